package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestWorkedSizes(t *testing.T) {
	tests := []struct {
		f     Format
		shape []int64
		want  int64
	}{
		{Q5G64, []int64{2, 130}, 528},
		{Q4G64, []int64{7168, 5120}, 19496960},
		{Q8G32, []int64{4, 200}, 1088},
		{NVFP4, []int64{5120, 5120}, 14745604},
		{FP8Row, []int64{6, 40}, 268},
		{Q6G64, []int64{1, 1}, 256 + 256 + 4},
		{BF16, []int64{3, 5}, 30},
		{FP32, []int64{}, 4},
	}
	for _, tc := range tests {
		got, err := EncodedSize(tc.f, tc.shape)
		if err != nil || got != tc.want {
			t.Errorf("EncodedSize(%s, %v) = %d, %v; want %d", tc.f, tc.shape, got, err, tc.want)
		}
		// The encoder produces exactly that many bytes.
		if tc.want < 1<<20 {
			n, k := int64(1), int64(1)
			if len(tc.shape) > 0 {
				n = tc.shape[0]
				k, _ = Elements(tc.shape[1:])
			}
			x := make([]float32, n*k)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			enc, err := Encode(tc.f, tc.shape, x)
			if err != nil || int64(len(enc)) != tc.want {
				t.Errorf("Encode(%s, %v) gave %d bytes, %v; want %d", tc.f, tc.shape, len(enc), err, tc.want)
			}
		}
	}
	g, _ := RowSplitLayout(Q5G64, 2, 130)
	if g.KPad != 256 || g.GroupsPerRow != 4 || g.BaseOff != 0 || g.HighOff != 256 || g.ScaleOff != 512 {
		t.Errorf("Q5 [2,130] geometry %+v, want K_pad 256, gpr 4, planes 0/256/512", g)
	}
	g, _ = RowSplitLayout(Q8G32, 4, 200)
	if g.KPad != 256 || g.GroupsPerRow != 8 || g.ScaleOff != 1024 {
		t.Errorf("W8 [4,200] geometry %+v, want K_pad 256, gpr 8, scale_off 1024", g)
	}
}

// TestGroupPackingBytes checks hand-derived bytes for known codes. Each
// group's amax equals qmax, so the scale is exactly 1.0 (0x3C00) and the
// codes equal the (integer) inputs.
func TestGroupPackingBytes(t *testing.T) {
	tests := []struct {
		name      string
		f         Format
		lanes     []float32 // first lanes of group 0 of a [1,128] row; rest 0
		wantBase  []byte    // first base bytes of group 0
		wantHigh  []byte    // first high bytes of group 0
		wantCodes []int8
	}{
		{"q4 nibbles", Q4G64, []float32{1, -2, 7, -7, 0, -1, 3, 4},
			[]byte{0xE1, 0x97, 0xF0, 0x43}, nil, nil},
		{"q4 ties to even", Q4G64, []float32{2.5, 3.5, -2.5, -0.5, 0.5, 1.5, 7, 0},
			[]byte{0x42, 0x0E, 0x20, 0x07}, nil, []int8{2, 4, -2, 0, 0, 2, 7, 0}},
		{"q5 high bits", Q5G64, []float32{15, -15, 1, -1, 0, -2, 8, -8, 0, -1},
			[]byte{0x1F, 0xF1, 0xE0, 0x88, 0xF0}, []byte{0xAA, 0x02}, nil},
		{"q6 high bits", Q6G64, []float32{31, -31, -1, 16, 0, 0, 0, -17},
			[]byte{0x1F, 0x0F, 0x00, 0xF0}, []byte{0x79, 0x80}, nil},
		{"q8 bytes", Q8G32, []float32{127, -127, -1, 0, 64},
			[]byte{0x7F, 0x81, 0xFF, 0x00, 0x40}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 128)
			copy(x, tc.lanes)
			enc, err := Encode(tc.f, []int64{1, 128}, x)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := RowSplitLayout(tc.f, 1, 128)
			if got := enc[:len(tc.wantBase)]; !bytes.Equal(got, tc.wantBase) {
				t.Errorf("base bytes % x, want % x", got, tc.wantBase)
			}
			if tc.wantHigh != nil {
				if got := enc[g.HighOff : g.HighOff+int64(len(tc.wantHigh))]; !bytes.Equal(got, tc.wantHigh) {
					t.Errorf("high bytes % x, want % x", got, tc.wantHigh)
				}
			}
			if s := binary.LittleEndian.Uint16(enc[g.ScaleOff:]); s != 0x3C00 {
				t.Errorf("group 0 scale 0x%04x, want 0x3c00", s)
			}
			// Group 1 (all zeros) has scale +0.
			if s := binary.LittleEndian.Uint16(enc[g.ScaleOff+2:]); s != 0 {
				t.Errorf("zero group scale 0x%04x, want 0", s)
			}
			dec, err := Decode(tc.f, []int64{1, 128}, enc)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tc.lanes {
				want := float32(math.RoundToEven(float64(v)))
				if tc.wantCodes != nil {
					want = float32(tc.wantCodes[i])
				}
				if dec[i] != want {
					t.Errorf("lane %d decodes to %v, want %v", i, dec[i], want)
				}
			}
		})
	}
}

