package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

// newRand returns a generator seeded per test run; the seed is logged so a
// failure can be reproduced (NINFER_TEST_SEED).
var newRand = numtest.Seeded

func randomLogits(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * 3)
	}
	return out
}

// refSoftmax is an independent float64 softmax over the ids in keep
// (logits/t), zero elsewhere.
func refSoftmax(logits []float64, t float64, keep []int) []float64 {
	p := make([]float64, len(logits))
	m := math.Inf(-1)
	for _, i := range keep {
		m = math.Max(m, logits[i]/t)
	}
	s := 0.0
	for _, i := range keep {
		p[i] = math.Exp(logits[i]/t - m)
		s += p[i]
	}
	for _, i := range keep {
		p[i] /= s
	}
	return p
}

func must(t *testing.T, cfg Config) *Sampler {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkProbs(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
	}
	for i := range got {
		g := float64(got[i])
		if math.IsNaN(g) || math.Abs(g-want[i]) > tol {
			t.Fatalf("%s: p[%d] = %v, want %v (tol %g)", name, i, g, want[i], tol)
		}
	}
}

func TestArgmaxTiesAndNaN(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		in   []float32
		want int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{nan, 0.5, nan, 0.5}, 1},
		{[]float32{-1, -1, -1}, 0},
		{[]float32{nan, nan}, -1},
		{[]float32{}, -1},
		{[]float32{1, inf, 2, inf}, 1},
	}
	for _, c := range cases {
		if got := Argmax(c.in); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestGreedyAndZeroTemperature(t *testing.T) {
	r := newRand(t)
	g := must(t, Config{Seed: 7})
	for trial := 0; trial < 50; trial++ {
		logits := randomLogits(r, 1000)
		want := Argmax(logits)
		for pos := int64(0); pos < 3; pos++ {
			if got := g.Sample(logits, pos); got != want {
				t.Fatalf("greedy Sample = %d, want argmax %d", got, want)
			}
		}
		p := g.Probs(logits)
		for i, v := range p {
			if (int32(i) == want) != (v == 1) || (int32(i) != want && v != 0) {
				t.Fatalf("greedy Probs[%d] = %v (argmax %d)", i, v, want)
			}
		}
		// A very low temperature concentrates all mass on the argmax.
		cold := must(t, Config{Temperature: 1e-4, Seed: uint64(trial)})
		sorted := slices.Clone(logits)
		slices.Sort(sorted)
		if sorted[len(sorted)-1]-sorted[len(sorted)-2] > 0.01 {
			if got := cold.Sample(logits, int64(trial)); got != want {
				t.Fatalf("T=1e-4 Sample = %d, want argmax %d", got, want)
			}
		}
	}
}

func TestProbsMatchReference(t *testing.T) {
	r := newRand(t)
	logits := randomLogits(r, 257)
	x := make([]float64, len(logits))
	all := make([]int, len(logits))
	for i, v := range logits {
		x[i], all[i] = float64(v), i
	}
	for _, temp := range []float64{0.3, 0.7, 1, 1.8} {
		s := must(t, Config{Temperature: temp})
		checkProbs(t, "softmax", s.Probs(logits), refSoftmax(x, temp, all), 1e-6)
	}
}

// order returns ids sorted by value descending, lower id first on ties.
func order(x []float64) []int {
	ids := make([]int, len(x))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return 0
	})
	return ids
}

func nonzero(p []float32) []int {
	var out []int
	for i, v := range p {
		if v != 0 {
			out = append(out, i)
		}
	}
	return out
}

