package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/plan"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// convertedModels returns the tiny model converted with q8 (with a
// proposal head over draft) and groupwise-int (shared testfixture
// artifacts), by recipe.
func convertedModels(t *testing.T, draft []int32) map[string]string {
	t.Helper()
	return map[string]string{
		"q8":            testfixture.Build(t, testfixture.Spec{Recipe: "q8", Draft: draft}),
		"groupwise-int": testfixture.Artifact(t, "groupwise-int", nil),
	}
}

func planObjects(w *loader.Weights) []plan.Object {
	f := w.File()
	objs := make([]plan.Object, len(f.Objects))
	for i := range f.Objects {
		o := &f.Objects[i]
		objs[i] = plan.Object{ID: o.ID, Component: o.Component, Bytes: o.Bytes, Host: !o.IsTensor()}
	}
	return objs
}

// TestArenasEqualPlan builds the engine for option sets over KV dtype,
// prefill chunk, max context and recipe and checks "plan = reality": the
// engine's weights, sequence and workspace arena capacities equal the
// fields pkg/plan computes for the same options, term by term for the
// sequence. It also runs a full step and checks that the workspace's
// largest phase is exactly reached (aligned peak = capacity). With MTP
// (k = 1..3, KV bf16/int8/fp8, with and without the proposal head) the MTP
// head's arenas are checked the same way (checkMTPArenas).
func TestArenasEqualPlan(t *testing.T) {
	r := seeded(t)
	vocab := testmodel.DefaultOptions().Vocab
	draft := make([]int32, 0, vocab/4)
	for _, id := range r.Perm(vocab)[:vocab/4] {
		draft = append(draft, int32(id))
	}
	for rec, path := range convertedModels(t, draft) {
		w, err := loader.OpenWeights(path)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		cfg := w.Config()
		objs := planObjects(w)
		for _, kv := range []string{"bf16", "int8", "fp8"} {
			for _, chunk := range []int{128, 1024} {
				for _, ctx := range []int{256, 4096} {
					name := rec + "/kv=" + kv
					e, s := newEngine(t, w, "avx2", Options{MaxContext: ctx, PrefillChunk: chunk, KVDtype: kv})
					p, err := plan.New(cfg, objs, plan.Options{MaxContext: int64(ctx), KVCapacity: int64(ctx), KVDtype: plan.KVDtype(kv),
						PrefillChunk: int64(chunk), Backend: plan.BackendCPU, AvailableAfterWeightsBytes: 1 << 30})
					if err != nil {
						t.Fatalf("%s: plan: %v", name, err)
					}
					a, m := e.Arenas(), p.Memory
					if a["weights"] != m.Weights.CapacityBytes || s.Bytes() != m.Sequence.CapacityBytes || a["workspace"] != m.Workspace.CapacityBytes {
						t.Errorf("%s chunk %d ctx %d: engine weights/sequence/workspace %d/%d/%d, plan %d/%d/%d", name, chunk, ctx,
							a["weights"], s.Bytes(), a["workspace"], m.Weights.CapacityBytes, m.Sequence.CapacityBytes, m.Workspace.CapacityBytes)
					}
					if e.weights.Cap() != p.Weights.Capacity || len(p.Weights.Terms) != len(cfg.Tensors())-mtpTensors(cfg) {
						t.Errorf("%s: weights %d (%d terms), plan %d", name, e.weights.Cap(), len(p.Weights.Terms), p.Weights.Capacity)
					}
					// The sequence views sit at the plan's term offsets.
					kvTerm, _ := p.Sequence.Term("kv.text")
					convTerm, _ := p.Sequence.Term("gdn.conv_state")
					idsTerm, _ := p.Sequence.Term("ctl.ids")
					if s.kv[0].K.Off != kvTerm.Offset || s.conv[1].View.Off != convTerm.Offset+int64(p.GDN.Slots)*p.GDN.ConvBytesPerLayer ||
						s.ids.Off != idsTerm.Offset || idsTerm.Bytes != 4*int64(min(chunk, ctx)) {
						t.Errorf("%s: views kv %d conv[1] %d ids %d, plan terms %+v %+v %+v", name, s.kv[0].K.Off, s.conv[1].View.Off, s.ids.Off, kvTerm, convTerm, idsTerm)
					}
					code, scale := backend.KVPlaneBytes(e.kvFmt, cfg.HeadDim)
					if want := int64(len(cfg.FullLayers())) * int64(layout.Pages(ctx)) * 64 * int64(cfg.NumKeyValueHeads) * 2 * (code + scale); m.KVPayloadBytes != want {
						t.Errorf("%s: kv_payload_bytes %d, want %d", name, m.KVPayloadBytes, want)
					}
					// One full step: every phase is allocated; the largest
					// one ends within its last 256 bytes of the capacity.
					T := min(chunk, ctx)
					if _, err := s.Prefill(randIDs(r, T, cfg.VocabSize), false); err != nil {
						t.Fatalf("%s: prefill: %v", name, err)
					}
					if got := layout.AlignUp(e.ws.Peak()); got != e.ws.Cap() {
						t.Errorf("%s chunk %d ctx %d: workspace peak %d (aligned %d), capacity %d", name, chunk, ctx, e.ws.Peak(), got, e.ws.Cap())
					}
					s.Close()
					e.Close()
				}
			}
		}
		// MTP as ninfer-bench runs it (k+1 state slots and logits rows).
		for k := 1; k <= 3; k++ {
			for _, kv := range []string{"bf16", "int8", "fp8"} {
				for _, prop := range []bool{false, true} {
					if prop && rec != "q8" {
						continue // only the q8 artifact has a proposal head
					}
					checkMTPArenas(t, r, w, objs, rec, k, kv, prop, newBackend(t, "avx2"), plan.BackendCPU)
				}
			}
		}
	}
}

