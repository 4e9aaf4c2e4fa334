package goldentest

import (
	"math"
	"slices"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/golden"
)

// fp32Tol is the fp32-path tolerance against transformers' float32 logits
// (scripts/golden/README.md: the independent float64 formula implementation
// agrees with the HF data to ≤ 1e-4; the engine adds its own fp32 rounding
// and a different GDN evaluation order): the fixed bar. Every other
// bound of this package is derived per case (derived_test.go).
const fp32Tol = 2e-3

// exactPathBar is the other fixed bar of the exact path: chunked prefill
// and token-by-token decode with fp32 weights and an fp32 KV cache agree
// within 1e-4 absolute at every position (measured ≤ 6.2e-5 on the
// committed cases); it applies on top of the derived bound (the smaller
// of the two is asserted).
const exactPathBar = 1e-4

// seeded returns a per-run random source (NINFER_TEST_SEED replays one).
var seeded = numtest.Seeded

// rowsDiff returns the largest |a−b| over two row lists (NaN → +Inf) and
// the row where it occurs.
func rowsDiff(t *testing.T, what string, a, b [][]float32) (float64, int) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d rows vs %d", what, len(a), len(b))
	}
	worst, at := 0.0, 0
	for r := range a {
		d, _ := golden.Compare(a[r], b[r])
		if d > worst || math.IsInf(d, 1) {
			worst, at = d, r
		}
	}
	return worst, at
}

// relL2 is ||a−b|| / ||b|| over all rows (NaN propagates and fails ≤).
func relL2(a, b [][]float32) float64 {
	var num, den float64
	for r := range b {
		for i, w := range b[r] {
			d := float64(a[r][i]) - float64(w)
			num += d * d
			den += float64(w) * float64(w)
		}
	}
	return math.Sqrt(num / den)
}

// TestFP32PathMatchesTransformers: the "fp32" recipe (every tensor exact)
// with an fp32 KV cache reproduces transformers' float32 logits at every
// stored prompt position and every continuation step within fp32Tol, and
// the free-running greedy continuation (Sequence.Generate, on-backend
// argmax, chunked prefill) is identical.
func TestFP32PathMatchesTransformers(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			m := measure(t, c, "fp32", "fp32")
			t.Logf("max |Δ| %.3g at %s, mean |Δ| %.3g over %d rows; top-1 %d/%d; greedy %d/%d",
				m.MaxAbs, m.WorstAt, m.MeanAbs, m.Rows, m.Top1, m.Rows, m.GreedyPrefix, m.GreedyLen)
			if !(m.MaxAbs <= fp32Tol) {
				t.Errorf("max |Δlogit| %.4g at %s exceeds %.g", m.MaxAbs, m.WorstAt, fp32Tol)
			}
			if m.Top1 != m.Rows {
				t.Errorf("top-1 differs from transformers on %d of %d rows", m.Rows-m.Top1, m.Rows)
			}
			if m.GreedyPrefix != m.GreedyLen {
				t.Errorf("teacher-forced greedy agrees for %d of %d tokens", m.GreedyPrefix, m.GreedyLen)
			}
			md := open(t, c, "fp32", engine.Options{PrefillChunk: 128, KVDtype: "fp32"}, asStored)
			want := i32(c.Manifest.Continuation)
			got, err := md.seq.Generate(i32(c.Manifest.IDs), len(want), nil)
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("greedy continuation\n got %v\nwant %v", got, want)
			}
		})
	}
}

// decodeAll runs ids token by token from an empty sequence and returns a
// copy of every step's logits.
func decodeAll(t *testing.T, s *engine.Sequence, ids []int32) [][]float32 {
	t.Helper()
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(ids))
	for p, id := range ids {
		row, err := s.Decode(id)
		if err != nil {
			t.Fatalf("decode position %d: %v", p, err)
		}
		out[p] = slices.Clone(row)
	}
	return out
}

// prefillAll prefills ids (all logits) from an empty sequence.
func prefillAll(t *testing.T, s *engine.Sequence, ids []int32, V int) [][]float32 {
	t.Helper()
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	flat, err := s.Prefill(ids, true)
	if err != nil {
		t.Fatalf("prefill %d ids: %v", len(ids), err)
	}
	if len(flat) != len(ids)*V {
		t.Fatalf("prefill of %d ids returned %d logits, want %d", len(ids), len(flat), len(ids)*V)
	}
	return rows(flat, V)
}

