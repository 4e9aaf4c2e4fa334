package goldentest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/golden"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/spec"
)

// The golden models on the CUDA backend: on a GPU with -tags cuda, and on
// any CPU with -tags cudasim (every kernel under the host SIMT harness,
// make test-cuda-sim). Without either tag these tests skip.

// cudaBackend is the CUDA backend of the whole binary (closed by TestMain).
var cudaBackend backend.Backend

func cudaE(t *testing.T) backend.Backend {
	t.Helper()
	if !backend.CUDABuilt {
		t.Skip("this test binary has no CUDA backend (go test -tags cudasim, or -tags cuda on a GPU machine)")
	}
	be, err := backendCache.get("cuda", func() (backend.Backend, error) {
		be, _, _, err := loader.NewBackend(loader.BackendCUDA, 0)
		if err == nil {
			cudaBackend = be
		}
		return be, err
	})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	return be
}

func openCUDA(t *testing.T, c *golden.Case, preset string, o engine.Options) *model {
	t.Helper()
	if o.MaxContext == 0 {
		o.MaxContext = 256
	}
	m, err := openOnE(cudaE(t), c, preset, o, asStored)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	return m
}

// cudaTrace prefills the prompt (all logits) and decodes the continuation
// teacher-forced, like traceOf, on the CUDA backend.
func cudaTrace(t *testing.T, md *model, c *golden.Case) [][]float32 {
	t.Helper()
	V := c.Manifest.VocabSize
	ids, cont := c.Manifest.IDs, c.Manifest.Continuation
	flat, err := md.seq.Prefill(i32(ids), true)
	if err != nil {
		t.Fatalf("prefill: %v", err)
	}
	out := rows(flat, V)
	for i := 1; i < len(cont); i++ {
		row, err := md.seq.Decode(int32(cont[i-1]))
		if err != nil {
			t.Fatalf("decode step %d: %v", i, err)
		}
		out = append(out, slices.Clone(row))
	}
	return out
}