func TestTopK(t *testing.T) {
	r := newRand(t)
	for _, k := range []int{1, 2, 5, 40, 299, 300, 1000} {
		logits := randomLogits(r, 300)
		x := make([]float64, len(logits))
		for i, v := range logits {
			x[i] = float64(v)
		}
		keep := order(x)
		if k < len(keep) {
			keep = keep[:k]
		}
		s := must(t, Config{Temperature: 0.9, TopK: k})
		p := s.Probs(logits)
		want := refSoftmax(x, 0.9, keep)
		checkProbs(t, "top-k", p, want, 1e-6)
		sortedKeep := slices.Clone(keep)
		slices.Sort(sortedKeep)
		if got := nonzero(p); !slices.Equal(got, sortedKeep) {
			t.Fatalf("k=%d: nonzero ids %v, want %v", k, got, sortedKeep)
		}
	}
	// Ties at the cut keep the lower ids.
	s := must(t, Config{Temperature: 1, TopK: 2})
	if got := nonzero(s.Probs([]float32{1, 5, 5, 5, 0})); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("tie cut kept %v, want [1 2]", got)
	}
}

func logitsOf(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = float32(math.Log(v))
	}
	return out
}

func TestTopPAndMinP(t *testing.T) {
	// Probabilities (at T=1) 0.05, 0.4, 0.1, 0.3, 0.15 for ids 0..4.
	logits := logitsOf(0.05, 0.4, 0.1, 0.3, 0.15)
	cases := []struct {
		name string
		cfg  Config
		keep []int
	}{
		{"top_p 0.35", Config{TopP: 0.35}, []int{1}},
		{"top_p 0.65", Config{TopP: 0.65}, []int{1, 3}},
		{"top_p 0.8", Config{TopP: 0.8}, []int{1, 3, 4}},
		{"top_p 0.9", Config{TopP: 0.9}, []int{1, 2, 3, 4}},
		{"top_p 0.99", Config{TopP: 0.99}, []int{0, 1, 2, 3, 4}},
		{"top_p off", Config{TopP: 1}, []int{0, 1, 2, 3, 4}},
		{"min_p 0.2", Config{MinP: 0.2}, []int{1, 2, 3, 4}}, // threshold 0.08
		{"min_p 0.3", Config{MinP: 0.3}, []int{1, 3, 4}},    // threshold 0.12
		{"min_p 0.9", Config{MinP: 0.9}, []int{1}},          // threshold 0.36
		{"top_k 3 + min_p 0.5", Config{TopK: 3, MinP: 0.5}, []int{1, 3}},
		{"min_p 0.2 + top_p 0.6", Config{MinP: 0.2, TopP: 0.6}, []int{1, 3}},
		{"top_k 4 + top_p 0.85", Config{TopK: 4, TopP: 0.85}, []int{1, 3, 4}},
	}
	base := []float64{0.05, 0.4, 0.1, 0.3, 0.15}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Temperature = 1
			p := must(t, c.cfg).Probs(logits)
			if got := nonzero(p); !slices.Equal(got, c.keep) {
				t.Fatalf("kept %v, want %v (probs %v)", got, c.keep, p)
			}
			// The kept probabilities are the base ones renormalized.
			sum := 0.0
			for _, i := range c.keep {
				sum += base[i]
			}
			want := make([]float64, len(base))
			for _, i := range c.keep {
				want[i] = base[i] / sum
			}
			checkProbs(t, c.name, p, want, 1e-6)
		})
	}
}

