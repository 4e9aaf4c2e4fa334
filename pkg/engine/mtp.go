package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// MTP is the multi-token-prediction draft head (qwen35.md §4) bound on the
// engine's backend: fc(concat(norm_e(embed(x_{t+1})), norm_h(h_t))), one
// full-attention decoder layer with its own KV cache, mtp.norm and the
// shared output head (or the reduced-vocabulary proposal head). Its weights
// live in their own arena, loaded only when speculation is on. Its two
// arenas (mtp.weights here, mtp.sequence per MTPSequence) are sized and
// carved from pkg/layout (MTPWeights, MTPSequence); its step runs in the
// engine's workspace arena, phase by phase (layout.MTPWorkspace), which
// LoadMTP grows to the largest target or MTP phase
// (layout.WorkspaceWithMTP).
type MTP struct {
	e        *Engine
	weights  *backend.Arena
	fc       *backend.Weight
	normE    backend.View
	normH    backend.View
	norm     backend.View
	ly       layer
	draft    *backend.Weight // proposal head [N,H]; nil = full head
	draftIDs []int32         // global id of each proposal-head row
	rows     int             // max rows of one MTP step
}

// MTPOptions configures LoadMTP.
type MTPOptions struct {
	// ProposalHead drafts with text/draft_head (argmax over its shortlist,
	// mapped back through text/draft_head_token_ids) instead of the full
	// output head. Verification always uses the full head.
	ProposalHead bool
}

