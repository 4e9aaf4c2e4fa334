package testmodel

import (
	"fmt"
	"sort"
	"strings"
)

// Shape is a named preset of the real Qwen3.5 dense text sizes: every head
// count and dimension, the layer pattern (every 4th layer full attention),
// the vocabulary, the MLP width and the embedding tie, so a random model of
// the shape exercises the same kernels and moves the same bytes as the
// released checkpoint.
//
// Sources (docs/CLI.md repeats them): the Qwen3.5 reference notes
// (shared/reference/qwen35.md §1.2), which take the sizes from the
// Megatron model scripts of THUDM/slime (0.8B, 27B) and radixark/miles (9B)
// and williammtan/miles (2B), cross-checked against the transformers
// Qwen3_5TextConfig defaults (= 9B) and an exact parameter count of the 9B
// checkpoint. The 2B linear-attention head counts (16/16) come from
// third-party test configs only and are unconfirmed. Fields every size
// shares: head_dim 256, linear key/value head dim 128, conv kernel 4,
// rope_theta 1e7, partial rotary 0.25, rms eps 1e-6, vocab 248320,
// max_position_embeddings 262144, one MTP layer.
type Shape struct {
	Name                  string
	Hidden                int
	Layers                int
	Intermediate          int
	Heads, KVHeads        int
	LinearKeyHeads        int
	LinearValueHeads      int
	Tied                  bool
	Source                string
	Vocab                 int
	HeadDim               int
	LinearKeyHeadDim      int
	LinearValueHeadDim    int
	FullAttentionInterval int
	MTPLayers             int
}

const (
	qwen35Vocab  = 248320
	qwen35MaxPos = 262144
)

func qwen35Shape(name string, hidden, layers, inter, nh, nkv, nk, nv int, tied bool, src string) Shape {
	return Shape{
		Name: name, Hidden: hidden, Layers: layers, Intermediate: inter, Heads: nh, KVHeads: nkv,
		LinearKeyHeads: nk, LinearValueHeads: nv, Tied: tied, Source: src,
		Vocab: qwen35Vocab, HeadDim: 256, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
		FullAttentionInterval: 4, MTPLayers: 1,
	}
}

// Shapes are the presets by name.
var Shapes = map[string]Shape{
	"qwen3.5-0.8b": qwen35Shape("qwen3.5-0.8b", 1024, 24, 3584, 8, 2, 16, 16, true,
		"THUDM/slime scripts/models/qwen3.5-0.8B.sh + config replicas (qwen35.md §1.2)"),
	"qwen3.5-2b": qwen35Shape("qwen3.5-2b", 2048, 24, 6144, 8, 2, 16, 16, true,
		"williammtan/miles scripts/models/qwen3.5-2B.sh; linear heads 16/16 third-party, unconfirmed (qwen35.md §1.2)"),
	"qwen3.5-9b": qwen35Shape("qwen3.5-9b", 4096, 32, 12288, 16, 4, 16, 32, false,
		"radixark/miles scripts/models/qwen3.5-9B.sh = transformers Qwen3_5TextConfig defaults (qwen35.md §1.1-1.2)"),
	"qwen3.5-27b": qwen35Shape("qwen3.5-27b", 5120, 64, 17408, 24, 4, 16, 48, false,
		"HF config.json replicas + THUDM/slime scripts/models/qwen3.5-27B.sh (qwen35.md §1.2)"),
}

// ShapeNames lists the preset names, sorted by size.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return Shapes[names[i]].Hidden < Shapes[names[j]].Hidden })
	return names
}

// LookupShape returns the preset of that name (case-insensitive).
func LookupShape(name string) (Shape, error) {
	s, ok := Shapes[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Shape{}, fmt.Errorf("testmodel: unknown shape %q: want one of %s", name, strings.Join(ShapeNames(), ", "))
	}
	return s, nil
}

// Apply returns o with every field of the shape set; the seed, dtype,
// shards, multimodal layout and tokenizer settings of o are kept.
func (s Shape) Apply(o Options) Options {
	o.Vocab, o.Hidden, o.Layers, o.Intermediate = s.Vocab, s.Hidden, s.Layers, s.Intermediate
	o.FullAttentionInterval = s.FullAttentionInterval
	o.Heads, o.KVHeads, o.HeadDim = s.Heads, s.KVHeads, s.HeadDim
	o.LinearKeyHeads, o.LinearValueHeads = s.LinearKeyHeads, s.LinearValueHeads
	o.LinearKeyHeadDim, o.LinearValueHeadDim = s.LinearKeyHeadDim, s.LinearValueHeadDim
	o.PartialRotaryFactor, o.ConvKernel, o.RopeTheta, o.RMSNormEps = 0.25, 4, 1e7, 1e-6
	o.MaxPositionEmbeddings = qwen35MaxPos
	o.Tied, o.MTPLayers = s.Tied, s.MTPLayers
	return o
}
