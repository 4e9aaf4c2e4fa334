package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// BF16ToF32 widens a bfloat16 bit pattern (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to bfloat16, nearest-even; NaN stays a quiet NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToF32 widens an IEEE binary16 bit pattern (exact, subnormals included).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man × 2^-24, exact in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// F32ToF16 rounds to IEEE binary16, nearest-even, with overflow to ±Inf,
// gradual underflow and NaN kept quiet.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x477ff000: // ≥ 65520 rounds to Inf
		return sign | 0x7c00
	case a >= 0x38800000: // normal half range (≥ 2^-14)
		r := a + 0xfff + (a>>13)&1
		return sign | uint16((r-0x38000000)>>13)
	case a < 0x33000000: // < 2^-25 rounds to zero
		return sign
	}
	// Subnormal half: value = a_man × 2^(e-150); result units of 2^-24.
	e := a >> 23
	m := a&0x7fffff | 0x800000
	shift := 126 - e // e in [102,112]: shift in [14,24]
	r := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

var (
	f16Once  sync.Once
	f16Table *[65536]float32
)

func f16Lookup() *[65536]float32 {
	f16Once.Do(func() {
		t := new([65536]float32)
		for i := range t {
			t[i] = F16ToF32(uint16(i))
		}
		f16Table = t
	})
	return f16Table
}

// DecodeF32 converts len(dst) elements of little-endian BF16, F16 or F32 data
// in src to float32. src must hold exactly len(dst) elements.
func DecodeF32(d DType, src []byte, dst []float32) error {
	n := len(dst)
	switch d {
	case BF16:
		if len(src) != 2*n {
			return fmt.Errorf("decode %s: %d bytes for %d elements", d, len(src), n)
		}
		decodeBF16(src, dst)
	case F16:
		if len(src) != 2*n {
			return fmt.Errorf("decode %s: %d bytes for %d elements", d, len(src), n)
		}
		t := f16Lookup()
		for i := range dst {
			dst[i] = t[binary.LittleEndian.Uint16(src[2*i:])]
		}
	case F32:
		if len(src) != 4*n {
			return fmt.Errorf("decode %s: %d bytes for %d elements", d, len(src), n)
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	default:
		return fmt.Errorf("decode: dtype %s cannot be converted to float32", d)
	}
	return nil
}

func decodeBF16(src []byte, dst []float32) {
	// Four at a time from one 64-bit load.
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		v := binary.LittleEndian.Uint64(src[2*i:])
		d := dst[i : i+4 : i+4]
		d[0] = math.Float32frombits(uint32(v) << 16)
		d[1] = math.Float32frombits(uint32(v>>16) << 16)
		d[2] = math.Float32frombits(uint32(v>>32) << 16)
		d[3] = math.Float32frombits(uint32(v>>48) << 16)
	}
	for ; i < len(dst); i++ {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// EncodeF32 converts src to little-endian d (BF16, F16 or F32) with
// round-to-nearest-even, appending to out.
func EncodeF32(d DType, src []float32, out []byte) ([]byte, error) {
	switch d {
	case BF16:
		for _, v := range src {
			out = binary.LittleEndian.AppendUint16(out, F32ToBF16(v))
		}
	case F16:
		for _, v := range src {
			out = binary.LittleEndian.AppendUint16(out, F32ToF16(v))
		}
	case F32:
		for _, v := range src {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	default:
		return out, fmt.Errorf("encode: dtype %s is not a float dtype", d)
	}
	return out, nil
}

// FirstNonFinite returns the index of the first NaN or ±Inf element of
// little-endian BF16, F16 or F32 data, or -1 if every element is finite.
func FirstNonFinite(d DType, src []byte) (int64, error) {
	switch d {
	case BF16:
		for i := 0; i+1 < len(src); i += 2 {
			if binary.LittleEndian.Uint16(src[i:])&0x7f80 == 0x7f80 {
				return int64(i / 2), nil
			}
		}
	case F16:
		for i := 0; i+1 < len(src); i += 2 {
			if binary.LittleEndian.Uint16(src[i:])&0x7c00 == 0x7c00 {
				return int64(i / 2), nil
			}
		}
	case F32:
		for i := 0; i+3 < len(src); i += 4 {
			if binary.LittleEndian.Uint32(src[i:])&0x7f800000 == 0x7f800000 {
				return int64(i / 4), nil
			}
		}
	default:
		return -1, fmt.Errorf("finite check: dtype %s is not a float dtype", d)
	}
	return -1, nil
}
