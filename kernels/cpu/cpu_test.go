package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/numtest"
)

func TestF16ConversionsExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		want := numtest.F16ToF64(uint16(h))
		got := float64(F16ToF32(uint16(h)))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("f16 %#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if got != want {
			t.Fatalf("f16 %#04x: got %v, want %v", h, got, want)
		}
		if back := F32ToF16(float32(want)); back != uint16(h) {
			t.Fatalf("f16 round trip %#04x → %v → %#04x", h, want, back)
		}
	}
}

// TestF32ToF16RoundsToNearestEven checks random values against the nearest
// binary16 by exhaustive neighbour search (ties to the even code).
func TestF32ToF16RoundsToNearestEven(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 20000; i++ {
		x := float32(math.Ldexp(r.Float64()*2-1, r.IntN(40)-26))
		h := F32ToF16(x)
		got := numtest.F16ToF64(h)
		for _, d := range []int{-1, 1} {
			nb := numtest.F16ToF64(uint16(int(h) + d))
			if math.IsNaN(nb) || (nb < 0) != (got < 0) && nb != 0 {
				continue
			}
			dg, dn := math.Abs(got-float64(x)), math.Abs(nb-float64(x))
			if dn < dg || (dn == dg && h&1 == 1) {
				t.Fatalf("f16(%v) = %v, neighbour %v is nearer/even", x, got, nb)
			}
		}
	}
}