// checkMTPArenas builds the engine, the MTP head and an MTP sequence for
// draft tokens k and checks them against the plan of --spec mtp: the
// reported weights and sequence (target + MTP arenas) and each MTP arena
// equal the plan's, the one workspace arena (target and MTP phases) equals
// the plan's workspace, the MTP views sit at the plan's term offsets, and
// kv_payload_bytes is the text KV plus the engine's one-layer MTP KV. A
// prefill over two chunks and k drafts then run on the carved arenas; the
// drafts' workspace peak is the MTP step's dry run.
func checkMTPArenas(t *testing.T, r *rand.Rand, w *loader.Weights, objs []plan.Object, rec string, k int, kv string, prop bool,
	be backend.Backend, pb plan.Backend) {
	t.Helper()
	cfg := w.Config()
	ctx, chunk := []int{0, 300, 100, 4096}[k], []int{0, 256, 128, 128}[k]
	name := fmt.Sprintf("%s mtp k=%d kv=%s proposal=%v", rec, k, kv, prop)
	e, err := New(w, be, Options{MaxContext: ctx, PrefillChunk: chunk, KVDtype: kv, StateSlots: k + 1, LogitsRows: k + 1})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer e.Close()
	m, err := e.LoadMTP(w, MTPOptions{ProposalHead: prop})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer m.Close()
	ms, err := m.NewMTPSequence()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer ms.Close()
	p, err := plan.New(cfg, objs, plan.Options{MaxContext: int64(ctx), KVCapacity: int64(ctx), KVDtype: plan.KVDtype(kv),
		PrefillChunk: int64(chunk), Spec: plan.SpecMTP, DraftTokens: k, LMHeadDraft: prop, Backend: pb,
		AvailableAfterWeightsBytes: 1 << 30})
	if err != nil {
		t.Fatalf("%s: plan: %v", name, err)
	}
	mem, ma := p.Memory, m.Arenas()
	if got := e.weights.Cap() + ma["mtp.weights"]; got != mem.Weights.CapacityBytes || ma["mtp.weights"] != p.MTP.Weights.Capacity {
		t.Errorf("%s: weights %d + mtp.weights %d, plan %d (mtp.weights %d)", name, e.weights.Cap(), ma["mtp.weights"], mem.Weights.CapacityBytes, p.MTP.Weights.Capacity)
	}
	if ms.Bytes() != mem.Sequence.CapacityBytes || ms.arena.Cap() != p.MTP.Sequence.Capacity {
		t.Errorf("%s: sequence %d (mtp.sequence %d), plan %d (%d)", name, ms.Bytes(), ms.arena.Cap(), mem.Sequence.CapacityBytes, p.MTP.Sequence.Capacity)
	}
	// One workspace arena: the largest target or MTP phase.
	_, target := layout.Workspace(cfg, min(chunk, ctx), k+1)
	if _, ok := ma["mtp.workspace"]; ok || len(ma) != 1 || e.ws.Cap() != mem.Workspace.CapacityBytes || e.ws.Cap() < target {
		t.Errorf("%s: workspace %d (mtp arenas %v), plan %d, target phases %d", name, e.ws.Cap(), ma, mem.Workspace.CapacityBytes, target)
	}
	checkOpScratch(t, name, e, p)
	wantTerms := mtpTensors(cfg)
	if prop {
		wantTerms += 2 // text/draft_head, text/draft_head_token_ids
	}
	if len(p.MTP.Weights.Terms) != wantTerms || len(p.Weights.Terms) != len(cfg.Tensors())+wantTerms-mtpTensors(cfg) {
		t.Errorf("%s: plan weights %d terms (mtp.weights %d), want %d mtp terms", name, len(p.Weights.Terms), len(p.MTP.Weights.Terms), wantTerms)
	}
	// Views at the plan's offsets (within the MTP arenas).
	term := func(a plan.Arena, n string) int64 {
		tm, ok := a.Term(n)
		if !ok {
			t.Errorf("%s: plan %s has no term %s", name, a.Name, n)
		}
		return tm.Offset
	}
	if m.norm.Off != term(p.MTP.Weights, "mtp/norm") || m.normE.Off != term(p.MTP.Weights, "mtp/pre_fc_norm_embedding") ||
		ms.kv.K.Off != term(p.MTP.Sequence, "kv.mtp") || ms.kv.BlockTable.Off != term(p.MTP.Sequence, "mtp.block_table") ||
		ms.ids.Off != term(p.MTP.Sequence, "mtp.ids") || ms.hbuf.Off != term(p.MTP.Sequence, "mtp.hidden") ||
		ms.mh.Off != term(p.MTP.Sequence, "mtp.last_hidden") {
		t.Errorf("%s: MTP views off the plan's terms", name)
	}
	code, scale := backend.KVPlaneBytes(e.kvFmt, cfg.HeadDim)
	pages := int64(layout.Pages(ctx))
	if want := int64(len(cfg.FullLayers())+1) * pages * 64 * int64(cfg.NumKeyValueHeads) * 2 * (code + scale); mem.KVPayloadBytes != want ||
		p.KV.MTPBytes != want/int64(len(cfg.FullLayers())+1) {
		t.Errorf("%s: kv_payload_bytes %d (mtp %d), want %d", name, mem.KVPayloadBytes, p.KV.MTPBytes, want)
	}
	if ms.kv.Pages != int(pages) || (scale > 0) != (ms.kv.KS.Buf != nil) {
		t.Errorf("%s: MTP KV %d pages (scales %v)", name, ms.kv.Pages, ms.kv.KS.Buf != nil)
	}
	// Run on the carved arenas: two prefill chunks, then k drafts.
	n := min(chunk+5, ctx-k-1)
	if _, err := ms.Prefill(randIDs(r, n, cfg.VocabSize)); err != nil {
		t.Fatalf("%s: prefill: %v", name, err)
	}
	// The drafts run MTP steps only (the pending prompt row, then k−1
	// one-row steps) in the target's workspace, after the last chunk's
	// residual: the peak is the largest MTP phase of that dry run.
	e.ResetMemoryPeaks()
	d, err := ms.Draft(int32(r.IntN(cfg.VocabSize)), k)
	if err != nil || len(d) != k {
		t.Fatalf("%s: draft %v %v", name, d, err)
	}
	lastT := n - (n-1)/chunk*chunk
	if got, want := layout.AlignUp(e.WorkspacePeakBytes()), MTPWorkspaceBytes(cfg, lastT, 1, k+1); got != want || got > e.ws.Cap() {
		t.Errorf("%s: draft workspace peak %d (aligned %d), MTP dry run after a %d-token step %d, capacity %d", name, e.WorkspacePeakBytes(), got, lastT, want, e.ws.Cap())
	}
	for _, id := range d {
		if id < 0 || int(id) >= cfg.VocabSize {
			t.Errorf("%s: draft id %d outside the vocabulary", name, id)
		}
	}
	checkScratchBound(t, name, e)
}

