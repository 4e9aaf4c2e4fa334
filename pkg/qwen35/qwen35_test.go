package qwen35

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// cfg27B is the 27B text config of reference/qwen35.md §1.2.
const cfg27B = `{"architectures":["Qwen3_5ForConditionalGeneration"],"model_type":"qwen3_5",
 "tie_word_embeddings":false,
 "text_config":{"model_type":"qwen3_5_text","vocab_size":248320,"hidden_size":5120,"num_hidden_layers":64,
  "intermediate_size":17408,"num_attention_heads":24,"num_key_value_heads":4,"head_dim":256,"hidden_act":"silu",
  "linear_conv_kernel_dim":4,"linear_key_head_dim":128,"linear_value_head_dim":128,"linear_num_key_heads":16,
  "linear_num_value_heads":48,"full_attention_interval":4,"rms_norm_eps":1e-6,"attn_output_gate":true,
  "mtp_num_hidden_layers":1,"max_position_embeddings":262144,"eos_token_id":248044,
  "rope_parameters":{"rope_type":"default","rope_theta":10000000,"partial_rotary_factor":0.25,
   "mrope_section":[11,11,10],"mrope_interleaved":true}}}`

const cfg9B = `{"architectures":["Qwen3_5ForCausalLM"],"model_type":"qwen3_5_text","vocab_size":248320,
 "hidden_size":4096,"num_hidden_layers":32,"intermediate_size":12288,"num_attention_heads":16,
 "num_key_value_heads":4,"head_dim":256,"linear_key_head_dim":128,"linear_value_head_dim":128,
 "linear_num_key_heads":16,"linear_num_value_heads":32,"rms_norm_eps":1e-6,"tie_word_embeddings":false,
 "rope_theta":10000000,"eos_token_id":[248044,248046]}`

func TestParse27B(t *testing.T) {
	c, layout, err := ParseHFConfig([]byte(cfg27B))
	if err != nil {
		t.Fatal(err)
	}
	if layout != LayoutMultimodal {
		t.Errorf("layout = %v, want multimodal", layout)
	}
	if got := len(c.FullLayers()); got != 16 {
		t.Errorf("full layers = %d, want 16", got)
	}
	if c.FullLayers()[0] != 3 || c.FullLayers()[15] != 63 || c.IsFull(0) {
		t.Errorf("full layers %v: want 3, 7, …, 63", c.FullLayers())
	}
	if c.RotaryDim() != 64 || c.KeyDim() != 2048 || c.ValueDim() != 6144 || c.ConvDim() != 10240 {
		t.Errorf("rotary %d key %d value %d conv %d; want 64 2048 6144 10240", c.RotaryDim(), c.KeyDim(), c.ValueDim(), c.ConvDim())
	}
	if c.RopeTheta != 1e7 || len(c.EOSTokenIDs) != 1 || c.EOSTokenIDs[0] != 248044 || c.TieWordEmbeddings || !c.MRopeInterleaved {
		t.Errorf("rope θ %g eos %v tied %t mrope %t", c.RopeTheta, c.EOSTokenIDs, c.TieWordEmbeddings, c.MRopeInterleaved)
	}
	// reference/qwen35.md §2: 14 tensors per linear layer, 11 per full
	// layer, +3 → 851 text tensors; the MTP head adds 15.
	ts := c.Tensors()
	text, mtp := 0, 0
	var params int64
	for _, tn := range ts {
		n := int64(1)
		for _, d := range tn.Shape {
			n *= d
		}
		switch tn.Component {
		case ComponentText:
			text++
			params += n
		case ComponentMTP:
			mtp++
		}
	}
	if text != 851 || mtp != 15 {
		t.Errorf("27B inventory: %d text + %d mtp tensors, want 851 + 15", text, mtp)
	}
	if params < 26_850_000_000 || params > 26_950_000_000 {
		t.Errorf("27B text parameters = %d, want ≈ 26.90 B", params)
	}
}