// LoadMTP binds the MTP head's weights (objects mtp/*, and the proposal
// head when asked) from w on the engine's backend and grows the engine's
// workspace arena to hold the MTP step's phases (layout.WorkspaceWithMTP).
// Call it between steps.
func (e *Engine) LoadMTP(w Weights, o MTPOptions) (*MTP, error) {
	cfg := e.cfg
	if cfg.MTPNumHiddenLayers < 1 {
		return nil, fmt.Errorf("engine: mtp: the model has no MTP head (mtp_num_hidden_layers = %d)", cfg.MTPNumHiddenLayers)
	}
	var want []qwen35.Tensor
	for _, t := range cfg.Tensors() {
		if t.Component == qwen35.ComponentMTP {
			want = append(want, t)
		}
	}
	type item struct {
		name string
		f    format.Format
		n, k int
		data []byte
		vec  []float32
	}
	var items []item
	var terms []layout.Term
	for _, t := range want {
		f, shape, data, err := w.Tensor(t.Name)
		if err != nil {
			return nil, fmt.Errorf("engine: mtp: tensor %s: %w", t.Name, err)
		}
		if !sameShape(shape, t.Shape) {
			return nil, fmt.Errorf("engine: mtp: tensor %s: shape %v, want %v", t.Name, shape, t.Shape)
		}
		if isVector(t.Class) {
			n, err := format.Elements(shape)
			if err != nil {
				return nil, fmt.Errorf("engine: mtp: tensor %s: %w", t.Name, err)
			}
			v, err := toF32(t.Name, f, data, n)
			if err != nil {
				return nil, err
			}
			items = append(items, item{name: t.Name, vec: v})
			terms = append(terms, layout.Term{Name: t.Name, Bytes: layout.BoundBytes(t.Class, n, int64(len(data)))})
			continue
		}
		if len(shape) != 2 {
			return nil, fmt.Errorf("engine: mtp: tensor %s: want a matrix, got shape %v", t.Name, shape)
		}
		items = append(items, item{name: t.Name, f: f, n: int(shape[0]), k: int(shape[1]), data: data})
		terms = append(terms, layout.Term{Name: t.Name, Bytes: layout.BoundBytes(t.Class, 0, int64(len(data)))})
	}
	m := &MTP{e: e}
	if o.ProposalHead {
		f, shape, data, err := w.Tensor(qwen35.NameDraftHead)
		if err != nil {
			return nil, fmt.Errorf("engine: mtp: proposal head (--lm-head-draft) needs %s (convert with --draft-head N): %w", qwen35.NameDraftHead, err)
		}
		if len(shape) != 2 || shape[1] != int64(cfg.HiddenSize) || shape[0] < 1 || shape[0] > int64(cfg.VocabSize) {
			return nil, fmt.Errorf("engine: mtp: tensor %s: shape %v, want [N ≤ %d, %d]", qwen35.NameDraftHead, shape, cfg.VocabSize, cfg.HiddenSize)
		}
		fi, ishape, idata, err := w.Tensor(qwen35.NameDraftIDs)
		if err != nil {
			return nil, fmt.Errorf("engine: mtp: proposal head: %w", err)
		}
		if fi != format.Int32 || len(ishape) != 1 || ishape[0] != shape[0] || int64(len(idata)) != 4*shape[0] {
			return nil, fmt.Errorf("engine: mtp: tensor %s: %s %v (%d bytes), want int32 [%d]", qwen35.NameDraftIDs, fi, ishape, len(idata), shape[0])
		}
		m.draftIDs = make([]int32, shape[0])
		for i := range m.draftIDs {
			id := int32(binary.LittleEndian.Uint32(idata[4*i:]))
			if id < 0 || int(id) >= cfg.VocabSize {
				return nil, fmt.Errorf("engine: mtp: tensor %s: id %d at row %d outside the vocabulary [0,%d)", qwen35.NameDraftIDs, id, i, cfg.VocabSize)
			}
			m.draftIDs[i] = id
		}
		items = append(items, item{name: qwen35.NameDraftHead, f: f, n: int(shape[0]), k: int(shape[1]), data: data})
		terms = append(terms, layout.Term{Name: qwen35.NameDraftHead, Bytes: int64(len(data))},
			layout.Term{Name: qwen35.NameDraftIDs, Bytes: int64(len(idata))})
	}
	lay := layout.MTPWeights(terms)
	arena, err := backend.NewArena(e.be, lay.Name, lay.Capacity)
	if err != nil {
		return nil, fmt.Errorf("engine: mtp: %w", err)
	}
	m.weights = arena
	mats := map[string]*backend.Weight{}
	vecs := map[string]backend.View{}
	fail := func(err error) (*MTP, error) {
		e.be.Free(arena.Buffer())
		return nil, err
	}
	views, err := carve(arena, lay)
	if err != nil {
		return fail(fmt.Errorf("engine: mtp: %w", err))
	}
	if o.ProposalHead {
		// The id map stays on the device too (mapped back on the host).
		if err := e.be.UploadI32(views[qwen35.NameDraftIDs], m.draftIDs); err != nil {
			return fail(fmt.Errorf("engine: mtp: tensor %s: %w", qwen35.NameDraftIDs, err))
		}
	}
	for _, it := range items {
		v := views[it.name]
		if it.vec != nil {
			if err := e.be.UploadF32(v, it.vec); err != nil {
				return fail(fmt.Errorf("engine: mtp: tensor %s: %w", it.name, err))
			}
			vecs[it.name] = v
			continue
		}
		if err := e.be.Upload(v, it.data); err != nil {
			return fail(fmt.Errorf("engine: mtp: tensor %s: %w", it.name, err))
		}
		wt, err := e.be.PrepareWeight(it.name, it.f, it.n, it.k, v, int64(len(it.data)))
		if err != nil {
			return fail(fmt.Errorf("engine: mtp: %w", err))
		}
		mats[it.name] = wt
	}
	n := func(s string) string { return qwen35.MTPLayerName(0, s) }
	m.fc = mats["mtp/fc"]
	m.normE, m.normH, m.norm = vecs["mtp/pre_fc_norm_embedding"], vecs["mtp/pre_fc_norm_hidden"], vecs["mtp/norm"]
	m.ly = layer{full: true, inNorm: vecs[n("input_norm")], postNorm: vecs[n("post_attention_norm")],
		q: mats[n("attention/q_proj")], k: mats[n("attention/k_proj")], v: mats[n("attention/v_proj")], o: mats[n("attention/o_proj")],
		qNorm: vecs[n("attention/q_norm")], kNorm: vecs[n("attention/k_norm")],
		gate: mats[n("mlp/gate_proj")], up: mats[n("mlp/up_proj")], down: mats[n("mlp/down_proj")]}
	if o.ProposalHead {
		m.draft = mats[qwen35.NameDraftHead]
		if m.draft != nil {
			m.draft.KeepFP32Activations() // an output head: fp32 activations
		}
	}
	// One MTP step covers a prefill chunk (plus the row pending from the
	// previous chunk) or a verify's rows.
	m.rows = layout.MTPRows(e.stepTokens(), e.opts.StateSlots)
	// Its step runs in the target's workspace: grow it to the largest
	// target or MTP phase.
	_, capacity := layout.WorkspaceWithMTP(cfg, e.stepTokens(), e.opts.StateSlots, e.opts.LogitsRows)
	if err := e.growWorkspace(capacity, max(e.stepTokens(), m.rows)); err != nil {
		return fail(fmt.Errorf("engine: mtp: workspace: %w", err))
	}
	return m, nil
}