// checkOpScratch: the engine's workspace ends with the plan's op-scratch
// term (CUDA), or has none (CPU).
func checkOpScratch(t *testing.T, name string, e *Engine, p *plan.Plan) {
	t.Helper()
	os := p.OpScratch
	if e.OpScratchBytes() != os.Bytes || (os.Bytes > 0 && (os.Offset+layout.AlignUp(os.Bytes) != e.ws.Cap() || os.Name != layout.OpScratchTerm)) {
		t.Errorf("%s: engine op scratch %d in a %d-byte workspace, plan term %+v", name, e.OpScratchBytes(), e.ws.Cap(), os)
	}
}

// checkScratchBound: after running, a backend with op scratch still uses
// exactly the bound workspace term (no op grew scratch of its own).
func checkScratchBound(t *testing.T, name string, e *Engine) {
	t.Helper()
	if _, ok := e.be.(backend.OpScratchUser); !ok {
		return
	}
	if sb, ok := e.be.(interface{ ScratchBytes() int64 }); ok && sb.ScratchBytes() != e.OpScratchBytes() {
		t.Errorf("%s: the backend's op scratch is %d bytes, the bound workspace term %d", name, sb.ScratchBytes(), e.OpScratchBytes())
	}
}

// mtpTensors counts the MTP head's tensors (not in the engine's weights
// arena without speculation).
func mtpTensors(c qwen35.Config) int {
	n := 0
	for _, t := range c.Tensors() {
		if t.Component == qwen35.ComponentMTP {
			n++
		}
	}
	return n
}

