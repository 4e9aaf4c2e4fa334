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
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
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

// Size limits of a config, far above any real model (the largest have a
// few hundred layers and tensors of a few 10⁹ elements) and low enough that
// every byte count the planner and the converter derive from a config fits
// in an int64: a config.json of a few bytes cannot make them allocate or
// overflow.
const (
	MaxLayers         = 1024    // num_hidden_layers and mtp_num_hidden_layers
	MaxTensorElements = 1 << 40 // elements of any one tensor of the inventory
)

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
	if c.NumHiddenLayers > MaxLayers {
		return fmt.Errorf("config: num_hidden_layers %d is more than %d", c.NumHiddenLayers, MaxLayers)
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return fmt.Errorf("config: layer_types has %d entries, num_hidden_layers is %d", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		if t != FullAttention && t != LinearAttention {
			return fmt.Errorf("config: layer_types[%d] is %s, want %q or %q", i, termsafe.Quote(t), FullAttention, LinearAttention)
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
	if c.MTPNumHiddenLayers < 0 || c.MTPNumHiddenLayers > MaxLayers {
		return fmt.Errorf("config: mtp_num_hidden_layers must be in [0, %d], got %d", MaxLayers, c.MTPNumHiddenLayers)
	}
	if err := c.checkRanges(); err != nil {
		return err
	}
	return c.checkSizes()
}

// checkSizes rejects dimensions whose tensors would have more than
// MaxTensorElements elements (the products are formed without overflow).
func (c Config) checkSizes() error {
	const limit = MaxTensorElements
	mul := func(xs ...int) int64 { // product of positive ints, limit+1 once it exceeds limit
		p := int64(1)
		for _, x := range xs {
			if int64(x) > limit/p {
				return limit + 1
			}
			p *= int64(x)
		}
		return p
	}
	H := c.HiddenSize
	conv := mul(2, c.LinearNumKeyHeads, c.LinearKeyHeadDim) + mul(c.LinearNumValueHeads, c.LinearValueHeadDim)
	for _, s := range []struct {
		what string
		n    int64
	}{
		{"vocab_size·hidden_size", mul(c.VocabSize, H)},
		{"intermediate_size·hidden_size", mul(c.IntermediateSize, H)},
		{"2·hidden_size·hidden_size", mul(2, H, H)},
		{"2·num_attention_heads·head_dim·hidden_size", mul(2, c.NumAttentionHeads, c.HeadDim, H)},
		{"num_key_value_heads·head_dim·hidden_size", mul(c.NumKeyValueHeads, c.HeadDim, H)},
		{"conv_dim·hidden_size", mul(int(min(conv, limit+1)), H)},
		{"conv_dim·linear_conv_kernel_dim", mul(int(min(conv, limit+1)), c.LinearConvKernelDim)},
		{"linear_num_value_heads·linear_value_head_dim·hidden_size", mul(c.LinearNumValueHeads, c.LinearValueHeadDim, H)},
	} {
		if s.n > limit {
			return fmt.Errorf("config: %s is more than %d elements", s.what, int64(limit))
		}
	}
	return nil
}

// hfText mirrors the subset of a Hugging Face text config that we read.
// Pointer fields tell an absent member from a given one, so the
// transformers defaults can be applied — and reported — exactly.
type hfText struct {
	ModelType             string          `json:"model_type"`
	VocabSize             *int            `json:"vocab_size"`
	HiddenSize            *int            `json:"hidden_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	HiddenAct             string          `json:"hidden_act"`
	LinearConvKernelDim   *int            `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim      *int            `json:"linear_key_head_dim"`
	LinearValueHeadDim    *int            `json:"linear_value_head_dim"`
	LinearNumKeyHeads     *int            `json:"linear_num_key_heads"`
	LinearNumValueHeads   *int            `json:"linear_num_value_heads"`
	LayerTypes            []string        `json:"layer_types"`
	FullAttentionInterval *int            `json:"full_attention_interval"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeParameters        *hfRope         `json:"rope_parameters"`
	RopeScaling           *hfRope         `json:"rope_scaling"`
	RopeTheta             *float64        `json:"rope_theta"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	AttnOutputGate        *bool           `json:"attn_output_gate"`
	AttentionBias         bool            `json:"attention_bias"`
	MTPNumHiddenLayers    *int            `json:"mtp_num_hidden_layers"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	BOSTokenID            *int            `json:"bos_token_id"`

	raw json.RawMessage // the text config object itself, for rejectNulls
}

// nonNullable are the members transformers types as plain int, float or
// bool (or pops from the kwargs and uses as such): an explicit null is an
// error there (Qwen3_5TextConfig is a strict dataclass), while leaving the
// member out takes the default. rope_parameters, rope_scaling, layer_types
// and the token ids may be null.
var nonNullable = []string{
	"vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
	"num_key_value_heads", "head_dim", "hidden_act", "linear_conv_kernel_dim", "linear_key_head_dim",
	"linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads", "full_attention_interval",
	"rms_norm_eps", "rope_theta", "partial_rotary_factor", "tie_word_embeddings", "max_position_embeddings",
	"attn_output_gate", "attention_bias", "mtp_num_hidden_layers",
}

// rejectNulls reports the first member of the text config (or of its
// rope_parameters / rope_scaling) that is an explicit null but may not be.
func rejectNulls(raw json.RawMessage) error {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil // not an object: the typed decode has already said so
	}
	isNull := func(v json.RawMessage) bool { return strings.TrimSpace(string(v)) == "null" }
	for _, k := range nonNullable {
		if v, ok := members[k]; ok && isNull(v) {
			return fmt.Errorf("config.json: %s is null (leave it out to take the default)", k)
		}
	}
	for _, block := range []string{"rope_parameters", "rope_scaling"} {
		var rope map[string]json.RawMessage
		if json.Unmarshal(members[block], &rope) != nil {
			continue
		}
		for _, k := range []string{"rope_theta", "partial_rotary_factor"} {
			if v, ok := rope[k]; ok && isNull(v) {
				return fmt.Errorf("config.json: %s.%s is null (leave it out to take the default)", block, k)
			}
		}
	}
	return nil
}

type hfRope struct {
	RopeType            string   `json:"rope_type"`
	Type                string   `json:"type"` // legacy spelling of rope_type
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	MRopeSection        []int    `json:"mrope_section"`
	MRopeInterleaved    bool     `json:"mrope_interleaved"`
}

// empty reports whether r is absent or {} — falsy in Python, so
// transformers' `rope_scaling or rope_parameters` skips it.
func (r *hfRope) empty() bool {
	return r == nil || (r.RopeType == "" && r.Type == "" && r.RopeTheta == nil && r.PartialRotaryFactor == nil &&
		r.MRopeSection == nil && !r.MRopeInterleaved)
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

// The defaults of transformers' Qwen3_5TextConfig (transformers 5.x,
// configuration_qwen3_5.py and the RoPE standardisation of
// modeling_rope_utils.py). A config.json member that is absent (or null)
// takes exactly these values; see Default.
const (
	DefaultVocabSize             = 248320
	DefaultHiddenSize            = 4096
	DefaultIntermediateSize      = 12288
	DefaultNumHiddenLayers       = 32
	DefaultNumAttentionHeads     = 16
	DefaultNumKeyValueHeads      = 4
	DefaultHeadDim               = 256 // a class default: NOT hidden_size / num_attention_heads
	DefaultLinearConvKernelDim   = 4
	DefaultLinearKeyHeadDim      = 128
	DefaultLinearValueHeadDim    = 128
	DefaultLinearNumKeyHeads     = 16
	DefaultLinearNumValueHeads   = 32
	DefaultFullAttentionInterval = 4
	DefaultRMSNormEps            = 1e-6
	DefaultRopeTheta             = 10000.0 // RotaryEmbeddingConfigMixin.default_theta; Qwen3.5 checkpoints use 1e7
	DefaultPartialRotaryFactor   = 0.25
	DefaultMaxPositionEmbeddings = 32768
	DefaultTieWordEmbeddings     = false
	// DefaultMTPNumHiddenLayers is ninfer's: transformers does not read
	// mtp_num_hidden_layers (it drops mtp.* weights), so absent means no
	// MTP head.
	DefaultMTPNumHiddenLayers = 0
)

// Default is one config field that config.json did not set and the value
// it took.
type Default struct {
	// Field is the config.json member name, which is also the
	// components.text.config member name (rope_theta and
	// partial_rotary_factor are looked up in rope_parameters first, then at
	// the top level), or full_attention_interval, which derives layer_types.
	Field string
	// Value is the value applied: an int, float64, bool, or []string for a
	// derived layer_types.
	Value any
}

// String renders d as field=value; a long list is abbreviated.
func (d Default) String() string {
	switch v := d.Value.(type) {
	case []string:
		if len(v) > 4 {
			return fmt.Sprintf("%s=[%s, %s, … %d entries]", d.Field, v[0], v[1], len(v))
		}
		return fmt.Sprintf("%s=%v", d.Field, v)
	case float64:
		return d.Field + "=" + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprintf("%s=%v", d.Field, d.Value)
}

// FormatDefaults joins defaults as "a=1, b=2" for a one-line note.
func FormatDefaults(ds []Default) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ", ")
}

// DefaultsMap returns ds as a JSON-ready map field → value (the form
// ninfer-convert records in the artifact metadata as config_defaults).
func DefaultsMap(ds []Default) map[string]any {
	m := make(map[string]any, len(ds))
	for _, d := range ds {
		m[d.Field] = d.Value
	}
	return m
}

// ParseHFConfig parses a Hugging Face config.json of a Qwen3.5 dense model,
// either text-only (Qwen3_5ForCausalLM) or multimodal
// (Qwen3_5ForConditionalGeneration with text_config). Absent members take
// the transformers defaults; ParseHFConfigDefaults also says which.
func ParseHFConfig(data []byte) (Config, Layout, error) {
	c, layout, _, err := ParseHFConfigDefaults(data)
	return c, layout, err
}

// ParseHFConfigDefaults is ParseHFConfig that also returns every field that
// config.json left out and the transformers Qwen3_5TextConfig default it
// took, in Config field order.
func ParseHFConfigDefaults(data []byte) (Config, Layout, []Default, error) {
	var root hfRoot
	if err := json.Unmarshal(data, &root); err != nil {
		return Config{}, 0, nil, fmt.Errorf("config.json: %w", err)
	}
	arch := ""
	if len(root.Architectures) > 0 {
		arch = root.Architectures[0]
	}
	layout := LayoutCausalLM
	text := root.hfText
	text.raw = data
	switch {
	case arch == "Qwen3_5ForConditionalGeneration" || (arch == "" && root.ModelType == "qwen3_5"):
		if len(root.TextConfig) == 0 {
			return Config{}, 0, nil, fmt.Errorf("config.json: %s has no text_config", arch)
		}
		text = hfText{}
		if err := json.Unmarshal(root.TextConfig, &text); err != nil {
			return Config{}, 0, nil, fmt.Errorf("config.json: text_config: %w", err)
		}
		text.raw = root.TextConfig
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
		return Config{}, 0, nil, fmt.Errorf("config.json: unsupported architecture %s (want %s or Qwen3_5ForConditionalGeneration)", termsafe.Quote(name), Architecture)
	}
	if text.HiddenAct != "" && text.HiddenAct != "silu" {
		return Config{}, 0, nil, fmt.Errorf("config.json: unsupported hidden_act %s (want silu)", termsafe.Quote(text.HiddenAct))
	}
	if text.AttentionBias {
		return Config{}, 0, nil, fmt.Errorf("config.json: attention_bias=true is not supported")
	}
	if text.AttnOutputGate != nil && !*text.AttnOutputGate {
		return Config{}, 0, nil, fmt.Errorf("config.json: attn_output_gate=false is not supported")
	}
	if err := rejectNulls(text.raw); err != nil {
		return Config{}, 0, nil, err
	}
	var defs []Default
	num := func(field string, p *int, def int) int {
		if p != nil {
			return *p
		}
		defs = append(defs, Default{field, def})
		return def
	}
	c := Config{AttnOutputGate: true, BOSTokenID: text.BOSTokenID}
	c.VocabSize = num("vocab_size", text.VocabSize, DefaultVocabSize)
	c.HiddenSize = num("hidden_size", text.HiddenSize, DefaultHiddenSize)
	c.NumHiddenLayers = num("num_hidden_layers", text.NumHiddenLayers, DefaultNumHiddenLayers)
	c.IntermediateSize = num("intermediate_size", text.IntermediateSize, DefaultIntermediateSize)
	c.NumAttentionHeads = num("num_attention_heads", text.NumAttentionHeads, DefaultNumAttentionHeads)
	c.NumKeyValueHeads = num("num_key_value_heads", text.NumKeyValueHeads, DefaultNumKeyValueHeads)
	c.HeadDim = num("head_dim", text.HeadDim, DefaultHeadDim)
	c.LinearConvKernelDim = num("linear_conv_kernel_dim", text.LinearConvKernelDim, DefaultLinearConvKernelDim)
	c.LinearKeyHeadDim = num("linear_key_head_dim", text.LinearKeyHeadDim, DefaultLinearKeyHeadDim)
	c.LinearValueHeadDim = num("linear_value_head_dim", text.LinearValueHeadDim, DefaultLinearValueHeadDim)
	c.LinearNumKeyHeads = num("linear_num_key_heads", text.LinearNumKeyHeads, DefaultLinearNumKeyHeads)
	c.LinearNumValueHeads = num("linear_num_value_heads", text.LinearNumValueHeads, DefaultLinearNumValueHeads)
	c.LayerTypes = text.LayerTypes
	if c.LayerTypes == nil {
		// Qwen3_5TextConfig.__post_init__: every interval-th layer is full
		// attention, the interval popped from the kwargs (default 4).
		interval := num("full_attention_interval", text.FullAttentionInterval, DefaultFullAttentionInterval)
		if interval <= 0 {
			return Config{}, 0, nil, fmt.Errorf("config.json: full_attention_interval must be positive, got %d", interval)
		}
		if c.NumHiddenLayers > MaxLayers { // before deriving that many layer types
			return Config{}, 0, nil, fmt.Errorf("config.json: num_hidden_layers %d is more than %d", c.NumHiddenLayers, MaxLayers)
		}
		c.LayerTypes = make([]string, 0, max(c.NumHiddenLayers, 0))
		for i := 0; i < c.NumHiddenLayers; i++ {
			t := LinearAttention
			if (i+1)%interval == 0 {
				t = FullAttention
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
		defs = append(defs, Default{"layer_types", append([]string(nil), c.LayerTypes...)})
	}
	c.RMSNormEps = DefaultRMSNormEps
	if text.RMSNormEps != nil {
		c.RMSNormEps = *text.RMSNormEps
	} else {
		defs = append(defs, Default{"rms_norm_eps", DefaultRMSNormEps})
	}
	// RoPE, as PreTrainedConfig.convert_rope_params_to_dict resolves it:
	// rope_scaling (when non-empty) replaces rope_parameters; each of
	// rope_theta and partial_rotary_factor comes from that dict, else the
	// top-level member, else the default.
	rope := text.RopeParameters
	if !text.RopeScaling.empty() {
		rope = text.RopeScaling
	}
	if rope == nil {
		rope = &hfRope{}
	}
	rt := rope.RopeType
	if rt == "" {
		rt = rope.Type
	}
	if rt != "" && rt != "default" && rt != "mrope" {
		return Config{}, 0, nil, fmt.Errorf("config.json: unsupported rope_type %s", termsafe.Quote(rt))
	}
	flt := func(field string, inRope, top *float64, def float64) float64 {
		switch {
		case inRope != nil:
			return *inRope
		case top != nil:
			return *top
		}
		defs = append(defs, Default{field, def})
		return def
	}
	c.RopeTheta = flt("rope_theta", rope.RopeTheta, text.RopeTheta, DefaultRopeTheta)
	c.PartialRotaryFactor = flt("partial_rotary_factor", rope.PartialRotaryFactor, text.PartialRotaryFactor, DefaultPartialRotaryFactor)
	c.MRopeSection, c.MRopeInterleaved = rope.MRopeSection, rope.MRopeInterleaved
	c.TieWordEmbeddings = DefaultTieWordEmbeddings
	if text.TieWordEmbeddings != nil {
		c.TieWordEmbeddings = *text.TieWordEmbeddings
	} else {
		defs = append(defs, Default{"tie_word_embeddings", DefaultTieWordEmbeddings})
	}
	c.MaxPositionEmbeddings = num("max_position_embeddings", text.MaxPositionEmbeddings, DefaultMaxPositionEmbeddings)
	c.MTPNumHiddenLayers = num("mtp_num_hidden_layers", text.MTPNumHiddenLayers, DefaultMTPNumHiddenLayers)
	if ids, err := parseIDs(text.EOSTokenID); err != nil {
		return Config{}, 0, nil, fmt.Errorf("config.json: eos_token_id: %w", err)
	} else {
		c.EOSTokenIDs = ids
	}
	if err := c.Validate(); err != nil {
		return Config{}, 0, nil, err
	}
	return c, layout, defs, nil
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