// refGroupQuant is an independent float64 statement of
// MAXABS_F16_RECIP_RNE_V1 for one group: it returns the scale value and
// codes. Intermediate float32 roundings are made explicit.
func refGroupQuant(p GroupParams, xs []float32) (float64, []int) {
	am := 0.0
	for _, v := range xs {
		am = math.Max(am, math.Abs(float64(v)))
	}
	codes := make([]int, len(xs))
	if am == 0 {
		return 0, codes
	}
	s := refF16(float64(float32(am / float64(p.QMax))))
	if s == 0 {
		s = math.Ldexp(1, -24)
	}
	inv := float64(float32(1 / s))
	qmin := -(1 << (p.Bits - 1))
	if p.Bits == 8 {
		qmin = -127
	}
	for i, v := range xs {
		q := int(math.RoundToEven(float64(float32(float64(v) * inv))))
		codes[i] = max(qmin, min(p.QMax, q))
	}
	return s, codes
}

// TestGroupRoundTrip encodes random matrices (K not a multiple of 128, so
// there are partial and wholly padded groups), compares scales and codes
// with the float64 reference quantizer bit for bit, and checks the error
// bound and the padding.
func TestGroupRoundTrip(t *testing.T) {
	r := newRNG(t)
	for _, f := range []Format{Q4G64, Q5G64, Q6G64, Q8G32} {
		for _, k := range []int{1, 63, 130, 200, 320} {
			t.Run(fmt.Sprintf("%s/k%d", f, k), func(t *testing.T) {
				n := 5
				p, _ := f.Group()
				x := randMatrix(r, n, k)
				x[1] = -x[0] * 3 // a negative group maximum
				enc, err := Encode(f, []int64{int64(n), int64(k)}, x)
				if err != nil {
					t.Fatal(err)
				}
				if err := Validate(f, []int64{int64(n), int64(k)}, enc); err != nil {
					t.Fatalf("Validate rejects encoder output: %v", err)
				}
				dec, err := Decode(f, []int64{int64(n), int64(k)}, enc)
				if err != nil {
					t.Fatal(err)
				}
				g, _ := RowSplitLayout(f, int64(n), int64(k))
				var codes [64]int8
				for row := 0; row < n; row++ {
					base, high, scales := (&geom{rs: g}).rowSpans(enc, int64(row))
					for gi := 0; gi < int(g.GroupsPerRow); gi++ {
						lo := gi * p.Group
						sb := binary.LittleEndian.Uint16(scales[2*gi:])
						unpackGroup(p, base[gi*p.BaseBytes:(gi+1)*p.BaseBytes], high[gi*p.HighBytes:(gi+1)*p.HighBytes], codes[:p.Group])
						if lo >= k {
							if sb != 0 || codes != [64]int8{} {
								t.Fatalf("row %d wholly padded group %d: scale 0x%04x codes %v", row, gi, sb, codes)
							}
							continue
						}
						xs := x[row*k+lo : row*k+min(lo+p.Group, k)]
						rs, rc := refGroupQuant(p, xs)
						if float64(F16ToF32(sb)) != rs {
							t.Fatalf("row %d group %d: scale %v, reference %v", row, gi, F16ToF32(sb), rs)
						}
						for i := range p.Group {
							want := 0
							if i < len(xs) {
								want = rc[i]
							}
							if int(codes[i]) != want {
								t.Fatalf("row %d group %d lane %d: code %d, reference %d (x=%v)", row, gi, i, codes[i], want, xs[i])
							}
						}
						s := float64(F16ToF32(sb))
						for i, v := range xs {
							got := float64(dec[row*k+lo+i])
							e := math.Abs(float64(v) - got)
							bound := ErrorBound(f, float64(v), s)
							if sb >= 0x0400 { // normal scale: the clamp never bites
								bound = s/2 + math.Abs(float64(v))*math.Ldexp(1, -21)
							}
							if !(e <= bound) {
								t.Fatalf("row %d col %d: |%v − %v| = %g > bound %g (scale %g)", row, lo+i, v, got, e, bound, s)
							}
						}
					}
				}
			})
		}
	}
}

