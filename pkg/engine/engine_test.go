package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Tolerance presets for model-level checks (frozen); see numtest.Tolerance.
type tol = numtest.Tolerance

var (
	// Engine (fp32 compute, fp32 KV) vs the FP64 reference with the same
	// represented weights. Tail: rare single elements reach ~2e-4 through
	// fp32 accumulation order; the whole-result rel-L2 stays ~1e-6.
	tolModel = tol{Name: "model_logits_fp32", Atol: 1e-4, Rtol: 1e-4, TailFrac: 1e-3, TailMax: 5, RelL2: 1e-5}
	// bf16 KV vs the reference storing bf16-rounded K/V: an element whose
	// fp32 value sits on a bf16 rounding boundary may round differently.
	tolModelBF16KV = tol{Name: "model_logits_bf16_kv", Atol: 2e-4, Rtol: 2e-4, TailFrac: 5e-2, TailMax: 20, RelL2: 3e-4}
	// Chunked prefill vs token-by-token decode of the same engine.
	tolPaths = tol{Name: "prefill_vs_decode", Atol: 1e-4}
	// Quantised KV caches vs the unquantised reference.
	tolKVInt8 = tol{Name: "model_logits_kv_int8", Atol: 2e-2, Rtol: 5e-2, TailFrac: 2e-2, TailMax: 5, RelL2: 1.5e-2}
	tolKVFP8  = tol{Name: "model_logits_kv_fp8", Atol: 6e-2, Rtol: 1e-1, TailFrac: 5e-2, TailMax: 5, RelL2: 5e-2}
)

func TestMain(m *testing.M) { testfixture.Main(m) }

// check fails the test when got is not within tl of the reference want.
var check = numtest.Check

// seeded returns a fresh random source (NINFER_TEST_SEED replays one).
var seeded = numtest.Seeded

func newBackend(t testing.TB, isa string) *backend.CPU {
	t.Helper()
	// scalar runs every op on the pool; avx2 keeps the serial cut-off for tiny ops.
	b, err := backend.NewCPU(backend.CPUOptions{Threads: 2, ISA: isa, AlwaysParallel: isa == "scalar"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testISAs is every CPU instruction-set level this machine runs (a level it
// lacks is skipped with a message naming it).
func testISAs(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, isa := range []string{"scalar", "avx2", "avx512"} {
		b, err := backend.NewCPU(backend.CPUOptions{Threads: 1, ISA: isa})
		if err != nil {
			t.Logf("skipping isa %s: %v", isa, err)
			continue
		}
		b.Close()
		out = append(out, isa)
	}
	return out
}

func newEngine(t testing.TB, w Weights, isa string, o Options) (*Engine, *Sequence) {
	t.Helper()
	e, err := New(w, newBackend(t, isa), o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	return e, s
}

// randIDs returns n uniform token ids in [0, vocab).
var randIDs = numtest.RandIDs

func refLogits(w *testWeights, ids []int32, kvRound bool) [][]float64 {
	m := newRef(w, kvRound)
	out := make([][]float64, len(ids))
	for i, id := range ids {
		out[i] = m.step(id)
	}
	return out
}

func TestPrefillMatchesReference(t *testing.T) {
	r := seeded(t)
	for _, m := range []struct {
		f    format.Format
		tied bool
	}{{format.FP32, false}, {format.BF16, true}} {
		w := newTestWeights(r, tinyConfig(m.tied), m.f)
		ids := randIDs(r, 300, w.cfg.VocabSize)
		want := refLogits(w, ids, false)
		for _, chunk := range []int{128, 256} {
			for _, isa := range testISAs(t) {
				name := fmt.Sprintf("%s/tied=%v/chunk=%d/%s", m.f, m.tied, chunk, isa)
				_, s := newEngine(t, w, isa, Options{KVDtype: "fp32", MaxContext: 512, PrefillChunk: chunk, LogitsRows: 100})
				got, err := s.Prefill(ids, true)
				if err != nil {
					t.Fatal(err)
				}
				check(t, name, got, flat(want), tolModel)
				if chunk == 128 && isa == "avx2" { // last-position-only logits
					_, s := newEngine(t, w, isa, Options{KVDtype: "fp32", MaxContext: 512, PrefillChunk: chunk})
					last, err := s.Prefill(ids, false)
					if err != nil {
						t.Fatal(err)
					}
					check(t, name+"/last", last, want[len(ids)-1], tolModel)
				}
			}
		}
	}
}

// TestQuantisedWeights runs a model whose matrices use every quantised
// format (nvfp4 where N%128 == 0) against the reference on the decoded
// (represented) weights.
func TestQuantisedWeights(t *testing.T) {
	r := seeded(t)
	recipe := func(tn qwen35.Tensor) format.Format {
		switch tn.Class {
		case qwen35.ClassEmbedding:
			return format.Q8G32
		case qwen35.ClassOutputHead:
			return format.Q6G64
		case qwen35.ClassAttnQ: // [256, 64]
			return format.NVFP4
		case qwen35.ClassAttnK, qwen35.ClassAttnV, qwen35.ClassAttnO:
			return format.Q4G64
		case qwen35.ClassGDNQKV, qwen35.ClassGDNZ, qwen35.ClassGDNOut:
			return format.Q5G64
		case qwen35.ClassMLPDown:
			return format.FP8Row
		}
		return format.BF16
	}
	w := newTestWeightsRecipe(r, tinyConfig(false), recipe)
	ids := randIDs(r, 140, w.cfg.VocabSize)
	want := refLogits(w, ids, false)
	for _, isa := range testISAs(t) {
		_, s := newEngine(t, w, isa, Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128, LogitsRows: 128})
		got, err := s.Prefill(ids[:130], true)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids[130:] {
			step, err := s.Decode(id)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, step...)
		}
		check(t, isa+"/quantised", got, flat(want), tolModel)
	}
}

func TestDecodeMatchesReferenceAndPrefill(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.FP32)
	V := w.cfg.VocabSize
	ids := randIDs(r, 140, V)
	want := refLogits(w, ids, false)
	for _, isa := range testISAs(t) {
		_, pre := newEngine(t, w, isa, Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128, LogitsRows: 128})
		all, err := pre.Prefill(ids, true)
		if err != nil {
			t.Fatal(err)
		}
		_, dec := newEngine(t, w, isa, Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128})
		if _, err := dec.Prefill(ids[:1], false); err != nil {
			t.Fatal(err)
		}
		var steps []float32
		for i := 1; i < len(ids); i++ {
			got, err := dec.Decode(ids[i])
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, got...)
			check(t, fmt.Sprintf("%s/decode_vs_prefill/pos%d", isa, i), got, f64(all[i*V:(i+1)*V]), tolPaths)
		}
		check(t, isa+"/decode", steps, flat(want[1:]), tolModel)
	}
}

