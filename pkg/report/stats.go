package report

import (
	"math"
)

// MeanStddev returns the mean and the sample standard deviation
// sqrt(Σ(x−m)²/(n−1)) of xs (stddev 0 when n = 1); ok is false for an empty
// series. The sum runs in input order, like the reference.
func MeanStddev(xs []float64) (mean, stddev float64, ok bool) {
	n := len(xs)
	if n == 0 {
		return 0, 0, false
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mean = sum / float64(n)
	if n == 1 {
		return mean, 0, true
	}
	ss := 0.0
	for _, x := range xs {
		d := x - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(n-1)), true
}

// RegIncBeta is the regularized incomplete beta function I_x(a, b) for
// a, b > 0 and x in [0, 1], evaluated with the continued fraction of
// Abramowitz & Stegun 26.5.8 (modified Lentz), using the symmetry
// I_x(a,b) = 1 − I_{1−x}(b,a) where the fraction converges slowly.
// It returns NaN for arguments outside the domain.
func RegIncBeta(x, a, b float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsNaN(a) || math.IsNaN(b) || a <= 0 || b <= 0 || x < 0 || x > 1:
		return math.NaN()
	case x == 0:
		return 0
	case x == 1:
		return 1
	}
	if x > (a+1)/(a+b+2) {
		return 1 - RegIncBeta(1-x, b, a)
	}
	lga, _ := math.Lgamma(a)
	lgb, _ := math.Lgamma(b)
	lgab, _ := math.Lgamma(a + b)
	front := math.Exp(a*math.Log(x) + b*math.Log1p(-x) - (lga + lgb - lgab))
	return front * betaFraction(x, a, b) / a
}

// lentzTiny stands in for a zero denominator in the modified Lentz method.
const lentzTiny = 1e-300

// betaFraction evaluates 1/(1+ d1/(1+ d2/(1+ ...))) with
// d_{2m+1} = −(a+m)(a+b+m)x / ((a+2m)(a+2m+1)) and
// d_{2m}   =  m(b−m)x / ((a+2m−1)(a+2m)).
func betaFraction(x, a, b float64) float64 {
	const eps = 1e-16
	// Lentz: f = b0 + a1/(b1 + a2/(b2 + ...)) with b0 = 0 handled by
	// starting from the first term 1/(1 + d1).
	c := 1.0
	d := 1 - (a+b)*x/(a+1)
	if math.Abs(d) < lentzTiny {
		d = lentzTiny
	}
	d = 1 / d
	f := d
	for m := 1; m <= 10000; m++ {
		fm := float64(m)
		// even step
		c, d = lentzStep(c, d, fm*(b-fm)*x/((a+2*fm-1)*(a+2*fm)))
		f *= d * c
		// odd step
		c, d = lentzStep(c, d, -(a+fm)*(a+b+fm)*x/((a+2*fm)*(a+2*fm+1)))
		delta := d * c
		f *= delta
		if math.Abs(delta-1) < eps {
			return f
		}
	}
	return f // converged to the float limit long before in practice
}

// lentzStep advances the modified Lentz state (c, d) over one more term
// num/(1 + ...) of the continued fraction; f changes by the factor d·c.
func lentzStep(c, d, num float64) (float64, float64) {
	d = 1 + num*d
	if math.Abs(d) < lentzTiny {
		d = lentzTiny
	}
	c = 1 + num/c
	if math.Abs(c) < lentzTiny {
		c = lentzTiny
	}
	return c, 1 / d
}

// StudentTCDF is P(T ≤ t) for Student's t distribution with df > 0 degrees
// of freedom (df need not be an integer).
func StudentTCDF(t, df float64) float64 {
	if math.IsNaN(t) || math.IsNaN(df) || df <= 0 {
		return math.NaN()
	}
	if math.IsInf(t, 0) {
		if t > 0 {
			return 1
		}
		return 0
	}
	// With x = df/(df+t²) and y = t²/(df+t²) = 1−x, P(T > |t|) =
	// I_x(df/2, 1/2)/2 and P(0 < T ≤ |t|) = I_y(1/2, df/2)/2. Both x and y
	// are computed from t² and df directly; forming one as 1 − the other
	// would cancel (near t = 0, 1 − x keeps only log2(df/t²) of x's 53 bits,
	// and I_y(1/2, ·) ~ √y amplifies that).
	t2 := t * t
	x, y := df/(df+t2), t2/(df+t2)
	if y < x { // |t| < √df: the central half-width, no cancellation
		half := 0.5 * RegIncBeta(y, 0.5, df/2)
		return 0.5 + math.Copysign(half, t)
	}
	tail := 0.5 * RegIncBeta(x, df/2, 0.5) // P(T > |t|)
	if t > 0 {
		return 1 - tail
	}
	return tail
}

// WelchResult is the outcome of Welch's unequal-variance t-test.
type WelchResult struct {
	T  float64 // (mean B − mean A) / standard error
	DF float64 // Welch–Satterthwaite degrees of freedom
	P  float64 // two-sided p-value
	OK bool    // false when a side has fewer than 2 samples
}

// Welch runs a two-sided Welch t-test of a against b. With both variances 0
// the p-value is 1 for equal means and 0 otherwise.
func Welch(a, b []float64) WelchResult {
	if len(a) < 2 || len(b) < 2 {
		return WelchResult{P: math.NaN()}
	}
	ma, sa, _ := MeanStddev(a)
	mb, sb, _ := MeanStddev(b)
	va := sa * sa / float64(len(a))
	vb := sb * sb / float64(len(b))
	se2 := va + vb
	if se2 == 0 {
		if ma == mb {
			return WelchResult{T: 0, DF: math.Inf(1), P: 1, OK: true}
		}
		return WelchResult{T: math.Copysign(math.Inf(1), mb-ma), DF: math.Inf(1), P: 0, OK: true}
	}
	t := (mb - ma) / math.Sqrt(se2)
	df := se2 * se2 / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1))
	p := RegIncBeta(df/(df+t*t), df/2, 0.5)
	return WelchResult{T: t, DF: df, P: p, OK: true}
}
