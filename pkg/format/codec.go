package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// RowEncoder encodes one tensor into a preallocated object buffer, a range of
// rows at a time. Calls of EncodeRows/EncodeRowsRaw for disjoint row ranges
// write disjoint bytes and may run concurrently on the same buffer; Finish
// writes the bytes no row owns (plane gaps and the NVFP4 divisor). The buffer
// need not be zeroed beforehand: together the calls write every byte.
//
// NVFP4 needs the whole tensor's max|x| before any row: call SetAmax first.
type RowEncoder struct {
	g          geom
	divisor    float32
	hasDivisor bool
}

// NewRowEncoder returns an encoder for a tensor of format f and shape.
func NewRowEncoder(f Format, shape []int64) (*RowEncoder, error) {
	g, err := newGeom(f, shape)
	if err != nil {
		return nil, err
	}
	return &RowEncoder{g: g}, nil
}

// Rows returns the number of rows N (shape[0], 1 for a scalar).
func (e *RowEncoder) Rows() int64 { return e.g.n }

// Cols returns the number of elements per row (K).
func (e *RowEncoder) Cols() int64 { return e.g.k }

// Size returns the encoded object size in bytes.
func (e *RowEncoder) Size() int64 { return e.g.size }

// SetAmax sets the tensor-wide max|x|; NVFP4 derives its weight divisor from
// it (see NVFP4Divisor). Other formats ignore it.
func (e *RowEncoder) SetAmax(amax float32) error {
	if e.g.f != NVFP4 {
		return nil
	}
	d, err := NVFP4Divisor(amax)
	if err != nil {
		return err
	}
	e.divisor, e.hasDivisor = d, true
	return nil
}

// Divisor returns the NVFP4 weight divisor set by SetAmax (0 if unset).
func (e *RowEncoder) Divisor() float32 { return e.divisor }

// EncodeRows encodes rows [r0,r1) from src (row-major, (r1-r0)·K elements)
// into dst, the whole object buffer.
func (e *RowEncoder) EncodeRows(dst []byte, r0, r1 int64, src []float32) error {
	g := &e.g
	if err := e.check(dst, r0, r1, int64(len(src)), "elements"); err != nil {
		return err
	}
	for r := r0; r < r1; r++ {
		if err := e.encodeRow(dst, r, src[(r-r0)*g.k:(r-r0+1)*g.k]); err != nil {
			return err
		}
	}
	return nil
}

// EncodeRowsRaw is EncodeRows for raw little-endian input of encoding st
// (e.g. a bf16 safetensors payload); it widens one row at a time.
func (e *RowEncoder) EncodeRowsRaw(dst []byte, r0, r1 int64, st Source, src []byte) error {
	g := &e.g
	if st != SourceF32 && st != SourceBF16 && st != SourceF16 {
		return fmt.Errorf("%s %v: unknown source encoding %v", g.f, g.shape, st)
	}
	w := int64(st.Width())
	if int64(len(src))%w != 0 {
		return fmt.Errorf("%s %v: %s input of %d bytes is not a whole number of elements", g.f, g.shape, st, len(src))
	}
	if err := e.check(dst, r0, r1, int64(len(src))/w, st.String()+" elements"); err != nil {
		return err
	}
	row := make([]float32, g.k)
	for r := r0; r < r1; r++ {
		widen(row, st, src[(r-r0)*g.k*w:])
		if err := e.encodeRow(dst, r, row); err != nil {
			return err
		}
	}
	return nil
}

func (e *RowEncoder) check(dst []byte, r0, r1, n int64, what string) error {
	g := &e.g
	if err := g.checkRows(r0, r1); err != nil {
		return err
	}
	if n != (r1-r0)*g.k {
		return fmt.Errorf("%s %v: rows [%d,%d) need %d input %s, got %d", g.f, g.shape, r0, r1, (r1-r0)*g.k, what, n)
	}
	if err := g.checkObject(dst, false); err != nil {
		return err
	}
	if g.f == NVFP4 && !e.hasDivisor {
		return fmt.Errorf("%s %v: the tensor max|x| must be set (SetAmax) before encoding rows", g.f, g.shape)
	}
	return nil
}

