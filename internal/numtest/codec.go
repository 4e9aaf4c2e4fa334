package numtest

import "math"

// F16ToF64 decodes an IEEE binary16 value in float64 from the definition
// (subnormals, ±Inf, NaN; the sign of zero is kept). It is the reference the
// kernels' half-precision conversions are checked against.
func F16ToF64(h uint16) float64 {
	e, m := int(h>>10)&31, float64(h&0x3ff)
	var v float64
	switch {
	case e == 31 && m == 0:
		v = math.Inf(1)
	case e == 31:
		return math.NaN()
	case e == 0:
		v = math.Ldexp(m, -24)
	default:
		v = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		return -v
	}
	return v
}

// E4M3ToF64 decodes an OCP FP8 E4M3 (fn) value in float64: no infinities,
// S.1111.111 is NaN, the largest finite magnitude is 448.
func E4M3ToF64(b uint8) float64 {
	e, m := int(b>>3)&15, float64(b&7)
	if e == 15 && m == 7 {
		return math.NaN()
	}
	v := math.Ldexp(8+m, e-10)
	if e == 0 {
		v = math.Ldexp(m, -9)
	}
	if b&0x80 != 0 {
		return -v
	}
	return v
}

// BF16ToF64 decodes a bfloat16 bit pattern (the top half of a float32).
func BF16ToF64(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }
