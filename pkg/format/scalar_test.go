package format

import (
	"math"
	"testing"
)

// TestF16Exhaustive checks F32ToF16 on every finite f16 value, every midpoint
// between neighbours (ties to even) and one float32 ulp either side of it.
func TestF16Exhaustive(t *testing.T) {
	for h := uint32(0); h < 0x7C00; h++ {
		for _, sign := range []uint32{0, 0x8000} {
			w := uint16(h | sign)
			v := F16ToF32(w)
			if got := F32ToF16(v); got != w {
				t.Fatalf("F32ToF16(%v) = 0x%04x, want 0x%04x", v, got, w)
			}
		}
		if h == 0x7BFF {
			break
		}
		a, b := float64(F16ToF32(uint16(h))), float64(F16ToF32(uint16(h+1)))
		mid := float32((a + b) / 2) // exact: needs 12 significant bits
		if float64(mid) != (a+b)/2 {
			t.Fatalf("midpoint of 0x%04x not exact", h)
		}
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		if got := F32ToF16(mid); got != even {
			t.Fatalf("tie %v: got 0x%04x, want 0x%04x", mid, got, even)
		}
		if got := F32ToF16(math.Nextafter32(mid, 0)); got != uint16(h) {
			t.Fatalf("below tie %v: got 0x%04x, want 0x%04x", mid, got, h)
		}
		if got := F32ToF16(math.Nextafter32(mid, 1e9)); got != uint16(h+1) {
			t.Fatalf("above tie %v: got 0x%04x, want 0x%04x", mid, got, h+1)
		}
	}
}

func TestF16Special(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{65504, 0x7BFF},
		{65519.99, 0x7BFF},
		{65520, 0x7C00}, // tie between 65504 and 2^16 goes to even (Inf)
		{1e10, 0x7C00},
		{-1e10, 0xFC00},
		{float32(math.Inf(1)), 0x7C00},
		{float32(math.NaN()), 0x7E00},
		{float32(math.Ldexp(1, -24)), 0x0001},
		{float32(math.Ldexp(1, -25)), 0x0000}, // tie to even 0
		{math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 0x0001},
		{float32(math.Ldexp(3, -25)), 0x0002}, // 1.5 units: tie to even 2
		{float32(math.Ldexp(3, -26)), 0x0001}, // 0.75 units
		{float32(math.Ldexp(1, -14)), 0x0400},
		{float32(math.Ldexp(1023.5, -24)), 0x0400}, // subnormal rounds into the smallest normal
		{1e-40, 0},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3C00},
		{-2, 0xC000},
	}
	for _, tc := range tests {
		if got := F32ToF16(tc.in); got != tc.want {
			t.Errorf("F32ToF16(%v) = 0x%04x, want 0x%04x", tc.in, got, tc.want)
		}
	}
}

// TestF16Random compares F32ToF16 with an independent float64 rounding on
// random float32 inputs across the whole f16 range.
func TestF16Random(t *testing.T) {
	r := newRNG(t)
	for i := 0; i < 200000; i++ {
		v := float32(math.Ldexp(r.Float64()*2-1, r.IntN(50)-30))
		want := refF16(float64(v))
		got := float64(F16ToF32(F32ToF16(v)))
		if got != want && !(math.IsInf(got, 0) && math.IsInf(want, 0)) {
			t.Fatalf("F32ToF16(%v) = %v, reference %v", v, got, want)
		}
	}
}

