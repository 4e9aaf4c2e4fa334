package engine

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer/pkg/backend"
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
}

// ErrContext is returned when a request would exceed the context limit.
var ErrContext = errors.New("context limit exceeded")

// NewSequence allocates a sequence's state arena.
func (e *Engine) NewSequence() (*Sequence, error) {
	c, o := e.cfg, e.opts
	plan := seqPlan(c, o, e.kvFmt)
	arena, err := backend.NewArena(e.be, "sequence", SequenceBytes(c, o, e.kvFmt))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	s := &Sequence{e: e, arena: arena, pages: pagesFor(o.MaxContext), verifyAt: -1}
	views := make([]backend.View, len(plan))
	for i, n := range plan {
		if views[i], err = arena.Alloc(n.bytes); err != nil {
			return nil, fmt.Errorf("engine: sequence %s: %w", n.name, err)
		}
	}
	i := 0
	next := func() backend.View { i++; return views[i-1] }
	s.table = next()
	_, scale := backend.KVPlaneBytes(e.kvFmt, c.HeadDim)
	for range c.FullLayers() {
		kv := backend.KVLayer{Format: e.kvFmt, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, Pages: s.pages,
			BlockTable: s.table, TableLen: s.pages}
		kv.K, kv.V = next(), next()
		if scale > 0 {
			kv.KS, kv.VS = next(), next()
		}
		s.kv = append(s.kv, kv)
	}
	for range c.LinearLayers() {
		ssm, conv := next(), next()
		s.ssm = append(s.ssm, backend.StateSlots{View: ssm, Slots: o.StateSlots,
			SlotBytes: 4 * int64(c.LinearNumValueHeads) * int64(c.LinearKeyHeadDim) * int64(c.LinearValueHeadDim)})
		s.conv = append(s.conv, backend.StateSlots{View: conv, Slots: o.StateSlots,
			SlotBytes: 4 * int64(c.ConvDim()) * int64(c.LinearConvKernelDim-1)})
	}
	s.ids, s.pos, s.inSlot = next(), next(), next()
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

// Bytes is the size of the sequence arena.
func (s *Sequence) Bytes() int64 { return s.arena.Cap() }

// Pos is the number of tokens in the sequence (the next position).
func (s *Sequence) Pos() int { return s.n }

// Close frees the sequence arena.
func (s *Sequence) Close() { s.e.be.Free(s.arena.Buffer()) }

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
			err = s.step(T, 0, out[done*V:(done+T)*V], int(s.slot))
		case done+T == len(ids):
			err = s.step(T, T-1, out, int(s.slot))
		default:
			err = s.step(T, 0, nil, int(s.slot))
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
	if err := s.step(1, 0, s.logits, int(s.slot)); err != nil {
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
	if err := s.step(len(ids), 0, out, backend.PerToken); err != nil {
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