// ProposalHead reports whether drafts use the reduced proposal head.
func (m *MTP) ProposalHead() bool { return m.draft != nil }

// Arenas reports the MTP allocations (name → bytes): its weights arena.
// Its step workspace is part of the engine's "workspace" arena.
func (m *MTP) Arenas() map[string]int64 {
	return map[string]int64{"mtp.weights": m.weights.Cap()}
}

// Close frees the MTP weights arena (its sequences must be closed first).
// The engine's workspace keeps the size LoadMTP gave it.
func (m *MTP) Close() {
	m.e.be.Free(m.weights.Buffer())
}

// MTPSequence couples a Sequence with the MTP head's own KV cache. It runs
// the target model steps (Prefill, Decode, Verify/Accept) and keeps the MTP
// aligned with them: after every target step it holds the target's
// post-final-norm hidden rows until the token that follows each row is
// known, then runs the MTP over them (writing its KV) and drafts.
type MTPSequence struct {
	s      *Sequence
	m      *MTP
	arena  *backend.Arena
	kv     backend.KVLayer
	ids    backend.View // ctl: MTP token ids [rows]
	pos    backend.View // ctl: MTP positions [rows]
	hbuf   backend.Tensor
	mh     backend.Tensor // post-mtp.norm hidden of the last MTP row [1,H]
	hostID []int32
	hostPs []int32
	argmax []int32
	// Pending target rows: hbuf rows [0,nh) are positions hpos..hpos+nh−1;
	// next[r] is the token after row r (known for the first len(next) rows).
	nh, hpos int
	next     []int32
	// Last verify's ids (the tokens after its rows are ids[1:]).
	verifyIDs []int32
	mhPos     int   // position of the row mh belongs to, −1 if none
	mhTok     int32 // the draft mh predicted (input of the next AR step)
	Logits    bool  // debug/test: keep every MTP row's logits in RowLogits
	RowLogits []float32
}

// NewMTPSequence allocates a sequence with its MTP KV cache. Verify rounds
// of k drafts need engine Options.StateSlots ≥ k+1.
func (m *MTP) NewMTPSequence() (*MTPSequence, error) {
	s, err := m.e.NewSequence()
	if err != nil {
		return nil, err
	}
	c, o := m.e.cfg, m.e.opts
	lay, g, err := layout.MTPSequence(c, seqOptions(o, m.e.kvFmt, m.e.be))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("engine: mtp: %w", err)
	}
	if R := layout.MTPRows(m.e.stepTokens(), o.StateSlots); R != m.rows {
		s.Close()
		return nil, fmt.Errorf("engine: mtp sequence: %d rows, the head's workspace has %d", R, m.rows)
	}
	arena, err := backend.NewArena(m.e.be, lay.Name, lay.Capacity)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("engine: mtp: %w", err)
	}
	views, err := carve(arena, lay)
	if err != nil {
		s.Close()
		m.e.be.Free(arena.Buffer())
		return nil, fmt.Errorf("engine: mtp sequence: %w", err)
	}
	at := func(term string, off int64) backend.View {
		v := views[term]
		v.Off += off
		return v
	}
	R, pages := m.rows, g.Pages
	ms := &MTPSequence{s: s, m: m, arena: arena, mhPos: -1,
		hostID: make([]int32, R), hostPs: make([]int32, R), argmax: make([]int32, 1)}
	k, v, ks, vs := g.KVPlanes(0)
	ms.kv = backend.KVLayer{Format: m.e.kvFmt, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, Pages: pages,
		BlockTable: views["mtp.block_table"], TableLen: pages, K: at("kv.mtp", k), V: at("kv.mtp", v)}
	if g.KVScale > 0 {
		ms.kv.KS, ms.kv.VS = at("kv.mtp", ks), at("kv.mtp", vs)
	}
	ms.ids, ms.pos = views["mtp.ids"], views["mtp.pos"]
	ms.hbuf = backend.Dense(views["mtp.hidden"], R, c.HiddenSize)
	ms.mh = backend.Dense(views["mtp.last_hidden"], 1, c.HiddenSize)
	table := make([]int32, pages)
	for p := range table {
		table[p] = int32(p)
	}
	if err := m.e.be.UploadI32(ms.kv.BlockTable, table); err != nil {
		ms.Close()
		return nil, fmt.Errorf("engine: mtp block table: %w", err)
	}
	return ms, nil
}