func TestParse9BTextOnly(t *testing.T) {
	c, layout, err := ParseHFConfig([]byte(cfg9B))
	if err != nil {
		t.Fatal(err)
	}
	if layout != LayoutCausalLM || len(c.LayerTypes) != 32 || len(c.FullLayers()) != 8 {
		t.Fatalf("layout %v, %d layer types, %d full", layout, len(c.LayerTypes), len(c.FullLayers()))
	}
	if c.PartialRotaryFactor != 0.25 || c.LinearConvKernelDim != 4 || len(c.EOSTokenIDs) != 2 {
		t.Errorf("defaults: rotary factor %g conv %d eos %v", c.PartialRotaryFactor, c.LinearConvKernelDim, c.EOSTokenIDs)
	}
	var params int64
	n := 0
	for _, tn := range c.Tensors() {
		if tn.Component != ComponentText {
			continue
		}
		n++
		p := int64(1)
		for _, d := range tn.Shape {
			p *= d
		}
		params += p
	}
	// reference/qwen35.md §1.2: 9B text params = 8,953,803,264; 427 tensors.
	if n != 427 || params != 8_953_803_264 {
		t.Errorf("9B: %d tensors, %d params; want 427, 8953803264", n, params)
	}
}

func TestTensorNames(t *testing.T) {
	c, _, err := ParseHFConfig([]byte(cfg9B))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Tensor{}
	for _, tn := range c.Tensors() {
		byName[tn.Name] = tn
	}
	cases := []struct {
		name, hf string
		shape    []int64
		class    Class
	}{
		{"text/layers/3/attention/q_proj", "model.layers.3.self_attn.q_proj.weight", []int64{8192, 4096}, ClassAttnQ},
		{"text/layers/0/gdn/conv1d", "model.layers.0.linear_attn.conv1d.weight", []int64{8192, 4}, ClassConv},
		{"text/layers/0/gdn/a_log", "model.layers.0.linear_attn.A_log", []int64{32}, ClassControl},
		{NameOutputHead, "lm_head.weight", []int64{248320, 4096}, ClassOutputHead},
	}
	for _, tc := range cases {
		tn, ok := byName[tc.name]
		if !ok {
			t.Errorf("%s missing", tc.name)
			continue
		}
		if tn.HFName != tc.hf || tn.Class != tc.class || len(tn.Shape) != len(tc.shape) || tn.Shape[0] != tc.shape[0] || tn.Shape[1%len(tn.Shape)] != tc.shape[1%len(tc.shape)] {
			t.Errorf("%s: %+v", tc.name, tn)
		}
	}
	if got := HFNameFor("model.layers.0.mlp.up_proj.weight", LayoutMultimodal); got != "model.language_model.layers.0.mlp.up_proj.weight" {
		t.Errorf("HFNameFor multimodal = %q", got)
	}
	if got := HFNameFor("lm_head.weight", LayoutMultimodal); got != "lm_head.weight" {
		t.Errorf("HFNameFor(lm_head) = %q", got)
	}
	if !IgnoredHFName("model.visual.blocks.0.attn.qkv.weight") || IgnoredHFName("mtp.fc.weight") {
		t.Error("IgnoredHFName")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		edit func(string) string
		want string
	}{
		{func(s string) string { return strings.Replace(s, "Qwen3_5ForCausalLM", "LlamaForCausalLM", 1) }, `unsupported architecture "LlamaForCausalLM"`},
		{func(s string) string {
			return strings.Replace(s, `"hidden_size":4096,`, `"hidden_size":4096,"hidden_act":"gelu",`, 1)
		}, "hidden_act"},
		{func(s string) string {
			return strings.Replace(s, `"hidden_size":4096,`, `"hidden_size":4096,"attention_bias":true,`, 1)
		}, "attention_bias"},
		{func(s string) string {
			return strings.Replace(s, `"num_key_value_heads":4`, `"num_key_value_heads":5`, 1)
		}, "not a multiple"},
		{func(s string) string {
			return strings.Replace(s, `"hidden_size":4096,`, `"hidden_size":4096,"layer_types":["full_attention"],`, 1)
		}, "layer_types has 1 entries"},
		{func(s string) string { return strings.Replace(s, `"vocab_size":248320,`, `"vocab_size":0,`, 1) }, "vocab_size must be positive"},
		{func(s string) string {
			return strings.Replace(s, `"vocab_size":248320,`, `"full_attention_interval":0,`, 1)
		}, "full_attention_interval must be positive"},
		{func(s string) string {
			return strings.Replace(s, `"rope_theta":10000000,`, `"rope_parameters":{"rope_type":"yarn"},`, 1)
		}, `unsupported rope_type "yarn"`},
		{func(s string) string { return s[:40] }, "config.json"},
		{func(s string) string { return strings.Replace(s, `"head_dim":256`, `"head_dim":null`, 1) }, "config.json: head_dim is null"},
		{func(s string) string {
			return strings.Replace(s, `"rope_theta":10000000,`, `"rope_parameters":{"rope_theta":null},`, 1)
		}, "config.json: rope_parameters.rope_theta is null"},
	}
	for _, c := range cases {
		_, _, err := ParseHFConfig([]byte(c.edit(cfg9B)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}

func TestTiedHasNoOutputHead(t *testing.T) {
	c, _, err := ParseHFConfig([]byte(strings.Replace(cfg9B, `"tie_word_embeddings":false`, `"tie_word_embeddings":true`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range c.Tensors() {
		if tn.Name == NameOutputHead {
			t.Fatal("tied config lists text/output_head")
		}
	}
}

// minimal is a text-only config.json that gives only what the tests below
// vary plus the dimensions of a tiny model; everything else is defaulted.
func minimal(extra string) string {
	return `{"architectures":["Qwen3_5ForCausalLM"],"vocab_size":512,"hidden_size":64,"num_hidden_layers":4,` +
		`"intermediate_size":128,"num_attention_heads":2,"num_key_value_heads":1,"linear_key_head_dim":16,` +
		`"linear_value_head_dim":16,"linear_num_key_heads":2,"linear_num_value_heads":2,"rms_norm_eps":1e-6,` +
		`"tie_word_embeddings":true,"max_position_embeddings":4096,"mtp_num_hidden_layers":0` + extra + `}`
}

// TestParseDefaults pins the defaults to transformers' Qwen3_5TextConfig
// (transformers 5.24.0: configuration_qwen3_5.py, and
// modeling_rope_utils.convert_rope_params_to_dict for RoPE); the expected
// values were checked against Qwen3_5TextConfig(**config) in Python.
func TestParseDefaults(t *testing.T) {
	interval4 := []string{LinearAttention, LinearAttention, LinearAttention, FullAttention}
	cases := []struct {
		name       string
		cfg        string
		theta, prf float64
		headDim    int
		defaulted  []Default
	}{
		{"no rope_parameters, no head_dim", minimal(""), 10000, 0.25, 256, []Default{
			{"head_dim", 256}, {"linear_conv_kernel_dim", 4}, {"full_attention_interval", 4}, {"layer_types", interval4},
			{"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}}},
		{"rope_parameters without partial_rotary_factor", minimal(`,"head_dim":32,"linear_conv_kernel_dim":4,"layer_types":["linear_attention","linear_attention","linear_attention","full_attention"],"rope_parameters":{"rope_type":"default","rope_theta":1e7}`),
			1e7, 0.25, 32, []Default{{"partial_rotary_factor", 0.25}}},
		{"rope_parameters without rope_theta", minimal(`,"head_dim":32,"full_attention_interval":2,"rope_parameters":{"rope_type":"default","partial_rotary_factor":0.5}`),
			10000, 0.5, 32, []Default{{"linear_conv_kernel_dim", 4}, {"layer_types", []string{LinearAttention, FullAttention, LinearAttention, FullAttention}}, {"rope_theta", 10000.0}}},
		{"top-level rope members fill rope_parameters", minimal(`,"head_dim":32,"linear_conv_kernel_dim":4,"full_attention_interval":4,"rope_parameters":{"rope_type":"default"},"rope_theta":5e6,"partial_rotary_factor":0.5`),
			5e6, 0.5, 32, []Default{{"layer_types", interval4}}},
		{"rope_parameters wins over top level", minimal(`,"head_dim":32,"linear_conv_kernel_dim":4,"full_attention_interval":4,"rope_parameters":{"type":"default","rope_theta":1e6,"partial_rotary_factor":0.25},"rope_theta":5e6`),
			1e6, 0.25, 32, []Default{{"layer_types", interval4}}},
		{"rope_scaling replaces rope_parameters", minimal(`,"head_dim":32,"linear_conv_kernel_dim":4,"full_attention_interval":4,"rope_parameters":{"rope_theta":1e6,"partial_rotary_factor":0.5},"rope_scaling":{"rope_type":"default","rope_theta":3e6}`),
			3e6, 0.25, 32, []Default{{"layer_types", interval4}, {"partial_rotary_factor", 0.25}}},
		{"null rope_parameters counts as absent", minimal(`,"head_dim":32,"linear_conv_kernel_dim":4,"layer_types":null,"rope_parameters":null,"rope_theta":1e7,"partial_rotary_factor":0.25`),
			1e7, 0.25, 32, []Default{{"full_attention_interval", 4}, {"layer_types", interval4}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, defs, err := ParseHFConfigDefaults([]byte(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			if c.RopeTheta != tc.theta || c.PartialRotaryFactor != tc.prf || c.HeadDim != tc.headDim {
				t.Errorf("rope θ %g, partial_rotary_factor %g, head_dim %d; want %g, %g, %d", c.RopeTheta, c.PartialRotaryFactor, c.HeadDim, tc.theta, tc.prf, tc.headDim)
			}
			if !reflect.DeepEqual(defs, tc.defaulted) {
				t.Errorf("defaulted %v\nwant      %v", defs, tc.defaulted)
			}
			// Every reported default is the value the config holds.
			for _, d := range defs {
				if d.Field == "full_attention_interval" {
					continue
				}
				if got := fieldOf(t, c, d.Field); !reflect.DeepEqual(got, d.Value) {
					t.Errorf("default %s=%v, but the config holds %v", d.Field, d.Value, got)
				}
			}
		})
	}
}

// fieldOf returns the value of the Config field with the given JSON name.
func fieldOf(t *testing.T, c Config, name string) any {
	t.Helper()
	v := reflect.ValueOf(c)
	for i := 0; i < v.NumField(); i++ {
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); tag == name {
			return v.Field(i).Interface()
		}
	}
	t.Fatalf("Config has no field %q", name)
	return nil
}

// TestParseAllDefaults: an empty text config takes every class default —
// the 9B shape, θ 10000 (not the checkpoints' 1e7) and head_dim 256 — and
// reports every field.
func TestParseAllDefaults(t *testing.T) {
	c, _, defs, err := ParseHFConfigDefaults([]byte(`{"architectures":["Qwen3_5ForCausalLM"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		VocabSize: 248320, HiddenSize: 4096, NumHiddenLayers: 32, IntermediateSize: 12288,
		NumAttentionHeads: 16, NumKeyValueHeads: 4, HeadDim: 256, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 128, LinearValueHeadDim: 128, LinearNumKeyHeads: 16, LinearNumValueHeads: 32,
		LayerTypes: c.LayerTypes, RMSNormEps: 1e-6, RopeTheta: 10000, PartialRotaryFactor: 0.25,
		MaxPositionEmbeddings: 32768, AttnOutputGate: true,
	}
	if !reflect.DeepEqual(c, want) || len(c.FullLayers()) != 8 || c.FullLayers()[0] != 3 {
		t.Errorf("config %+v\nwant   %+v", c, want)
	}
	var fields []string
	for _, d := range defs {
		fields = append(fields, d.Field)
	}
	wantFields := "vocab_size hidden_size num_hidden_layers intermediate_size num_attention_heads num_key_value_heads head_dim " +
		"linear_conv_kernel_dim linear_key_head_dim linear_value_head_dim linear_num_key_heads linear_num_value_heads " +
		"full_attention_interval layer_types rms_norm_eps rope_theta partial_rotary_factor tie_word_embeddings " +
		"max_position_embeddings mtp_num_hidden_layers"
	if got := strings.Join(fields, " "); got != wantFields {
		t.Errorf("defaulted fields\n%s\nwant\n%s", got, wantFields)
	}
	if got := FormatDefaults(defs[5:8]); got != "num_key_value_heads=4, head_dim=256, linear_conv_kernel_dim=4" {
		t.Errorf("FormatDefaults = %q", got)
	}
	if got := defs[13].String(); got != "layer_types=[linear_attention, linear_attention, … 32 entries]" {
		t.Errorf("layer_types default renders as %q", got)
	}
	if got := DefaultsMap(defs)["rope_theta"]; got != 10000.0 {
		t.Errorf("DefaultsMap rope_theta = %v", got)
	}
}

// TestGoldenConfigsNeedNoDefaults: the committed golden checkpoints (saved
// by transformers) spell out every field, so nothing is defaulted.
func TestGoldenConfigsNeedNoDefaults(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "golden", "*", "config.json"))
	if len(paths) == 0 {
		t.Skip("no golden configs")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, _, defs, err := ParseHFConfigDefaults(b)
		if err != nil || len(defs) != 0 {
			t.Errorf("%s: defaulted %v, err %v", p, defs, err)
		}
	}
}

// TestParse27BDefaults: the reference 27B config derives layer_types from
// its full_attention_interval and defaults nothing else.
func TestParse27BDefaults(t *testing.T) {
	_, _, defs, err := ParseHFConfigDefaults([]byte(cfg27B))
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || defs[0].Field != "layer_types" {
		t.Errorf("27B defaulted %v, want only layer_types", defs)
	}
}