func flat(x [][]float64) []float64 {
	var out []float64
	for _, r := range x {
		out = append(out, r...)
	}
	return out
}

// f64 widens float32 values to float64.
var f64 = numtest.F64

func TestBF16KVCache(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.BF16)
	ids := randIDs(r, 200, w.cfg.VocabSize)
	want := refLogits(w, ids, true)
	for _, isa := range testISAs(t) {
		_, s := newEngine(t, w, isa, Options{MaxContext: 256, PrefillChunk: 128, LogitsRows: 128})
		got, err := s.Prefill(ids[:150], true)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids[150:] {
			step, err := s.Decode(id)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, step...)
		}
		check(t, isa+"/kv=bf16", got, flat(want), tolModelBF16KV)
	}
}

func TestQuantisedKVCache(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.FP32)
	ids := randIDs(r, 150, w.cfg.VocabSize)
	want := refLogits(w, ids, false)
	for kv, tl := range map[string]tol{"int8": tolKVInt8, "fp8": tolKVFP8} {
		_, s := newEngine(t, w, "avx2", Options{MaxContext: 256, PrefillChunk: 128, KVDtype: kv, LogitsRows: 64})
		got, err := s.Prefill(ids[:140], true)
		if err != nil {
			t.Fatal(err)
		}
		for i := 140; i < len(ids); i++ {
			step, err := s.Decode(ids[i])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, step...)
		}
		check(t, "kv="+kv, got, flat(want), tl)
	}
}

