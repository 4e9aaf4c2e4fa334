// Package testmodel generates tiny random Qwen3.5 Hugging Face model
// directories deterministically from a seed (config.json, safetensors
// weights incl. the MTP head, a small byte-level BPE tokenizer, tokenizer and
// generation configs, chat template), so tests and CI need no downloads.
package testmodel

import (
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/safetensors"
)

// Options describes the model to generate. DefaultOptions gives a 4-layer
// model (3 Gated DeltaNet + 1 full attention) with hidden 128.
type Options struct {
	Seed                  uint64
	Vocab                 int // embedding rows; ≥ tokenizer size, extra rows unused
	Hidden                int
	Layers                int
	FullAttentionInterval int // layer i is full attention when (i+1) % interval == 0
	Intermediate          int
	Heads                 int
	KVHeads               int
	HeadDim               int
	PartialRotaryFactor   float64
	LinearKeyHeads        int
	LinearValueHeads      int
	LinearKeyHeadDim      int
	LinearValueHeadDim    int
	ConvKernel            int
	RopeTheta             float64
	RMSNormEps            float64
	MaxPositionEmbeddings int
	Tied                  bool
	MTPLayers             int
	Multimodal            bool   // Qwen3_5ForConditionalGeneration layout
	DType                 string // "bf16" (default), "f16" or "f32"
	Shards                int    // 1: model.safetensors; >1: index + N shards
	MaxMerges             int    // BPE merges to learn (capped by Vocab)
}

// DefaultOptions returns the default tiny model.
func DefaultOptions() Options {
	return Options{
		Seed: 1, Vocab: 512, Hidden: 128, Layers: 4, FullAttentionInterval: 4,
		Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 64, PartialRotaryFactor: 0.25,
		LinearKeyHeads: 2, LinearValueHeads: 4, LinearKeyHeadDim: 32, LinearValueHeadDim: 32,
		ConvKernel: 4, RopeTheta: 1e7, RMSNormEps: 1e-6, MaxPositionEmbeddings: 4096,
		MTPLayers: 1, DType: "bf16", Shards: 1, MaxMerges: 200,
	}
}

// dtype maps the DType option to a safetensors dtype.
func (o Options) dtype() (safetensors.DType, string, error) {
	switch strings.ToLower(o.DType) {
	case "", "bf16", "bfloat16":
		return safetensors.BF16, "bfloat16", nil
	case "f16", "fp16", "float16":
		return safetensors.F16, "float16", nil
	case "f32", "fp32", "float32":
		return safetensors.F32, "float32", nil
	}
	return "", "", fmt.Errorf("testmodel: dtype %q: want bf16, f16 or f32", o.DType)
}

// LayerTypes returns the layer_types list implied by Layers and
// FullAttentionInterval.
func (o Options) LayerTypes() []string {
	out := make([]string, o.Layers)
	for i := range out {
		out[i] = qwen35.LinearAttention
		if o.FullAttentionInterval > 0 && (i+1)%o.FullAttentionInterval == 0 {
			out[i] = qwen35.FullAttention
		}
	}
	return out
}

// Config returns the qwen35 config the options describe (eos filled in by
// Generate from the tokenizer).
func (o Options) Config() qwen35.Config {
	return qwen35.Config{
		VocabSize: o.Vocab, HiddenSize: o.Hidden, NumHiddenLayers: o.Layers,
		IntermediateSize: o.Intermediate, NumAttentionHeads: o.Heads, NumKeyValueHeads: o.KVHeads,
		HeadDim: o.HeadDim, LinearConvKernelDim: o.ConvKernel, LinearKeyHeadDim: o.LinearKeyHeadDim,
		LinearValueHeadDim: o.LinearValueHeadDim, LinearNumKeyHeads: o.LinearKeyHeads,
		LinearNumValueHeads: o.LinearValueHeads, LayerTypes: o.LayerTypes(), RMSNormEps: o.RMSNormEps,
		RopeTheta: o.RopeTheta, PartialRotaryFactor: o.PartialRotaryFactor, TieWordEmbeddings: o.Tied,
		MaxPositionEmbeddings: o.MaxPositionEmbeddings, AttnOutputGate: true, MTPNumHiddenLayers: o.MTPLayers,
	}
}

// Validate checks the options.
func (o Options) Validate() error {
	if _, _, err := o.dtype(); err != nil {
		return err
	}
	if err := o.Config().Validate(); err != nil {
		return fmt.Errorf("testmodel: %w", err)
	}
	if o.FullAttentionInterval <= 0 {
		return fmt.Errorf("testmodel: full attention interval must be positive, got %d", o.FullAttentionInterval)
	}
	if min := 256 + len(SpecialTokens); o.Vocab < min {
		return fmt.Errorf("testmodel: vocab %d is below the tokenizer minimum %d (256 bytes + %d added tokens)", o.Vocab, min, len(SpecialTokens))
	}
	if o.MaxMerges < 0 {
		return fmt.Errorf("testmodel: max merges must be ≥ 0, got %d", o.MaxMerges)
	}
	if o.Shards < 1 {
		return fmt.Errorf("testmodel: shards must be ≥ 1, got %d", o.Shards)
	}
	if n := len(o.Config().Tensors()); o.Shards > n {
		return fmt.Errorf("testmodel: %d shards for %d tensors", o.Shards, n)
	}
	return nil
}
