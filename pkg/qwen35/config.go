// Package qwen35 describes the Qwen3.5 dense text architecture: its config,
// derived dimensions, and the tensor inventory (ninfer object names, the
// Hugging Face names they come from, shapes and recipe classes). It is the
// single contract shared by the converter, the planner and the engine.
// Math and names: shared/reference/qwen35.md.
package qwen35

import (
	"encoding/json"
	"fmt"
	"math"
)

// Architecture is the architecture string the engine serves.
const Architecture = "Qwen3_5ForCausalLM"

// Layer types.
const (
	FullAttention   = "full_attention"
	LinearAttention = "linear_attention"
)

// Config is the text config of a Qwen3.5 dense model. JSON names follow the
// Hugging Face text_config; it is stored verbatim in the .ninfer directory.
type Config struct {
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	LinearConvKernelDim   int      `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim      int      `json:"linear_key_head_dim"`
	LinearValueHeadDim    int      `json:"linear_value_head_dim"`
	LinearNumKeyHeads     int      `json:"linear_num_key_heads"`
	LinearNumValueHeads   int      `json:"linear_num_value_heads"`
	LayerTypes            []string `json:"layer_types"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	PartialRotaryFactor   float64  `json:"partial_rotary_factor"`
	MRopeSection          []int    `json:"mrope_section,omitempty"`
	MRopeInterleaved      bool     `json:"mrope_interleaved"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	AttnOutputGate        bool     `json:"attn_output_gate"`
	MTPNumHiddenLayers    int      `json:"mtp_num_hidden_layers"`
	EOSTokenIDs           []int    `json:"eos_token_ids,omitempty"`
	BOSTokenID            *int     `json:"bos_token_id,omitempty"`
}

// RotaryDim is the number of leading head dims that RoPE rotates.
func (c Config) RotaryDim() int { return int(math.Round(float64(c.HeadDim) * c.PartialRotaryFactor)) }

// KeyDim is nk·dk, the GDN query/key width.
func (c Config) KeyDim() int { return c.LinearNumKeyHeads * c.LinearKeyHeadDim }

// ValueDim is nv·dv, the GDN value width.
func (c Config) ValueDim() int { return c.LinearNumValueHeads * c.LinearValueHeadDim }

// ConvDim is the GDN conv channel count 2·key_dim + value_dim.
func (c Config) ConvDim() int { return 2*c.KeyDim() + c.ValueDim() }

// IsFull reports whether layer l is a full-attention layer.
func (c Config) IsFull(l int) bool { return c.LayerTypes[l] == FullAttention }

// FullLayers returns the indices of the full-attention layers.
func (c Config) FullLayers() []int { return c.layersOf(FullAttention) }

// LinearLayers returns the indices of the Gated DeltaNet layers.
func (c Config) LinearLayers() []int { return c.layersOf(LinearAttention) }

func (c Config) layersOf(kind string) []int {
	var out []int
	for i, t := range c.LayerTypes {
		if t == kind {
			out = append(out, i)
		}
	}
	return out
}

// Validate checks that the config is self-consistent.
func (c Config) Validate() error {
	pos := map[string]int{
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "num_hidden_layers": c.NumHiddenLayers,
		"intermediate_size": c.IntermediateSize, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.NumKeyValueHeads, "head_dim": c.HeadDim,
		"linear_conv_kernel_dim": c.LinearConvKernelDim, "linear_key_head_dim": c.LinearKeyHeadDim,
		"linear_value_head_dim": c.LinearValueHeadDim, "linear_num_key_heads": c.LinearNumKeyHeads,
		"linear_num_value_heads": c.LinearNumValueHeads,
	}
	for _, k := range []string{"vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
		"num_attention_heads", "num_key_value_heads", "head_dim", "linear_conv_kernel_dim",
		"linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads"} {
		if pos[k] <= 0 {
			return fmt.Errorf("config: %s must be positive, got %d", k, pos[k])
		}
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return fmt.Errorf("config: layer_types has %d entries, num_hidden_layers is %d", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		if t != FullAttention && t != LinearAttention {
			return fmt.Errorf("config: layer_types[%d] is %q, want %q or %q", i, t, FullAttention, LinearAttention)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("config: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fmt.Errorf("config: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if r := c.RotaryDim(); r <= 0 || r > c.HeadDim || r%2 != 0 {
		return fmt.Errorf("config: rotary dim %d (head_dim %d × partial_rotary_factor %g) must be even and in (0, head_dim]", r, c.HeadDim, c.PartialRotaryFactor)
	}
	if !(c.RMSNormEps > 0) || !(c.RopeTheta > 0) {
		return fmt.Errorf("config: rms_norm_eps and rope_theta must be positive")
	}
	if c.MTPNumHiddenLayers < 0 {
		return fmt.Errorf("config: mtp_num_hidden_layers must be ≥ 0")
	}
	return nil
}

// hfText mirrors the subset of a Hugging Face text config that we read.
type hfText struct {
	ModelType             string          `json:"model_type"`
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      int             `json:"num_key_value_heads"`
	HeadDim               int             `json:"head_dim"`
	HiddenAct             string          `json:"hidden_act"`
	LinearConvKernelDim   int             `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim      int             `json:"linear_key_head_dim"`
	LinearValueHeadDim    int             `json:"linear_value_head_dim"`
	LinearNumKeyHeads     int             `json:"linear_num_key_heads"`
	LinearNumValueHeads   int             `json:"linear_num_value_heads"`
	LayerTypes            []string        `json:"layer_types"`
	FullAttentionInterval int             `json:"full_attention_interval"`
	RMSNormEps            float64         `json:"rms_norm_eps"`
	RopeParameters        *hfRope         `json:"rope_parameters"`
	RopeScaling           *hfRope         `json:"rope_scaling"`
	RopeTheta             float64         `json:"rope_theta"`
	PartialRotaryFactor   float64         `json:"partial_rotary_factor"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	AttnOutputGate        *bool           `json:"attn_output_gate"`
	AttentionBias         bool            `json:"attention_bias"`
	MTPNumHiddenLayers    int             `json:"mtp_num_hidden_layers"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	BOSTokenID            *int            `json:"bos_token_id"`
}

