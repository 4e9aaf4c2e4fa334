package format

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

func TestNVFP4ScaleOffset(t *testing.T) {
	tests := []struct{ n, g, k, want int64 }{
		{0, 0, 64, 0},
		{0, 1, 64, 1},
		{0, 3, 64, 3},
		{1, 0, 64, 16},
		{31, 0, 64, 496},
		{32, 0, 64, 4},
		{96, 2, 64, 14},
		{127, 3, 64, 511},
		{128, 0, 64, 512},
		{0, 4, 128, 512},    // second K tile of row tile 0
		{128, 0, 128, 1024}, // row tile 1 follows both K tiles of row tile 0
		{200, 9, 192, (1*3+2)*512 + (72%32)*16 + (72/32)*4 + 1},
	}
	for _, tc := range tests {
		if got := NVFP4ScaleOffset(tc.n, tc.g, tc.k); got != tc.want {
			t.Errorf("NVFP4ScaleOffset(n=%d, g=%d, K=%d) = %d, want %d", tc.n, tc.g, tc.k, got, tc.want)
		}
	}
	// File order is reshape(N/128, 4, 32, Kt, 4).permute(0,3,2,1,4): walking
	// (rt, kt, r32, r4, c) in that nesting must visit offsets 0, 1, 2, ...
	const n, k = 256, 192
	kt := int64(k / 64)
	off := int64(0)
	for rt := int64(0); rt < n/128; rt++ {
		for ktile := int64(0); ktile < kt; ktile++ {
			for r32 := int64(0); r32 < 32; r32++ {
				for r4 := int64(0); r4 < 4; r4++ {
					for c := int64(0); c < 4; c++ {
						row, g := rt*128+r4*32+r32, ktile*4+c
						if got := NVFP4ScaleOffset(row, g, k); got != off {
							t.Fatalf("row %d block %d: offset %d, want %d", row, g, got, off)
						}
						off++
					}
				}
			}
		}
	}
	if off != n*k/16 {
		t.Fatalf("visited %d offsets, want %d", off, n*k/16)
	}
}

// TestNVFP4Bytes checks hand-derived codes, scales and divisor. The tensor
// max is 2688, so d_w = 1 and codes are x / e4m3(scale).
func TestNVFP4Bytes(t *testing.T) {
	const n, k = 128, 64
	x := make([]float32, n*k)
	copy(x[0:16], []float32{6, -6, 0.5, 1, 1.5, 2, 3, 4, -0.5, 0}) // row 0 block 0: bamax 6 → scale 1.0
	copy(x[16:32], []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6})
	x[k] = 2688                               // row 1 block 0: scale 448
	copy(x[2*k:], []float32{6.2, 3.1, -0.31}) // row 2 block 0: scale rounded up to 1.125
	x[3*k+16] = float32(math.Ldexp(1, -12))   // row 3 block 1: tiny, scale 0x01
	enc, err := Encode(NVFP4, []int64{n, k}, x)
	if err != nil {
		t.Fatal(err)
	}
	geo, _ := NVFP4Layout(n, k)
	codes := []struct {
		off  int
		want []byte
	}{
		{0, []byte{0xF7, 0x21, 0x43, 0x65, 0x09, 0x00}},
		{8, []byte{0x20, 0x42, 0x64, 0x76, 0x00}},
		{32, []byte{0x07, 0x00}},
		// 6.2/1.125 = 5.51 → 6 (word 7); 3.1/1.125 = 2.76 → 3 (word 5);
		// -0.31/1.125 = -0.276 → -0.5 (word 9).
		{64, []byte{0x57, 0x09}},
		// 2^-12 / 2^-9 / 6 → scale = smallest e4m3 ≥ 2^-12/6, i.e. 0x01
		// (2^-9); 2^-12/2^-9 = 0.125 → 0.
		{96 + 8, []byte{0x00}},
	}
	for _, c := range codes {
		if got := enc[c.off : c.off+len(c.want)]; !bytes.Equal(got, c.want) {
			t.Errorf("code bytes at %d: % x, want % x", c.off, got, c.want)
		}
	}
	scales := []struct {
		row, blk int64
		want     byte
	}{{0, 0, 0x38}, {0, 1, 0x38}, {0, 2, 0x00}, {1, 0, 0x7E}, {2, 0, 0x39}, {3, 1, 0x01}, {3, 0, 0x00}}
	for _, s := range scales {
		off := geo.ScaleOff + NVFP4ScaleOffset(s.row, s.blk, k)
		if got := enc[off]; got != s.want {
			t.Errorf("row %d block %d scale (byte %d) = 0x%02x, want 0x%02x", s.row, s.blk, off, got, s.want)
		}
	}
	if d := math.Float32frombits(binary.LittleEndian.Uint32(enc[geo.DivisorOff:])); d != 1 {
		t.Errorf("divisor %v, want 1", d)
	}
	if int64(len(enc)) != geo.DivisorOff+4 {
		t.Errorf("object is %d bytes, want %d", len(enc), geo.DivisorOff+4)
	}
}

