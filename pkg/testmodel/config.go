package testmodel

// mropeSection splits rotary/2 frequency slots into T/H/W sections the way
// the real checkpoints do ([11,11,10] for rotary 64).
func mropeSection(rotary int) []int {
	half := rotary / 2
	a := (half + 2) / 3
	b := (half - a + 1) / 2
	return []int{a, b, half - a - b}
}

// textConfig renders the HF text config (Qwen3_5TextConfig field names plus
// the checkpoint-only keys of the released models).
func (o Options) textConfig(torchDType string, eos int, withArch bool) orderedObject {
	c := o.Config()
	var doc orderedObject
	if withArch {
		doc = append(doc, kv{"architectures", []string{"Qwen3_5ForCausalLM"}})
	}
	doc = append(doc,
		kv{"model_type", "qwen3_5_text"},
		kv{"attention_bias", false},
		kv{"attention_dropout", 0.0},
		kv{"attn_output_gate", true},
		kv{"dtype", torchDType},
		kv{"eos_token_id", eos},
		kv{"full_attention_interval", o.FullAttentionInterval},
		kv{"head_dim", o.HeadDim},
		kv{"hidden_act", "silu"},
		kv{"hidden_size", o.Hidden},
		kv{"initializer_range", 0.02},
		kv{"intermediate_size", o.Intermediate},
		kv{"layer_types", c.LayerTypes},
		kv{"linear_conv_kernel_dim", o.ConvKernel},
		kv{"linear_key_head_dim", o.LinearKeyHeadDim},
		kv{"linear_num_key_heads", o.LinearKeyHeads},
		kv{"linear_num_value_heads", o.LinearValueHeads},
		kv{"linear_value_head_dim", o.LinearValueHeadDim},
		kv{"mamba_ssm_dtype", "float32"},
		kv{"max_position_embeddings", o.MaxPositionEmbeddings},
		kv{"mlp_only_layers", []int{}},
		kv{"mtp_num_hidden_layers", o.MTPLayers},
		kv{"mtp_use_dedicated_embeddings", false},
		kv{"num_attention_heads", o.Heads},
		kv{"num_hidden_layers", o.Layers},
		kv{"num_key_value_heads", o.KVHeads},
		kv{"rms_norm_eps", o.RMSNormEps},
		kv{"rope_parameters", orderedObject{
			{"mrope_interleaved", true},
			{"mrope_section", mropeSection(c.RotaryDim())},
			{"partial_rotary_factor", o.PartialRotaryFactor},
			{"rope_theta", o.RopeTheta},
			{"rope_type", "default"},
		}},
		kv{"tie_word_embeddings", o.Tied},
		kv{"use_cache", true},
		kv{"vocab_size", o.Vocab},
	)
	return doc
}

// ConfigJSON renders config.json: text-only Qwen3_5ForCausalLM, or the
// multimodal Qwen3_5ForConditionalGeneration wrapper with text_config and a
// small vision_config.
func (o Options) ConfigJSON(eos int) ([]byte, error) {
	_, torchDType, err := o.dtype()
	if err != nil {
		return nil, err
	}
	if !o.Multimodal {
		return indentJSON(o.textConfig(torchDType, eos, true))
	}
	doc := orderedObject{
		{"architectures", []string{"Qwen3_5ForConditionalGeneration"}},
		{"model_type", "qwen3_5"},
		{"text_config", o.textConfig(torchDType, eos, false)},
		{"tie_word_embeddings", o.Tied},
		{"vision_config", orderedObject{
			{"model_type", "qwen3_5_vision"},
			{"depth", 1},
			{"hidden_size", visualHidden},
			{"in_channels", 3},
			{"out_hidden_size", o.Hidden},
			{"patch_size", visualPatch},
			{"spatial_merge_size", 2},
			{"temporal_patch_size", 2},
		}},
	}
	return indentJSON(doc)
}

// Generation config defaults (Qwen3 instruct values).
func generationConfig(tok *Tokenizer) ([]byte, error) {
	return indentJSON(orderedObject{
		{"bos_token_id", tok.ID(TokEndOfText)},
		{"do_sample", true},
		{"eos_token_id", []int{tok.ID(TokIMEnd), tok.ID(TokEndOfText)}},
		{"pad_token_id", tok.ID(TokEndOfText)},
		{"temperature", 0.6},
		{"top_k", 20},
		{"top_p", 0.95},
		{"transformers_version", "5.2.0"},
	})
}
