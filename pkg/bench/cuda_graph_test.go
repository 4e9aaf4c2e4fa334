package bench

import (
	"context"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// TestRunCUDAGraphConfig: on the CUDA backend (a GPU with -tags cuda, the
// host SIMT harness with -tags cudasim) decode graphs are on unless
// --no-cuda-graph, and the run line says so as the reference's documents
// do: use_cuda_graph true, decode_path cuda_graph / mtp_cuda_graph, and the
// decode-graph prime of PrimeOutputs tokens (7 for --spec mtp
// --draft-tokens 2). Eager runs report eager paths and no prime.
func TestRunCUDAGraphConfig(t *testing.T) {
	if !backend.CUDABuilt {
		t.Skip("this test binary has no CUDA backend (go test -tags cudasim, or -tags cuda on a GPU machine)")
	}
	corpus := writeCorpus(t, 64, 512)
	for _, c := range []struct {
		name      string
		spec      string
		noGraph   bool
		wantPath  string
		wantPrime benchfmt.GraphPrime
	}{
		{"plain", SpecNone, false, "cuda_graph", benchfmt.GraphPrime{Primed: true, OutputTokens: 3}},
		{"plain eager", SpecNone, true, "eager", benchfmt.GraphPrime{}},
		{"mtp", SpecMTP, false, "mtp_cuda_graph", benchfmt.GraphPrime{Primed: true, OutputTokens: 7}},
		{"mtp eager", SpecMTP, true, "mtp_eager", benchfmt.GraphPrime{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testParams(draftModel(t), corpus)
			p.Backend, p.Threads = "cuda", 0
			p.Prompts, p.Gens, p.Pairs, p.Repetitions, p.Warmup = nil, []int{6}, nil, 1, 0
			p.NoCUDAGraph = c.noGraph
			if c.spec == SpecMTP {
				p.Spec, p.DraftTokens, p.LMHeadDraft = SpecMTP, 2, true
			}
			var col Collect
			if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
				t.Fatal(err)
			}
			run := col.Lines[0].Run
			cfg := run.Config
			if cfg.UseCUDAGraph == c.noGraph || cfg.DecodePath != c.wantPath || cfg.DecodeGraphPrime != c.wantPrime {
				t.Errorf("use_cuda_graph %v, decode_path %q, decode_graph_prime %+v; want %v, %q, %+v",
					cfg.UseCUDAGraph, cfg.DecodePath, cfg.DecodeGraphPrime, !c.noGraph, c.wantPath, c.wantPrime)
			}
			if run.Environment.GPUName == nil || *run.Environment.Backend != "cuda" {
				t.Errorf("environment %+v: want the CUDA backend's device", run.Environment)
			}
			if graphed := run.Memory.CUDAGraphAllowanceBytes > 0; graphed == c.noGraph {
				t.Errorf("cuda_graph_allowance_bytes %d with use_cuda_graph %v", run.Memory.CUDAGraphAllowanceBytes, cfg.UseCUDAGraph)
			}
		})
	}
}
