package numtest

import (
	"fmt"
	"math"
	"testing"
)

// Accumulation describes the arithmetic a kernel uses to compute dot
// products y = c + Σ_k x_k·w_k, for deriving per-output error bounds from it
// (docs/ACCURACY.md, "Derived bounds for dot products").
//
// Each step of the computation adds up to StepTerms products and the running
// sum and commits an error of at most U·(|running sum| + Σ|products|).
// Recursive-summation analysis then bounds one output by
//
//	|ŷ − y| ≤ (γ_S + Rep·(1 + γ_S))·(|c| + Σ_k |x_k·w_k|),  γ_S = S·U/(1 − S·U),
//
// where S = Steps(K) is the number of steps along the longest path and Rep
// bounds the relative error of each product as the kernel forms it (operands
// rounded first, such as a bf16 split of the activations or a reciprocal
// scale). The bound holds for every input, any summation order and every
// seed: a correct kernel never exceeds it. It is loose by design for random
// data (rounding errors mostly cancel), so CheckDots also bounds the
// root-mean-square error of the whole result by what the accumulation's
// statistics explain (see CheckDots).
type Accumulation struct {
	Name string
	// U bounds the relative error of one step. IEEE fp32 round to nearest:
	// 2^-24. A tensor-core fused step (products exact, aligned to the
	// largest exponent, truncated, final round toward zero): 2^-20, the
	// safe model of reference/tensor-core-numerics.md §4 (5·2^-23 for
	// A100/H100/B200 bf16, with a 1.6× margin).
	U float64
	// StepTerms is the number of products one step adds: 1 for an FMA
	// chain, 16 for an m16n8k16 mma.
	StepTerms int
	// StepsPerK multiplies the steps: 3 when each k-step runs one mma per
	// bf16 term of a three-term activation split.
	StepsPerK int
	// ExtraSteps covers the additions outside the dot-product loop: a
	// partial sum per group or k-tile (up to K/GroupMin of them), scale
	// multiplications, the final add of an accumulated output.
	GroupMin   int
	ExtraSteps int
	// Rep bounds the relative error of each product's operands as formed
	// by the kernel.
	Rep float64
}

// Steps is the number of error-committing steps S along the longest path of a
// length-k dot product.
func (a Accumulation) Steps(k int) int {
	st := a.StepTerms
	if st < 1 {
		st = 1
	}
	per := a.StepsPerK
	if per < 1 {
		per = 1
	}
	s := per * ((k + st - 1) / st)
	if a.GroupMin > 0 {
		s += 2 * ((k + a.GroupMin - 1) / a.GroupMin) // group partial: scale multiply + add
	}
	return s + a.ExtraSteps
}

// Gamma is γ_S for a length-k dot product (+Inf when S·U ≥ 1).
func (a Accumulation) Gamma(k int) float64 {
	su := float64(a.Steps(k)) * a.U
	if su >= 1 {
		return math.Inf(1)
	}
	return su / (1 - su)
}

// The accumulations of the kernels under test.
var (
	// FP32Chain: IEEE fp32 round to nearest (the CPU kernels, the CUDA SIMT
	// GEMV/GEMM paths), with group/tile partial sums of at least 8 products.
	FP32Chain = Accumulation{Name: "fp32_rn", U: 0x1p-24, StepTerms: 1, GroupMin: 8, ExtraSteps: 4, Rep: 0x1p-23}
	// TensorCoreBF16x3: the CUDA mma.sync GEMM: activations split into three
	// bf16 terms (residual ≤ 2^-24·|x|, plus a reciprocal weight scale:
	// Rep 2^-22), one fused step per term and k16 step, per-tile partials
	// added in fp32.
	TensorCoreBF16x3 = Accumulation{Name: "tensor_core_bf16x3", U: 0x1p-20, StepTerms: 16, StepsPerK: 3, GroupMin: 16, ExtraSteps: 4, Rep: 0x1p-22}
)

// Dots holds the FP64 reference of a batch of dot products y_i = c_i + Σ_k
// x_k·w_k, each with the magnitudes its error bound needs. Add one output at
// a time with Add.
type Dots struct {
	K    int
	Want []float64 // c + Σ x·w
	Abs  []float64 // |c| + Σ |x·w|
	Sq   []float64 // c² + Σ (x·w)²
	// Rep, when not nil, holds an extra relative error of each output's
	// products (added to the Accumulation's Rep): an error the inputs
	// carry in from an earlier computation, such as softmax weights formed
	// from fp32 scores (AddTerms).
	Rep []float64
}

// AddTerms appends one output given as its products p (FP64 values of the
// terms the kernel adds), each carrying an extra relative error of at most
// rep from the computation that formed it.
func (d *Dots) AddTerms(p []float64, rep float64) {
	if d.Rep == nil {
		d.Rep = make([]float64, len(d.Want))
	}
	var s, abs, sq float64
	for _, v := range p {
		s += v
		abs += math.Abs(v)
		sq += v * v
	}
	d.Want = append(d.Want, s)
	d.Abs = append(d.Abs, abs)
	d.Sq = append(d.Sq, sq)
	d.Rep = append(d.Rep, rep)
}

// NewDots returns an empty batch of length-k dot products.
func NewDots(k int) *Dots { return &Dots{K: k} }

// Add appends one output: c plus the products x[i]·w[i] (x and w of length
// K; w may be given as float64 decoded weights).
func (d *Dots) Add(c float64, x []float32, w []float64) {
	s, abs, sq := c, math.Abs(c), c*c
	for i := range w {
		p := float64(x[i]) * w[i]
		s += p
		abs += math.Abs(p)
		sq += p * p
	}
	d.Want = append(d.Want, s)
	d.Abs = append(d.Abs, abs)
	d.Sq = append(d.Sq, sq)
	if d.Rep != nil {
		d.Rep = append(d.Rep, 0)
	}
}

