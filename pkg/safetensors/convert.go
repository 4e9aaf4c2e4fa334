package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ninfer/ninfer/pkg/format"
)

// The scalar conversions are pkg/format's; these wrappers keep the
// safetensors rule for NaN, which keeps the payload's top bits and sets the
// quiet bit where pkg/format writes the canonical quiet NaN. For every other
// input the two agree bit for bit.

// BF16ToF32 widens a bfloat16 bit pattern (exact).
func BF16ToF32(h uint16) float32 { return format.BF16ToF32(h) }

// F32ToBF16 rounds to bfloat16, nearest-even; NaN stays a quiet NaN.
func F32ToBF16(f float32) uint16 {
	if u := math.Float32bits(f); u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	return format.F32ToBF16(f)
}

// F16ToF32 widens an IEEE binary16 bit pattern (exact, subnormals included).
func F16ToF32(h uint16) float32 { return format.F16ToF32(h) }

// F32ToF16 rounds to IEEE binary16, nearest-even, with overflow to ±Inf,
// gradual underflow and NaN kept quiet.
func F32ToF16(f float32) uint16 {
	if u := math.Float32bits(f); u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16)&0x8000 | 0x7e00 | uint16(u>>13)&0x3ff
	}
	return format.F32ToF16(f)
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
		for i := range dst {
			dst[i] = format.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
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
