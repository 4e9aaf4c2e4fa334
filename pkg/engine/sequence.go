package engine

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/layout"
)

// Sequence is one generation stream: its own sequence arena (paged KV
// cache, GDN state slots, control buffers) and position.
type Sequence struct {
	e        *Engine
	arena    *backend.Arena
	table    backend.View
	pages    int
	kv       []backend.KVLayer
	ssm      []backend.StateSlots
	conv     []backend.StateSlots
	ids, pos backend.View
	inSlot   backend.View
	hostIDs  []int32
	hostPos  []int32
	hostSlot []int32
	logits   []float32 // Decode's result, reused every step
	lastRow  backend.Tensor
	n        int   // tokens in the cache (next position)
	slot     int32 // current GDN state slot
	verifyAt int   // position before the last Verify, −1 if none
	verifyT  int
	graphs   *graphCache  // decode-step graphs (Options.CUDAGraph); nil = eager
	sampler  backend.View // ctl.sampler: device sampling's state (Buf nil: none)
}

// ErrContext is returned when a request would exceed the context limit.
var ErrContext = errors.New("context limit exceeded")

// NewSequence allocates a sequence's state arena and carves it by the
// terms of layout.Sequence.
func (e *Engine) NewSequence() (*Sequence, error) {
	c, o := e.cfg, e.opts
	lay, g, err := layout.Sequence(c, seqOptions(o, e.kvFmt, e.be))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	arena, err := backend.NewArena(e.be, "sequence", lay.Capacity)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	s := &Sequence{e: e, arena: arena, pages: g.Pages, verifyAt: -1, graphs: newGraphCache(e)}
	views, err := carve(arena, lay)
	if err != nil {
		e.be.Free(arena.Buffer())
		return nil, err
	}
	at := func(term string, off int64) backend.View {
		v := views[term]
		v.Off += off
		return v
	}
	s.table = views["block_table"]
	for l := range c.FullLayers() {
		k, v, ks, vs := g.KVPlanes(l)
		kv := backend.KVLayer{Format: e.kvFmt, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, Pages: s.pages,
			BlockTable: s.table, TableLen: s.pages, K: at("kv.text", k), V: at("kv.text", v)}
		if g.KVScale > 0 {
			kv.KS, kv.VS = at("kv.text", ks), at("kv.text", vs)
		}
		s.kv = append(s.kv, kv)
	}
	for l := range c.LinearLayers() {
		s.ssm = append(s.ssm, backend.StateSlots{View: at("gdn.ssm_state", g.SSMOffset(l)), Slots: g.Slots, SlotBytes: g.SSMSlotBytes})
		s.conv = append(s.conv, backend.StateSlots{View: at("gdn.conv_state", g.ConvOffset(l)), Slots: g.Slots, SlotBytes: g.ConvSlotBytes,
			BF16: g.ConvSlotBytes == 2*g.ConvSlotFloats})
	}
	s.ids, s.pos, s.inSlot = views["ctl.ids"], views["ctl.pos"], views["ctl.in_slot"]
	s.sampler = views["ctl.sampler"] // zero View without the term (the CPU)
	s.hostIDs = make([]int32, o.PrefillChunk)
	s.hostPos = make([]int32, o.PrefillChunk)
	s.hostSlot = make([]int32, 1)
	s.logits = make([]float32, c.VocabSize)
	table := make([]int32, s.pages) // one page group per logical page, identity map
	for p := range table {
		table[p] = int32(p)
	}
	if err := e.be.UploadI32(s.table, table); err != nil {
		return nil, fmt.Errorf("engine: block table: %w", err)
	}
	if err := s.Reset(); err != nil {
		return nil, err
	}
	return s, nil
}

// carve allocates every term of lay from arena in order and checks that
// each lands at its planned offset; it returns the views by term name.
func carve(arena *backend.Arena, lay layout.Arena) (map[string]backend.View, error) {
	if arena.Cap() != lay.Capacity {
		return nil, fmt.Errorf("engine: %s arena: %d bytes allocated, layout has %d", lay.Name, arena.Cap(), lay.Capacity)
	}
	views := make(map[string]backend.View, len(lay.Terms))
	for _, t := range lay.Terms {
		v, err := arena.Alloc(t.Bytes)
		if err != nil {
			return nil, fmt.Errorf("engine: %s %s: %w", lay.Name, t.Name, err)
		}
		if v.Off != t.Offset {
			return nil, fmt.Errorf("engine: %s %s: at offset %d, layout has %d", lay.Name, t.Name, v.Off, t.Offset)
		}
		views[t.Name] = v
	}
	return views, nil
}

// Bytes is the size of the sequence arena.
func (s *Sequence) Bytes() int64 { return s.arena.Cap() }

// Pos is the number of tokens in the sequence (the next position).
func (s *Sequence) Pos() int { return s.n }

// Close releases the sequence's graphs and frees its arena.
func (s *Sequence) Close() {
	s.graphs.close()
	s.e.be.Free(s.arena.Buffer())
}

// GraphStats reports the graphs the sequence captured and launched (both 0
// when it runs eagerly: Options.CUDAGraph off or a backend without graphs).
func (s *Sequence) GraphStats() (captures, launches int) {
	if s.graphs == nil {
		return 0, 0
	}
	return s.graphs.captures, s.graphs.launches
}