func TestPenalties(t *testing.T) {
	logits := []float32{2, -1, 0.5, 3, 1}
	s := must(t, Config{Temperature: 1, PresencePenalty: 0.5, FrequencyPenalty: 0.25, RepetitionPenalty: 1.5})
	s.AddPrompt([]int32{1, 4})
	for _, id := range []int32{0, 0, 0, 3, 99, -5} { // out-of-range ids are ignored
		s.Accept(id)
	}
	got := s.penalized(logits)
	want := []float64{
		2/1.5 - 0.5 - 3*0.25, // generated 3×: repetition then presence + 3·frequency
		-1 * 1.5,             // prompt only: negative logit × r
		0.5,                  // untouched
		3/1.5 - 0.5 - 0.25,   // generated once
		1 / 1.5,              // prompt only: positive logit / r
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("penalized[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	all := []int{0, 1, 2, 3, 4}
	checkProbs(t, "penalized probs", s.Probs(logits), refSoftmax(want, 1, all), 1e-6)

	// Greedy honours penalties: id 3 drops below id 2... check the argmax
	// of the penalized logits is what Sample picks.
	g := must(t, Config{PresencePenalty: 10})
	g.Accept(3)
	if got := g.Sample(logits, 0); got != 0 {
		t.Errorf("greedy with presence penalty on 3 picked %d, want 0", got)
	}
	g.Reset()
	if got := g.Sample(logits, 0); got != 3 {
		t.Errorf("after Reset picked %d, want 3", got)
	}
}

func TestDeterminismByPosition(t *testing.T) {
	r := newRand(t)
	logits := randomLogits(r, 64)
	cfg := Config{Temperature: 1.2, TopP: 0.95, Seed: r.Uint64()}
	a := must(t, cfg)
	b := must(t, cfg)
	const n = 400
	fwd := make([]int32, n)
	for pos := 0; pos < n; pos++ {
		fwd[pos] = a.Sample(logits, int64(pos))
	}
	// Reverse call order on a fresh sampler gives the same tokens.
	for pos := n - 1; pos >= 0; pos-- {
		if got := b.Sample(logits, int64(pos)); got != fwd[pos] {
			t.Fatalf("pos %d: %d vs %d depending on call order", pos, got, fwd[pos])
		}
	}
	// Positions give different draws, and a different seed changes them.
	distinct := map[int32]bool{}
	for _, v := range fwd {
		distinct[v] = true
	}
	if len(distinct) < 5 {
		t.Fatalf("only %d distinct tokens over %d positions", len(distinct), n)
	}
	cfg.Seed++
	c := must(t, cfg)
	same := 0
	for pos := 0; pos < n; pos++ {
		if c.Sample(logits, int64(pos)) == fwd[pos] {
			same++
		}
	}
	if same == n {
		t.Fatal("changing the seed did not change any draw")
	}
	if Uniform(1, 5, PurposeSample) == Uniform(1, 5, PurposeAccept) {
		t.Fatal("purposes share a draw")
	}
	if Uniform(3, 9, PurposeAccept) != Uniform(3, 9, PurposeAccept) {
		t.Fatal("Uniform is not a pure function")
	}
}

// chiSquareP returns the upper-tail p-value of a chi-square statistic with
// df degrees of freedom: Q(df/2, x/2) via the series for the lower
// regularized incomplete gamma function.
func chiSquareP(x float64, df int) float64 {
	a, z := float64(df)/2, x/2
	if z <= 0 {
		return 1
	}
	term := 1 / a
	sum := term
	for n := 1; n < 10000; n++ {
		term *= z / (a + float64(n))
		sum += term
		if term < sum*1e-15 {
			break
		}
	}
	lg, _ := math.Lgamma(a)
	lower := math.Exp(a*math.Log(z)-z-lg) * sum
	return math.Max(0, 1-lower)
}

func TestChiSquarePValue(t *testing.T) {
	// Known values: df=1, x=3.841 → 0.05; df=5, x=11.07 → 0.05; df=10, x=23.21 → 0.01.
	cases := []struct {
		x    float64
		df   int
		want float64
	}{{3.841459, 1, 0.05}, {11.0705, 5, 0.05}, {23.2093, 10, 0.01}}
	for _, c := range cases {
		if got := chiSquareP(c.x, c.df); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("chiSquareP(%v, %d) = %v, want %v", c.x, c.df, got, c.want)
		}
	}
}

func TestSampleDistributionChiSquare(t *testing.T) {
	// Six tokens with known probabilities; top-k 5 removes the smallest,
	// so id 5 must never appear.
	logits := logitsOf(0.3, 0.05, 0.2, 0.25, 0.15, 0.05)
	const draws = 20000
	for _, seed := range []uint64{1, 2, 3, 0xdeadbeef} {
		s := must(t, Config{Temperature: 1, TopK: 5, Seed: seed})
		probs := s.Probs(logits)
		counts := make([]int, len(logits))
		for pos := 0; pos < draws; pos++ {
			counts[s.Sample(logits, int64(pos))]++
		}
		if counts[5] != 0 || probs[5] != 0 {
			t.Fatalf("seed %d: filtered id 5 drawn %d times (p=%v)", seed, counts[5], probs[5])
		}
		stat := 0.0
		for i := 0; i < 5; i++ {
			e := float64(probs[i]) * draws
			d := float64(counts[i]) - e
			stat += d * d / e
		}
		p := chiSquareP(stat, 4)
		if math.IsNaN(p) || p < 1e-4 {
			t.Errorf("seed %d: chi-square %.2f (df 4), p = %.3g; counts %v probs %v", seed, stat, p, counts, probs)
		}
	}
}

func TestUniformIsUniform(t *testing.T) {
	const buckets, n = 32, 64000
	counts := make([]int, buckets)
	for pos := int64(0); pos < n; pos++ {
		u := Uniform(12345, pos, PurposeAccept)
		if u < 0 || u >= 1 || math.IsNaN(u) {
			t.Fatalf("Uniform = %v out of [0,1)", u)
		}
		counts[int(u*buckets)]++
	}
	stat := 0.0
	e := float64(n) / buckets
	for _, c := range counts {
		stat += (float64(c) - e) * (float64(c) - e) / e
	}
	if p := chiSquareP(stat, buckets-1); p < 1e-4 {
		t.Errorf("Uniform buckets chi-square %.1f, p = %.3g", stat, p)
	}
}

func TestCategorical(t *testing.T) {
	p := []float32{0, 0.25, 0, 0.75}
	cases := []struct {
		u    float64
		want int32
	}{{0, 1}, {0.2499, 1}, {0.25, 3}, {0.999999, 3}}
	for _, c := range cases {
		if got := Categorical(p, c.u); got != c.want {
			t.Errorf("Categorical(u=%v) = %d, want %d", c.u, got, c.want)
		}
	}
	if got := Categorical([]float32{0, 0}, 0.5); got != -1 {
		t.Errorf("all-zero Categorical = %d, want -1", got)
	}
}

func TestNaNAndInfLogits(t *testing.T) {
	nan := float32(math.NaN())
	ninf := float32(math.Inf(-1))
	s := must(t, Config{Temperature: 1, Seed: 3})
	logits := []float32{nan, 0, ninf, 0}
	for pos := int64(0); pos < 200; pos++ {
		if got := s.Sample(logits, pos); got != 1 && got != 3 {
			t.Fatalf("sampled %d from NaN/-Inf logits", got)
		}
	}
	checkProbs(t, "nan", s.Probs(logits), []float64{0, 0.5, 0, 0.5}, 1e-7)
	pinf := float32(math.Inf(1))
	checkProbs(t, "+inf", s.Probs([]float32{1, pinf, nan, pinf}), []float64{0, 0.5, 0, 0.5}, 1e-7)
	tiny := must(t, Config{Temperature: 1e-300})
	checkProbs(t, "tiny temperature", tiny.Probs([]float32{1, 2, 1.5}), []float64{0, 1, 0}, 0)
	if got := s.Sample([]float32{nan, ninf}, 0); got != -1 {
		t.Errorf("no valid logit: Sample = %d, want -1", got)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		cfg     Config
		wantErr string
	}{
		{Config{Temperature: -1}, "temperature"},
		{Config{Temperature: math.NaN()}, "temperature"},
		{Config{TopK: -1}, "top_k"},
		{Config{TopP: 1.5}, "top_p"},
		{Config{MinP: 1}, "min_p"},
		{Config{PresencePenalty: math.Inf(1)}, "presence_penalty"},
		{Config{FrequencyPenalty: math.NaN()}, "frequency_penalty"},
		{Config{RepetitionPenalty: -2}, "repetition_penalty"},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("New(%+v) err = %v, want containing %q", c.cfg, err, c.wantErr)
		}
	}
	if _, err := New(Config{Temperature: 0.6, TopK: 20, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1}); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func BenchmarkSampleTopK20TopP(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 248320)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	s, _ := New(Config{Temperature: 0.6, TopK: 20, TopP: 0.95, Seed: 1})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Sample(logits, int64(i))
	}
}