// TestGroupEdgeCases covers zero groups, the largest representable groups,
// scale overflow, subnormal scales (including the 0x0001 replacement and
// the clamp when f16 rounds a subnormal scale down) and a scale rounded down
// by the largest normal f16 relative step.
func TestGroupEdgeCases(t *testing.T) {
	tests := []struct {
		name      string
		f         Format
		vals      []float32 // group 0 values
		wantScale uint16
		wantErr   string
	}{
		{"zero group", Q4G64, []float32{0, 0, 0}, 0x0000, ""},
		{"negative zero group", Q4G64, []float32{float32(math.Copysign(0, -1))}, 0x0000, ""},
		{"max q4", Q4G64, []float32{65504 * 7, -65504 * 7}, 0x7BFF, ""},
		{"max q8", Q8G32, []float32{-65504 * 127, 1}, 0x7BFF, ""},
		{"overflow q4", Q4G64, []float32{65520 * 7}, 0, "above the f16 range"},
		{"overflow q8", Q8G32, []float32{1e9}, 0, "above the f16 range"},
		{"scale rounds to zero", Q4G64, []float32{3e-8, -1e-8}, 0x0001, ""},
		{"tiny scale, clamp", Q4G64, []float32{float32(7 * 1.4 * math.Ldexp(1, -24)), -float32(7 * 1.4 * math.Ldexp(1, -24))}, 0x0001, ""},
		{"subnormal scale", Q6G64, []float32{float32(31 * 100.3 * math.Ldexp(1, -24)), 1e-7}, 100, ""},
		{"scale rounded down 2^-11", Q5G64, []float32{float32(15 * (1 + math.Ldexp(1, -11) - math.Ldexp(1, -20))), -1}, 0x3C00, ""},
		{"nan", Q4G64, []float32{1, float32(math.NaN())}, 0, "column 1 is NaN"},
		{"inf", Q8G32, []float32{float32(math.Inf(-1))}, 0, "column 0 is -Inf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := tc.f.Group()
			x := make([]float32, 2*128)
			copy(x[128:], tc.vals) // row 1
			x[0] = 1               // row 0 is ordinary
			shape := []int64{2, 128}
			enc, err := Encode(tc.f, shape, x)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "row 1") {
					t.Fatalf("error %v, want one naming row 1 and containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, _ := RowSplitLayout(tc.f, 2, 128)
			s := binary.LittleEndian.Uint16(enc[g.ScaleOff+2*g.GroupsPerRow:])
			if s != tc.wantScale {
				t.Fatalf("scale 0x%04x, want 0x%04x", s, tc.wantScale)
			}
			if err := Validate(tc.f, shape, enc); err != nil {
				t.Fatal(err)
			}
			dec, _ := Decode(tc.f, shape, enc)
			sv := float64(F16ToF32(s))
			clamped := false
			for i, v := range tc.vals {
				got := float64(dec[128+i])
				e := math.Abs(float64(v) - got)
				if b := ErrorBound(tc.f, float64(v), sv); !(e <= b) {
					t.Errorf("value %v decodes to %v: error %g > bound %g", v, got, e, b)
				}
				if e > sv/2*(1+1e-6) {
					clamped = true
				}
			}
			if clamped != (tc.name == "tiny scale, clamp") {
				t.Errorf("clamp effect = %v; it should occur only for a subnormal scale rounded down", clamped)
			}
			_ = p
		})
	}
}