func TestBF16Exhaustive(t *testing.T) {
	for h := uint32(0); h < 0x7F80; h++ {
		v := BF16ToF32(uint16(h))
		if got := F32ToBF16(v); got != uint16(h) {
			t.Fatalf("F32ToBF16(%v) = 0x%04x, want 0x%04x", v, got, h)
		}
		if got := F32ToBF16(-v); got != uint16(h|0x8000) {
			t.Fatalf("F32ToBF16(%v) = 0x%04x", -v, got)
		}
		if got := F32ToBF16Up(v); got != uint16(h) {
			t.Fatalf("F32ToBF16Up(%v) = 0x%04x, want 0x%04x", v, got, h)
		}
		if h == 0x7F7F {
			break
		}
		a, b := float64(v), float64(BF16ToF32(uint16(h+1)))
		mid := float32((a + b) / 2)
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		if got := F32ToBF16(mid); got != even {
			t.Fatalf("tie %v: got 0x%04x, want 0x%04x", mid, got, even)
		}
		if got := F32ToBF16(math.Nextafter32(mid, 0)); got != uint16(h) {
			t.Fatalf("below tie %v: got 0x%04x", mid, got)
		}
		lo := math.Nextafter32(v, float32(math.Inf(1)))
		if got := F32ToBF16Up(lo); got != uint16(h+1) {
			t.Fatalf("F32ToBF16Up(%v) = 0x%04x, want 0x%04x", lo, got, h+1)
		}
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7FFF != 0x7FC0 {
		t.Errorf("F32ToBF16(NaN) = 0x%04x", got)
	}
	if got := F32ToBF16(math.MaxFloat32); got != 0x7F80 {
		t.Errorf("F32ToBF16(max) = 0x%04x, want Inf 0x7F80", got)
	}
}

func TestE4M3Table(t *testing.T) {
	known := map[uint8]float64{
		0x00: 0, 0x01: math.Ldexp(1, -9), 0x07: 7 * math.Ldexp(1, -9), 0x08: math.Ldexp(1, -6),
		0x38: 1, 0x39: 1.125, 0x40: 2, 0x7E: 448, 0x7D: 416, 0xFE: -448, 0xB8: -1,
	}
	for c, v := range known {
		if got := float64(E4M3ToF32(c)); got != v {
			t.Errorf("E4M3ToF32(0x%02x) = %v, want %v", c, got, v)
		}
	}
	if !math.IsNaN(float64(E4M3ToF32(0x7F))) || !math.IsNaN(float64(E4M3ToF32(0xFF))) {
		t.Error("0x7F/0xFF must decode to NaN")
	}
	// Every finite code round-trips; neighbour midpoints tie to even.
	for c := 0; c < 0x7E; c++ {
		for _, s := range []int{0, 0x80} {
			w := uint8(c | s)
			if w == 0x80 {
				continue
			}
			if got := F32ToE4M3(E4M3ToF32(w)); got != w {
				t.Fatalf("F32ToE4M3(%v) = 0x%02x, want 0x%02x", E4M3ToF32(w), got, w)
			}
		}
		a, b := float64(E4M3ToF32(uint8(c))), float64(E4M3ToF32(uint8(c+1)))
		mid := float32((a + b) / 2)
		even := uint8(c)
		if c&1 == 1 {
			even = uint8(c + 1)
		}
		if got := F32ToE4M3(mid); got != even {
			t.Fatalf("tie %v: got 0x%02x, want 0x%02x", mid, got, even)
		}
		if got := F32ToE4M3(math.Nextafter32(mid, 1e9)); got != uint8(c+1) {
			t.Fatalf("above tie %v: got 0x%02x", mid, got)
		}
		if got := F32ToE4M3(math.Nextafter32(mid, 0)); got != uint8(c) {
			t.Fatalf("below tie %v: got 0x%02x", mid, got)
		}
	}
	special := []struct {
		in   float32
		want uint8
	}{
		{448, 0x7E}, {464, 0x7E}, {1e30, 0x7E}, {float32(math.Inf(1)), 0x7E},
		{float32(math.Inf(-1)), 0xFE}, {-500, 0xFE}, {float32(math.NaN()), 0x7F},
		{float32(math.Ldexp(1, -10)), 0x00}, {-1e-6, 0x00}, {float32(math.Copysign(0, -1)), 0x00},
		{float32(math.Ldexp(3, -10)), 0x02},
	}
	for _, tc := range special {
		if got := F32ToE4M3(tc.in); got != tc.want {
			t.Errorf("F32ToE4M3(%v) = 0x%02x, want 0x%02x", tc.in, got, tc.want)
		}
	}
}

func TestE4M3Up(t *testing.T) {
	r := newRNG(t)
	for i := 0; i < 100000; i++ {
		a := float32(math.Ldexp(r.Float64(), r.IntN(22)-12))
		c := f32ToE4M3Up(a)
		if a > 448 {
			if c != 0x7E {
				t.Fatalf("f32ToE4M3Up(%v) = 0x%02x, want saturation", a, c)
			}
			continue
		}
		if v := E4M3ToF32(c); v < a || (c > 0 && E4M3ToF32(c-1) >= a) {
			t.Fatalf("f32ToE4M3Up(%v) = 0x%02x (%v) is not the smallest code ≥ a", a, c, v)
		}
	}
}

func TestE2M1(t *testing.T) {
	for c := uint8(0); c < 16; c++ {
		want := c
		if c == 8 {
			want = 0 // -0 encodes as +0
		}
		if got := F32ToE2M1(E2M1ToF32(c)); got != want {
			t.Errorf("F32ToE2M1(%v) = %d, want %d", E2M1ToF32(c), got, want)
		}
	}
	ties := []struct {
		in   float32
		want uint8
	}{
		{0.25, 0}, {0.2501, 1}, {0.75, 2}, {0.7499, 1}, {1.25, 2}, {1.2501, 3}, {1.75, 4},
		{2.5, 4}, {2.5001, 5}, {3.5, 6}, {3.4999, 5}, {5, 6}, {5.0001, 7}, {7, 7}, {100, 7},
		{-0.1, 0}, {-0.75, 10}, {-6.5, 15},
	}
	for _, tc := range ties {
		if got := F32ToE2M1(tc.in); got != tc.want {
			t.Errorf("F32ToE2M1(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestE2M1Random compares F32ToE2M1 with a nearest-value search (ties to
// the even word) on random inputs.
func TestE2M1Random(t *testing.T) {
	r := newRNG(t)
	for i := 0; i < 100000; i++ {
		v := float32((r.Float64()*2 - 1) * 7)
		if i%4 == 0 {
			v = float32(r.IntN(29)-14) / 4 // quarter steps hit every tie
		}
		best, bestErr := uint8(0), math.Inf(1)
		for c := uint8(0); c < 8; c++ {
			e := math.Abs(math.Abs(float64(v)) - float64(E2M1ToF32(c)))
			if e < bestErr || (e == bestErr && c%2 == 0) {
				best, bestErr = c, e
			}
		}
		if best != 0 && v < 0 {
			best |= 8
		}
		if got := F32ToE2M1(v); got != best {
			t.Fatalf("F32ToE2M1(%v) = %d, want %d", v, got, best)
		}
	}
}
