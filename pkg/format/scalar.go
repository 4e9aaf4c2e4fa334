package format

import "math"

// Scalar conversions between float32 and the small floating-point types used
// by the tensor formats: bfloat16, IEEE binary16 (f16), OCP FP8 E4M3FN and
// FP4 E2M1. Every encoder rounds to nearest, ties to even (RNE). The rules
// for overflow, NaN and signed zero are stated per function and in
// docs/FORMATS-TENSOR.md §1.

// maxF32 is the largest finite float32.
const maxF32 = math.MaxFloat32

// isFinite32 reports whether v is neither NaN nor ±Inf.
func isFinite32(v float32) bool { return v-v == 0 }

// F32ToBF16 converts v to bfloat16 with RNE. Overflow rounds to ±Inf as IEEE
// requires; NaN becomes a quiet NaN (0x7FC0 with v's sign).
func F32ToBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16)&0x8000 | 0x7FC0
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// F32ToBF16Up converts a non-negative finite v to the smallest bfloat16
// value ≥ v (rounding toward +Inf). It is used for row scales, which must
// never be smaller than the exact quotient so that codes fit.
func F32ToBF16Up(v float32) uint16 {
	b := math.Float32bits(v)
	h := uint16(b >> 16)
	if b&0xFFFF != 0 {
		h++
	}
	return h
}

// BF16ToF32 widens a bfloat16 value; it is exact.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToF16 converts v to IEEE binary16 with RNE, including gradual underflow
// to f16 subnormals. Finite values that round beyond 65504 become ±Inf; NaN
// becomes a quiet NaN (0x7E00 with v's sign); the sign of zero is kept.
func F32ToF16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xFF
	mant := b & 0x7FFFFF
	if exp == 0xFF {
		if mant != 0 {
			return sign | 0x7E00
		}
		return sign | 0x7C00
	}
	he := exp - 127 + 15 // biased f16 exponent
	if he >= 0x1F {
		return sign | 0x7C00
	}
	if he <= 0 {
		// f16 subnormal (or zero): the code is the value in units of 2^-24.
		if he < -10 {
			return sign // below half the smallest subnormal: rounds to ±0
		}
		m := mant | 0x800000
		shift := uint(14 - he)
		r := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++ // may carry into the smallest normal, 0x0400, which is correct
		}
		return sign | uint16(r)
	}
	r := uint32(he)<<10 | mant>>13
	rem := mant & 0x1FFF
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // a carry out of the mantissa bumps the exponent; 0x7C00 is Inf
	}
	return sign | uint16(r)
}

// f16Table holds the float32 value of every binary16 bit pattern.
var f16Table = func() *[65536]float32 {
	var t [65536]float32
	for i := range t {
		t[i] = f16Decode(uint16(i))
	}
	return &t
}()

// f16Decode computes the float32 value of a binary16 word (exact).
func f16Decode(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	mant := uint32(h & 0x3FF)
	switch {
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	default:
		v := float32(mant) * (1.0 / (1 << 24)) // exact: mant < 2^10
		if sign != 0 {
			v = -v
		}
		return v
	}
}

// F16ToF32 widens a binary16 value; it is exact.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// E4M3 is the OCP FP8 E4M3FN encoding: sign, 4 exponent bits (bias 7),
// 3 mantissa bits, no infinities; 0x7F and 0xFF are NaN; the largest finite
// magnitude is 448 (0x7E) and the smallest subnormal is 2^-9 (0x01).
const (
	E4M3Max    = 448.0
	E4M3MaxHex = 0x7E
)

// e4m3Table holds the float32 value of every E4M3FN byte (NaN for 0x7F/0xFF).
var e4m3Table = func() *[256]float32 {
	var t [256]float32
	for i := range t {
		c := uint8(i)
		e := int(c>>3) & 0xF
		m := float64(c & 7)
		var v float64
		switch {
		case c&0x7F == 0x7F:
			v = math.NaN()
		case e == 0:
			v = m / 8 * math.Ldexp(1, -6)
		default:
			v = (1 + m/8) * math.Ldexp(1, e-7)
		}
		if c&0x80 != 0 {
			v = -v
		}
		t[i] = float32(v)
	}
	return &t
}()

