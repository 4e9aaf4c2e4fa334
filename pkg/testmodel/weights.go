package testmodel

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/safetensors"
)

// Vision tower stand-ins (multimodal layout only); they must be skipped.
const (
	visualHidden = 16
	visualPatch  = 2
)

// weightTensor is one generated checkpoint tensor.
type weightTensor struct {
	hfName string
	shape  []int64
	values []float32
}

// tensorRNG gives each tensor its own stream, keyed by seed and text-only
// checkpoint name, so values do not depend on generation order, sharding or
// the name layout (a multimodal model holds the same text weights).
func tensorRNG(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// initValues draws the values of one inventory tensor:
//   - matrices N(0, 1/√fan_in); projections back into the residual stream
//     (o_proj, out_proj, down_proj) are further scaled by 1/√(2·layers) so
//     the residual stays O(1);
//   - embedding N(0, 0.1) (a tied head then gives logits of std ≈ 0.1·√H);
//   - zero-centred (1+w) norms N(0, 0.05); the gated GDN norm 1 + N(0, 0.05);
//   - conv N(0, 0.3); A_log = log U(1,16); dt_bias N(0, 0.1).
func initValues(spec qwen35.Tensor, layers int, r *rand.Rand) []float32 {
	n := safetensors.NumElements(spec.Shape)
	out := make([]float32, n)
	normal := func(mean, std float64) {
		for i := range out {
			out[i] = float32(mean + std*r.NormFloat64())
		}
	}
	fanIn := float64(spec.Shape[len(spec.Shape)-1])
	residualOut := strings.HasSuffix(spec.Name, "/o_proj") || strings.HasSuffix(spec.Name, "/out_proj") ||
		strings.HasSuffix(spec.Name, "/down_proj")
	switch {
	case spec.Class == qwen35.ClassEmbedding:
		normal(0, 0.1)
	case spec.Class == qwen35.ClassNorm && strings.HasSuffix(spec.Name, "gdn/norm"):
		normal(1, 0.05)
	case spec.Class == qwen35.ClassNorm:
		normal(0, 0.05)
	case spec.Class == qwen35.ClassConv:
		normal(0, 0.3)
	case strings.HasSuffix(spec.Name, "gdn/a_log"):
		for i := range out {
			out[i] = float32(math.Log(1 + 15*r.Float64()))
		}
	case strings.HasSuffix(spec.Name, "gdn/dt_bias"):
		normal(0, 0.1)
	case residualOut:
		normal(0, 1/math.Sqrt(fanIn)/math.Sqrt(2*float64(max(layers, 1))))
	default:
		normal(0, 1/math.Sqrt(fanIn))
	}
	return out
}

// visualTensors are a few dummy vision-tower tensors for the multimodal
// layout (weights and a bias, as the real tower has both).
func visualTensors(hidden int) []weightTensor {
	specs := []struct {
		name  string
		shape []int64
	}{
		{"model.visual.patch_embed.proj.weight", []int64{visualHidden, 3, 2, visualPatch, visualPatch}},
		{"model.visual.blocks.0.norm1.weight", []int64{visualHidden}},
		{"model.visual.merger.linear_fc2.bias", []int64{int64(hidden)}},
	}
	out := make([]weightTensor, len(specs))
	for i, s := range specs {
		out[i] = weightTensor{hfName: s.name, shape: s.shape}
	}
	return out
}

// weights generates every checkpoint tensor, in inventory order (vision
// dummies last).
func (o Options) weights() []weightTensor {
	cfg := o.Config()
	layout := qwen35.LayoutCausalLM
	if o.Multimodal {
		layout = qwen35.LayoutMultimodal
	}
	var out []weightTensor
	for _, spec := range cfg.Tensors() {
		name := qwen35.HFNameFor(spec.HFName, layout)
		out = append(out, weightTensor{hfName: name, shape: spec.HFShape,
			values: initValues(spec, o.Layers, tensorRNG(o.Seed, spec.HFName))})
	}
	if o.Multimodal {
		for _, v := range visualTensors(o.Hidden) {
			r := tensorRNG(o.Seed, v.hfName)
			v.values = make([]float32, safetensors.NumElements(v.shape))
			for i := range v.values {
				v.values[i] = float32(0.02 * r.NormFloat64())
			}
			out = append(out, v)
		}
	}
	return out
}