func TestVerifyAcceptRollsBackState(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.FP32)
	V := w.cfg.VocabSize
	prompt, draft := randIDs(r, 20, V), randIDs(r, 4, V)
	next := int32(7)
	_, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 128, PrefillChunk: 128, StateSlots: 5})
	if _, err := s.Prefill(prompt, false); err != nil {
		t.Fatal(err)
	}
	vl, err := s.Verify(draft)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(1); err == nil {
		t.Fatal("decode after verify without accept succeeded")
	}
	// Verify logits equal the reference at every draft position.
	want := refLogits(w, append(append([]int32{}, prompt...), draft...), false)
	check(t, "verify", vl, flat(want[len(prompt):]), tolModel)
	if err := s.Accept(2); err != nil {
		t.Fatal(err)
	}
	if s.Pos() != len(prompt)+2 {
		t.Fatalf("position %d after accept, want %d", s.Pos(), len(prompt)+2)
	}
	got, err := s.Decode(next)
	if err != nil {
		t.Fatal(err)
	}
	want = refLogits(w, append(append(append([]int32{}, prompt...), draft[:2]...), next), false)
	check(t, "decode after accept(2)", got, want[len(want)-1], tolModel)
	// A second round from the accepted slot (slot 1 is now current).
	got, err = s.Decode(next + 1)
	if err != nil {
		t.Fatal(err)
	}
	want = refLogits(w, append(append(append([]int32{}, prompt...), draft[:2]...), next, next+1), false)
	check(t, "second decode after accept", got, want[len(want)-1], tolModel)
}

func TestContextLimitAndReset(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(true), format.BF16)
	_, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 100, PrefillChunk: 128})
	ids := randIDs(r, 90, w.cfg.VocabSize)
	first, err := s.Prefill(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	first = append([]float32(nil), first...)
	if _, err := s.Prefill(ids[:11], false); !errors.Is(err, ErrContext) {
		t.Fatalf("prefill past the limit: err %v, want ErrContext", err)
	}
	if _, err := s.Prefill(ids[:10], false); err != nil {
		t.Fatalf("prefill up to the limit: %v", err)
	}
	if _, err := s.Decode(1); !errors.Is(err, ErrContext) {
		t.Fatalf("decode past the limit: err %v, want ErrContext", err)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	again, err := s.Prefill(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "prefill after reset", again, f64(first), tolPaths)
	if _, err := New(w, newBackend(t, "scalar"), Options{PrefillChunk: 100}); err == nil {
		t.Fatal("prefill chunk 100 accepted")
	}
	if _, err := New(w, newBackend(t, "scalar"), Options{KVDtype: "fp4"}); err == nil {
		t.Fatal("kv dtype fp4 accepted")
	}
}

func TestGenerateGreedy(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.BF16)
	prompt := randIDs(r, 12, w.cfg.VocabSize)
	_, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 128, PrefillChunk: 128})
	var seen []int32
	out, err := s.Generate(prompt, 10, func(id int32) bool { seen = append(seen, id); return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 || len(out) != len(seen) {
		t.Fatalf("generated %v, callback saw %v", out, seen)
	}
	// Each token is the reference argmax given the tokens before it.
	seq := append([]int32{}, prompt...)
	ref := newRef(w, false)
	var logits []float64
	for _, id := range seq {
		logits = ref.step(id)
	}
	for i, id := range out {
		best := 0
		for j, v := range logits {
			if v > logits[best] {
				best = j
			}
		}
		if int32(best) != id {
			t.Fatalf("token %d: engine %d, reference argmax %d", i, id, best)
		}
		if i+1 < len(out) {
			logits = ref.step(id)
		}
	}
	if len(out) < 10 && out[len(out)-1] != 96 {
		t.Fatalf("stopped after %d tokens without EOS", len(out))
	}
}

func TestDecodeStepAllocatesNothing(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.BF16)
	_, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 512, PrefillChunk: 128})
	if _, err := s.Prefill(randIDs(r, 8, w.cfg.VocabSize), false); err != nil {
		t.Fatal(err)
	}
	var err error
	allocs := testing.AllocsPerRun(50, func() {
		if _, e := s.Decode(3); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("decode step allocates %.1f times per token, want 0", allocs)
	}
}

// TestRealHeadDims uses the released models' per-head shapes (head_dim 256
// with 64 rotary dims, dk = dv = 128) on a narrow two-layer model.
func TestRealHeadDims(t *testing.T) {
	r := seeded(t)
	c := tinyConfig(false)
	c.HiddenSize, c.IntermediateSize, c.VocabSize = 256, 384, 300
	c.NumHiddenLayers, c.LayerTypes = 2, c.LayerTypes[:2]
	c.HeadDim, c.LinearKeyHeadDim, c.LinearValueHeadDim = 256, 128, 128
	c.EOSTokenIDs = nil
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	w := newTestWeights(r, c, format.BF16)
	ids := randIDs(r, 140, c.VocabSize)
	want := refLogits(w, ids, false)
	_, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128, LogitsRows: 32})
	got, err := s.Prefill(ids[:135], true)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[135:] {
		step, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, step...)
	}
	check(t, "real head dims", got, flat(want), tolModel)
}