// TestCUDAFP32PathMatchesTransformers: the fp32 recipe with an fp32 KV
// cache on the CUDA backend reproduces transformers' float32 logits within
// fp32Tol at every stored prompt row and continuation step (the same bar as
// the CPU), the teacher-forced top-1 matches, and the free-running greedy
// continuation equals transformers' (and so the CPU backend's).
func TestCUDAFP32PathMatchesTransformers(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			md := openCUDA(t, c, "fp32", engine.Options{PrefillChunk: 1024, KVDtype: "fp32", LogitsRows: 64})
			tr := cudaTrace(t, md, c)
			T := len(c.Manifest.IDs)
			var a acc
			a.addStored(t, c.Manifest.Name, tr[:T], c.LogitsAt, len(c.Logits), "prompt position %d", "prompt")
			for i := 1; i < len(c.Manifest.Continuation); i++ {
				a.add(fmt.Sprintf("continuation step %d", i), tr[T-1+i], c.ContinuationLogits[i])
			}
			m := &metrics{}
			a.fill(m)
			t.Logf("max |Δ| %.3g at %s over %d rows", m.MaxAbs, m.WorstAt, m.Rows)
			if !(m.MaxAbs <= fp32Tol) {
				t.Errorf("max |Δlogit| %.4g at %s exceeds %.g", m.MaxAbs, m.WorstAt, fp32Tol)
			}
			md2 := openCUDA(t, c, "fp32", engine.Options{PrefillChunk: 128, KVDtype: "fp32"})
			want := i32(c.Manifest.Continuation)
			got, err := md2.seq.Generate(i32(c.Manifest.IDs), len(want), nil)
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("greedy continuation\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestCUDAGreedyMatchesCPU: for every recipe preset and KV format, the
// CUDA backend's logits stay within the derived order bound of the CPU's
// (orderBound of the preset and KV format: both backends compute the same
// formulas in fp32, the order of sums differs, and with a rounded KV cache an
// element whose two fp32 values straddle a rounding boundary is stored one
// code step apart, which the bound's twins include), and greedy
// continuations are identical wherever the CPU's top-2 margin exceeds twice
// the measured logit difference (a tie closer than the difference of two
// fp32 evaluation orders may break either way; such a step ends the
// comparison and is logged).
func TestCUDAGreedyMatchesCPU(t *testing.T) {
	const steps = 16
	for _, c := range cases(t) {
		for _, preset := range []string{"fp32", "bf16", "q8", "groupwise-int", "nvfp4-mlp", "fp8"} {
			for _, kv := range []string{"fp32", "bf16", "int8", "fp8"} {
				if preset != "fp32" && kv != "bf16" && kv != "fp8" {
					continue // the KV formats are covered on fp32 weights; quantized weights with bf16 and fp8 KV
				}
				t.Run(fmt.Sprintf("%s/%s/kv=%s", c.Manifest.Name, preset, kv), func(t *testing.T) {
					o := engine.Options{PrefillChunk: 128, KVDtype: kv, MaxContext: 256}
					cpuM, err := openE(c, preset, o, asStored)
					if err != nil {
						t.Fatal(err)
					}
					defer cpuM.close()
					gpuM := openCUDA(t, c, preset, o)
					ids := i32(c.Manifest.IDs)
					compareGreedy(t, cpuM.seq, gpuM.seq, ids, steps, orderBound(t, c, preset, kv).max)
				})
			}
		}
	}
}

func compareGreedy(t *testing.T, cpuSeq, gpuSeq *engine.Sequence, prompt []int32, steps int, tol float64) {
	t.Helper()
	for _, s := range []*engine.Sequence{cpuSeq, gpuSeq} {
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	a, err := cpuSeq.Prefill(prompt, false)
	if err != nil {
		t.Fatalf("cpu prefill: %v", err)
	}
	b, err := gpuSeq.Prefill(prompt, false)
	if err != nil {
		t.Fatalf("cuda prefill: %v", err)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	for step := 0; step < steps; step++ {
		d, _ := golden.Compare(b, a)
		if !(d <= tol) {
			t.Fatalf("step %d: max |Δlogit| CUDA vs CPU %.4g exceeds %.3g", step, d, tol)
		}
		ta, tb := argmax(a), argmax(b)
		if ta != tb {
			if m := top2Margin(a); m <= 2*d {
				t.Logf("step %d: tokens %d (cpu) and %d (cuda) are a near-tie (margin %.3g ≤ 2·%.3g); stopping", step, ta, tb, m, d)
				return
			}
			t.Fatalf("step %d: greedy token %d on the CPU, %d on CUDA (CPU top-2 margin %.3g, |Δ| %.3g)", step, ta, tb, top2Margin(a), d)
		}
		if a, err = cpuSeq.Decode(ta); err != nil {
			t.Fatalf("cpu decode: %v", err)
		}
		a = slices.Clone(a)
		if b, err = gpuSeq.Decode(tb); err != nil {
			t.Fatalf("cuda decode: %v", err)
		}
		b = slices.Clone(b)
	}
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] || (math.IsNaN(float64(x[best])) && !math.IsNaN(float64(v))) {
			best = i
		}
	}
	return int32(best)
}

func top2Margin(x []float32) float64 {
	b := argmax(x)
	second := math.Inf(-1)
	for i, v := range x {
		if int32(i) != b && float64(v) > second {
			second = float64(v)
		}
	}
	return float64(x[b]) - second
}

// TestCUDAMTPSpeculativeLossless: MTP speculative greedy decoding on the
// CUDA backend (k = 1, 2, 3; oracle drafts corrupted with p = 0.25 so
// rounds accept 0..k tokens) reproduces transformers' greedy continuation.
func TestCUDAMTPSpeculativeLossless(t *testing.T) {
	rng := seeded(t)
	for _, c := range cases(t) {
		for _, k := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/k=%d", c.Manifest.Name, k), func(t *testing.T) {
				md := openCUDA(t, c, "fp32", engine.Options{PrefillChunk: 128, KVDtype: "fp32", StateSlots: spec.MaxDraftTokens + 1})
				m, err := md.eng.LoadMTP(md.w, engine.MTPOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ms, err := m.NewMTPSequence()
				if err != nil {
					m.Close()
					t.Fatal(err)
				}
				t.Cleanup(func() { ms.Close(); m.Close() })
				want := i32(c.Manifest.Continuation)
				d := &oracleDrafter{ms: ms, ref: append(i32(c.Manifest.IDs), want...), rng: rng, pWrong: 0.25, vocab: c.Manifest.VocabSize}
				dc, err := spec.NewDecoder(ms, d, spec.Options{K: k, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				got, st, err := dc.Generate(i32(c.Manifest.IDs), len(want), nil)
				if err != nil {
					t.Fatalf("generate: %v", err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("speculative greedy continuation on CUDA\n got %v\nwant %v", got, want)
				}
				if err := st.Check(); err != nil {
					t.Error(err)
				}
				if st.AcceptedTokens == 0 {
					t.Errorf("oracle drafts were never accepted (rounds %d)", st.Rounds)
				}
			})
		}
	}
}