// Sequence is the target sequence.
func (ms *MTPSequence) Sequence() *Sequence { return ms.s }

// Pos is the number of tokens in the target cache.
func (ms *MTPSequence) Pos() int { return ms.s.Pos() }

// MaxContext is the context limit (target and MTP caches).
func (ms *MTPSequence) MaxContext() int { return ms.s.e.opts.MaxContext }

// VerifyLimit is the most tokens one Verify can score (the state slots).
func (ms *MTPSequence) VerifyLimit() int {
	return min(ms.s.e.opts.StateSlots, ms.s.e.opts.PrefillChunk)
}

// VocabSize is the vocabulary size.
func (ms *MTPSequence) VocabSize() int { return ms.s.e.cfg.VocabSize }

// Bytes is the size of the target and MTP sequence arenas.
func (ms *MTPSequence) Bytes() int64 { return ms.s.Bytes() + ms.arena.Cap() }

// Close frees both sequence arenas.
func (ms *MTPSequence) Close() {
	ms.s.Close()
	ms.m.e.be.Free(ms.arena.Buffer())
}

// Reset empties the sequence.
func (ms *MTPSequence) Reset() error {
	ms.nh, ms.hpos, ms.next, ms.verifyIDs, ms.mhPos = 0, 0, ms.next[:0], nil, -1
	return ms.s.Reset()
}

// residual is the residual stream of the target's last step (T rows): step
// allocates it first in the workspace, and nothing overwrites it until the
// next target step (the MTP step allocates after it: layout.MTPWorkspace).
func (s *Sequence) residual(T int) backend.Tensor {
	return backend.Dense(backend.View{Buf: s.e.ws.Buffer(), Off: 0}, T, s.e.cfg.HiddenSize)
}

// capture appends the post-final-norm hidden rows of the target step just
// run over ids (at positions at..) to the pending rows.
func (ms *MTPSequence) capture(ids []int32, at int) error {
	T := len(ids)
	if ms.nh > len(ms.next) {
		ms.next = append(ms.next, ids[0]) // the pending row's successor
	}
	if ms.nh+T > ms.hbuf.T {
		if err := ms.flush(ms.nh, false); err != nil {
			return err
		}
	}
	if ms.nh == 0 {
		ms.hpos = at
	}
	if ms.hpos+ms.nh != at {
		return fmt.Errorf("engine: mtp: target step at position %d, pending MTP rows end at %d", at, ms.hpos+ms.nh)
	}
	e := ms.s.e
	e.be.RMSNorm(ms.hbuf.Rows(ms.nh, T), ms.s.residual(T), e.final, float32(e.cfg.RMSNormEps), true)
	ms.nh += T
	ms.next = append(ms.next, ids[1:]...)
	return nil
}