// encodeRow encodes row r from x (len K).
func (e *RowEncoder) encodeRow(dst []byte, r int64, x []float32) error {
	g := &e.g
	var err error
	switch g.f {
	case BF16:
		out := dst[2*r*g.k : 2*(r+1)*g.k]
		for i, v := range x {
			h := F32ToBF16(v)
			if h&0x7F80 == 0x7F80 {
				return g.elemErr(r, i, fmt.Sprintf("is %v, not finite in bf16", v))
			}
			binary.LittleEndian.PutUint16(out[2*i:], h)
		}
	case FP32:
		out := dst[4*r*g.k : 4*(r+1)*g.k]
		for i, v := range x {
			if !isFinite32(v) {
				return g.elemErr(r, i, fmt.Sprintf("is %v", v))
			}
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case Int32:
		out := dst[4*r*g.k : 4*(r+1)*g.k]
		for i, v := range x {
			if v != float32(math.Trunc(float64(v))) || v < math.MinInt32 || v >= math.MaxInt32 {
				return g.elemErr(r, i, fmt.Sprintf("is %v, not an int32 value", v))
			}
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(v)))
		}
	case NVFP4:
		err = encodeNVFP4Row(x, e.divisor, r, dst[r*g.k/2:(r+1)*g.k/2], dst[g.nv.ScaleOff:g.nv.ScaleOff+g.nv.ScaleBytes])
	case FP8Row:
		err = encodeFP8Row(x, dst[r*g.k:(r+1)*g.k], dst[g.f8.ScaleOff+2*r:g.f8.ScaleOff+2*r+2])
	default:
		base, high, scales := g.rowSpans(dst, r)
		err = encodeGroupRow(g.grp, x, base, high, scales)
	}
	if err != nil {
		return fmt.Errorf("%s %v: row %d: %w", g.f, g.shape, r, err)
	}
	return nil
}

// Finish writes the zero padding between planes and, for NVFP4, the trailing
// divisor. Call it once, after or alongside the row encodes.
func (e *RowEncoder) Finish(dst []byte) error {
	g := &e.g
	if err := g.checkObject(dst, false); err != nil {
		return err
	}
	switch g.f {
	case Q4G64, Q5G64, Q6G64, Q8G32:
		groups := g.n * g.rs.GroupsPerRow
		clear(dst[groups*g.rs.BaseBytes : g.rs.HighOff])
		clear(dst[g.rs.HighOff+groups*g.rs.HighBytes : g.rs.ScaleOff])
	case NVFP4:
		if !e.hasDivisor {
			return fmt.Errorf("%s %v: the tensor max|x| must be set (SetAmax) before Finish", g.f, g.shape)
		}
		clear(dst[g.nv.CodeBytes:g.nv.ScaleOff])
		binary.LittleEndian.PutUint32(dst[g.nv.DivisorOff:], math.Float32bits(e.divisor))
	case FP8Row:
		clear(dst[g.n*g.k : g.f8.ScaleOff])
	}
	return nil
}

// Encode encodes a whole tensor given as row-major float32 values. It fails
// on NaN or ±Inf input and on values a format cannot represent.
func Encode(f Format, shape []int64, src []float32) ([]byte, error) {
	e, err := NewRowEncoder(f, shape)
	if err != nil {
		return nil, err
	}
	if f == NVFP4 {
		am, err := Amax(src)
		if err != nil {
			return nil, fmt.Errorf("%s %v: %w", f, shape, err)
		}
		if err := e.SetAmax(am); err != nil {
			return nil, err
		}
	}
	dst := make([]byte, e.Size())
	if err := e.EncodeRows(dst, 0, e.Rows(), src); err != nil {
		return nil, err
	}
	return dst, e.Finish(dst)
}

// EncodeRows encodes rows [r0,r1) of a tensor from src ((r1-r0)·K elements)
// into dst, the whole preallocated object buffer. The caller calls it for
// every row range (possibly concurrently) and finally FinishObject. NVFP4
// needs a tensor-wide divisor: use RowEncoder with SetAmax instead.
func EncodeRows(f Format, shape []int64, src []float32, r0, r1 int64, dst []byte) error {
	if f == NVFP4 {
		return fmt.Errorf("%s %v: EncodeRows needs the tensor-wide divisor; use RowEncoder.SetAmax", f, shape)
	}
	e, err := NewRowEncoder(f, shape)
	if err != nil {
		return err
	}
	return e.EncodeRows(dst, r0, r1, src)
}

// FinishObject writes the plane padding of an object encoded with EncodeRows.
func FinishObject(f Format, shape []int64, dst []byte) error {
	if f == NVFP4 {
		return fmt.Errorf("%s %v: use RowEncoder.Finish, which writes the divisor", f, shape)
	}
	e, err := NewRowEncoder(f, shape)
	if err != nil {
		return err
	}
	return e.Finish(dst)
}

// Decode decodes a whole object to row-major float32 (the reference
// decoder). len(data) must equal EncodedSize. Values are not validated
// (see Validate), except that an NVFP4 divisor must be finite and > 0.
// int32 values are converted to the nearest float32.
func Decode(f Format, shape []int64, data []byte) ([]float32, error) {
	g, err := newGeom(f, shape)
	if err != nil {
		return nil, err
	}
	if err := g.checkObject(data, true); err != nil {
		return nil, err
	}
	dst := make([]float32, g.n*g.k)
	return dst, g.decodeRows(data, 0, g.n, dst)
}

