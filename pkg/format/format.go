// Package format defines the tensor storage formats of the .ninfer container:
// their names (v3 lowercase and v2 uppercase), storage layouts, exact encoded
// byte sizes, and (in sibling files) the canonical encoders and reference
// decoders. The container is specified in docs/FORMAT.md; tensor byte
// layouts, encoder algorithms, decode formulas and error bounds in
// docs/FORMATS-TENSOR.md.
package format

import (
	"fmt"
	"math/bits"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Format is a tensor storage format, named by its v3 string.
type Format string

// The tensor formats of container v3.
const (
	BF16     Format = "bf16"
	FP32     Format = "fp32"
	Int32    Format = "int32"
	Q4G64    Format = "q4_g64_fp16"
	Q5G64    Format = "q5_g64_fp16"
	Q6G64    Format = "q6_g64_fp16"
	Q8G32    Format = "q8_g32_fp16"
	NVFP4    Format = "nvfp4"
	FP8Row   Format = "fp8_e4m3fn_row_bf16"
	RawBytes Format = "raw_bytes_v1" // resource encoding, not a tensor format
)

// Layout is a storage layout, named by its v3 string.
type Layout string

// The storage layouts of container v3.
const (
	Contiguous Layout = "contiguous_le_v1"
	RowSplit   Layout = "row_split_k128_v1"
	BlockScale Layout = "block_scale_k16_m128x4_v1"
	RowScale   Layout = "row_scale_v1"
)

// TensorAlignment is the payload alignment of every tensor object.
const TensorAlignment = 256

// All lists every tensor format in a stable order.
var All = []Format{BF16, FP32, Int32, Q4G64, Q5G64, Q6G64, Q8G32, NVFP4, FP8Row}

var v2Names = map[string]Format{
	"BF16": BF16, "FP32": FP32, "I32": Int32,
	"Q4G64_F16S": Q4G64, "Q5G64_F16S": Q5G64, "Q6G64_F16S": Q6G64,
	"W8G32_F16S": Q8G32, "NVFP4": NVFP4, "FP8_E4M3FN_ROW_BF16S": FP8Row,
}

var v2Layouts = map[string]Layout{
	"contiguous-le-v1": Contiguous, "row-split-k128-v1": RowSplit,
	"blockscale-k16-m128x4-v1": BlockScale, "row-scale-v1": RowScale,
}

// Parse returns the format named by a v3 string.
func Parse(name string) (Format, error) {
	f := Format(name)
	for _, k := range All {
		if k == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown tensor format %s", termsafe.Quote(name))
}

// ParseV2 returns the format named by a v2 (uppercase) string.
func ParseV2(name string) (Format, error) {
	if f, ok := v2Names[name]; ok {
		return f, nil
	}
	return "", fmt.Errorf("unknown v2 tensor format %s", termsafe.Quote(name))
}

// ParseLayout returns the layout named by a v3 string.
func ParseLayout(name string) (Layout, error) {
	switch l := Layout(name); l {
	case Contiguous, RowSplit, BlockScale, RowScale:
		return l, nil
	}
	return "", fmt.Errorf("unknown storage layout %s", termsafe.Quote(name))
}

// ParseLayoutV2 returns the layout named by a v2 string.
func ParseLayoutV2(name string) (Layout, error) {
	if l, ok := v2Layouts[name]; ok {
		return l, nil
	}
	return "", fmt.Errorf("unknown v2 storage layout %s", termsafe.Quote(name))
}

// LayoutOf returns the one storage layout a format is stored in.
func (f Format) LayoutOf() Layout {
	switch f {
	case Q4G64, Q5G64, Q6G64, Q8G32:
		return RowSplit
	case NVFP4:
		return BlockScale
	case FP8Row:
		return RowScale
	default:
		return Contiguous
	}
}

// GroupParams describes a grouped-integer (row_split_k128_v1) format.
type GroupParams struct {
	Bits      int // code width
	Group     int // elements per group along K
	BaseBytes int // bytes per group in the base plane
	HighBytes int // bytes per group in the high-bit plane
	QMax      int // largest code magnitude
}

// Group returns the grouped-integer parameters of f, or ok=false.
func (f Format) Group() (GroupParams, bool) {
	switch f {
	case Q4G64:
		return GroupParams{4, 64, 32, 0, 7}, true
	case Q5G64:
		return GroupParams{5, 64, 32, 8, 15}, true
	case Q6G64:
		return GroupParams{6, 64, 32, 16, 31}, true
	case Q8G32:
		return GroupParams{8, 32, 32, 0, 127}, true
	}
	return GroupParams{}, false
}

// IsQuantized reports whether f is a block/group-quantized matrix format.
func (f Format) IsQuantized() bool {
	switch f {
	case Q4G64, Q5G64, Q6G64, Q8G32, NVFP4, FP8Row:
		return true
	}
	return false
}

// AlignUp rounds v up to a multiple of a (a > 0).
func AlignUp(v, a int64) int64 { return (v + a - 1) / a * a }

// mul multiplies non-negative int64 values, failing on overflow.
func mul(a, b int64) (int64, error) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("size overflow")
	}
	return int64(lo), nil
}

