package safetensors

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

func TestF16ToF32Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got, want := float64(F16ToF32(h)), numtest.F16ToF64(h)
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("%#04x: got %g, want NaN", h, got)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("%#04x: got %g, want %g", h, got, want)
		}
	}
}

// checkNearest asserts that code c (decoded by dec) is the nearest
// representable value to f, ties to even, by comparing against both
// neighbouring codes in float64.
func checkNearest(t *testing.T, kind string, f float32, c uint16, dec func(uint16) float32, maxFinite float64) {
	t.Helper()
	x := float64(f)
	got := float64(dec(c))
	if math.IsNaN(x) {
		if !math.IsNaN(got) {
			t.Fatalf("%s(NaN) = %g", kind, got)
		}
		return
	}
	if math.IsNaN(got) {
		t.Fatalf("%s(%g) = NaN", kind, x)
	}
	if math.IsInf(got, 0) {
		// Only values at least half an ulp past the largest finite may overflow.
		if math.Abs(x) <= maxFinite {
			t.Fatalf("%s(%g) overflowed to %g", kind, x, got)
		}
		return
	}
	if math.Signbit(got) != math.Signbit(x) {
		t.Fatalf("%s(%g) = %g has the wrong sign", kind, x, got)
	}
	d := math.Abs(got - x)
	for _, nb := range []uint16{c + 1, c - 1} {
		if (nb^c)&0x8000 != 0 {
			continue // wrapped across the sign bit
		}
		v := float64(dec(nb))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		dn := math.Abs(v - x)
		if dn < d || (dn == d && c&1 == 1) {
			t.Fatalf("%s(%g) = %#04x (%g), but %#04x (%g) is nearer or the even tie", kind, x, c, got, nb, v)
		}
	}
}

func randFloat32(r *rand.Rand, maxExp int) float32 {
	switch r.IntN(4) {
	case 0: // any bit pattern
		return math.Float32frombits(r.Uint32())
	default:
		e := r.IntN(2*maxExp) - maxExp
		return float32(r.NormFloat64() * math.Pow(2, float64(e)))
	}
}

func TestF32ToF16Nearest(t *testing.T) {
	r := seeded(t)
	for i := 0; i < 200000; i++ {
		f := randFloat32(r, 28)
		checkNearest(t, "F32ToF16", f, F32ToF16(f), F16ToF32, 65504)
	}
	// Boundaries: largest finite, overflow threshold, subnormal ties.
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {-65520, 0xfc00},
		{float32(math.Pow(2, -24)), 0x0001}, {float32(math.Pow(2, -25)), 0x0000},
		{float32(3 * math.Pow(2, -25)), 0x0002}, {float32(math.Pow(2, -14)), 0x0400},
		{1, 0x3c00}, {float32(math.Inf(-1)), 0xfc00},
	} {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestF32ToBF16Nearest(t *testing.T) {
	r := seeded(t)
	maxBF16 := float64(BF16ToF32(0x7f7f))
	for i := 0; i < 200000; i++ {
		f := randFloat32(r, 120)
		checkNearest(t, "F32ToBF16", f, F32ToBF16(f), BF16ToF32, maxBF16)
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN encodes as %#04x, not a NaN", got)
	}
}

func TestDecodeF32MatchesScalar(t *testing.T) {
	r := seeded(t)
	for _, d := range []DType{BF16, F16, F32} {
		for _, n := range []int{0, 1, 3, 4, 5, 64, 1001} {
			w := d.Bits() / 8
			src := randBytes(r, n*w)
			dst := make([]float32, n)
			if err := DecodeF32(d, src, dst); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				var want float32
				switch d {
				case BF16:
					want = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
				case F16:
					want = float32(numtest.F16ToF64(binary.LittleEndian.Uint16(src[2*i:])))
				case F32:
					want = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
				}
				if math.Float32bits(dst[i]) != math.Float32bits(want) && !(want != want && dst[i] != dst[i]) {
					t.Fatalf("%s n=%d [%d]: got %g, want %g", d, n, i, dst[i], want)
				}
			}
			// Encode → decode round trip of the (finite) decoded values is exact.
			for i := range dst {
				if math.IsNaN(float64(dst[i])) || math.IsInf(float64(dst[i]), 0) {
					dst[i] = 0.5
				}
			}
			enc, err := EncodeF32(d, dst, nil)
			if err != nil {
				t.Fatal(err)
			}
			back := make([]float32, n)
			if err := DecodeF32(d, enc, back); err != nil {
				t.Fatal(err)
			}
			for i := range back {
				if back[i] != dst[i] {
					t.Fatalf("%s round trip [%d]: %g → %g", d, i, dst[i], back[i])
				}
			}
		}
	}
	if err := DecodeF32(BF16, make([]byte, 3), make([]float32, 2)); err == nil {
		t.Error("short BF16 source accepted")
	}
	if err := DecodeF32(I32, make([]byte, 4), make([]float32, 1)); err == nil {
		t.Error("I32 accepted")
	}
}

func TestFirstNonFinite(t *testing.T) {
	r := seeded(t)
	for _, d := range []DType{BF16, F16, F32} {
		vals := make([]float32, 100)
		for i := range vals {
			vals[i] = float32(r.NormFloat64())
		}
		enc, _ := EncodeF32(d, vals, nil)
		if i, err := FirstNonFinite(d, enc); err != nil || i != -1 {
			t.Fatalf("%s finite data: %d %v", d, i, err)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			at := 1 + r.IntN(98)
			v := append([]float32(nil), vals...)
			v[at] = bad
			v[at+1] = bad
			enc, _ := EncodeF32(d, v, nil)
			if i, _ := FirstNonFinite(d, enc); i != int64(at) {
				t.Errorf("%s %g at %d: found %d", d, bad, at, i)
			}
		}
	}
}

func BenchmarkDecodeBF16(b *testing.B) { benchmarkDecode(b, BF16) }

func BenchmarkDecodeF16(b *testing.B) { benchmarkDecode(b, F16) }

// benchmarkDecode times DecodeF32 on 4 MiB of 16-bit data.
func benchmarkDecode(b *testing.B, d DType) {
	src := make([]byte, 1<<22)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]float32, len(src)/2)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		DecodeF32(d, src, dst)
	}
}