func TestNVFP4Divisor(t *testing.T) {
	r := newRNG(t)
	if d, err := NVFP4Divisor(0); d != 1 || err != nil {
		t.Errorf("NVFP4Divisor(0) = %v, %v; want 1", d, err)
	}
	if d, err := NVFP4Divisor(1e-44); err != nil || d != math.MaxFloat32 {
		t.Errorf("NVFP4Divisor(1e-44) = %v, %v; want the largest float32", d, err)
	}
	for _, bad := range []float32{-1, float32(math.NaN()), float32(math.Inf(1))} {
		if _, err := NVFP4Divisor(bad); err == nil {
			t.Errorf("NVFP4Divisor(%v) accepted", bad)
		}
	}
	for i := 0; i < 20000; i++ {
		am := float32(math.Ldexp(0.5+r.Float64()/2, r.IntN(200)-100))
		d, err := NVFP4Divisor(am)
		if err != nil {
			t.Fatal(err)
		}
		exact := 2688 / float64(am)
		if am*d > 2688 || math.Abs(float64(d)-exact) > exact*math.Ldexp(1, -21) {
			t.Fatalf("NVFP4Divisor(%v) = %v: amax·d = %v, exact quotient %v", am, d, am*d, exact)
		}
	}
}

func TestNVFP4RoundTrip(t *testing.T) {
	r := newRNG(t)
	for _, shape := range [][2]int{{128, 64}, {256, 192}} {
		n, k := shape[0], shape[1]
		sh := []int64{int64(n), int64(k)}
		x := randMatrix(r, n, k)
		enc, err := Encode(NVFP4, sh, x)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(NVFP4, sh, enc); err != nil {
			t.Fatalf("Validate rejects encoder output: %v", err)
		}
		dec, err := Decode(NVFP4, sh, enc)
		if err != nil {
			t.Fatal(err)
		}
		geo, _ := NVFP4Layout(int64(n), int64(k))
		d := float64(math.Float32frombits(binary.LittleEndian.Uint32(enc[geo.DivisorOff:])))
		am, _ := Amax(x)
		if want, _ := NVFP4Divisor(am); float64(want) != d {
			t.Fatalf("stored divisor %v, want %v", d, want)
		}
		for row := 0; row < n; row++ {
			for col := 0; col < k; col++ {
				sb := enc[geo.ScaleOff+NVFP4ScaleOffset(int64(row), int64(col/16), int64(k))]
				if sb >= 0x7F {
					t.Fatalf("row %d block %d: illegal scale 0x%02x", row, col/16, sb)
				}
				u := float64(E4M3ToF32(sb)) / d
				v, got := float64(x[row*k+col]), float64(dec[row*k+col])
				e := math.Abs(v - got)
				if b := ErrorBound(NVFP4, v, u); !(e <= b) {
					t.Fatalf("[%d,%d]: |%v − %v| = %g > bound %g (unit %g)", row, col, v, got, e, b, u)
				}
				// Scales round up, so no element saturates beyond 6 units.
				if math.Abs(v) > 6*u*(1+1e-6) {
					t.Fatalf("[%d,%d]: |x| = %v exceeds 6 units (%g)", row, col, v, 6*u)
				}
			}
		}
	}
}