// E4M3ToF32 decodes an E4M3FN byte; 0x7F and 0xFF decode to NaN.
func E4M3ToF32(c uint8) float32 { return e4m3Table[c] }

// F32ToE4M3 encodes v as E4M3FN with RNE and saturation ("satfinite"):
// finite magnitudes above 448 and ±Inf become ±448 (0x7E/0xFE); NaN becomes
// 0x7F. A value whose magnitude rounds to zero is encoded as +0 (0x00), so
// the encoder never emits 0x80. 0xFF is never produced.
func F32ToE4M3(v float32) uint8 {
	b := math.Float32bits(v)
	if b&0x7FFFFFFF > 0x7F800000 {
		return 0x7F
	}
	mag := f32ToE4M3Mag(math.Float32frombits(b & 0x7FFFFFFF))
	if mag == 0 {
		return 0
	}
	return mag | uint8(b>>24)&0x80
}

// f32ToE4M3Mag encodes a non-negative, non-NaN magnitude with RNE and
// saturation to 0x7E.
func f32ToE4M3Mag(a float32) uint8 {
	b := math.Float32bits(a)
	exp := int(b>>23) & 0xFF
	if exp-127 > 8 {
		return E4M3MaxHex
	}
	if exp-127 < -6 {
		// Subnormal range: the code is the value in units of 2^-9; the
		// product is exact and RoundToEven gives RNE. 8 is the smallest normal.
		return uint8(math.RoundToEven(float64(a) * 512))
	}
	mant := b & 0x7FFFFF
	r := uint32(exp-127+7)<<3 | mant>>20
	rem := mant & 0xFFFFF
	if rem > 0x80000 || (rem == 0x80000 && r&1 == 1) {
		r++
	}
	if r > E4M3MaxHex {
		return E4M3MaxHex
	}
	return uint8(r)
}

// f32ToE4M3Up returns the smallest non-negative E4M3FN code whose value is
// ≥ a (a ≥ 0, not NaN), saturating at 0x7E.
func f32ToE4M3Up(a float32) uint8 {
	c := f32ToE4M3Mag(a)
	if e4m3Table[c] < a && c < E4M3MaxHex {
		c++
	}
	return c
}

// E2M1 is the FP4 E2M1 encoding of NVFP4 codes: bit 3 is the sign and words
// 0..7 have the magnitudes below. All 16 words are valid (0x8 is -0).
var e2m1Mag = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// E2M1ToF32 decodes a 4-bit E2M1 word (the low nibble of c).
func E2M1ToF32(c uint8) float32 {
	v := e2m1Mag[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// F32ToE2M1 encodes v as E2M1 with RNE and saturation: magnitudes above 6
// (and ±Inf) become ±6. A magnitude that rounds to zero is encoded as +0
// (word 0), never -0. NaN saturates like +Inf; callers reject NaN
// beforehand. The encode is branch-free.
func F32ToE2M1(v float32) uint8 {
	b := math.Float32bits(v)
	c := e2m1MagCode(b & 0x7FFFFFFF)
	sign := uint8(b>>28) & 8
	return c | sign&-((c+7)>>3) // keep the sign only for a nonzero word
}

// e2m1Thresholds are float32 bit patterns t such that a magnitude with bits
// b rounds past one more E2M1 word exactly when b > t. Ties go to the even
// word: 0.25→0, 0.75→1.0, 1.25→1.0, 1.75→2, 2.5→2, 3.5→4, 5→4, so the
// thresholds at 0.75, 1.75 and 3.5 are one ulp lower (b ≥ t').
var e2m1Thresholds = [7]uint32{
	0x3E800000,     // 0.25
	0x3F400000 - 1, // 0.75
	0x3FA00000,     // 1.25
	0x3FE00000 - 1, // 1.75
	0x40200000,     // 2.5
	0x40600000 - 1, // 3.5
	0x40A00000,     // 5
}

// e2m1MagCode rounds a non-negative magnitude, given as float32 bits (which
// order like the values), to the nearest E2M1 word 0..7.
func e2m1MagCode(b uint32) uint8 {
	var c uint32
	for _, t := range e2m1Thresholds {
		c += (t - b) >> 31
	}
	return uint8(c)
}