// TestChunkedPrefillMatchesDecode: prefill in chunks of 128 (136 = 128 + 8),
// 256 and 1024 (one chunk) gives the logits of token-by-token decode of the
// same ids at every position, within the derived bound of two evaluation
// orders (orderBound: max |Δ| and rel-L2) of the model at hand — fp32
// weights with an fp32 KV cache, every quantized preset with an fp32 cache
// (the multi-row and one-row quantized kernels agree), and fp32 weights with
// the default bf16 cache (whose bound includes K/V elements that round to
// the neighbouring bf16 value). A last-row-only prefill gives the same last
// row, and Reset + prefill again is bit-identical.
func TestChunkedPrefillMatchesDecode(t *testing.T) {
	type run struct{ preset, kv string }
	runs := []run{{"fp32", "fp32"}, {"fp32", "bf16"}}
	for _, p := range quantPresets {
		runs = append(runs, run{p, "fp32"})
	}
	for _, c := range cases(t) {
		for _, r := range runs {
			t.Run(c.Manifest.Name+"/"+r.preset+"/kv="+r.kv, func(t *testing.T) {
				ids := i32(c.Manifest.IDs)
				V := c.Manifest.VocabSize
				ob := orderBound(t, c, r.preset, r.kv)
				tol, relTol := ob.max, ob.relL2
				if r.preset == "fp32" && r.kv == "fp32" {
					tol = min(tol, exactPathBar)
				}
				t.Logf("derived bound (orderBound): %s", ob)
				dec := open(t, c, r.preset, engine.Options{PrefillChunk: 128, KVDtype: r.kv}, asStored)
				ref := decodeAll(t, dec.seq, ids)
				for i, chunk := range []int{128, 256, 1024} {
					lr := []int{1, 64, 1024}[i] // also vary the head's row pieces
					md := open(t, c, r.preset, engine.Options{PrefillChunk: chunk, KVDtype: r.kv, LogitsRows: lr}, asStored)
					got := prefillAll(t, md.seq, ids, V)
					d, at := rowsDiff(t, "prefill vs decode", got, ref)
					rel := relL2(got, ref)
					t.Logf("chunk %4d (logits rows %4d): max |prefill − decode| %.3g at position %d, rel-L2 %.3g", chunk, lr, d, at, rel)
					if !(d <= tol) || !(rel <= relTol) {
						t.Errorf("chunk %d: max |prefill − decode| %.4g at position %d (bound %.3g), rel-L2 %.3g (bound %.3g)",
							chunk, d, at, tol, rel, relTol)
					}
					again := prefillAll(t, md.seq, ids, V)
					if d, at := rowsDiff(t, "reset", again, got); d != 0 {
						t.Errorf("chunk %d: Reset + prefill differs from the first prefill by %.3g at position %d", chunk, d, at)
					}
					if err := md.seq.Reset(); err != nil {
						t.Fatal(err)
					}
					last, err := md.seq.Prefill(ids, false)
					if err != nil {
						t.Fatalf("chunk %d: last-row prefill: %v", chunk, err)
					}
					if d, _ := golden.Compare(last, got[len(ids)-1]); !(d <= tol) {
						t.Errorf("chunk %d: last-row prefill differs from the all-logits last row by %.4g (bound %.3g)", chunk, d, tol)
					}
				}
			})
		}
	}
}