// Reset empties the sequence: position 0, zero GDN state in slot 0.
func (s *Sequence) Reset() error {
	be := s.e.be
	for i := range s.ssm {
		be.Zero(s.ssm[i].View, int64(s.ssm[i].Slots)*s.ssm[i].SlotBytes)
		be.Zero(s.conv[i].View, int64(s.conv[i].Slots)*s.conv[i].SlotBytes)
	}
	s.n, s.slot, s.verifyAt = 0, 0, -1
	return s.setSlot(0)
}

func (s *Sequence) setSlot(v int32) error {
	s.slot = v
	s.hostSlot[0] = v
	if err := s.e.be.UploadI32(s.inSlot, s.hostSlot); err != nil {
		return fmt.Errorf("engine: state slot: %w", err)
	}
	return nil
}

func (s *Sequence) fits(n int) error {
	if n <= 0 {
		return fmt.Errorf("engine: no tokens given")
	}
	if s.verifyAt >= 0 {
		return fmt.Errorf("engine: the last Verify has not been followed by Accept")
	}
	if s.n+n > s.e.opts.MaxContext {
		return fmt.Errorf("engine: %w: %d tokens at position %d exceed max context %d", ErrContext, n, s.n, s.e.opts.MaxContext)
	}
	return nil
}

// Prefill appends ids and returns the logits of the last position, or of
// every position ([len(ids)·vocab], row-major) when all is true. It runs in
// chunks of Options.PrefillChunk tokens.
func (s *Sequence) Prefill(ids []int32, all bool) ([]float32, error) {
	if err := s.fits(len(ids)); err != nil {
		return nil, err
	}
	V := s.e.cfg.VocabSize
	var out []float32
	if all {
		out = make([]float32, len(ids)*V)
	} else {
		out = make([]float32, V)
	}
	chunk := s.e.opts.PrefillChunk
	for done := 0; done < len(ids); {
		T := min(chunk, len(ids)-done)
		copy(s.hostIDs, ids[done:done+T])
		var err error
		switch {
		case all:
			err = s.step(T, 0, out[done*V:(done+T)*V], int(s.slot), false)
		case done+T == len(ids):
			err = s.step(T, T-1, out, int(s.slot), false)
		default:
			err = s.step(T, 0, nil, int(s.slot), false)
		}
		if err != nil {
			return nil, err
		}
		done += T
	}
	s.verifyAt = -1
	return out, nil
}

// Decode appends one token and returns the next-token logits. The returned
// slice is owned by the sequence and overwritten by the next Decode.
func (s *Sequence) Decode(id int32) ([]float32, error) {
	if err := s.fits(1); err != nil {
		return nil, err
	}
	s.hostIDs[0] = id
	if err := s.step(1, 0, s.logits, int(s.slot), true); err != nil {
		return nil, err
	}
	s.verifyAt = -1
	return s.logits, nil
}

// Verify scores ids (at most StateSlots tokens) in one pass, writing the GDN
// state after each token t into slot t, and returns the logits of every
// position. Follow it with Accept.
func (s *Sequence) Verify(ids []int32) ([]float32, error) {
	if err := s.fits(len(ids)); err != nil {
		return nil, err
	}
	if len(ids) > s.e.opts.StateSlots || len(ids) > s.e.opts.PrefillChunk {
		return nil, fmt.Errorf("engine: verify of %d tokens needs ≥ %d state slots (have %d)", len(ids), len(ids), s.e.opts.StateSlots)
	}
	V := s.e.cfg.VocabSize
	out := make([]float32, len(ids)*V)
	copy(s.hostIDs, ids)
	at := s.n
	if err := s.step(len(ids), 0, out, backend.PerToken, true); err != nil {
		return nil, err
	}
	s.verifyAt, s.verifyT = at, len(ids)
	return out, nil
}

// Accept keeps the first n tokens of the last Verify: the GDN state slot
// n−1 becomes current (no copies) and the KV position rewinds (later rows
// are overwritten by the next step).
func (s *Sequence) Accept(n int) error {
	if s.verifyAt < 0 {
		return fmt.Errorf("engine: accept without a preceding verify")
	}
	if n < 1 || n > s.verifyT {
		return fmt.Errorf("engine: accept %d of %d verified tokens", n, s.verifyT)
	}
	s.n = s.verifyAt + n
	s.verifyAt = -1
	return s.setSlot(int32(n - 1))
}

// Generate runs greedy decoding: it prefills prompt, then emits up to maxNew
// tokens (argmax on the backend), calling emit for each; emit returning
// false stops early. Generation also stops after an EOS id of the config.
func (s *Sequence) Generate(prompt []int32, maxNew int, emit func(int32) bool) ([]int32, error) {
	if _, err := s.Prefill(prompt, false); err != nil {
		return nil, err
	}
	var out []int32
	tok := make([]int32, 1)
	for len(out) < maxNew {
		be := s.e.be
		be.Argmax(s.pos, s.lastRow) // ctl.pos is free between steps
		if err := be.Sync(); err != nil {
			return out, fmt.Errorf("engine: argmax: %w", err)
		}
		if err := be.DownloadI32(tok, s.pos); err != nil {
			return out, fmt.Errorf("engine: argmax: %w", err)
		}
		out = append(out, tok[0])
		if emit != nil && !emit(tok[0]) {
			break
		}
		if s.isEOS(tok[0]) || len(out) == maxNew {
			break
		}
		if _, err := s.Decode(tok[0]); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *Sequence) isEOS(id int32) bool {
	for _, e := range s.e.cfg.EOSTokenIDs {
		if int32(e) == id {
			return true
		}
	}
	return false
}
