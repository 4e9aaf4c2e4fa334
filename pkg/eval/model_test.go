package eval

import (
	"context"
	"math"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/loader"
)

func TestMain(m *testing.M) { testfixture.Main(m) }

const testCtx = 64

func open(t *testing.T, path string) *Model {
	t.Helper()
	m, err := Open(ModelOptions{Weights: path, Backend: "cpu", Threads: 2, Ctx: testCtx, KVDtype: "fp32"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// corpusIDs tokenizes the test model's own training text.
func corpusIDs(t *testing.T, m *Model) []int32 {
	t.Helper()
	tok, _, err := Tokenizer(m.Resource, "test model")
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(testCorpus, false)
	if len(ids) < 3*testCtx {
		t.Fatalf("only %d ids", len(ids))
	}
	return ids
}

const testCorpus = `The quick brown fox jumps over the lazy dog. The dog did not mind; it was asleep in the sun.
A small model is easy to test, and a test that runs in a second is a test that people run.
Inference engines read weights, run the forward pass, and sample the next token again and again.
Numbers: 0 1 2 3 4 5 6 7 8 9, 10, 42, 123456, 3.14159, 2026-12-01, 1e-6, 0x7f80.
Tokens, tokenizer, tokenization, token ids, merges, vocabulary, byte-level, pre-tokenizer.
The the the and and of of to to in in is is it it that that for for on on with with as as.`

// The perplexity is exp(mean NLL) of the engine's own all-position logits,
// computed here directly from one Prefill of each whole window.
func TestPerplexityMatchesEngineLogits(t *testing.T) {
	path := testfixture.Artifact(t, "q8", nil)
	m := open(t, path)
	ids := corpusIDs(t, m)
	ws, err := Windows(len(ids), testCtx, testCtx/2, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Evaluate(context.Background(), ids, ws, []Scorer{m}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Direct: a separate engine, one prefill of the whole window with all
	// logits, NLL by hand in float64.
	w, err := loader.OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	be, _, _, err := loader.NewBackend("cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	eng, err := engine.New(w, be, engine.Options{MaxContext: testCtx, KVDtype: "fp32"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	seq, err := eng.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	V := w.Config().VocabSize
	var sum float64
	n := 0
	for _, win := range ws {
		if err := seq.Reset(); err != nil {
			t.Fatal(err)
		}
		x := ids[win.Start : win.Start+win.Ctx]
		lg, err := seq.Prefill(x, true)
		if err != nil {
			t.Fatal(err)
		}
		for p := win.First; p < win.Ctx-1; p++ {
			row := lg[p*V : (p+1)*V]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			var s float64
			for _, v := range row {
				s += math.Exp(float64(v) - mx)
			}
			sum += mx + math.Log(s) - float64(row[x[p+1]])
			n++
		}
	}
	want := math.Exp(sum / float64(n))
	r := res[0]
	if r.Tokens != n || r.Windows != len(ws) {
		t.Fatalf("scored %d tokens in %d windows, want %d in %d", r.Tokens, r.Windows, n, len(ws))
	}
	if math.Abs(r.PPL-want) > 1e-4*want {
		t.Errorf("ppl %v, direct exp(mean NLL) %v", r.PPL, want)
	}
	if r.PPLStdErr <= 0 || r.PPLStdErr >= r.PPL {
		t.Errorf("ppl stderr %v", r.PPLStdErr)
	}
	t.Logf("ppl %.4f ± %.4f over %d tokens (direct %.4f)", r.PPL, r.PPLStdErr, n, want)
}

// An artifact against itself: KL exactly 0, top-1 agreement 1, Δppl 0; a
// q8 artifact against the fp32 one of the same model: small positive KL.
func TestKLAgainstReference(t *testing.T) {
	fp32 := open(t, testfixture.Artifact(t, "fp32", nil))
	fp32b := open(t, testfixture.Artifact(t, "fp32", nil))
	q8 := open(t, testfixture.Artifact(t, "q8", nil))
	ids := corpusIDs(t, fp32)
	ws, err := Windows(len(ids), testCtx, testCtx, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Evaluate(context.Background(), ids, ws, []Scorer{fp32b, q8}, fp32, nil)
	if err != nil {
		t.Fatal(err)
	}
	self, q := res[0], res[1]
	if self.KL.Mean != 0 || self.KL.Max != 0 || *self.Top1 != 1 || *self.DeltaPPL != 0 || self.DeltaNLL.Max != 0 {
		t.Errorf("fp32 against itself: KL %+v, top1 %v, Δppl %v", *self.KL, *self.Top1, *self.DeltaPPL)
	}
	if !(q.KL.Mean > 0 && q.KL.Mean < 0.01 && q.KL.Max < 0.1) {
		t.Errorf("q8 against fp32: KL %+v, want small and > 0", *q.KL)
	}
	if *q.Top1 < 0.9 || math.Abs(*q.DeltaPPL) > 0.02*q.PPL {
		t.Errorf("q8 against fp32: top1 %v, Δppl %v (ppl %v)", *q.Top1, *q.DeltaPPL, q.PPL)
	}
	t.Logf("q8 vs fp32: KL mean %.3g median %.3g p99 %.3g max %.3g, top1 %.4f, Δppl %.4g",
		q.KL.Mean, q.KL.Median, q.KL.P99, q.KL.Max, *q.Top1, *q.DeltaPPL)
}