// TestInterleavedPrefillDecodeRandom: a fresh random id sequence of random
// length is run as prefill / token-by-token decode / prefill (segments of
// random length, chunk 128) and must match pure token-by-token decode at
// every position within the derived order bound of the same ids
// (orderBoundIDs: the random ids have no margin selection, so the twins run
// on them rather than on the golden ids): state carried across
// calls (KV positions, GDN recurrent and conv state, DeltaChunked chunk
// boundaries not aligned to the call boundaries) is the same as in the
// one-token path. A wrong carried state shows as O(1) differences.
func TestInterleavedPrefillDecodeRandom(t *testing.T) {
	rng := seeded(t)
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			V := c.Manifest.VocabSize
			n := 129 + rng.IntN(250)
			ids := numtest.RandIDs(rng, n, V)
			a := 1 + rng.IntN(n-2)
			b := a + 1 + rng.IntN(min(20, n-a-1))
			md := open(t, c, "fp32", engine.Options{PrefillChunk: 128, KVDtype: "fp32"}, asStored)
			ref := decodeAll(t, md.seq, ids)
			if err := md.seq.Reset(); err != nil {
				t.Fatal(err)
			}
			var got [][]float32
			flat, err := md.seq.Prefill(ids[:a], true)
			if err != nil {
				t.Fatalf("prefill [0,%d): %v", a, err)
			}
			got = append(got, rows(flat, V)...)
			for p := a; p < b; p++ {
				row, err := md.seq.Decode(ids[p])
				if err != nil {
					t.Fatalf("decode %d: %v", p, err)
				}
				got = append(got, slices.Clone(row))
			}
			if b < n {
				flat, err = md.seq.Prefill(ids[b:], true)
				if err != nil {
					t.Fatalf("prefill [%d,%d): %v", b, n, err)
				}
				got = append(got, rows(flat, V)...)
			}
			d, at := rowsDiff(t, "interleaved vs decode", got, ref)
			rel := relL2(got, ref)
			ob := orderBoundIDs(t, c, ids)
			t.Logf("n %d, prefill [0,%d) decode [%d,%d) prefill [%d,%d): max |Δ| %.3g at %d, rel-L2 %.3g (derived bound %s)", n, a, a, b, b, n, d, at, rel, ob)
			if !(d <= ob.max) || !(rel <= ob.relL2) {
				t.Errorf("interleaved vs decode: max |Δ| %.4g at position %d (bound %.3g), rel-L2 %.3g (bound %.3g); n %d, segments %d/%d",
					d, at, ob.max, rel, ob.relL2, n, a, b)
			}
			if md.seq.Pos() != n {
				t.Errorf("sequence position %d after %d tokens", md.seq.Pos(), n)
			}
		})
	}
}

// quantPresets are the recipes with quantized or rounded matrices.
var quantPresets = []string{"bf16", "q8", "groupwise-int", "nvfp4-mlp", "fp8"}

// TestQuantizedKernelsMatchRepresentedWeights: for every quantized preset,
// the engine on the stored artifact (quantized kernels) equals the engine on
// the same artifact with every tensor decoded to fp32 by pkg/format's
// reference decoder (fp32 kernels) within the derived order bound of the
// preset (the same products summed in another order: per-group partial sums
// times the group scale; orderBound) on every trace row, with the same
// argmax on every row whose top-1/top-2 margin exceeds twice that bound. So
// the deviations measured
// against transformers are entirely representation error of the weights,
// not kernel error.
func TestQuantizedKernelsMatchRepresentedWeights(t *testing.T) {
	for _, c := range cases(t) {
		for _, p := range quantPresets {
			t.Run(c.Manifest.Name+"/"+p, func(t *testing.T) {
				st, dc := trace(t, c, p, "fp32", asStored), trace(t, c, p, "fp32", asDecoded)
				d, at := rowsDiff(t, "stored vs decoded", st, dc)
				rel := relL2(st, dc)
				ob := orderBound(t, c, p, "fp32")
				t.Logf("max |stored − decoded| %.3g at row %d, rel-L2 %.3g (derived bound %s)", d, at, rel, ob)
				if !(d <= ob.max) || !(rel <= ob.relL2) {
					t.Errorf("stored vs decoded: max |Δ| %.4g at row %d (bound %.3g), rel-L2 %.3g (bound %.3g)", d, at, ob.max, rel, ob.relL2)
				}
				for r := range st {
					if golden.Argmax(st[r]) != golden.Argmax(dc[r]) && top2Margin(dc[r]) > 2*ob.max {
						t.Errorf("row %d: argmax %d (stored) vs %d (decoded), top-1/top-2 margin %.3g", r,
							golden.Argmax(st[r]), golden.Argmax(dc[r]), top2Margin(dc[r]))
					}
				}
			})
		}
	}
}