func TestE4M3Conversions(t *testing.T) {
	for b := 0; b < 256; b++ {
		want := numtest.E4M3ToF64(uint8(b))
		got := float64(E4M3ToF32(uint8(b)))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("e4m3 %#02x: got %v, want NaN", b, got)
			}
			continue
		}
		if got != want {
			t.Fatalf("e4m3 %#02x: got %v, want %v", b, got, want)
		}
		if back := F32ToE4M3(float32(want)); numtest.E4M3ToF64(back) != want || (want == 0 && back != uint8(b)) {
			t.Fatalf("e4m3 round trip %#02x → %v → %#02x", b, want, back)
		}
	}
	// Saturation and ties to even: 448 is the largest finite value; 17 lies
	// between 16 (m=0, even) and 18 (m=1).
	for _, c := range []struct {
		x    float32
		want float64
	}{{1000, 448}, {-1000, -448}, {17, 16}, {19, 20}, {0.0009765625, 0}, {0.0029296875, 0.00390625}} {
		if got := numtest.E4M3ToF64(F32ToE4M3(c.x)); got != c.want {
			t.Fatalf("e4m3(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

// TestPoolRoundTrip runs empty ops on pools of 1–4 threads with the helpers
// spinning (default), sleeping at once (spin 0) and spinning briefly with
// pauses longer than the spin between ops (every op then wakes sleepers):
// every task of every op runs exactly once, and Close returns.
func TestPoolRoundTrip(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		for _, c := range []struct {
			name  string
			spin  time.Duration
			pause time.Duration
			ops   int
		}{
			{"default", -1, 0, 2000},
			{"sleep", 0, 0, 2000},
			{"spin-then-sleep", 50 * time.Microsecond, 200 * time.Microsecond, 50},
		} {
			x, err := NewCtx(threads, ISAScalar)
			if err != nil {
				t.Fatal(err)
			}
			if c.spin >= 0 {
				x.SetSpin(c.spin)
			}
			for i := range c.ops {
				n := 1 + i%9
				if got := x.RoundTrip(n); got != n {
					t.Fatalf("%d threads, %s: op %d ran %d of %d tasks", threads, c.name, i, got, n)
				}
				if c.pause > 0 {
					time.Sleep(c.pause)
				}
			}
			x.Close()
		}
	}
}

// BenchmarkPoolRoundTrip is the fork/join cost of one parallel op (an empty
// op of 16 tasks): with the helpers spinning between ops (the default) and
// sleeping on a condition variable (spin 0, the pool before 2026-12-06).
func BenchmarkPoolRoundTrip(b *testing.B) {
	for _, threads := range []int{2, 4} {
		for _, spin := range []time.Duration{-1, 0} {
			name := fmt.Sprintf("threads=%d/spin", threads)
			if spin == 0 {
				name = fmt.Sprintf("threads=%d/sleep", threads)
			}
			b.Run(name, func(b *testing.B) {
				x, err := NewCtx(threads, ISAScalar)
				if err != nil {
					b.Fatal(err)
				}
				defer x.Close()
				if spin >= 0 {
					x.SetSpin(spin)
				}
				for b.Loop() {
					x.RoundTrip(16)
				}
			})
		}
	}
}

// TestSiluAllBinades checks ni_silu_vec at every ISA level this CPU runs
// against silu in float64 over every 4099th float32 bit pattern (about
// 1.05 M values across all binades, both signs, subnormals, ±inf, NaNs):
// at most 4 ulp of the correctly rounded result (an exp of ~1 ulp, then
// one add and one divide; ulp = 2^-149 in the subnormal range), NaN in
// gives NaN out, and silu(−inf) is NaN (−inf/inf) like the scalar ni_silu.
// Below x = −88.72 exp(−x) overflows fp32 in every path (scalar expf too),
// so silu is −0 there instead of |x|·e^x < 2^-120: accepted as such.
func TestSiluAllBinades(t *testing.T) {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 4099 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	xs = append(xs, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, -0.0, 88.7, 88.73, -88.7, -103.9, -104.5)
	ys := make([]float32, len(xs))
	for _, isa := range []int{ISAScalar, ISAAVX2, ISAAVX512} {
		if isa > BestISA() {
			t.Logf("isa %d: not on this CPU, skipped", isa)
			continue
		}
		Silu(isa, xs, ys)
		worst, at := 0.0, float32(0)
		for i, x := range xs {
			got := ys[i]
			x64 := float64(x)
			switch {
			case x != x:
				if got == got {
					t.Fatalf("isa %d: silu(NaN) = %g, want NaN", isa, got)
				}
				continue
			case math.IsInf(x64, -1):
				if got == got {
					t.Fatalf("isa %d: silu(-inf) = %g, want NaN (-inf/inf, as ni_silu)", isa, got)
				}
				continue
			case math.IsInf(x64, 1):
				if !math.IsInf(float64(got), 1) {
					t.Fatalf("isa %d: silu(+inf) = %g, want +inf", isa, got)
				}
				continue
			}
			ref := x64 / (1 + math.Exp(-x64))
			if x64 < -88.72 && got == 0 && math.Abs(ref) < 0x1p-120 {
				continue // exp(−x) overflows fp32: −x/inf
			}
			r32 := float32(ref)
			ulp := math.Max(math.Abs(float64(math.Nextafter32(r32, float32(math.Inf(1)))-r32)), math.Ldexp(1, -149))
			if got != got {
				t.Fatalf("isa %d: silu(%g) = NaN, want %g", isa, x, ref)
			}
			if e := math.Abs(float64(got)-ref) / ulp; e > worst {
				worst, at = e, x
			}
		}
		t.Logf("isa %d: %d values, worst error %.2f ulp at x = %g", isa, len(xs), worst, at)
		if worst > 4 {
			t.Errorf("isa %d: silu error %.2f ulp at x = %g, want ≤ 4", isa, worst, at)
		}
	}
}

// TestGDNStepRowsBitIdentical: the fused delta-rule row passes equal the
// row-by-row ni_scal / ni_axpy sequence bit for bit at every ISA level this
// CPU runs, for widths that exercise the full blocks, the single vectors,
// the masked / scalar remainders and a zero-row head.
func TestGDNStepRowsBitIdentical(t *testing.T) {
	rng := numtest.Seeded(t)
	randv := func(n int, scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * scale)
		}
		return x
	}
	for _, isa := range []int{ISAScalar, ISAAVX2, ISAAVX512} {
		if isa > BestISA() {
			t.Logf("isa %d: not on this CPU, skipped", isa)
			continue
		}
		for _, dk := range []int{0, 1, 3, 128} {
			for _, dv := range []int{1, 7, 8, 13, 24, 64, 72, 100, 128, 136, 200, 257} {
				S := randv(dk*dv, 0.5)
				k, q, delta := randv(dk, 0.1), randv(dk, 0.1), randv(dv, 1)
				decay := float32(math.Exp(-rng.Float64()))
				S2 := append([]float32(nil), S...)
				kv, o, kv2, o2 := make([]float32, dv), make([]float32, dv), make([]float32, dv), make([]float32, dv)
				for i := range kv { // stale contents must not leak into the results
					kv[i], o[i], kv2[i], o2[i] = 9, 9, -9, -9
				}
				GDNStepRows(isa, false, S, dk, dv, decay, k, delta, q, kv, o)
				GDNStepRows(isa, true, S2, dk, dv, decay, k, delta, q, kv2, o2)
				name := fmt.Sprintf("isa %d dk %d dv %d", isa, dk, dv)
				for i := range S {
					if math.Float32bits(S[i]) != math.Float32bits(S2[i]) {
						t.Fatalf("%s: S[%d] = %g fused, %g row by row", name, i, S2[i], S[i])
					}
				}
				for d := 0; d < dv; d++ {
					if math.Float32bits(kv[d]) != math.Float32bits(kv2[d]) || math.Float32bits(o[d]) != math.Float32bits(o2[d]) {
						t.Fatalf("%s: column %d: kv %g / %g, o %g / %g (fused / row by row)", name, d, kv2[d], kv[d], o2[d], o[d])
					}
				}
			}
		}
	}
}

// BenchmarkGDNStepRows: one decode step's row passes over the recurrent
// state of the Qwen3.5-0.8B shape (18 delta-rule layers × 16 heads of
// 128×128 fp32, 18 MiB: streamed from memory, as in decode), fused against
// row by row, per ISA level.
func BenchmarkGDNStepRows(b *testing.B) {
	const heads, dk, dv = 18 * 16, 128, 128
	S := make([]float32, heads*dk*dv)
	for i := range S {
		S[i] = float32(i%97) * 1e-3
	}
	k, q, delta := make([]float32, dk), make([]float32, dk), make([]float32, dv)
	for i := range k {
		k[i], q[i], delta[i] = 0.01, 0.02, 0.001
	}
	kv, o := make([]float32, dv), make([]float32, dv)
	for _, isa := range []int{ISAScalar, ISAAVX2, ISAAVX512} {
		if isa > BestISA() {
			continue
		}
		for _, fused := range []bool{false, true} {
			b.Run(fmt.Sprintf("isa%d/fused=%v", isa, fused), func(b *testing.B) {
				b.SetBytes(int64(len(S)) * 4)
				for range b.N {
					for h := 0; h < heads; h++ {
						GDNStepRows(isa, fused, S[h*dk*dv:], dk, dv, 0.999, k, delta, q, kv, o)
					}
				}
			})
		}
	}
}