// Elements returns the element count of shape (1 for a scalar).
func Elements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d <= 0 {
			return 0, fmt.Errorf("shape %v has a non-positive dimension", shape)
		}
		var err error
		if n, err = mul(n, d); err != nil {
			return 0, fmt.Errorf("shape %v: %w", shape, err)
		}
	}
	return n, nil
}

// RowSplitGeometry is the plane layout of a row_split_k128_v1 tensor.
type RowSplitGeometry struct {
	N, K, KPad, GroupsPerRow   int64
	BaseOff, HighOff, ScaleOff int64 // plane offsets within the object
	BaseBytes, HighBytes       int64 // per-group plane widths
	Bytes                      int64 // total object size
}

// RowSplitLayout returns the plane geometry of an [N,K] tensor in format f.
func RowSplitLayout(f Format, n, k int64) (RowSplitGeometry, error) {
	p, ok := f.Group()
	if !ok {
		return RowSplitGeometry{}, fmt.Errorf("format %s is not a row_split_k128_v1 format", f)
	}
	if n <= 0 || k <= 0 {
		return RowSplitGeometry{}, fmt.Errorf("format %s needs a positive [N,K] shape, got [%d,%d]", f, n, k)
	}
	g := RowSplitGeometry{N: n, K: k, KPad: AlignUp(k, 128), BaseBytes: int64(p.BaseBytes), HighBytes: int64(p.HighBytes)}
	g.GroupsPerRow = g.KPad / int64(p.Group)
	groups, err := mul(n, g.GroupsPerRow)
	if err != nil {
		return g, err
	}
	base, err := mul(groups, g.BaseBytes)
	if err != nil {
		return g, err
	}
	high := groups * g.HighBytes
	g.HighOff = AlignUp(base, 256)
	g.ScaleOff = g.HighOff + AlignUp(high, 256)
	g.Bytes = g.ScaleOff + groups*2
	return g, nil
}

// NVFP4Geometry is the byte layout of a block_scale_k16_m128x4_v1 tensor.
type NVFP4Geometry struct {
	N, K                            int64
	CodeBytes, ScaleOff, ScaleBytes int64
	DivisorOff, Bytes               int64
}

// NVFP4Layout returns the byte layout of an [N,K] NVFP4 tensor.
func NVFP4Layout(n, k int64) (NVFP4Geometry, error) {
	if n <= 0 || k <= 0 || n%128 != 0 || k%64 != 0 {
		return NVFP4Geometry{}, fmt.Errorf("nvfp4 needs N%%128 == 0 and K%%64 == 0, got [%d,%d]", n, k)
	}
	code, err := mul(n, k/2)
	if err != nil {
		return NVFP4Geometry{}, err
	}
	g := NVFP4Geometry{N: n, K: k, CodeBytes: code, ScaleOff: AlignUp(code, 256), ScaleBytes: n * (k / 16)}
	g.DivisorOff = g.ScaleOff + g.ScaleBytes
	g.Bytes = g.DivisorOff + 4
	return g, nil
}

// FP8RowGeometry is the byte layout of a row_scale_v1 tensor.
type FP8RowGeometry struct {
	N, K, ScaleOff, Bytes int64
}

// FP8RowLayout returns the byte layout of an [N,K] FP8 row-scaled tensor.
func FP8RowLayout(n, k int64) (FP8RowGeometry, error) {
	if n <= 0 || k <= 0 {
		return FP8RowGeometry{}, fmt.Errorf("fp8_e4m3fn_row_bf16 needs a positive [N,K] shape, got [%d,%d]", n, k)
	}
	codes, err := mul(n, k)
	if err != nil {
		return FP8RowGeometry{}, err
	}
	g := FP8RowGeometry{N: n, K: k, ScaleOff: AlignUp(codes, 256)}
	g.Bytes = g.ScaleOff + 2*n
	return g, nil
}

// CheckShape reports whether shape is valid for format f.
func CheckShape(f Format, shape []int64) error {
	_, err := EncodedSize(f, shape)
	return err
}

// EncodedSize returns the exact object size in bytes of a tensor of the
// given shape stored in format f.
func EncodedSize(f Format, shape []int64) (int64, error) {
	switch f {
	case BF16, FP32, Int32:
		if len(shape) > 16 {
			return 0, fmt.Errorf("format %s supports rank ≤ 16, got rank %d", f, len(shape))
		}
		n, err := Elements(shape)
		if err != nil {
			return 0, err
		}
		w := int64(4)
		if f == BF16 {
			w = 2
		}
		return mul(n, w)
	case Q4G64, Q5G64, Q6G64, Q8G32, NVFP4, FP8Row:
		if len(shape) != 2 {
			return 0, fmt.Errorf("format %s needs a rank-2 [N,K] shape, got %v", f, shape)
		}
		switch f {
		case NVFP4:
			g, err := NVFP4Layout(shape[0], shape[1])
			return g.Bytes, err
		case FP8Row:
			g, err := FP8RowLayout(shape[0], shape[1])
			return g.Bytes, err
		default:
			g, err := RowSplitLayout(f, shape[0], shape[1])
			return g.Bytes, err
		}
	}
	return 0, fmt.Errorf("unknown tensor format %s", termsafe.Quote(string(f)))
}
