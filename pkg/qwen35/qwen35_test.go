package qwen35

import (
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
		{func(s string) string { return strings.Replace(s, `"vocab_size":248320,`, "", 1) }, "vocab_size must be positive"},
		{func(s string) string { return s[:40] }, "config.json"},
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
