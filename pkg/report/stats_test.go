package report

import (
	"math"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

func TestMeanStddev(t *testing.T) {
	cases := []struct {
		xs       []float64
		mean, sd float64
		ok       bool
	}{
		{nil, 0, 0, false},
		{[]float64{3.5}, 3.5, 0, true}, // n=1: stddev 0
		{[]float64{1, 2}, 1.5, math.Sqrt(0.5), true},
		{[]float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, math.Sqrt(32.0 / 7.0), true}, // sample, not population (2)
		{[]float64{1.02e-06, 1.36e-06, 1.59e-06}, 1.323333333333333e-06, 2.8676354952e-07, true},
	}
	for _, c := range cases {
		m, sd, ok := MeanStddev(c.xs)
		if ok != c.ok || math.Abs(m-c.mean) > 1e-12*math.Abs(c.mean) || math.Abs(sd-c.sd) > 1e-9*math.Max(c.sd, 1e-300) {
			t.Errorf("MeanStddev(%v) = %v %v %v, want %v %v %v", c.xs, m, sd, ok, c.mean, c.sd, c.ok)
		}
	}
}

// Reference values computed with mpmath (40 digits):
// betainc(a, b, 0, x, regularized=True).
func TestRegIncBetaReference(t *testing.T) {
	cases := []struct{ x, a, b, want float64 }{
		{0.3, 2.5, 0.5, 0.018927124071945651653},
		{0.9, 5, 0.5, 0.3166429150200123125},
		{0.5, 0.5, 0.5, 0.5},
		{0.01, 10, 0.5, 1.770034965528574304e-21},
		{0.999, 1.5, 3.25, 0.99999999959845055178},
		{0.2, 50, 40, 6.1397154928073698282e-14},
		{0.75, 100, 0.5, 3.5629510435073626464e-14},
		{0.4, 0.1, 7, 0.9989940681187698788},
		{0.6, 3.7, 200, 1.0},
		{1e-05, 0.5, 0.5, 0.0020131718394753873031},
	}
	for _, c := range cases {
		got := RegIncBeta(c.x, c.a, c.b)
		if math.IsNaN(got) || math.Abs(got-c.want) > 1e-11*c.want {
			t.Errorf("I_%v(%v,%v) = %.17g, want %.17g (rel tol 1e-11)", c.x, c.a, c.b, got, c.want)
		}
	}
	for _, bad := range [][3]float64{{-0.1, 1, 1}, {1.1, 1, 1}, {0.5, 0, 1}, {0.5, 1, -2}, {math.NaN(), 1, 1}} {
		if got := RegIncBeta(bad[0], bad[1], bad[2]); !math.IsNaN(got) {
			t.Errorf("RegIncBeta(%v) = %v, want NaN", bad, got)
		}
	}
}

// Closed forms on fresh random inputs: I_x(a,1) = x^a, I_x(1,b) = 1−(1−x)^b,
// I_x(a,b) + I_{1−x}(b,a) = 1.
func TestRegIncBetaIdentities(t *testing.T) {
	rng := numtest.Seeded(t)
	for i := 0; i < 500; i++ {
		x := rng.Float64()*0.98 + 0.01
		a := math.Exp(rng.Float64()*6 - 2) // 0.14 .. 55
		b := math.Exp(rng.Float64()*6 - 2)
		if got, want := RegIncBeta(x, a, 1), math.Pow(x, a); math.Abs(got-want) > 1e-12*math.Max(want, 1e-200) {
			t.Fatalf("I_%v(%v,1) = %v, want %v", x, a, got, want)
		}
		if got, want := RegIncBeta(x, 1, b), -math.Expm1(b*math.Log1p(-x)); math.Abs(got-want) > 1e-12*want {
			t.Fatalf("I_%v(1,%v) = %v, want %v", x, b, got, want)
		}
		if s := RegIncBeta(x, a, b) + RegIncBeta(1-x, b, a); math.Abs(s-1) > 1e-13 {
			t.Fatalf("symmetry at x=%v a=%v b=%v: sum %v", x, a, b, s)
		}
	}
}

func TestStudentTCDF(t *testing.T) {
	// Near 0 first: t = -0.000203846… (from clock seed 1796615910857080344
	// before tests were seeded by name) missed by 2e-13 when 1 − x of the
	// incomplete beta cancelled.
	fixed := []float64{-0.00020384643799387092, 1e-9, -3e-6, 0.01, -1e-300}
	rng := numtest.Seeded(t)
	for i := 0; i < 200+len(fixed); i++ {
		tv := (rng.Float64() - 0.5) * 40
		if i < len(fixed) {
			tv = fixed[i]
		}
		// df = 1: Cauchy; df = 2: 1/2 + t/(2 sqrt(2+t²)).
		if got, want := StudentTCDF(tv, 1), 0.5+math.Atan(tv)/math.Pi; math.Abs(got-want) > 1e-13 {
			t.Fatalf("CDF(%v, 1) = %v, want %v", tv, got, want)
		}
		if got, want := StudentTCDF(tv, 2), 0.5+tv/(2*math.Sqrt(2+tv*tv)); math.Abs(got-want) > 1e-13 {
			t.Fatalf("CDF(%v, 2) = %v, want %v", tv, got, want)
		}
	}
	if StudentTCDF(math.Inf(1), 3) != 1 || StudentTCDF(math.Inf(-1), 3) != 0 || StudentTCDF(0, 7) != 0.5 {
		t.Error("CDF at ±Inf or 0")
	}
	// Two-sided p-values, reference from mpmath.
	cases := []struct{ t, df, p float64 }{
		{1, 8, 0.34659350708733424783},
		{2.228138851986, 10, 0.050000000000023296838},
		{0.5, 3.3, 0.64853507639955839006},
		{4, 2.5, 0.039012975841318246614},
		{10, 30, 4.5752514082296131926e-11},
		{1.96, 1e6, 0.049996067585269790686},
	}
	for _, c := range cases {
		p := 2 * (1 - StudentTCDF(math.Abs(c.t), c.df))
		if c.p < 1e-6 {
			p = 2 * StudentTCDF(-math.Abs(c.t), c.df) // avoid cancellation for tiny p
		}
		// Relative error grows with df through the lgamma cancellation in
		// the beta function's prefactor (~1e-16·df·log df): 1e-10 up to
		// df 30, 1e-8 at df = 1e6 (benchmarks have df < 100).
		tol := 1e-10
		if c.df > 1000 {
			tol = 1e-8
		}
		if math.Abs(p-c.p) > tol*c.p {
			t.Errorf("two-sided p(t=%v, df=%v) = %.17g, want %.17g", c.t, c.df, p, c.p)
		}
	}
}

func TestWelch(t *testing.T) {
	// Hand-computable: means 3 and 4, variances 2.5, n 5 → t = 1, df = 8.
	r := Welch([]float64{1, 2, 3, 4, 5}, []float64{2, 3, 4, 5, 6})
	if !r.OK || math.Abs(r.T-1) > 1e-15 || math.Abs(r.DF-8) > 1e-12 || math.Abs(r.P-0.34659350708733424783) > 1e-12 {
		t.Errorf("Welch = %+v", r)
	}
	// Unequal variances and sizes: df from Welch–Satterthwaite.
	a := []float64{10, 12, 11, 13}
	b := []float64{20, 25, 15, 30, 22, 18}
	r = Welch(a, b)
	va, vb := (5.0/3)/4, (424.0/3/5)/6 // sample variances (Σd² = 5 and 424/3) over n
	wantDF := (va + vb) * (va + vb) / (va*va/3 + vb*vb/5)
	if math.Abs(r.DF-wantDF) > 1e-12 || math.Abs(r.T-(21.666666666666668-11.5)/math.Sqrt(va+vb)) > 1e-12 {
		t.Errorf("Welch unequal = %+v, want df %v", r, wantDF)
	}
	if r := Welch([]float64{1}, []float64{1, 2}); r.OK || !math.IsNaN(r.P) {
		t.Errorf("n=1 should not test: %+v", r)
	}
	if r := Welch([]float64{5, 5}, []float64{5, 5, 5}); !r.OK || r.P != 1 {
		t.Errorf("zero variance equal means: %+v", r)
	}
	if r := Welch([]float64{5, 5}, []float64{6, 6}); !r.OK || r.P != 0 {
		t.Errorf("zero variance different means: %+v", r)
	}
}

// Synthetic samples: a 5% shift under 0.5% noise is detected and a shift
// of 0.01 noise-sigma is not. Failure odds per seed: the first needs the
// pooled sample variance ~20× the true one (χ² with 18 df above 360: far
// below 1e-15); the second is the null's p < 1e-6 (probability ≈ 1e-6).
func TestWelchSynthetic(t *testing.T) {
	rng := numtest.Seeded(t)
	draw := func(n int, mean, sd float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = mean + sd*rng.NormFloat64()
		}
		return xs
	}
	if r := Welch(draw(10, 100, 0.5), draw(10, 105, 0.5)); r.P >= 1e-4 {
		t.Errorf("clear shift not significant: %+v", r)
	}
	if r := Welch(draw(10, 100, 1), draw(10, 100.01, 1)); r.P < 1e-6 {
		t.Errorf("no real shift but p = %v", r.P)
	}
}
