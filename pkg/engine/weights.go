package engine

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/progress"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Weights is the engine's view of a model artifact: its config and its
// tensors by ninfer object name (qwen35.Config.Tensors names, e.g.
// "text/layers/3/attention/q_proj"). Data is the exact encoded payload.
// An adapter over pkg/artifact implements it.
type Weights interface {
	Config() qwen35.Config
	Tensor(id string) (f format.Format, shape []int64, data []byte, err error)
}

// isVector reports classes the engine keeps as fp32 vectors/small matrices
// (norm weights, the conv kernel, GDN control parameters): layout.IsVector.
func isVector(c qwen35.Class) bool { return layout.IsVector(c) }

// toF32 decodes a bf16/fp32 payload to float32 values.
func toF32(id string, f format.Format, data []byte, n int64) ([]float32, error) {
	out := make([]float32, n)
	switch f {
	case format.FP32:
		if int64(len(data)) != 4*n {
			return nil, fmt.Errorf("engine: tensor %s: %d bytes, want %d", id, len(data), 4*n)
		}
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case format.BF16:
		if int64(len(data)) != 2*n {
			return nil, fmt.Errorf("engine: tensor %s: %d bytes, want %d", id, len(data), 2*n)
		}
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("engine: tensor %s: format %s not supported for a norm/conv/control tensor (want bf16 or fp32)", id, f)
	}
	return out, nil
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bound is the weights arena contents: every text tensor, by name.
type bound struct {
	mats map[string]*backend.Weight
	vecs map[string]backend.View
}

// bindWeights uploads the text tensors into one "weights" arena laid out by
// layout.Weights (one term per tensor in inventory order, bytes
// layout.BoundBytes): matrices keep their packed format, vectors become fp32.
func bindWeights(be backend.Backend, w Weights, cfg qwen35.Config, prog io.Writer) (*backend.Arena, *bound, error) {
	type item struct {
		t    qwen35.Tensor
		f    format.Format
		data []byte
		vec  []float32
	}
	var items []item
	var terms []layout.Term
	for _, t := range cfg.Tensors() {
		if t.Component != qwen35.ComponentText {
			continue // MTP head: not bound by this engine yet
		}
		f, shape, data, err := w.Tensor(t.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: tensor %s: %w", t.Name, err)
		}
		if !sameShape(shape, t.Shape) {
			return nil, nil, fmt.Errorf("engine: tensor %s: shape %v, want %v", t.Name, shape, t.Shape)
		}
		it := item{t: t, f: f, data: data}
		if isVector(t.Class) {
			n, err := format.Elements(shape)
			if err != nil {
				return nil, nil, fmt.Errorf("engine: tensor %s: %w", t.Name, err)
			}
			if it.vec, err = toF32(t.Name, f, data, n); err != nil {
				return nil, nil, err
			}
			terms = append(terms, layout.Term{Name: t.Name, Bytes: layout.BoundBytes(t.Class, n, int64(len(data)))})
		} else {
			if len(shape) != 2 {
				return nil, nil, fmt.Errorf("engine: tensor %s: want a matrix, got shape %v", t.Name, shape)
			}
			terms = append(terms, layout.Term{Name: t.Name, Bytes: layout.BoundBytes(t.Class, 0, int64(len(data)))})
		}
		items = append(items, it)
	}
	lay := layout.Weights(terms)
	arena, err := backend.NewArena(be, "weights", lay.Capacity)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: %w", err)
	}
	views, err := carve(arena, lay)
	if err != nil {
		be.Free(arena.Buffer())
		return nil, nil, err
	}
	bd := &bound{mats: map[string]*backend.Weight{}, vecs: map[string]backend.View{}}
	fail := func(err error) (*backend.Arena, *bound, error) {
		be.Free(arena.Buffer())
		return nil, nil, err
	}
	var bar *progress.Bar
	if prog != nil {
		var total int64
		for _, it := range items {
			total += int64(len(it.data))
		}
		bar = progress.New(prog, "upload "+be.Name(), total, false)
		defer bar.Finish()
	}
	for _, it := range items {
		v := views[it.t.Name]
		if bar != nil {
			bar.Add(int64(len(it.data))) // bytes handed to the backend
		}
		if it.vec != nil {
			err := be.UploadF32(v, it.vec)
			if err != nil {
				return fail(fmt.Errorf("engine: tensor %s: %w", it.t.Name, err))
			}
			bd.vecs[it.t.Name] = v
			continue
		}
		if err := be.Upload(v, it.data); err != nil {
			return fail(fmt.Errorf("engine: tensor %s: %w", it.t.Name, err))
		}
		m, err := be.PrepareWeight(it.t.Name, it.f, int(it.t.Shape[0]), int(it.t.Shape[1]), v, int64(len(it.data)))
		if err != nil {
			return fail(fmt.Errorf("engine: %w", err))
		}
		bd.mats[it.t.Name] = m
	}
	return arena, bd, nil
}
