package format

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestValidateCorruptions starts from valid encoder output and applies one
// corruption at a time; Validate must reject each with an error naming the
// place, and accept the untouched object.
func TestValidateCorruptions(t *testing.T) {
	r := newRNG(t)
	type corruption struct {
		name    string
		f       Format
		shape   []int64
		mutate  func(t *testing.T, data []byte)
		wantErr string
	}
	put16 := func(off int64, v uint16) func(*testing.T, []byte) {
		return func(_ *testing.T, d []byte) { binary.LittleEndian.PutUint16(d[off:], v) }
	}
	q4, _ := RowSplitLayout(Q4G64, 3, 130)
	q5, _ := RowSplitLayout(Q5G64, 3, 130)
	q8, _ := RowSplitLayout(Q8G32, 3, 130)
	nv, _ := NVFP4Layout(128, 128)
	f8, _ := FP8RowLayout(3, 40)
	// scaleOf returns the scale-plane offset of (row, group) in q4/q5/q8 [3,130].
	scaleOf := func(g RowSplitGeometry, row, gi int64) int64 { return g.ScaleOff + 2*(row*g.GroupsPerRow+gi) }
	tests := []corruption{
		{"q4 negative scale", Q4G64, []int64{3, 130}, put16(scaleOf(q4, 1, 0), 0xBC00), "row 1: group 0 (columns 0..63): scale 0xbc00"},
		{"q4 -0 scale", Q4G64, []int64{3, 130}, put16(scaleOf(q4, 2, 1), 0x8000), "row 2: group 1"},
		{"q4 inf scale", Q4G64, []int64{3, 130}, put16(scaleOf(q4, 0, 1), 0x7C00), "scale 0x7c00"},
		{"q4 nan scale", Q4G64, []int64{3, 130}, put16(scaleOf(q4, 0, 2), 0x7E01), "row 0: group 2"},
		{"q4 zero scale with codes", Q4G64, []int64{3, 130}, put16(scaleOf(q4, 1, 1), 0), "code"},
		{"q4 padding column code", Q4G64, []int64{3, 130}, func(_ *testing.T, d []byte) {
			// Row 0 group 2 covers columns 128..191; column 131 is lane 3:
			// the high nibble of base byte 1 of that group.
			d[2*q4.BaseBytes+1] |= 0x10
		}, "padding column 131"},
		{"q4 padded group scale", Q4G64, []int64{3, 130}, put16(scaleOf(q4, 2, 3), 0x3C00), "row 2: group 3 (columns 192..255): wholly padded"},
		{"q5 padding high bit", Q5G64, []int64{3, 130}, func(_ *testing.T, d []byte) {
			// Row 1 group 2, lane 5 (column 133): high byte 0 bit 5.
			d[q5.HighOff+(1*q5.GroupsPerRow+2)*q5.HighBytes] |= 1 << 5
		}, "row 1: group 2 (columns 128..191): padding column 133"},
		{"q8 code 0x80", Q8G32, []int64{3, 130}, func(_ *testing.T, d []byte) {
			d[(2*q8.GroupsPerRow+1)*32+7] = 0x80 // row 2, group 1, lane 7
		}, "row 2: group 1 (columns 32..63): column 39 has illegal code 0x80"},
		{"nvfp4 scale 0x7f", NVFP4, []int64{128, 128}, func(_ *testing.T, d []byte) {
			d[nv.ScaleOff+NVFP4ScaleOffset(37, 5, 128)] = 0x7F
		}, "row 37 block 5 (columns 80..95): scale byte 0x7f"},
		{"nvfp4 negative scale", NVFP4, []int64{128, 128}, func(_ *testing.T, d []byte) {
			d[nv.ScaleOff+NVFP4ScaleOffset(127, 7, 128)] = 0x80
		}, "row 127 block 7"},
		{"nvfp4 zero divisor", NVFP4, []int64{128, 128}, func(_ *testing.T, d []byte) {
			binary.LittleEndian.PutUint32(d[nv.DivisorOff:], 0)
		}, "weight divisor 0"},
		{"nvfp4 negative divisor", NVFP4, []int64{128, 128}, func(_ *testing.T, d []byte) {
			binary.LittleEndian.PutUint32(d[nv.DivisorOff:], math.Float32bits(-2))
		}, "weight divisor -2"},
		{"nvfp4 inf divisor", NVFP4, []int64{128, 128}, func(_ *testing.T, d []byte) {
			binary.LittleEndian.PutUint32(d[nv.DivisorOff:], 0x7F800000)
		}, "weight divisor +Inf"},
		{"nvfp4 nan divisor", NVFP4, []int64{128, 128}, func(_ *testing.T, d []byte) {
			binary.LittleEndian.PutUint32(d[nv.DivisorOff:], 0x7FC00000)
		}, "weight divisor NaN"},
		{"fp8 code 0x7f", FP8Row, []int64{3, 40}, func(_ *testing.T, d []byte) { d[40+17] = 0x7F }, "row 1 column 17: illegal code 0x7f"},
		{"fp8 code 0xff", FP8Row, []int64{3, 40}, func(_ *testing.T, d []byte) { d[2*40+39] = 0xFF }, "row 2 column 39"},
		{"fp8 negative scale", FP8Row, []int64{3, 40}, put16(f8.ScaleOff+2, 0xBF80), "row 1: scale 0xbf80"},
		{"fp8 nan scale", FP8Row, []int64{3, 40}, put16(f8.ScaleOff+4, 0x7FC0), "row 2: scale 0x7fc0"},
		{"fp8 inf scale", FP8Row, []int64{3, 40}, put16(f8.ScaleOff, 0x7F80), "row 0: scale 0x7f80"},
		{"fp8 zero scale with codes", FP8Row, []int64{3, 40}, put16(f8.ScaleOff+2, 0), "under a +0 row scale"},
		{"bf16 nan", BF16, []int64{4, 5}, put16(2*13, 0x7FC1), "element 13 [2 3]"},
		{"bf16 inf", BF16, []int64{4, 5}, put16(2*19, 0xFF80), "element 19 [3 4]"},
		{"fp32 inf", FP32, []int64{7}, func(_ *testing.T, d []byte) {
			binary.LittleEndian.PutUint32(d[4*6:], 0xFF800000)
		}, "element 6 [6]"},
		{"fp32 nan scalar", FP32, []int64{}, func(_ *testing.T, d []byte) {
			binary.LittleEndian.PutUint32(d, 0x7FC00000)
		}, "element 0 []"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, k := int64(1), int64(1)
			if len(tc.shape) > 0 {
				n = tc.shape[0]
				k, _ = Elements(tc.shape[1:])
			}
			x := randMatrix(r, int(n), int(k))
			for i := range x { // no zero-scale groups/rows: every group is live
				if x[i] == 0 {
					x[i] = 0.5
				}
			}
			enc, err := Encode(tc.f, tc.shape, x)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(tc.f, tc.shape, enc); err != nil {
				t.Fatalf("valid object rejected: %v", err)
			}
			tc.mutate(t, enc)
			err = Validate(tc.f, tc.shape, enc)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidateSize(t *testing.T) {
	for _, f := range All {
		shape := []int64{128, 64}
		enc, err := Encode(f, shape, make([]float32, 128*64))
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(f, shape, enc); err != nil {
			t.Errorf("%s: zero tensor rejected: %v", f, err)
		}
		if err := Validate(f, shape, append(enc, 0)); err == nil || !strings.Contains(err.Error(), "bytes, want") {
			t.Errorf("%s: oversized object: %v", f, err)
		}
		if err := Validate(f, []int64{128, 64, 1, 0}, enc); err == nil {
			t.Errorf("%s: bad shape accepted", f)
		}
	}
}
