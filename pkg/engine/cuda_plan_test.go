package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/plan"
	"github.com/ninfer/ninfer/pkg/sample"
)

// TestCUDAArenasEqualPlan is "plan = reality" on the CUDA backend (a GPU
// with -tags cuda, the host SIMT harness with -tags cudasim; skipped
// without): the engine's weights, sequence and workspace arenas equal
// `ninfer-plan --backend cuda` byte for byte, including the workspace's
// op-scratch term (after the phases) and the sequence's ctl.sampler term;
// a prefill, device-sampled decode steps and, with MTP, drafts then run
// with every op's scratch inside that term (nothing grown outside the
// arenas).
func TestCUDAArenasEqualPlan(t *testing.T) {
	be := newCUDABackend(t)
	r := seeded(t)
	w := graphArtifact(t, r)
	cfg, objs := w.Config(), planObjects(w)
	for _, kv := range []string{"bf16", "fp8"} {
		for _, ctx := range []int{256, 4096} {
			name := fmt.Sprintf("cuda kv=%s ctx=%d", kv, ctx)
			e, err := New(w, be, Options{MaxContext: ctx, PrefillChunk: 128, KVDtype: kv})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			s, err := e.NewSequence()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			p, err := plan.New(cfg, objs, plan.Options{MaxContext: int64(ctx), KVCapacity: int64(ctx), KVDtype: plan.KVDtype(kv),
				PrefillChunk: 128, Backend: plan.BackendCUDA, UseCUDAGraph: true, AvailableAfterWeightsBytes: 1 << 30})
			if err != nil {
				t.Fatalf("%s: plan: %v", name, err)
			}
			a, m := e.Arenas(), p.Memory
			if a["weights"] != m.Weights.CapacityBytes || s.Bytes() != m.Sequence.CapacityBytes || a["workspace"] != m.Workspace.CapacityBytes {
				t.Errorf("%s: engine weights/sequence/workspace %d/%d/%d, plan %d/%d/%d", name, a["weights"], s.Bytes(), a["workspace"],
					m.Weights.CapacityBytes, m.Sequence.CapacityBytes, m.Workspace.CapacityBytes)
			}
			checkOpScratch(t, name, e, p)
			if tm, ok := p.Sequence.Term("ctl.sampler"); !ok || s.sampler.Off != tm.Offset || tm.Bytes != layout.SamplerBytes(cfg.VocabSize) {
				t.Errorf("%s: sampler view at %d, plan term %+v (%v)", name, s.sampler.Off, tm, ok)
			}
			// Prefill over two chunks, then device-sampled decode steps.
			dsm, err := s.NewDeviceSampler(sample.Config{Temperature: 0.8, TopK: 20, TopP: 0.9, Seed: 7})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			prompt := randIDs(r, min(200, ctx-8), cfg.VocabSize)
			if err := dsm.Reset(prompt); err != nil {
				t.Fatal(err)
			}
			id, err := s.PrefillSample(prompt, dsm)
			for i := 0; i < 4 && err == nil; i++ {
				if id < 0 || int(id) >= cfg.VocabSize {
					t.Fatalf("%s: sampled id %d", name, id)
				}
				id, err = s.DecodeSample(id, dsm)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkScratchBound(t, name, e)
			s.Close()
			e.Close()
		}
	}
	for k := 1; k <= 2; k++ {
		checkMTPArenas(t, r, w, objs, "q8", k, "bf16", k == 2, be, plan.BackendCUDA)
	}
}

// TestDeviceSamplerNeedsTheTerm: a CPU sequence has no ctl.sampler term,
// so asking it for a device sampler is a clear error.
func TestDeviceSamplerNeedsTheTerm(t *testing.T) {
	w := graphArtifact(t, seeded(t))
	_, s := newEngine(t, w, "avx2", Options{MaxContext: 128, PrefillChunk: 128})
	if _, err := s.NewDeviceSampler(sample.Config{Temperature: 1}); err == nil || !strings.Contains(err.Error(), "ctl.sampler") {
		t.Errorf("a CPU sequence's device sampler: %v, want an error naming ctl.sampler", err)
	}
}
