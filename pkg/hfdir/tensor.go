package hfdir

import (
	"fmt"
	"math"

	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/safetensors"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Tensor is a validated view of one checkpoint tensor. It reads through the
// memory map and stays valid until the Dir is closed.
type Tensor struct {
	Spec    qwen35.Tensor
	HFName  string // name in this checkpoint (layout applied)
	File    string // base name of the shard holding it
	DType   safetensors.DType
	HFShape []int64

	rows, cols int64
	data       []byte
}

// Rows is the number of rows of the ninfer shape (1 for a vector).
func (t *Tensor) Rows() int64 { return t.rows }

// Cols is the row length of the ninfer shape (product of the trailing dims).
func (t *Tensor) Cols() int64 { return t.cols }

// NumElements is Rows×Cols.
func (t *Tensor) NumElements() int64 { return t.rows * t.cols }

// Raw returns the checkpoint bytes (read-only mmap view).
func (t *Tensor) Raw() []byte { return t.data }

// ReadRowsF32 converts rows [r0, r1) to float32 into dst, which must hold
// exactly (r1−r0)·Cols() values.
func (t *Tensor) ReadRowsF32(r0, r1 int64, dst []float32) error {
	if r0 < 0 || r1 < r0 || r1 > t.rows {
		return fmt.Errorf("hfdir: tensor %s: rows [%d,%d) outside [0,%d)", t.HFName, r0, r1, t.rows)
	}
	n := (r1 - r0) * t.cols
	if int64(len(dst)) != n {
		return fmt.Errorf("hfdir: tensor %s: rows [%d,%d) hold %d values, dst has %d", t.HFName, r0, r1, n, len(dst))
	}
	w := int64(t.DType.Bits() / 8)
	src := t.data[r0*t.cols*w : r1*t.cols*w]
	if err := safetensors.DecodeF32(t.DType, src, dst); err != nil {
		return fmt.Errorf("hfdir: tensor %s: %w", t.HFName, err)
	}
	return nil
}

// ReadAllF32 converts the whole tensor (only for small tensors: norms,
// control vectors, tests).
func (t *Tensor) ReadAllF32() ([]float32, error) {
	out := make([]float32, t.NumElements())
	return out, t.ReadRowsF32(0, t.rows, out)
}

// CheckFinite scans the raw data and fails on the first NaN or ±Inf, naming
// the tensor, the flat element index and its (row, col).
func (t *Tensor) CheckFinite() error {
	i, err := safetensors.FirstNonFinite(t.DType, t.data)
	if err != nil {
		return fmt.Errorf("hfdir: tensor %s: %w", t.HFName, err)
	}
	if i < 0 {
		return nil
	}
	v := make([]float32, 1)
	w := int64(t.DType.Bits() / 8)
	_ = safetensors.DecodeF32(t.DType, t.data[i*w:(i+1)*w], v)
	return fmt.Errorf("hfdir: tensor %s (%s): element %d (row %d, col %d) is %v", t.HFName, termsafe.Path(t.File), i, i/t.cols, i%t.cols, v[0])
}

// CheckFiniteF32 fails on the first NaN or ±Inf in vals, naming the tensor
// and the flat index base+i (for callers that checked converted rows).
func CheckFiniteF32(name string, base int64, vals []float32) error {
	for i, v := range vals {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("tensor %s: element %d is %v", name, base+int64(i), v)
		}
	}
	return nil
}
