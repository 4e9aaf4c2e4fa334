package eval

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestWindows(t *testing.T) {
	for _, tc := range []struct {
		name                string
		n, ctx, stride, max int
		starts              []int
		first, scored       int
		err                 string
	}{
		{"llama chunks", 1000, 256, 256, 0, []int{0, 256, 512}, 128, 127, ""},
		{"exact fit", 512, 256, 256, 0, []int{0, 256}, 128, 127, ""},
		{"half stride", 600, 256, 128, 0, []int{0, 128, 256}, 128, 127, ""},
		{"max windows", 1000, 256, 256, 2, []int{0, 256}, 128, 127, ""},
		{"odd ctx", 10, 5, 5, 0, []int{0, 5}, 2, 2, ""},
		{"smallest", 3, 3, 1, 0, []int{0}, 1, 1, ""},
		{"stride past ctx", 100, 10, 40, 0, []int{0, 40, 80}, 5, 4, ""},
		{"too short", 100, 256, 256, 0, nil, 0, 0, "do not fill one window"},
		{"ctx 2", 100, 2, 2, 0, nil, 0, 0, "want ≥ 3"},
		{"stride 0", 100, 10, 0, 0, nil, 0, 0, "stride 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := Windows(tc.n, tc.ctx, tc.stride, tc.max)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var starts []int
			for _, w := range ws {
				starts = append(starts, w.Start)
				if w.Ctx != tc.ctx || w.First != tc.first || w.Scored() != tc.scored {
					t.Errorf("window %+v: want ctx %d first %d scored %d", w, tc.ctx, tc.first, tc.scored)
				}
			}
			if !slices.Equal(starts, tc.starts) {
				t.Errorf("starts %v, want %v", starts, tc.starts)
			}
		})
	}
}

func TestLogSumExp(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		row    []float32
		lse    float64
		argmax int
		ok     bool
	}{
		{[]float32{0, 0, 0, 0}, math.Log(4), 0, true},
		{[]float32{1, 3, 3, 2}, 3 + math.Log(1+1+math.Exp(-2)+math.Exp(-1)), 1, true},
		{[]float32{1000, 0}, 1000 + math.Log(1+math.Exp(-1000)), 0, true},
		{[]float32{-inf, 5}, 5, 1, true},
		{[]float32{-inf, -inf}, 0, 0, false},
		{[]float32{float32(math.NaN()), 1}, 0, 0, false},
		{[]float32{inf, 1}, 0, 0, false},
	} {
		lse, am, ok := LogSumExp(tc.row)
		if ok != tc.ok || (ok && (math.Abs(lse-tc.lse) > 1e-12 || am != tc.argmax)) {
			t.Errorf("LogSumExp(%v) = %v, %d, %v; want %v, %d, %v", tc.row, lse, am, ok, tc.lse, tc.argmax, tc.ok)
		}
	}
}