// flush runs the MTP over pending rows [0,n) (each with its successor
// known), writing MTP KV at their positions, and keeps the rest pending.
// With draft it returns the last row's draft token.
func (ms *MTPSequence) flush(n int, draft bool) error {
	if n <= 0 {
		return nil
	}
	if n > len(ms.next) {
		return fmt.Errorf("engine: mtp: %d rows to run, only %d successors known", n, len(ms.next))
	}
	if err := ms.step(ms.hbuf.Rows(0, n), ms.next[:n], ms.hpos, draft); err != nil {
		return err
	}
	rest := ms.nh - n
	if rest > 0 {
		be, H := ms.m.e.be, int64(ms.m.e.cfg.HiddenSize)
		// Rows move down in order; a forward copy of non-overlapping
		// ranges row by row is safe.
		for r := 0; r < rest; r++ {
			be.Copy(ms.hbuf.Rows(r, 1).View, ms.hbuf.Rows(n+r, 1).View, 4*H)
		}
	}
	ms.next = append(ms.next[:0], ms.next[n:]...)
	ms.nh, ms.hpos = rest, ms.hpos+n
	return nil
}

// Prefill appends the prompt (chunked like Sequence.Prefill) and returns the
// logits of its last position. The MTP runs over every prompt row whose
// successor is known; the last row waits for the first generated token
// (Draft).
func (ms *MTPSequence) Prefill(ids []int32) ([]float32, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("engine: no tokens given")
	}
	if ms.s.Pos() == 0 {
		// The target was reset directly (Sequence().Reset()): drop stale rows.
		ms.nh, ms.hpos, ms.next, ms.mhPos = 0, 0, ms.next[:0], -1
	}
	chunk := ms.s.e.opts.PrefillChunk
	var out []float32
	for done := 0; done < len(ids); done += chunk {
		T := min(chunk, len(ids)-done)
		at := ms.s.Pos()
		lg, err := ms.s.Prefill(ids[done:done+T], false)
		if err != nil {
			return nil, err
		}
		out = lg
		if err := ms.capture(ids[done:done+T], at); err != nil {
			return nil, err
		}
		if err := ms.flush(ms.nh-1, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Decode appends one token (an ordinary step) and returns the next-token
// logits (owned by the sequence, overwritten by the next Decode).
func (ms *MTPSequence) Decode(id int32) ([]float32, error) {
	at := ms.s.Pos()
	lg, err := ms.s.Decode(id)
	if err != nil {
		return nil, err
	}
	if err := ms.capture([]int32{id}, at); err != nil {
		return nil, err
	}
	return lg, nil
}

// Verify scores ids = [t, d1..dk] in one target pass (GDN state after each
// token in its own slot) and returns the logits of every position
// ([len(ids)·vocab]). Follow it with Accept.
func (ms *MTPSequence) Verify(ids []int32) ([]float32, error) {
	at := ms.s.Pos()
	lg, err := ms.s.Verify(ids)
	if err != nil {
		return nil, err
	}
	ms.verifyIDs = append(ms.verifyIDs[:0], ids...)
	if err := ms.capture(ids, at); err != nil {
		return nil, err
	}
	return lg, nil
}

// Accept keeps the first n tokens of the last Verify: the target resumes
// from GDN slot n−1 (no copies) and rewinds its KV frontier; the MTP drops
// the hidden rows of the rejected tokens.
func (ms *MTPSequence) Accept(n int) error {
	T := len(ms.verifyIDs)
	if err := ms.s.Accept(n); err != nil {
		return err
	}
	// The last accepted row's successor (the correction or bonus token) is
	// not known yet; rows of rejected drafts are dropped.
	ms.nh -= T - n
	ms.next = ms.next[:ms.nh-1]
	ms.verifyIDs = ms.verifyIDs[:0]
	return nil
}

// Draft returns n draft tokens that follow next, the token after the last
// committed target position: the MTP runs over the pending target rows (the
// last one with next as its successor), drafts d1 from the last row, then
// d2..dn autoregressively from its own post-mtp.norm hidden at the following
// positions. n = 0 drafts nothing and leaves the rows pending.
func (ms *MTPSequence) Draft(next int32, n int) ([]int32, error) {
	if n <= 0 {
		return nil, nil
	}
	if ms.nh == 0 || len(ms.next) != ms.nh-1 {
		return nil, fmt.Errorf("engine: mtp: draft needs a target step first (%d pending rows, %d successors)", ms.nh, len(ms.next))
	}
	if last := ms.hpos + ms.nh - 1 + n - 1; last >= ms.MaxContext() {
		return nil, fmt.Errorf("engine: mtp: %w: %d drafts after position %d exceed max context %d", ErrContext, n, ms.hpos+ms.nh-1, ms.MaxContext())
	}
	ms.next = append(ms.next, next)
	if err := ms.flush(ms.nh, true); err != nil {
		return nil, err
	}
	out := make([]int32, 0, n)
	out = append(out, ms.mhTok)
	for len(out) < n {
		if err := ms.step(ms.mh, []int32{ms.mhTok}, ms.mhPos+1, true); err != nil {
			return nil, err
		}
		out = append(out, ms.mhTok)
	}
	return out, nil
}

// step runs the MTP over T rows: hidden h (post-final-norm target rows, or
// the MTP's own post-mtp.norm hidden), successor ids, positions pos0...
// The last row's post-mtp.norm hidden goes to mh; with draft, its argmax
// (over the proposal head when bound) becomes mhTok. With ms.Logits every
// row's full-head logits are appended to RowLogits.
func (ms *MTPSequence) step(h backend.Tensor, ids []int32, pos0 int, draft bool) error {
	m, e := ms.m, ms.m.e
	be := e.be
	T := len(ids)
	if T > m.rows || h.T != T {
		return fmt.Errorf("engine: mtp: step of %d rows (hidden %d, workspace %d)", T, h.T, m.rows)
	}
	if pos0+T > e.opts.MaxContext {
		return fmt.Errorf("engine: mtp: %w: rows %d..%d exceed max context %d", ErrContext, pos0, pos0+T-1, e.opts.MaxContext)
	}
	copy(ms.hostID, ids)
	for i := 0; i < T; i++ {
		ms.hostPs[i] = int32(pos0 + i)
	}
	if err := be.UploadI32(ms.ids, ms.hostID[:T]); err != nil {
		return fmt.Errorf("engine: mtp ids: %w", err)
	}
	if err := be.UploadI32(ms.pos, ms.hostPs[:T]); err != nil {
		return fmt.Errorf("engine: mtp positions: %w", err)
	}
	var am backend.View
	var err error
	// Decode-round steps (the rows of a verify, or one draft) replay as
	// graphs; prefill-sized steps run eagerly.
	if ms.s.graphs != nil && !ms.Logits && T <= e.opts.StateSlots {
		key := graphKey{kind: graphMTP, T: T, resT: e.residualT, h: h.View, draft: draft}
		var out backend.Tensor
		out, err = ms.s.graphs.run(key, e.ws, func() (backend.Tensor, error) {
			v, err := ms.queue(h, T, pos0, draft)
			return backend.Tensor{View: v}, err
		})
		am = out.View
	} else {
		am, err = ms.queue(h, T, pos0, draft)
	}
	if err != nil {
		return err
	}
	ms.mhPos = pos0 + T - 1
	if err := be.Sync(); err != nil {
		return fmt.Errorf("engine: mtp step at position %d: %w", pos0, err)
	}
	if draft {
		if err := be.DownloadI32(ms.argmax, am); err != nil {
			return fmt.Errorf("engine: mtp argmax: %w", err)
		}
		tok := ms.argmax[0]
		if m.draft != nil {
			if tok < 0 || int(tok) >= len(m.draftIDs) {
				return fmt.Errorf("engine: mtp: proposal-head argmax %d outside [0,%d)", tok, len(m.draftIDs))
			}
			tok = m.draftIDs[tok]
		}
		ms.mhTok = tok
	}
	return nil
}

// queue queues the MTP step's ops over T rows (step; the control values are
// on the device already) and returns the view its draft argmax lands in.
// Only the ms.Logits debug path syncs and downloads inside it; the graph
// path (Options.CUDAGraph) never takes it.
func (ms *MTPSequence) queue(h backend.Tensor, T, pos0 int, draft bool) (backend.View, error) {
	m, e := ms.m, ms.m.e
	be, c := e.be, e.cfg
	H, eps := c.HiddenSize, float32(c.RMSNormEps)
	// The phases of layout.MTPWorkspace in the target's workspace: the
	// target step's residual stays live at offset 0 (capture may read it
	// after this step), then mtp.x and mtp.x_norm for the whole step and
	// one phase at a time on top.
	e.ws.Reset()
	p := stepper{ws: e.ws}
	p.dense(e.residualT, H)
	x, xn := p.dense(T, H), p.dense(T, H)
	mark := e.ws.Mark()
	emb, cat := p.dense(T, H), p.dense(T, 2*H)
	if p.err != nil {
		return backend.View{}, fmt.Errorf("engine: mtp workspace: %w", p.err)
	}
	be.Embed(emb, e.embed, ms.ids)
	be.RMSNorm(cat.Cols(0, H), emb, m.normE, eps, true)
	be.RMSNorm(cat.Cols(H, H), h, m.normH, eps, true)
	be.MatMul(x, cat, m.fc, false)
	e.ws.Release(mark)
	ly := &m.ly
	be.RMSNorm(xn, x, ly.inNorm, eps, true)
	if err := ms.attention(&p, ly, x, xn, T); err != nil {
		return backend.View{}, err
	}
	e.ws.Release(mark)
	be.RMSNorm(xn, x, ly.postNorm, eps, true)
	g, u := p.dense(T, c.IntermediateSize), p.dense(T, c.IntermediateSize)
	if p.err != nil {
		return backend.View{}, fmt.Errorf("engine: mtp workspace: %w", p.err)
	}
	swigluMLP(be, ly, x, xn, g, u)
	e.ws.Release(mark)
	LR := e.opts.LogitsRows
	hn := p.dense(T, H)
	lgBuf := p.dense(LR, c.VocabSize) // the proposal head has ≤ V rows
	am := p.dense(LR, 1).View         // int32 [LR]
	if p.err != nil {
		return backend.View{}, fmt.Errorf("engine: mtp workspace: %w", p.err)
	}
	be.RMSNorm(hn, x, m.norm, eps, true)
	if ms.Logits {
		V := c.VocabSize
		lg := backend.Dense(lgBuf.View, LR, V)
		start := len(ms.RowLogits)
		ms.RowLogits = append(ms.RowLogits, make([]float32, T*V)...)
		for r := 0; r < T; r += LR {
			k := min(LR, T-r)
			be.MatMul(lg.Rows(0, k), hn.Rows(r, k), e.head, false)
			if err := be.Sync(); err != nil {
				return backend.View{}, fmt.Errorf("engine: mtp step at position %d: %w", pos0, err)
			}
			if err := be.DownloadF32(ms.RowLogits[start+r*V:start+(r+k)*V], lg.View); err != nil {
				return backend.View{}, fmt.Errorf("engine: mtp logits: %w", err)
			}
		}
	}
	be.Copy(ms.mh.View, hn.Rows(T-1, 1).View, 4*int64(H))
	if draft {
		head := e.head
		if m.draft != nil {
			head = m.draft
		}
		lg := backend.Dense(lgBuf.View, 1, head.N)
		be.MatMul(lg, hn.Rows(T-1, 1), head, false)
		be.Argmax(am, lg)
	}
	return am, nil
}

// attention is the MTP layer's gated full attention over its own KV cache
// (the mtp.attention phase, allocated from p); it adds o_proj(...) into x.
func (ms *MTPSequence) attention(p *stepper, ly *layer, x, xn backend.Tensor, T int) error {
	c := ms.m.e.cfg
	nh, nkv, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	b := attnBuffers{qg: p.dense(T, 2*nh*hd), q: p.dense(T, nh*hd), k: p.dense(T, nkv*hd), v: p.dense(T, nkv*hd), att: p.dense(T, nh*hd)}
	if p.err != nil {
		return fmt.Errorf("engine: mtp workspace: %w", p.err)
	}
	gatedAttention(ms.m.e.be, c, ly, x, xn, T, b, ms.kv, ms.pos)
	return nil
}
