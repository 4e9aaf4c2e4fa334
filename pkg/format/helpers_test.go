package format

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

// newRNG returns test t's random stream, seeded from its name (numtest);
// a failure logs the command that replays it.
func newRNG(t testing.TB) *rand.Rand {
	t.Helper()
	return numtest.Seeded(t)
}

// randMatrix returns n·k values: normals with a random per-row magnitude
// over many decades, a few outliers, some exact zeros and some all-zero
// row segments, never all zero overall.
func randMatrix(r *rand.Rand, n, k int) []float32 {
	x := make([]float32, n*k)
	for i := 0; i < n; i++ {
		mag := math.Pow(10, r.Float64()*8-6) // 1e-6 .. 1e2
		for j := 0; j < k; j++ {
			v := r.NormFloat64() * mag
			switch u := r.IntN(200); {
			case u == 0:
				v *= 40 // outlier
			case u == 1:
				v = 0
			}
			x[i*k+j] = float32(v)
		}
		if r.IntN(8) == 0 && k > 64 { // a zero run covering a whole group
			clear(x[i*k : i*k+64])
		}
	}
	x[0] = 1.5 // never all zero
	return x
}

// refF16 rounds a float64 to the nearest binary16 value (ties to even) by
// float64 arithmetic, independently of F32ToF16; it returns the value.
func refF16(v float64) float64 {
	a := math.Abs(v)
	if a == 0 {
		return v
	}
	_, e := math.Frexp(a) // a in [2^(e-1), 2^e)
	ulpExp := e - 1 - 10
	if ulpExp < -24 {
		ulpExp = -24 // subnormal spacing
	}
	q := math.RoundToEven(math.Ldexp(a, -ulpExp))
	r := math.Ldexp(q, ulpExp)
	if r > 65504 {
		r = math.Inf(1)
	}
	return math.Copysign(r, v)
}

// f16Bits returns the binary16 bits of a value exactly representable in f16.
func f16Bits(t *testing.T, v float64) uint16 {
	t.Helper()
	if math.IsInf(v, 0) {
		if v > 0 {
			return 0x7C00
		}
		return 0xFC00
	}
	h := F32ToF16(float32(v))
	if float64(F16ToF32(h)) != v {
		t.Fatalf("%v is not an f16 value", v)
	}
	return h
}