// TestKVPlaneBytesAgree: pkg/layout's KV plane sizes are the backend's.
func TestKVPlaneBytesAgree(t *testing.T) {
	for _, f := range []backend.KVFormat{backend.KVBF16, backend.KVInt8G64, backend.KVFP8Row, backend.KVF32} {
		for _, hd := range []int{32, 64, 96, 128, 256, 320} {
			c, s := backend.KVPlaneBytes(f, hd)
			lc, ls, err := layout.KVPlaneBytes(f.String(), hd)
			if err != nil || c != lc || s != ls {
				t.Errorf("%s hd %d: backend %d+%d, layout %d+%d (%v)", f, hd, c, s, lc, ls, err)
			}
		}
	}
	if _, _, err := layout.KVPlaneBytes("nvfp4", 64); err == nil {
		t.Error("layout accepted KV dtype nvfp4")
	}
}

// TestWorkspacePeakMatchesDryRun: the workspace high-water mark measured
// while running equals (up to the final alignment) the dry-run size
// (WorkspaceBytes, pkg/layout) of the step taken: a prefill chunk, a decode
// step and a verify pass.
func TestWorkspacePeakMatchesDryRun(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.BF16)
	cfg := w.cfg
	e, s := newEngine(t, w, "", Options{MaxContext: 512, PrefillChunk: 128, StateSlots: 3, LogitsRows: 3})
	ids := randIDs(r, 100, cfg.VocabSize)
	cases := []struct {
		name string
		run  func() error
		T    int
	}{
		{"prefill 100", func() error { _, err := s.Prefill(ids, false); return err }, 100},
		{"decode", func() error { _, err := s.Decode(5); return err }, 1},
		{"verify 3", func() error { _, err := s.Verify([]int32{1, 2, 3}); return err }, 3},
	}
	for _, c := range cases {
		e.ResetMemoryPeaks()
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// The dry run's capacity rounds the last term up to the arena
		// alignment; the measured mark ends at the last byte used.
		got, want := e.WorkspacePeakBytes(), WorkspaceBytes(cfg, c.T, 3)
		if aligned := (got + backend.ArenaAlign - 1) / backend.ArenaAlign * backend.ArenaAlign; aligned != want {
			t.Errorf("%s: workspace peak %d (aligned %d), dry run of a %d-token step %d", c.name, got, aligned, c.T, want)
		}
	}
}

