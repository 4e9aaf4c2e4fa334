//go:build cudasim && !cuda

package backend_test

// The CUDA backend's arenas against pkg/layout, and the dry-run replica of
// cuda_geometry_test.go against the engine it stands for.

import (
	"fmt"
	"testing"

	"github.com/ninfer/ninfer/kernels/cuda"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// ---- the replica against the engine, and the arenas -------------------------

// zeroWeights is an engine.Weights of cfg with bf16 zero tensors (fp32 for
// the control class, as every recipe stores them).
type zeroWeights struct{ cfg qwen35.Config }

func (w zeroWeights) Config() qwen35.Config { return w.cfg }

func (w zeroWeights) Tensor(id string) (format.Format, []int64, []byte, error) {
	for _, t := range w.cfg.Tensors() {
		if t.Name == id {
			f := format.BF16
			if t.Class == qwen35.ClassControl {
				f = format.FP32
			}
			n, err := format.EncodedSize(f, t.Shape)
			if err != nil {
				return "", nil, nil, err
			}
			return f, t.Shape, make([]byte, n), nil
		}
	}
	return "", nil, nil, fmt.Errorf("unknown tensor %s", id)
}

// geomTinyConfig is a small config with the real models' structure (hd
// 256 would make the harness slow; the routes that matter, GEMV and
// tensor-core matmul, every norm route, split and tile attention, chunked
// and recurrent GDN, are reached at these sizes).
func geomTinyConfig(t *testing.T) qwen35.Config {
	c := qwen35.Config{VocabSize: 200, HiddenSize: 128, NumHiddenLayers: 4, IntermediateSize: 192,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 64, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 32, LinearValueHeadDim: 32, LinearNumKeyHeads: 2, LinearNumValueHeads: 4,
		LayerTypes: []string{qwen35.LinearAttention, qwen35.LinearAttention, qwen35.LinearAttention, qwen35.FullAttention},
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, MaxPositionEmbeddings: 4096,
		AttnOutputGate: true, EOSTokenIDs: []int{1}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCUDADryRunMatchesEngine runs the engine (bf16 weights, bf16 KV) on
// the CUDA backend in dry-run mode and checks that its decode, verify and
// prefill steps launch exactly the kernels, grids, blocks and shared memory
// of this file's replica for the same config, so the real-shape sweep
// above checks what the engine launches.
func TestCUDADryRunMatchesEngine(t *testing.T) {
	be, err := backend.NewCUDA(backend.CUDAOptions{})
	if err != nil {
		t.Skip(err)
	}
	defer be.Close()
	cfg := geomTinyConfig(t)
	const maxCtx, chunk = 512, 256
	e, err := engine.New(zeroWeights{cfg}, be, engine.Options{MaxContext: maxCtx, PrefillChunk: chunk, StateSlots: geomSlots, LogitsRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sq, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	ctx := backend.CUDACtxForTest(be)
	engineLog := func(f func() error) []cuda.Launch {
		t.Helper()
		if err := ctx.DryRun(true, 0, 0); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := ctx.DryRun(false, 0, 0); err != nil {
				t.Fatal(err)
			}
		}()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return ctx.Launches()
	}
	rec, err := recipe.Lookup("bf16")
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(t, cfg, rec)
	s := m.newSeq(t, maxCtx, backend.KVBF16)
	all := make([]int, cfg.NumHiddenLayers)
	for i := range all {
		all[i] = i
	}
	replica := func(o stepOpts) []cuda.Launch {
		t.Helper()
		d := &dry{tb: t, ctx: ctx, pass: "H200", sms: h200SMs, optin: h200Optin, strict: true, mode: "engine replica",
			dk: cfg.LinearKeyHeadDim}
		o.layers = all
		d.step(m, s, o)
		var out []cuda.Launch
		for _, r := range d.recs {
			out = append(out, r.launches...)
		}
		if err := ctx.DryRun(false, 0, 0); err != nil {
			t.Fatal(err)
		}
		return out
	}
	ids := make([]int32, 300) // two chunks: 256 + a ragged 44
	for i := range ids {
		ids[i] = int32(i % cfg.VocabSize)
	}
	compare := func(what string, got, want []cuda.Launch) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: the engine launched %d kernels, the replica %d", what, len(got), len(want))
		}
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Errorf("%s: launch %d: engine %+v, replica %+v", what, i, got[i], want[i])
				return
			}
		}
	}
	// The engine's dry-run logits are whatever the device memory holds
	// (kernels do not run); only the launches matter here.
	pre := engineLog(func() error { _, err := sq.Prefill(ids, false); return err })
	// Prefill(all = false): only the last chunk computes logits.
	want := append(replica(stepOpts{T: chunk, outSlot: 0}),
		replica(stepOpts{T: len(ids) - chunk, from: len(ids) - chunk - 1, logits: 1, logitRows: 1, outSlot: 0})...)
	compare("prefill 256 + 44", pre, want)
	dec := engineLog(func() error { _, err := sq.Decode(5); return err })
	compare("decode", dec, replica(stepOpts{T: 1, logits: 1, logitRows: 1, outSlot: 0}))
	ver := engineLog(func() error { _, err := sq.Verify([]int32{1, 2, 3, 4}); return err })
	compare("verify 4", ver, replica(stepOpts{T: 4, logits: 4, logitRows: 1, outSlot: backend.PerToken}))
	t.Logf("engine and replica agree: prefill %d, decode %d, verify %d launches", len(pre), len(dec), len(ver))
}