func TestNVFP4Zero(t *testing.T) {
	enc, err := Encode(NVFP4, []int64{128, 64}, make([]float32, 128*64))
	if err != nil {
		t.Fatal(err)
	}
	geo, _ := NVFP4Layout(128, 64)
	for i, b := range enc[:geo.DivisorOff] {
		if b != 0 {
			t.Fatalf("byte %d of a zero tensor is 0x%02x", i, b)
		}
	}
	if d := math.Float32frombits(binary.LittleEndian.Uint32(enc[geo.DivisorOff:])); d != 1 {
		t.Fatalf("zero tensor divisor %v, want 1", d)
	}
}

func TestFP8Row(t *testing.T) {
	// Row 0: amax 448 → scale 1.0 (0x3F80), codes are e4m3(x).
	// Row 1: amax 449 → 449/448 rounds up to bf16 1.0078125 (0x3F81).
	// Row 2: all zero → scale +0, codes 0.
	const n, k = 4, 8
	x := []float32{
		448, -448, 1, float32(math.Ldexp(1, -9)), float32(math.Ldexp(1, -10)), float32(math.Ldexp(3, -10)), -3.3, 0,
		449, -449, 1, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		1e-30, -2e-30, 0, 0, 0, 0, 0, 0,
	}
	enc, err := Encode(FP8Row, []int64{n, k}, x)
	if err != nil {
		t.Fatal(err)
	}
	wantCodes := []byte{0x7E, 0xFE, 0x38, 0x01, 0x00, 0x02, 0xC5, 0x00}
	if !bytes.Equal(enc[:8], wantCodes) {
		t.Errorf("row 0 codes % x, want % x", enc[:8], wantCodes)
	}
	geo, _ := FP8RowLayout(n, k)
	wantScales := []uint16{0x3F80, 0x3F81, 0x0000}
	for r, w := range wantScales {
		if got := binary.LittleEndian.Uint16(enc[geo.ScaleOff+2*int64(r):]); got != w {
			t.Errorf("row %d scale 0x%04x, want 0x%04x", r, got, w)
		}
	}
	if !bytes.Equal(enc[16:24], make([]byte, 8)) {
		t.Errorf("zero row codes % x", enc[16:24])
	}
	if enc[8] != 0x7E || enc[9] != 0xFE {
		t.Errorf("row 1 extremes 0x%02x 0x%02x, want 0x7e 0xfe (no saturation needed)", enc[8], enc[9])
	}
	if err := Validate(FP8Row, []int64{n, k}, enc); err != nil {
		t.Fatal(err)
	}
	dec, _ := Decode(FP8Row, []int64{n, k}, enc)
	if dec[0] != 448 || dec[6] != -3.25 || dec[16] != 0 {
		t.Errorf("decoded %v", dec[:8])
	}
	if math.Abs(float64(dec[25])+2e-30) > 2e-30/16 {
		t.Errorf("tiny row decodes %v, want ≈ -2e-30", dec[25])
	}
}

func TestFP8RoundTrip(t *testing.T) {
	r := newRNG(t)
	const n, k = 64, 300
	x := randMatrix(r, n, k)
	enc, err := Encode(FP8Row, []int64{n, k}, x)
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := Decode(FP8Row, []int64{n, k}, enc)
	geo, _ := FP8RowLayout(n, k)
	for row := 0; row < n; row++ {
		s := float64(BF16ToF32(binary.LittleEndian.Uint16(enc[geo.ScaleOff+2*int64(row):])))
		am, _ := Amax(x[row*k : (row+1)*k])
		if am > 0 && !(s >= float64(am)/448*(1-math.Ldexp(1, -23))) || s > float64(am)/448*(1+math.Ldexp(1, -7)) {
			t.Fatalf("row %d: scale %v for amax %v is not the bf16 ceiling of amax/448", row, s, am)
		}
		for col := 0; col < k; col++ {
			c := enc[row*k+col]
			if c == 0x7F || c == 0xFF {
				t.Fatalf("[%d,%d]: NaN code 0x%02x", row, col, c)
			}
			v, got := float64(x[row*k+col]), float64(dec[row*k+col])
			if b := ErrorBound(FP8Row, v, s); !(math.Abs(v-got) <= b) {
				t.Fatalf("[%d,%d]: |%v − %v| > bound %g (scale %g)", row, col, v, got, b, s)
			}
		}
	}
}
