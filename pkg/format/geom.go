package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// geom is the row view of a tensor shared by the encoders, decoders and the
// validator. Quantized formats are rank-2 [N,K]; a contiguous tensor of shape
// [d0, d1, ...] is viewed as N = d0 rows of K = d1·d2·... elements (a scalar
// is one row of one element).
type geom struct {
	f     Format
	shape []int64
	n, k  int64
	size  int64
	grp   GroupParams
	rs    RowSplitGeometry
	nv    NVFP4Geometry
	f8    FP8RowGeometry
}

func newGeom(f Format, shape []int64) (geom, error) {
	size, err := EncodedSize(f, shape)
	if err != nil {
		return geom{}, fmt.Errorf("%s %v: %w", f, shape, err)
	}
	g := geom{f: f, shape: append([]int64(nil), shape...), size: size}
	switch f {
	case BF16, FP32, Int32:
		elems, _ := Elements(shape)
		g.n = 1
		if len(shape) > 0 {
			g.n = shape[0]
		}
		g.k = elems / g.n
	case NVFP4:
		g.n, g.k = shape[0], shape[1]
		g.nv, _ = NVFP4Layout(g.n, g.k)
	case FP8Row:
		g.n, g.k = shape[0], shape[1]
		g.f8, _ = FP8RowLayout(g.n, g.k)
	default:
		g.n, g.k = shape[0], shape[1]
		g.grp, _ = f.Group()
		g.rs, _ = RowSplitLayout(f, g.n, g.k)
	}
	return g, nil
}

// checkRows validates a row range against the tensor.
func (g *geom) checkRows(r0, r1 int64) error {
	if r0 < 0 || r1 < r0 || r1 > g.n {
		return fmt.Errorf("%s %v: row range [%d,%d) is outside [0,%d)", g.f, g.shape, r0, r1, g.n)
	}
	return nil
}

// checkObject validates the length of an encoded object buffer.
func (g *geom) checkObject(data []byte, exact bool) error {
	if exact && int64(len(data)) != g.size || int64(len(data)) < g.size {
		return fmt.Errorf("%s %v: object is %d bytes, want %d", g.f, g.shape, len(data), g.size)
	}
	return nil
}

// Source is the element encoding of raw (byte-slice) encoder input, e.g. a
// safetensors payload. All are little-endian.
type Source int

// Raw input element encodings.
const (
	SourceF32  Source = iota // IEEE binary32
	SourceBF16               // bfloat16
	SourceF16                // IEEE binary16
)

// Width returns the element width in bytes.
func (s Source) Width() int {
	if s == SourceF32 {
		return 4
	}
	return 2
}

func (s Source) String() string {
	switch s {
	case SourceF32:
		return "f32"
	case SourceBF16:
		return "bf16"
	case SourceF16:
		return "f16"
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// widen converts len(dst) raw elements of src to float32.
func widen(dst []float32, st Source, src []byte) {
	switch st {
	case SourceF32:
		src = src[:4*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case SourceBF16:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case SourceF16:
		src = src[:2*len(dst)]
		for i := range dst {
			dst[i] = f16Table[binary.LittleEndian.Uint16(src[2*i:])]
		}
	}
}

// Amax returns max|x| over src, failing on the first NaN or ±Inf.
func Amax(src []float32) (float32, error) {
	m, bad := amax(src)
	if bad >= 0 {
		return 0, fmt.Errorf("element %d is %v", bad, src[bad])
	}
	return m, nil
}

// amax returns max|x| over src and the index of the first non-finite
// element, or -1 when all are finite.
func amax(src []float32) (float32, int) {
	// Max over the magnitude bits: for finite floats the order of the bit
	// patterns is the order of the values, and any NaN or ±Inf has bits
	// ≥ 0x7f800000, so one comparison at the end finds them.
	const absMask, infBits = 1<<31 - 1, 0x7f800000
	var m0, m1, m2, m3 uint32
	i := 0
	for ; i+4 <= len(src); i += 4 {
		m0 = max(m0, math.Float32bits(src[i])&absMask)
		m1 = max(m1, math.Float32bits(src[i+1])&absMask)
		m2 = max(m2, math.Float32bits(src[i+2])&absMask)
		m3 = max(m3, math.Float32bits(src[i+3])&absMask)
	}
	for ; i < len(src); i++ {
		m0 = max(m0, math.Float32bits(src[i])&absMask)
	}
	m := max(m0, m1, m2, m3)
	if m >= infBits {
		for j, v := range src {
			if math.Float32bits(v)&absMask >= infBits {
				return 0, j
			}
		}
	}
	return math.Float32frombits(m), -1
}

// AmaxRaw returns max|x| over raw little-endian elements, failing on the
// first NaN or ±Inf.
func AmaxRaw(st Source, src []byte) (float32, error) {
	if st != SourceF32 && st != SourceBF16 && st != SourceF16 {
		return 0, fmt.Errorf("unknown source encoding %v", st)
	}
	w := st.Width()
	if len(src)%w != 0 {
		return 0, fmt.Errorf("%s input of %d bytes is not a whole number of elements", st, len(src))
	}
	var buf [4096]float32
	var m float32
	for off := 0; off < len(src); {
		n := min((len(src)-off)/w, len(buf))
		widen(buf[:n], st, src[off:])
		a, bad := amax(buf[:n])
		if bad >= 0 {
			return 0, fmt.Errorf("element %d is %v", off/w+bad, buf[bad])
		}
		m = max(m, a)
		off += n * w
	}
	return m, nil
}