// TestCUDAArenasAreLayout checks that the CUDA backend holds exactly the
// engine's three arenas of pkg/layout (weights, sequence, workspace; with
// MTP also mtp.weights and mtp.sequence) and nothing else, before and after
// running steps: the workspace ends with the op-scratch term
// (layout.CUDAOpScratch), which the ops use without allocating (the
// context's scratch stays the bound term), and the sequence carries
// ctl.sampler.
func TestCUDAArenasAreLayout(t *testing.T) {
	be, err := backend.NewCUDA(backend.CUDAOptions{})
	if err != nil {
		t.Skip(err)
	}
	defer be.Close()
	cfg := geomTinyConfig(t)
	cfg.MTPNumHiddenLayers = 1
	o := engine.Options{MaxContext: 512, PrefillChunk: 128, KVDtype: "int8", StateSlots: 3, LogitsRows: 3}
	w := zeroWeights{cfg}
	e, err := engine.New(w, be, o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var terms []layout.Term
	var mtpTerms []layout.Term
	for _, tn := range cfg.Tensors() {
		_, shape, data, err := w.Tensor(tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := format.Elements(shape)
		if err != nil {
			t.Fatal(err)
		}
		term := layout.Term{Name: tn.Name, Bytes: layout.BoundBytes(tn.Class, n, int64(len(data)))}
		if tn.Component == qwen35.ComponentMTP {
			mtpTerms = append(mtpTerms, term)
		} else {
			terms = append(terms, term)
		}
	}
	T := layout.StepTokens(o.MaxContext, o.PrefillChunk)
	so := layout.SequenceOptions{MaxContext: o.MaxContext, StepTokens: T, KVDtype: o.KVDtype, StateSlots: o.StateSlots, DeviceSampler: true}
	seqLay, _, err := layout.Sequence(cfg, so)
	if err != nil {
		t.Fatal(err)
	}
	_, phases := layout.Workspace(cfg, T, o.LogitsRows)
	_, need := layout.CUDAOpScratch(cfg, T, T)
	_, wsCap := layout.WithOpScratch(phases, need)
	if need <= 0 || wsCap != layout.AlignUp(phases)+layout.AlignUp(need) {
		t.Fatalf("op scratch %d, workspace %d of phases %d", need, wsCap, phases)
	}
	want := []backend.CUDABufferForTest{{"sequence", seqLay.Capacity}, {"weights", layout.Weights(terms).Capacity}, {"workspace", wsCap}}
	sq, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, want []backend.CUDABufferForTest) {
		t.Helper()
		got := backend.CUDABuffersForTest(be)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: CUDA buffers %v, pkg/layout arenas %v", what, got, want)
		}
	}
	check("after NewSequence", want)
	ids := make([]int32, 70) // one step of 70: chunked GDN with a ragged chunk, conv halo
	if _, err := sq.Prefill(ids, false); err != nil {
		t.Fatal(err)
	}
	if _, err := sq.Decode(1); err != nil {
		t.Fatal(err)
	}
	check("after prefill and decode", want)
	if be.ScratchBytes() != need {
		t.Errorf("after prefill and decode: the context's op scratch is %d B, the bound workspace term %d B", be.ScratchBytes(), need)
	}
	t.Logf("tiny config (T = %d, int8 KV, 3 slots): op scratch term %d B at the end of the workspace", T, need)
	sq.Close()

	mtp, err := e.LoadMTP(w, engine.MTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mtp.Close()
	ms, err := mtp.NewMTPSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	mseq, _, err := layout.MTPSequence(cfg, so)
	if err != nil {
		t.Fatal(err)
	}
	seq2, _, err := layout.Sequence(cfg, so)
	if err != nil {
		t.Fatal(err)
	}
	_, mtpPhases := layout.WorkspaceWithMTP(cfg, T, o.StateSlots, o.LogitsRows)
	_, mtpNeed := layout.CUDAOpScratch(cfg, T, layout.MTPRows(T, o.StateSlots))
	_, wsMTP := layout.WithOpScratch(mtpPhases, mtpNeed)
	wantMTP := []backend.CUDABufferForTest{{layout.MTPSequenceArena, mseq.Capacity}, {layout.MTPWeightsArena, layout.MTPWeights(mtpTerms).Capacity},
		{"sequence", seq2.Capacity}, {"weights", layout.Weights(terms).Capacity}, {"workspace", wsMTP}}
	check("with MTP", wantMTP)
	if _, err := ms.Prefill(ids); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Decode(1); err != nil {
		t.Fatal(err)
	}
	check("with MTP after prefill and decode", wantMTP)
	if be.ScratchBytes() != mtpNeed {
		t.Errorf("with MTP: the context's op scratch is %d B, the bound workspace term %d B", be.ScratchBytes(), mtpNeed)
	}
}