// TestEncodeRowsConcurrent encodes bf16 input in two row chunks on two
// goroutines into a buffer prefilled with garbage and compares with Encode.
func TestEncodeRowsConcurrent(t *testing.T) {
	r := newRNG(t)
	for _, f := range []Format{Q4G64, Q5G64, Q6G64, Q8G32, FP8Row, NVFP4, BF16} {
		t.Run(string(f), func(t *testing.T) {
			n, k := 256, 192
			shape := []int64{int64(n), int64(k)}
			xf := randMatrix(r, n, k)
			raw := make([]byte, 2*n*k)
			for i, v := range xf {
				h := F32ToBF16(v)
				binary.LittleEndian.PutUint16(raw[2*i:], h)
				xf[i] = BF16ToF32(h)
			}
			want, err := Encode(f, shape, xf)
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewRowEncoder(f, shape)
			if err != nil {
				t.Fatal(err)
			}
			am, err := AmaxRaw(SourceBF16, raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.SetAmax(am); err != nil {
				t.Fatal(err)
			}
			dst := bytes.Repeat([]byte{0xAA}, int(e.Size()))
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r0, r1 := int64(w*n/2), int64((w+1)*n/2)
					errs[w] = e.EncodeRowsRaw(dst, r0, r1, SourceBF16, raw[2*r0*int64(k):2*r1*int64(k)])
				}()
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			if err := e.Finish(dst); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, want) {
				for i := range dst {
					if dst[i] != want[i] {
						t.Fatalf("byte %d: 0x%02x, want 0x%02x", i, dst[i], want[i])
					}
				}
			}
		})
	}
}

func TestDecodeRows(t *testing.T) {
	r := newRNG(t)
	for _, f := range All {
		t.Run(string(f), func(t *testing.T) {
			n, k := 128, 192
			shape := []int64{int64(n), int64(k)}
			x := randMatrix(r, n, k)
			if f == Int32 {
				for i := range x {
					x[i] = float32(r.IntN(1<<20) - 1<<19)
				}
			}
			enc, err := Encode(f, shape, x)
			if err != nil {
				t.Fatal(err)
			}
			all, err := Decode(f, shape, enc)
			if err != nil {
				t.Fatal(err)
			}
			if f == FP32 || f == Int32 {
				for i := range x {
					if all[i] != x[i] {
						t.Fatalf("element %d: %v, want exact %v", i, all[i], x[i])
					}
				}
			}
			for _, rr := range [][2]int64{{0, 1}, {5, 9}, {127, 128}, {3, 3}} {
				dst := make([]float32, (rr[1]-rr[0])*int64(k))
				if err := DecodeRows(f, shape, enc, rr[0], rr[1], dst); err != nil {
					t.Fatal(err)
				}
				for i, v := range dst {
					if w := all[rr[0]*int64(k)+int64(i)]; v != w && !(v != v && w != w) {
						t.Fatalf("rows %v element %d: %v, full decode %v", rr, i, v, w)
					}
				}
			}
			if err := DecodeRows(f, shape, enc, 5, 129, make([]float32, 124*k)); err == nil {
				t.Error("DecodeRows accepted rows past N")
			}
			if err := DecodeRows(f, shape, enc, 0, 2, make([]float32, k)); err == nil {
				t.Error("DecodeRows accepted a short dst")
			}
			if _, err := Decode(f, shape, enc[:len(enc)-1]); err == nil {
				t.Error("Decode accepted a short object")
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		f       Format
		shape   []int64
		x       []float32
		wantErr string
	}{
		{"rank", Q4G64, []int64{128}, make([]float32, 128), "rank-2"},
		{"nvfp4 shape", NVFP4, []int64{100, 64}, make([]float32, 6400), "N%128"},
		{"length", Q4G64, []int64{2, 64}, make([]float32, 127), "need 128 input"},
		{"fp32 nan", FP32, []int64{2}, []float32{1, float32(math.NaN())}, "element 1 [1] is NaN"},
		{"bf16 overflow", BF16, []int64{1, 2}, []float32{1, 3.4e38}, "not finite in bf16"},
		{"int32 fraction", Int32, []int64{2}, []float32{1, 2.5}, "not an int32"},
		{"fp8 inf", FP8Row, []int64{2, 4}, []float32{0, 0, 0, 0, 1, float32(math.Inf(1)), 0, 0}, "row 1: column 1 is +Inf"},
		{"nvfp4 nan", NVFP4, []int64{128, 64}, append(make([]float32, 100), float32(math.NaN())), "element 100 is NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.x) < 8192 && tc.f == NVFP4 && tc.shape[0] == 128 {
				tc.x = append(tc.x, make([]float32, 128*64-len(tc.x))...)
			}
			_, err := Encode(tc.f, tc.shape, tc.x)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if err := EncodeRows(NVFP4, []int64{128, 64}, make([]float32, 64), 0, 1, make([]byte, 8192)); err == nil {
		t.Error("EncodeRows accepted NVFP4 without a divisor")
	}
}