// ZMax bounds the root-mean-square of the normalised errors
// e_i / (U·√(S·Σp²)) over a whole result. Each step errs by at most U times
// the magnitudes it adds; when the products have mixed signs (the op tests
// draw activations from N(0,1)) the running sums are a random walk with rms ≤
// √Σp² and the steps' errors have either sign, so E[e²] ≤ S·U²·Σp² and the
// rms normalised error is at most 1. (Same-sign data can make truncating
// tensor-core steps err one way, growing like S: only the worst-case bound
// covers that.) A sequential fp32 sum measures 0.25–0.30, so an error 4×
// what the arithmetic explains, on every output, is caught.
const ZMax = 1.0

// CheckDots compares a result against its FP64 reference under the bounds
// derived from acc: every output within (γ_S + Rep·(1+γ_S))·Abs_i (plus
// (S+1)·2^-126 of absolute slack for subnormal partial sums), and the
// root-mean-square normalised error at most ZMax. Non-finite values fail.
func CheckDots(t testing.TB, what string, got []float32, ref *Dots, acc Accumulation) {
	t.Helper()
	if err := CompareDots(what, got, ref, acc); err != nil {
		t.Fatal(err)
	}
}

// CompareDots is CheckDots returning the error instead of failing a test.
func CompareDots(what string, got []float32, ref *Dots, acc Accumulation) error {
	_, err := DotsError(what, got, ref, acc)
	return err
}

// DotsStats tells how close a result came to its bounds: the rms
// normalised error (ZMax at most) and the largest error as a fraction of its
// output's worst-case bound (1 at most).
type DotsStats struct {
	RMSZ, WorstOfBound float64
}

// DotsError is CompareDots that also returns how close the result came to
// its bounds.
func DotsError(what string, got []float32, ref *Dots, acc Accumulation) (st DotsStats, err error) {
	if len(got) != len(ref.Want) {
		return st, fmt.Errorf("%s: %d values, want %d", what, len(got), len(ref.Want))
	}
	steps := float64(acc.Steps(ref.K))
	g := acc.Gamma(ref.K)
	rel := g + acc.Rep*(1+g)
	slack := (steps + 1) * 0x1p-126
	worst, worstAt, viol, worstBound := 0.0, -1, 0, 0.0
	var zsum float64
	var zn int
	for i := range got {
		gv, w := float64(got[i]), ref.Want[i]
		if math.IsNaN(gv) || math.IsInf(gv, 0) || math.IsNaN(w) || math.IsInf(w, 0) {
			return st, fmt.Errorf("%s[%d]: non-finite value got %v want %v", what, i, gv, w)
		}
		e := math.Abs(gv - w)
		reli := rel
		if ref.Rep != nil {
			reli += ref.Rep[i] * (1 + g)
		}
		bound := reli*ref.Abs[i] + slack
		st.WorstOfBound = math.Max(st.WorstOfBound, e/bound)
		if e > bound {
			viol++
			if r := e / bound; r > worst {
				worst, worstAt, worstBound = r, i, bound
			}
		}
		sigma := math.Sqrt(steps * ref.Sq[i])
		if ref.Rep != nil && ref.Rep[i] > 0 {
			// an upstream error of the products, of unknown sign and
			// possibly shared by all of them (a softmax normaliser)
			sigma += ref.Rep[i] / acc.U * ref.Abs[i]
		}
		if sigma > 0 {
			z := e / (acc.U * sigma)
			zsum += z * z
			zn++
		}
	}
	if zn > 0 {
		st.RMSZ = math.Sqrt(zsum / float64(zn))
	}
	if viol > 0 {
		return st, fmt.Errorf("%s (%s, K=%d, S=%d): %d/%d outputs past the derived bound (worst ×%.3g at %d: got %v want %v, bound %.3g)",
			what, acc.Name, ref.K, int(steps), viol, len(got), worst, worstAt, got[worstAt], ref.Want[worstAt], worstBound)
	}
	if st.RMSZ > ZMax {
		return st, fmt.Errorf("%s (%s, K=%d, S=%d): rms normalised error %.3g > %g: more error than the accumulation explains",
			what, acc.Name, ref.K, int(steps), st.RMSZ, ZMax)
	}
	return st, nil
}

// CheckBound fails t unless every |got_i − want_i| ≤ bound_i, a per-output
// error bound derived from the computation (for example by running error
// analysis alongside the FP64 reference). Non-finite values fail.
func CheckBound(t testing.TB, what string, got []float32, want, bound []float64) {
	t.Helper()
	if err := CompareBound(what, got, want, bound); err != nil {
		t.Fatal(err)
	}
}

// CompareBound is CheckBound returning the error instead of failing a test.
func CompareBound(what string, got []float32, want, bound []float64) error {
	if len(got) != len(want) || len(bound) != len(want) {
		return fmt.Errorf("%s: %d values, %d references, %d bounds", what, len(got), len(want), len(bound))
	}
	worst, worstAt, viol := 0.0, -1, 0
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(w) || math.IsInf(w, 0) || math.IsNaN(bound[i]) {
			return fmt.Errorf("%s[%d]: non-finite value got %v want %v (bound %v)", what, i, g, w, bound[i])
		}
		if e := math.Abs(g - w); e > bound[i] {
			viol++
			if r := e / bound[i]; r > worst || worstAt < 0 {
				worst, worstAt = r, i
			}
		}
	}
	if viol > 0 {
		return fmt.Errorf("%s: %d/%d values past their derived bound (worst ×%.3g at %d: got %v want %v, bound %.3g)",
			what, viol, len(got), worst, worstAt, got[worstAt], want[worstAt], bound[worstAt])
	}
	return nil
}