// TestMTPKeepsTargetResidual: the MTP step runs in the target's workspace
// after the target step's residual rows, which must stay live: a run of
// decodes without drafts overflows the pending MTP rows, so capture runs
// the MTP over them between a target step and reading that step's residual.
// The MTP rows of that run must match a run that flushes after every
// decode (no overflow), row by row (fp32 weights and KV; the batched and
// one-row steps may round differently, so a small tolerance).
func TestMTPKeepsTargetResidual(t *testing.T) {
	r := seeded(t)
	path := testfixture.Artifact(t, "fp32", nil)
	w, err := loader.OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cfg := w.Config()
	V := cfg.VocabSize
	e, err := New(w, newBackend(t, "avx2"), Options{MaxContext: 256, PrefillChunk: 128, KVDtype: "fp32"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m, err := e.LoadMTP(w, MTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt, dec := randIDs(r, 20, V), randIDs(r, 140, V) // 1 + 140 pending rows > 129
	next := int32(r.IntN(V))
	run := func(flushEach bool) []float32 {
		ms, err := m.NewMTPSequence()
		if err != nil {
			t.Fatal(err)
		}
		defer ms.Close()
		ms.Logits = true
		if _, err := ms.Prefill(prompt); err != nil {
			t.Fatal(err)
		}
		for i, id := range dec {
			if flushEach {
				if _, err := ms.Draft(id, 1); err != nil {
					t.Fatalf("draft before decode %d: %v", i, err)
				}
			}
			if _, err := ms.Decode(id); err != nil {
				t.Fatalf("decode %d: %v", i, err)
			}
		}
		if _, err := ms.Draft(next, 1); err != nil {
			t.Fatal(err)
		}
		return ms.RowLogits
	}
	batched, single := run(false), run(true)
	rows := len(prompt) + len(dec)
	if len(batched) != rows*V || len(single) != rows*V {
		t.Fatalf("%d and %d MTP logits, want %d rows of %d", len(batched)/V, len(single)/V, rows, V)
	}
	for row := 0; row < rows; row++ {
		var worst, scale float64
		for j := row * V; j < (row+1)*V; j++ {
			d := math.Abs(float64(batched[j]) - float64(single[j]))
			if math.IsNaN(d) {
				t.Fatalf("row %d: NaN", row)
			}
			worst, scale = max(worst, d), max(scale, math.Abs(float64(single[j])))
		}
		if worst > 1e-4*max(scale, 1) {
			t.Fatalf("MTP row %d (position %d): max |Δ| %.3g between the overflowing and the per-decode flushes (logits up to %.3g)", row, row, worst, scale)
		}
	}
}