func TestKL(t *testing.T) {
	l := func(p ...float64) []float32 {
		r := make([]float32, len(p))
		for i, x := range p {
			r[i] = float32(math.Log(x))
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		ref, q []float32
		want   float64
	}{
		{"equal", []float32{1, 2, 3}, []float32{1, 2, 3}, 0},
		{"shifted logits are the same distribution", []float32{1, 2, 3}, []float32{11, 12, 13}, 0},
		{"coin", l(0.5, 0.5), l(0.25, 0.75), 0.5*math.Log(0.5/0.25) + 0.5*math.Log(0.5/0.75)},
		{"zero reference mass ignored", []float32{0, float32(math.Inf(-1))}, []float32{0, 0}, math.Log(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lr, _, _ := LogSumExp(tc.ref)
			lq, _, _ := LogSumExp(tc.q)
			got := KL(tc.ref, lr, tc.q, lq)
			if math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("KL = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStats(t *testing.T) {
	for _, tc := range []struct {
		v                  []float64
		mean, se, med, p99 float64
		max                float64
	}{
		{nil, 0, 0, 0, 0, 0},
		{[]float64{2}, 2, 0, 2, 2, 2},
		{[]float64{1, 3}, 2, 1, 2, 1 + 0.99*2, 3},
		// population variance 2, n-1 = 4: se = sqrt(2/4)
		{[]float64{5, 1, 4, 2, 3}, 3, math.Sqrt(0.5), 3, 4 + 0.96, 5},
	} {
		s := Summarize(tc.v)
		want := Stats{tc.mean, tc.se, tc.med, tc.p99, tc.max}
		if math.Abs(s.Mean-want.Mean)+math.Abs(s.StdErr-want.StdErr)+math.Abs(s.Median-want.Median)+
			math.Abs(s.P99-want.P99)+math.Abs(s.Max-want.Max) > 1e-12 {
			t.Errorf("Summarize(%v) = %+v, want %+v", tc.v, s, want)
		}
	}
	ppl, se := Perplexity([]float64{1, 3})
	if math.Abs(ppl-math.Exp(2)) > 1e-12 || math.Abs(se-math.Exp(2)) > 1e-12 {
		t.Errorf("Perplexity = %v ± %v, want e² ± e²", ppl, se)
	}
}

// table is a Scorer whose logits depend only on the previous token: row
// for token a is logits[a].
type table struct {
	logits [][]float32
	calls  int
}

func (m *table) VocabSize() int { return len(m.logits) }
func (m *table) Logits(w []int32, first int) ([]float32, error) {
	m.calls++
	var out []float32
	for _, id := range w[first : len(w)-1] {
		out = append(out, m.logits[id]...)
	}
	return out, nil
}

func TestEvaluate(t *testing.T) {
	ids := []int32{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}
	// Model a predicts the cycle 0→1→2→0 with p = 0.5; b is uniform.
	half := float32(math.Log(0.5))
	q := float32(math.Log(0.25))
	a := &table{logits: [][]float32{{q, half, q}, {q, q, half}, {half, q, q}}}
	b := &table{logits: [][]float32{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}}
	ws, err := Windows(len(ids), 4, 2, 0) // starts 0, 2, 4, 6; first 2; 1 token each
	if err != nil {
		t.Fatal(err)
	}
	var calls []int
	res, err := Evaluate(context.Background(), ids, ws, []Scorer{a, b}, a, func(done, total int, ppl []float64) {
		calls = append(calls, done)
		if total != 4 || len(ppl) != 2 {
			t.Errorf("progress(%d, %d, %v)", done, total, ppl)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []int{1, 2, 3, 4}) {
		t.Errorf("progress calls %v", calls)
	}
	ra, rb := res[0], res[1]
	if ra.Windows != 4 || ra.Tokens != 4 || ra.Ctx != 4 || ra.Stride != 2 {
		t.Errorf("a: %+v", ra)
	}
	if math.Abs(ra.PPL-2) > 1e-6 || math.Abs(rb.PPL-3) > 1e-6 {
		t.Errorf("ppl a %v b %v, want 2 and 3", ra.PPL, rb.PPL)
	}
	if ra.KL.Max != 0 || *ra.Top1 != 1 || *ra.DeltaPPL != 0 {
		t.Errorf("a against itself: KL %+v top1 %v Δppl %v", *ra.KL, *ra.Top1, *ra.DeltaPPL)
	}
	wantKL := 0.5*math.Log(0.5*3) + 2*0.25*math.Log(0.25*3)
	if math.Abs(rb.KL.Mean-wantKL) > 1e-6 || math.Abs(*rb.DeltaPPL-1) > 1e-6 {
		t.Errorf("b: KL %v (want %v), Δppl %v", rb.KL.Mean, wantKL, *rb.DeltaPPL)
	}
	// Uniform rows pick token 0; the reference picks the next in the
	// cycle, which is 0 in two of the four windows.
	if *rb.Top1 != 0.5 {
		t.Errorf("b top1 %v, want 0.5", *rb.Top1)
	}

	// A cancelled context stops before the first window.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err = Evaluate(ctx, ids, ws, []Scorer{a}, nil, nil)
	if err != nil || !res[0].Interrupted || res[0].Windows != 0 {
		t.Errorf("cancelled: %+v, %v", res, err)
	}
	// Ids outside the vocabulary are refused.
	if _, err := Evaluate(context.Background(), []int32{0, 1, 7, 0}, ws[:1], []Scorer{a}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("id 7: err %v", err)
	}
}