type hfRope struct {
	RopeType            string  `json:"rope_type"`
	RopeTheta           float64 `json:"rope_theta"`
	PartialRotaryFactor float64 `json:"partial_rotary_factor"`
	MRopeSection        []int   `json:"mrope_section"`
	MRopeInterleaved    bool    `json:"mrope_interleaved"`
}

type hfRoot struct {
	hfText
	Architectures     []string        `json:"architectures"`
	TextConfig        json.RawMessage `json:"text_config"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
}

// Layout tells how tensor names are prefixed in a Hugging Face checkpoint.
type Layout int

// Checkpoint name layouts.
const (
	LayoutCausalLM   Layout = iota // model.layers.N..., lm_head.weight, mtp.*
	LayoutMultimodal               // model.language_model.layers.N..., lm_head.weight, mtp.*, model.visual.*
)

// ParseHFConfig parses a Hugging Face config.json of a Qwen3.5 dense model,
// either text-only (Qwen3_5ForCausalLM) or multimodal
// (Qwen3_5ForConditionalGeneration with text_config).
func ParseHFConfig(data []byte) (Config, Layout, error) {
	var root hfRoot
	if err := json.Unmarshal(data, &root); err != nil {
		return Config{}, 0, fmt.Errorf("config.json: %w", err)
	}
	arch := ""
	if len(root.Architectures) > 0 {
		arch = root.Architectures[0]
	}
	layout := LayoutCausalLM
	text := root.hfText
	switch {
	case arch == "Qwen3_5ForConditionalGeneration" || (arch == "" && root.ModelType == "qwen3_5"):
		if len(root.TextConfig) == 0 {
			return Config{}, 0, fmt.Errorf("config.json: %s has no text_config", arch)
		}
		text = hfText{}
		if err := json.Unmarshal(root.TextConfig, &text); err != nil {
			return Config{}, 0, fmt.Errorf("config.json: text_config: %w", err)
		}
		if text.TieWordEmbeddings == nil {
			text.TieWordEmbeddings = root.TieWordEmbeddings
		}
		layout = LayoutMultimodal
	case arch == Architecture || (arch == "" && root.ModelType == "qwen3_5_text"):
		// hfRoot's own tie_word_embeddings shadows the embedded hfText one.
		text.TieWordEmbeddings = root.TieWordEmbeddings
	default:
		name := arch
		if name == "" {
			name = "model_type " + root.ModelType
		}
		return Config{}, 0, fmt.Errorf("config.json: unsupported architecture %q (want %s or Qwen3_5ForConditionalGeneration)", name, Architecture)
	}
	if text.HiddenAct != "" && text.HiddenAct != "silu" {
		return Config{}, 0, fmt.Errorf("config.json: unsupported hidden_act %q (want silu)", text.HiddenAct)
	}
	if text.AttentionBias {
		return Config{}, 0, fmt.Errorf("config.json: attention_bias=true is not supported")
	}
	c := Config{
		VocabSize: text.VocabSize, HiddenSize: text.HiddenSize, NumHiddenLayers: text.NumHiddenLayers,
		IntermediateSize: text.IntermediateSize, NumAttentionHeads: text.NumAttentionHeads,
		NumKeyValueHeads: text.NumKeyValueHeads, HeadDim: text.HeadDim,
		LinearConvKernelDim: text.LinearConvKernelDim, LinearKeyHeadDim: text.LinearKeyHeadDim,
		LinearValueHeadDim: text.LinearValueHeadDim, LinearNumKeyHeads: text.LinearNumKeyHeads,
		LinearNumValueHeads: text.LinearNumValueHeads, LayerTypes: text.LayerTypes,
		RMSNormEps: text.RMSNormEps, MaxPositionEmbeddings: text.MaxPositionEmbeddings,
		MTPNumHiddenLayers: text.MTPNumHiddenLayers, AttnOutputGate: true, BOSTokenID: text.BOSTokenID,
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.LinearConvKernelDim == 0 {
		c.LinearConvKernelDim = 4
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if text.AttnOutputGate != nil && !*text.AttnOutputGate {
		return Config{}, 0, fmt.Errorf("config.json: attn_output_gate=false is not supported")
	}
	if text.TieWordEmbeddings != nil {
		c.TieWordEmbeddings = *text.TieWordEmbeddings
	}
	if len(c.LayerTypes) == 0 {
		interval := text.FullAttentionInterval
		if interval == 0 {
			interval = 4
		}
		for i := 0; i < c.NumHiddenLayers; i++ {
			t := LinearAttention
			if (i+1)%interval == 0 {
				t = FullAttention
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
	}
	rope := text.RopeParameters
	if rope == nil {
		rope = text.RopeScaling
	}
	c.RopeTheta, c.PartialRotaryFactor = text.RopeTheta, text.PartialRotaryFactor
	if rope != nil {
		if rope.RopeType != "" && rope.RopeType != "default" && rope.RopeType != "mrope" {
			return Config{}, 0, fmt.Errorf("config.json: unsupported rope_type %q", rope.RopeType)
		}
		if rope.RopeTheta > 0 {
			c.RopeTheta = rope.RopeTheta
		}
		if rope.PartialRotaryFactor > 0 {
			c.PartialRotaryFactor = rope.PartialRotaryFactor
		}
		c.MRopeSection, c.MRopeInterleaved = rope.MRopeSection, rope.MRopeInterleaved
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.PartialRotaryFactor == 0 {
		c.PartialRotaryFactor = 0.25
	}
	if ids, err := parseIDs(text.EOSTokenID); err != nil {
		return Config{}, 0, fmt.Errorf("config.json: eos_token_id: %w", err)
	} else {
		c.EOSTokenIDs = ids
	}
	if err := c.Validate(); err != nil {
		return Config{}, 0, err
	}
	return c, layout, nil
}

func parseIDs(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want an integer or an array of integers")
	}
	return many, nil
}
