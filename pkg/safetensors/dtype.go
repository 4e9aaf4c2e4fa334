// Package safetensors reads and writes the Hugging Face safetensors format:
// an 8-byte little-endian header length N, N bytes of JSON header
// ({name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}), then
// the data buffer that the offsets index. Files are memory-mapped read-only
// and every header field is validated with overflow-safe arithmetic before
// any view into the buffer is handed out.
package safetensors

import (
	"fmt"
	"math/bits"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// DType is a safetensors element type, spelled as in the header.
type DType string

// Known safetensors dtypes.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	U16    DType = "U16"
	I16    DType = "I16"
	U32    DType = "U32"
	I32    DType = "I32"
	U64    DType = "U64"
	I64    DType = "I64"
	F16    DType = "F16"
	BF16   DType = "BF16"
	F32    DType = "F32"
	F64    DType = "F64"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	F8E8M0 DType = "F8_E8M0"
	F6E2M3 DType = "F6_E2M3"
	F6E3M2 DType = "F6_E3M2"
	F4     DType = "F4"
	C64    DType = "C64"
)

// dtypeBits is the element width in bits of every known dtype.
var dtypeBits = map[DType]uint64{
	BOOL: 8, U8: 8, I8: 8, F8E4M3: 8, F8E5M2: 8, F8E8M0: 8,
	U16: 16, I16: 16, F16: 16, BF16: 16,
	U32: 32, I32: 32, F32: 32,
	U64: 64, I64: 64, F64: 64, C64: 64,
	F6E2M3: 6, F6E3M2: 6, F4: 4,
}

// Bits returns the element width in bits, or 0 for an unknown dtype.
func (d DType) Bits() int { return int(dtypeBits[d]) }

// Known reports whether d is a dtype this package can size.
func (d DType) Known() bool { return dtypeBits[d] != 0 }

// ByteSize returns the exact byte size of a tensor of dtype d and the given
// shape. It fails on an unknown dtype, a negative dimension, a size that
// overflows int64, or sub-byte elements that do not fill whole bytes.
func ByteSize(d DType, shape []int64) (int64, error) {
	b := dtypeBits[d]
	if b == 0 {
		return 0, fmt.Errorf("unknown dtype %s", termsafe.Quote(string(d)))
	}
	n := uint64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", s, shape)
		}
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > 1<<62 {
			return 0, fmt.Errorf("shape %v: element count overflows", shape)
		}
		n = lo
	}
	hi, total := bits.Mul64(n, b)
	if hi != 0 || total > 1<<62 {
		return 0, fmt.Errorf("shape %v × %d bits overflows", shape, b)
	}
	if total%8 != 0 {
		return 0, fmt.Errorf("shape %v of %s is %d bits, not a whole number of bytes", shape, d, total)
	}
	return int64(total / 8), nil
}

// NumElements returns the product of shape (1 for a scalar); the caller must
// have validated it with ByteSize.
func NumElements(shape []int64) int64 {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	return n
}
