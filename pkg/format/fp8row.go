package format

import (
	"encoding/binary"
	"fmt"
)

// FP8 row-scaled format (fp8_e4m3fn_row_bf16, row_scale_v1): E4M3FN codes
// row-major, then one bf16 multiplier scale per row; w = e4m3(c) · bf16(s).
// See docs/FORMATS-TENSOR.md §5.

// FP8RowScale returns the bf16 row scale the encoder uses for a row whose
// max|x| is amax: +0 for amax 0, else the smallest bf16 ≥ f32(amax/448)
// (rounded up so that codes fit under 448), with a zero result replaced by
// the smallest bf16 subnormal 0x0001.
func FP8RowScale(amax float32) uint16 {
	if amax == 0 {
		return 0
	}
	s := F32ToBF16Up(amax / E4M3Max)
	if s == 0 {
		s = 1
	}
	return s
}

// encodeFP8Row encodes one row; codes get f32ToE4M3(f32(x/s)).
func encodeFP8Row(x []float32, codes []byte, scale []byte) error {
	am, bad := amax(x)
	if bad >= 0 {
		return fmt.Errorf("column %d is %v", bad, x[bad])
	}
	s := FP8RowScale(am)
	binary.LittleEndian.PutUint16(scale, s)
	if s == 0 {
		clear(codes)
		return nil
	}
	sv := BF16ToF32(s)
	for i, v := range x {
		codes[i] = F32ToE4M3(v / sv)
	}
	return nil
}

// decodeFP8Row decodes one row into dst.
func decodeFP8Row(codes []byte, scale []byte, dst []float32) {
	s := BF16ToF32(binary.LittleEndian.Uint16(scale))
	for i, c := range codes {
		dst[i] = e4m3Table[c] * s
	}
}

// validateFP8 checks every code and row scale of the object.
func (g *geom) validateFP8(data []byte) error {
	for n := int64(0); n < g.n; n++ {
		sb := binary.LittleEndian.Uint16(data[g.f8.ScaleOff+2*n:])
		if sb&0x8000 != 0 || sb&0x7F80 == 0x7F80 {
			return fmt.Errorf("%s %v: row %d: scale 0x%04x is not +0 or a finite positive bf16", g.f, g.shape, n, sb)
		}
		codes := data[n*g.k : (n+1)*g.k]
		for k, c := range codes {
			switch {
			case c&0x7F == 0x7F:
				return fmt.Errorf("%s %v: row %d column %d: illegal code 0x%02x (NaN)", g.f, g.shape, n, k, c)
			case sb == 0 && c&0x7F != 0:
				return fmt.Errorf("%s %v: row %d column %d: code 0x%02x under a +0 row scale", g.f, g.shape, n, k, c)
			}
		}
	}
	return nil
}
