package runner

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/sample"
)

// The device sampling path (engine.DeviceSampler) of the CUDA backend: on a
// GPU with -tags cuda, under the host SIMT harness with -tags cudasim; the
// test skips in a binary without CUDA.

// hostLoop is Run's host loop written out on the engine: Prefill, then
// sample.Sampler at the sequence position and Decode, on backend beName.
func hostLoop(t *testing.T, path, beName string, graphs bool, prompt []int32, cfg sample.Config, n int) []int32 {
	t.Helper()
	w, err := loader.OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	be, _, _, err := loader.NewBackend(beName, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	eng, err := engine.New(w, be, engine.Options{MaxContext: 512, PrefillChunk: 128, KVDtype: "fp32", CUDAGraph: graphs})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	seq, err := eng.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	sm, err := sample.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sm.AddPrompt(prompt)
	logits, err := seq.Prefill(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for len(out) < n {
		id := sm.Sample(logits, int64(seq.Pos()))
		if id < 0 {
			t.Fatalf("host loop: no finite logit at position %d", seq.Pos())
		}
		sm.Accept(id)
		out = append(out, id)
		if len(out) == n {
			break
		}
		if logits, err = seq.Decode(id); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestCUDADeviceSamplingMatchesHost(t *testing.T) {
	if !backend.CUDABuilt {
		t.Skip("this test binary has no CUDA backend (go test -tags cudasim, or -tags cuda on a GPU machine)")
	}
	const n = 28
	rng := seeded(t)
	seed := rng.Uint64()
	t.Logf("sampler seed %d", seed)
	configs := []struct {
		name string
		cfg  sample.Config
	}{
		{"greedy", sample.Config{}},
		{"sampled", sample.Config{Temperature: 0.9, TopK: 40, TopP: 0.92, PresencePenalty: 0.3,
			FrequencyPenalty: 0.2, RepetitionPenalty: 1.15, Seed: seed}},
	}
	path := artifact(t, "fp32")
	for _, tc := range configs {
		for _, plen := range []int{5, 150} { // 150 spans two prefill chunks
			for _, graphs := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/prompt%d/graph=%v", tc.name, plen, graphs), func(t *testing.T) {
					opts := func(be string) func(*Options) {
						return func(o *Options) {
							o.Backend, o.IgnoreEOS, o.MaxNew, o.Sampling, o.NoCUDAGraph = be, true, n, tc.cfg, !graphs
						}
					}
					dev := openRunner(t, "fp32", opts(loader.BackendCUDA))
					if dev.dsm == nil {
						t.Fatal("the CUDA runner has no device sampler")
					}
					prompt := randIDs(rng, plen, dev.VocabSize())
					got, err := dev.Run(context.Background(), Input{IDs: prompt}, nil)
					if err != nil {
						t.Fatal(err)
					}
					if len(got.IDs) != n || got.FinishReason != FinishLength {
						t.Fatalf("device path: %d ids, finish %q; want %d, %q", len(got.IDs), got.FinishReason, n, FinishLength)
					}
					if _, launches := dev.seq.GraphStats(); graphs != (launches > 0) {
						t.Fatalf("graph launches %d with graphs %v", launches, graphs)
					}
					t.Logf("ids %v", got.IDs)
					// Same backend, host sampler: the logits are the same, so
					// the draws must be identical.
					if want := hostLoop(t, path, loader.BackendCUDA, graphs, prompt, tc.cfg, n); !slices.Equal(got.IDs, want) {
						t.Fatalf("device path %v\nhost sampler on cuda %v", got.IDs, want)
					}
					// The CPU runner (host path, the reference backend).
					if graphs { // the CPU run does not depend on graphs: once per prompt
						cpu := openRunner(t, "fp32", opts(loader.BackendCPU))
						if cpu.dsm != nil {
							t.Fatal("the CPU runner has a device sampler")
						}
						want, err := cpu.Run(context.Background(), Input{IDs: prompt}, nil)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got.IDs, want.IDs) {
							t.Fatalf("cuda device path %v\ncpu host path %v", got.IDs, want.IDs)
						}
					}
					// A second run resets the device state: the same ids.
					again, err := dev.Run(context.Background(), Input{IDs: prompt}, nil)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(again.IDs, got.IDs) {
						t.Fatalf("second device run %v differs from first %v", again.IDs, got.IDs)
					}
				})
			}
		}
	}
}