// DecodeRows decodes rows [r0,r1) of the object data (the whole object) into
// dst[:(r1-r0)·K]; padding columns are dropped.
func DecodeRows(f Format, shape []int64, data []byte, r0, r1 int64, dst []float32) error {
	g, err := newGeom(f, shape)
	if err != nil {
		return err
	}
	if err := g.checkRows(r0, r1); err != nil {
		return err
	}
	if err := g.checkObject(data, false); err != nil {
		return err
	}
	if int64(len(dst)) < (r1-r0)*g.k {
		return fmt.Errorf("%s %v: rows [%d,%d) need %d output elements, got %d", f, shape, r0, r1, (r1-r0)*g.k, len(dst))
	}
	return g.decodeRows(data, r0, r1, dst)
}

func (g *geom) decodeRows(data []byte, r0, r1 int64, dst []float32) error {
	var d float32
	if g.f == NVFP4 {
		var err error
		if d, err = g.nvfp4Divisor(data); err != nil {
			return err
		}
	}
	for r := r0; r < r1; r++ {
		out := dst[(r-r0)*g.k : (r-r0+1)*g.k]
		switch g.f {
		case BF16:
			in := data[2*r*g.k:]
			for i := range out {
				out[i] = BF16ToF32(binary.LittleEndian.Uint16(in[2*i:]))
			}
		case FP32:
			in := data[4*r*g.k:]
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
			}
		case Int32:
			in := data[4*r*g.k:]
			for i := range out {
				out[i] = float32(int32(binary.LittleEndian.Uint32(in[4*i:])))
			}
		case NVFP4:
			decodeNVFP4Row(data[r*g.k/2:(r+1)*g.k/2], data[g.nv.ScaleOff:g.nv.ScaleOff+g.nv.ScaleBytes], d, r, out)
		case FP8Row:
			decodeFP8Row(data[r*g.k:(r+1)*g.k], data[g.f8.ScaleOff+2*r:], out)
		default:
			base, high, scales := g.rowSpans(data, r)
			decodeGroupRow(g.grp, base, high, scales, out)
		}
	}
	return nil
}

// Validate checks that data is a well-formed object of format f and shape:
// its exact size and the validity of every stored value. The error names the
// first bad element, group, block or row. Checked: bf16/fp32 NaN or ±Inf;
// grouped-int scales that are negative (sign bit set), Inf or NaN, +0 scales
// with nonzero codes, q8 code 0x80, nonzero codes in padding columns and
// nonzero scales of wholly padded groups; NVFP4 scale bytes 0x7F or ≥ 0x80
// and a divisor that is not finite and > 0; FP8 codes 0x7F/0xFF, row scales
// that are negative, Inf or NaN, and nonzero codes under a +0 row scale.
// Plane-gap padding bytes are not checked.
func Validate(f Format, shape []int64, data []byte) error {
	g, err := newGeom(f, shape)
	if err != nil {
		return err
	}
	if err := g.checkObject(data, true); err != nil {
		return err
	}
	switch f {
	case BF16:
		for i := int64(0); i < g.n*g.k; i++ {
			if h := binary.LittleEndian.Uint16(data[2*i:]); h&0x7F80 == 0x7F80 {
				return fmt.Errorf("%s %v: element %d %s is 0x%04x, not finite", f, shape, i, g.index(i), h)
			}
		}
	case FP32:
		for i := int64(0); i < g.n*g.k; i++ {
			if w := binary.LittleEndian.Uint32(data[4*i:]); w&0x7F800000 == 0x7F800000 {
				return fmt.Errorf("%s %v: element %d %s is 0x%08x, not finite", f, shape, i, g.index(i), w)
			}
		}
	case Int32:
	case NVFP4:
		return g.validateNVFP4(data)
	case FP8Row:
		return g.validateFP8(data)
	default:
		for r := int64(0); r < g.n; r++ {
			base, high, scales := g.rowSpans(data, r)
			if err := validateGroupRow(g.grp, int(g.k), base, high, scales); err != nil {
				return fmt.Errorf("%s %v: row %d: %w", f, shape, r, err)
			}
		}
	}
	return nil
}

// elemErr reports a bad input element of a contiguous tensor by flat and
// multi-dimensional index.
func (g *geom) elemErr(r int64, i int, what string) error {
	e := r*g.k + int64(i)
	return fmt.Errorf("%s %v: element %d %s %s", g.f, g.shape, e, g.index(e), what)
}

// index formats a flat element index as a multi-index of the shape.
func (g *geom) index(i int64) string {
	if len(g.shape) == 0 {
		return "[]"
	}
	idx := make([]int64, len(g.shape))
	for d := len(g.shape) - 1; d >= 0; d-- {
		idx[d] = i % g.shape[d]
		i /= g.shape[d]
	}
	return fmt.Sprint(idx)
}
