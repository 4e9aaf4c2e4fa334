package numtest

import (
	"math"
	"strings"
	"testing"
)

// fp32Dots computes the batch as a sequential fp32 FMA-free chain (each
// product rounded, then added: the IEEE round-to-nearest arithmetic the
// FP32Chain model describes) next to its FP64 reference.
func fp32Dots(t *testing.T, n, k int) (got []float32, ref *Dots, x [][]float32, w [][]float64) {
	r := NewSource(t).Stream("dots")
	ref = NewDots(k)
	for i := 0; i < n; i++ {
		xi := make([]float32, k)
		wi := make([]float64, k)
		var s float32
		for j := range xi {
			xi[j] = float32(r.NormFloat64())
			wi[j] = float64(float32(r.NormFloat64() * 0.1))
			s += xi[j] * float32(wi[j])
		}
		got = append(got, s)
		ref.Add(0, xi, wi)
		x, w = append(x, xi), append(w, wi)
	}
	return got, ref, x, w
}

func TestCheckDotsPassesCorrectArithmetic(t *testing.T) {
	for _, k := range []int{16, 320, 4096} {
		got, ref, _, _ := fp32Dots(t, 200, k)
		st, err := DotsError("fp32 chain", got, ref, FP32Chain)
		if err != nil {
			t.Fatalf("K=%d: a plain fp32 sum fails its own bound: %v", k, err)
		}
		t.Logf("K=%d: sequential fp32 sum: rms normalised error %.3g (ZMax %g), worst error %.3g of its bound", k, st.RMSZ, ZMax, st.WorstOfBound)
		// The correctly rounded result (the best any fp32 kernel can do) passes.
		exact := make([]float32, len(got))
		for i, v := range ref.Want {
			exact[i] = float32(v)
		}
		if err := CompareDots("correctly rounded", exact, ref, FP32Chain); err != nil {
			t.Fatalf("K=%d: the correctly rounded result fails: %v", k, err)
		}
	}
}

func TestCheckDotsCatchesPlantedErrors(t *testing.T) {
	const k = 320
	got, ref, x, w := fp32Dots(t, 200, k)
	steps := float64(FP32Chain.Steps(k))
	g := FP32Chain.Gamma(k)
	bound := func(i int) float64 { return (g+FP32Chain.Rep*(1+g))*ref.Abs[i] + (steps+1)*0x1p-126 }

	one := append([]float32(nil), got...)
	one[17] = float32(ref.Want[17] + 4*bound(17)) // one output 4× past its bound
	if err := CompareDots("planted", one, ref, FP32Chain); err == nil || !strings.Contains(err.Error(), "past the derived bound") {
		t.Fatalf("an output 4× past its bound was not caught: %v", err)
	}

	// Every output carrying 4× the error the accumulation explains
	// statistically (U·√(S·Σp²)·4, inside the worst-case bound) is caught by
	// the rms check.
	scaled := make([]float32, len(got))
	for i := range got {
		e := 4 * FP32Chain.U * math.Sqrt(steps*ref.Sq[i])
		if i%2 == 1 {
			e = -e
		}
		scaled[i] = float32(ref.Want[i] + e)
	}
	if err := CompareDots("rms", scaled, ref, FP32Chain); err == nil || !strings.Contains(err.Error(), "more error than the accumulation explains") {
		t.Fatalf("4× the statistical error on every output was not caught: %v", err)
	}

	// A kernel that rounds its activations to bf16 (drops 16 bits) fails.
	bf := make([]float32, len(got))
	for i := range got {
		var s float64
		for j := range x[i] {
			xb := math.Float32frombits(math.Float32bits(x[i][j]) &^ 0xffff)
			s += float64(xb) * w[i][j]
		}
		bf[i] = float32(s)
	}
	if err := CompareDots("bf16 activations", bf, ref, FP32Chain); err == nil {
		t.Fatal("bf16-rounded activations passed the fp32 bound")
	}

	nan := append([]float32(nil), got...)
	nan[3] = float32(math.NaN())
	if err := CompareDots("nan", nan, ref, FP32Chain); err == nil || !strings.Contains(err.Error(), "non-finite") {
		t.Fatalf("NaN passed: %v", err)
	}
}

func TestAccumulationSteps(t *testing.T) {
	cases := []struct {
		a    Accumulation
		k    int
		want int
	}{
		{Accumulation{U: 1, StepTerms: 1}, 10, 10},
		{Accumulation{U: 1, StepTerms: 16, StepsPerK: 3}, 320, 60},
		{Accumulation{U: 1, StepTerms: 16, StepsPerK: 3}, 321, 63},
		{Accumulation{U: 1, StepTerms: 1, GroupMin: 8, ExtraSteps: 4}, 64, 64 + 16 + 4},
	}
	for _, c := range cases {
		if got := c.a.Steps(c.k); got != c.want {
			t.Errorf("%+v.Steps(%d) = %d, want %d", c.a, c.k, got, c.want)
		}
	}
	if g := (Accumulation{U: 0.5, StepTerms: 1}).Gamma(4); !math.IsInf(g, 1) {
		t.Errorf("Gamma with S·U ≥ 1 = %v, want +Inf", g)
	}
}
