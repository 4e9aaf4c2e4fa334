package artifact

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// inputScaleSuffix names the optional NVFP4 activation divisor of a matrix:
// "<matrix id>/input_scale_divisor", shape [], fp32.
const inputScaleSuffix = "/input_scale_divisor"

// checkModel binds the directory to the model its config describes
// (docs/FORMAT.md §4 step 9): every tensor of qwen35 Config.Tensors() is
// present with that component and exactly that shape, and every other
// tensor is the proposal head (shaped [rows, hidden_size], rows ≤
// vocab_size) or a matrix's input_scale_divisor. It reads nothing but the
// parsed directory.
func (f *File) checkModel() error {
	cfg := f.config
	want := cfg.Tensors()
	expected := make(map[string]*qwen35.Tensor, len(want))
	for i := range want {
		expected[want[i].Name] = &want[i]
	}
	for i := range f.Objects {
		o := &f.Objects[i]
		if !o.IsTensor() {
			continue
		}
		if t, ok := expected[o.ID]; ok {
			if o.Component != t.Component {
				return f.errf(o.ID, "component %s, but the config's tensor inventory puts it in %q", termsafe.Quote(o.Component), t.Component)
			}
			if !equalShape(o.Shape, t.Shape) {
				return f.errf(o.ID, "shape %s does not match the config: [%s] = %s", ShapeString(o.Shape), strings.Join(t.Dims, ", "), ShapeString(t.Shape))
			}
			continue
		}
		switch {
		case o.ID == qwen35.NameDraftHead && o.Component == ComponentProposal:
			if len(o.Shape) != 2 || o.Shape[1] != int64(cfg.HiddenSize) || o.Shape[0] > int64(cfg.VocabSize) {
				return f.errf(o.ID, "shape %s does not match the config: want [rows, hidden_size] = [rows,%d] with rows ≤ vocab_size %d", ShapeString(o.Shape), cfg.HiddenSize, cfg.VocabSize)
			}
		case o.ID == qwen35.NameDraftIDs && o.Component == ComponentProposal:
			// [rows] int32, checked with components.proposal.
		case strings.HasSuffix(o.ID, inputScaleSuffix):
			m, ok := expected[strings.TrimSuffix(o.ID, inputScaleSuffix)]
			if !ok || len(m.Shape) != 2 {
				return f.errf(o.ID, "is not the input_scale_divisor of a matrix of the config's tensor inventory%s", inventoryHint(cfg, o.ID))
			}
			if len(o.Shape) != 0 || o.Format != format.FP32 || o.Component != m.Component {
				return f.errf(o.ID, "input_scale_divisor must be a %s fp32 scalar [], got %s %s %s", m.Component, o.Component, o.Format, ShapeString(o.Shape))
			}
		default:
			return f.errf(o.ID, "tensor is not in the config's tensor inventory%s", inventoryHint(cfg, o.ID))
		}
	}
	for i := range want {
		if _, ok := f.Object(want[i].Name); !ok {
			return f.errf("", "tensor %q of the config's tensor inventory is missing%s", want[i].Name, inventoryHint(cfg, want[i].Name))
		}
	}
	return nil
}

// inventoryHint names the config field that decides whether tensor id
// belongs to the model, e.g. " (num_hidden_layers is 4)".
func inventoryHint(cfg *qwen35.Config, id string) string {
	switch {
	case id == qwen35.NameOutputHead:
		return fmt.Sprintf(" (tie_word_embeddings is %t)", cfg.TieWordEmbeddings)
	case strings.HasPrefix(id, "mtp/"):
		return fmt.Sprintf(" (mtp_num_hidden_layers is %d)", cfg.MTPNumHiddenLayers)
	}
	rest, ok := strings.CutPrefix(id, "text/layers/")
	if !ok {
		return ""
	}
	n, _, _ := strings.Cut(rest, "/")
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 {
		return ""
	}
	if l >= cfg.NumHiddenLayers {
		return fmt.Sprintf(" (num_hidden_layers is %d)", cfg.NumHiddenLayers)
	}
	return fmt.Sprintf(" (layer_types[%d] is %s)", l, cfg.LayerTypes[l])
}

func equalShape(a, b []int64) bool {
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
