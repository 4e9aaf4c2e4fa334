package qwen35

import (
	"fmt"
	"strings"
)

// Class is the recipe class of a tensor: a recipe maps each class to a format.
type Class string

// Tensor classes. Matrices get recipe formats; Norm/Conv/Control stay exact.
const (
	ClassEmbedding  Class = "embedding"
	ClassOutputHead Class = "output_head"
	ClassAttnQ      Class = "attn_q" // query+gate rows, head-interleaved
	ClassAttnK      Class = "attn_k"
	ClassAttnV      Class = "attn_v"
	ClassAttnO      Class = "attn_o"
	ClassGDNQKV     Class = "gdn_qkv"
	ClassGDNZ       Class = "gdn_z"
	ClassGDNA       Class = "gdn_a"
	ClassGDNB       Class = "gdn_b"
	ClassGDNOut     Class = "gdn_out"
	ClassMLPGate    Class = "mlp_gate"
	ClassMLPUp      Class = "mlp_up"
	ClassMLPDown    Class = "mlp_down"
	ClassMTPFC      Class = "mtp_fc"
	ClassMTPMatrix  Class = "mtp_matrix" // MTP layer attention + MLP matrices
	ClassNorm       Class = "norm"       // RMSNorm weights, stored bf16
	ClassConv       Class = "conv"       // GDN depthwise conv [conv_dim, K], stored bf16
	ClassControl    Class = "control"    // A_log, dt_bias, stored fp32
	ClassDraftHead  Class = "draft_head" // reduced-vocabulary proposal head
	ClassDraftIDs   Class = "draft_ids"  // int32 id map of the proposal head
)

// Component names of the .ninfer directory.
const (
	ComponentText     = "text"
	ComponentMTP      = "mtp"
	ComponentProposal = "proposal"
)

// Tensor describes one weight tensor of the model.
type Tensor struct {
	Name    string  // ninfer object name, e.g. "text/layers/3/attention/q_proj"
	HFName  string  // text-only (Qwen3_5ForCausalLM) checkpoint name
	Shape   []int64 // ninfer shape (conv1d squeezed to [conv_dim, K])
	HFShape []int64 // checkpoint shape
	// Dims names the config expression of each Shape dimension, e.g.
	// ["vocab_size", "hidden_size"], for error messages.
	Dims      []string
	Class     Class
	Component string
}

// Object names of the text trunk.
const (
	NameEmbedding  = "text/token_embedding"
	NameFinalNorm  = "text/final_norm"
	NameOutputHead = "text/output_head"
	NameDraftHead  = "text/draft_head"
	NameDraftIDs   = "text/draft_head_token_ids"
)

// LayerName returns the object name of a per-layer tensor, e.g.
// LayerName(3, "attention/q_proj") = "text/layers/3/attention/q_proj".
func LayerName(l int, suffix string) string { return fmt.Sprintf("text/layers/%d/%s", l, suffix) }

// MTPLayerName returns the object name of a tensor of MTP layer l.
func MTPLayerName(l int, suffix string) string { return fmt.Sprintf("mtp/layers/%d/%s", l, suffix) }

// Tensors returns the text (and, when c.MTPNumHiddenLayers > 0, MTP) tensor
// inventory in writer order.
func (c Config) Tensors() []Tensor {
	H, I, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	hd, nh, nkv := int64(c.HeadDim), int64(c.NumAttentionHeads), int64(c.NumKeyValueHeads)
	nv, dv := int64(c.LinearNumValueHeads), int64(c.LinearValueHeadDim)
	conv, vdim := int64(c.ConvDim()), int64(c.ValueDim())
	K := int64(c.LinearConvKernelDim)
	// Names of the dimensions, as config expressions.
	const (
		dH, dI, dV   = "hidden_size", "intermediate_size", "vocab_size"
		dQ           = "2·num_attention_heads·head_dim"
		dKV          = "num_key_value_heads·head_dim"
		dO           = "num_attention_heads·head_dim"
		dHD          = "head_dim"
		dConv        = "2·linear_num_key_heads·linear_key_head_dim+linear_num_value_heads·linear_value_head_dim"
		dVal         = "linear_num_value_heads·linear_value_head_dim"
		dNV, dDV, dK = "linear_num_value_heads", "linear_value_head_dim", "linear_conv_kernel_dim"
		dFC          = "2·hidden_size"
	)
	var out []Tensor
	add := func(name, hf string, shape []int64, dims []string, class Class, comp string) {
		out = append(out, Tensor{Name: name, HFName: hf, Shape: shape, HFShape: shape, Dims: dims, Class: class, Component: comp})
	}
	add(NameEmbedding, "model.embed_tokens.weight", []int64{V, H}, []string{dV, dH}, ClassEmbedding, ComponentText)
	attn := func(prefix, hf string, comp string, mtp bool) {
		qc, kc, vc, oc := ClassAttnQ, ClassAttnK, ClassAttnV, ClassAttnO
		if mtp {
			qc, kc, vc, oc = ClassMTPMatrix, ClassMTPMatrix, ClassMTPMatrix, ClassMTPMatrix
		}
		add(prefix+"attention/q_proj", hf+"self_attn.q_proj.weight", []int64{2 * nh * hd, H}, []string{dQ, dH}, qc, comp)
		add(prefix+"attention/k_proj", hf+"self_attn.k_proj.weight", []int64{nkv * hd, H}, []string{dKV, dH}, kc, comp)
		add(prefix+"attention/v_proj", hf+"self_attn.v_proj.weight", []int64{nkv * hd, H}, []string{dKV, dH}, vc, comp)
		add(prefix+"attention/o_proj", hf+"self_attn.o_proj.weight", []int64{H, nh * hd}, []string{dH, dO}, oc, comp)
		add(prefix+"attention/q_norm", hf+"self_attn.q_norm.weight", []int64{hd}, []string{dHD}, ClassNorm, comp)
		add(prefix+"attention/k_norm", hf+"self_attn.k_norm.weight", []int64{hd}, []string{dHD}, ClassNorm, comp)
	}
	mlp := func(prefix, hf string, comp string, mtp bool) {
		gc, uc, dc := ClassMLPGate, ClassMLPUp, ClassMLPDown
		if mtp {
			gc, uc, dc = ClassMTPMatrix, ClassMTPMatrix, ClassMTPMatrix
		}
		add(prefix+"mlp/gate_proj", hf+"mlp.gate_proj.weight", []int64{I, H}, []string{dI, dH}, gc, comp)
		add(prefix+"mlp/up_proj", hf+"mlp.up_proj.weight", []int64{I, H}, []string{dI, dH}, uc, comp)
		add(prefix+"mlp/down_proj", hf+"mlp.down_proj.weight", []int64{H, I}, []string{dH, dI}, dc, comp)
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		p, hf := LayerName(l, ""), fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_norm", hf+"input_layernorm.weight", []int64{H}, []string{dH}, ClassNorm, ComponentText)
		if c.IsFull(l) {
			attn(p, hf, ComponentText, false)
		} else {
			g := hf + "linear_attn."
			add(p+"gdn/in_proj_qkv", g+"in_proj_qkv.weight", []int64{conv, H}, []string{dConv, dH}, ClassGDNQKV, ComponentText)
			add(p+"gdn/in_proj_z", g+"in_proj_z.weight", []int64{vdim, H}, []string{dVal, dH}, ClassGDNZ, ComponentText)
			add(p+"gdn/in_proj_b", g+"in_proj_b.weight", []int64{nv, H}, []string{dNV, dH}, ClassGDNB, ComponentText)
			add(p+"gdn/in_proj_a", g+"in_proj_a.weight", []int64{nv, H}, []string{dNV, dH}, ClassGDNA, ComponentText)
			out = append(out, Tensor{Name: p + "gdn/conv1d", HFName: g + "conv1d.weight", Shape: []int64{conv, K},
				HFShape: []int64{conv, 1, K}, Dims: []string{dConv, dK}, Class: ClassConv, Component: ComponentText})
			add(p+"gdn/dt_bias", g+"dt_bias", []int64{nv}, []string{dNV}, ClassControl, ComponentText)
			add(p+"gdn/a_log", g+"A_log", []int64{nv}, []string{dNV}, ClassControl, ComponentText)
			add(p+"gdn/norm", g+"norm.weight", []int64{dv}, []string{dDV}, ClassNorm, ComponentText)
			add(p+"gdn/out_proj", g+"out_proj.weight", []int64{H, vdim}, []string{dH, dVal}, ClassGDNOut, ComponentText)
		}
		add(p+"post_attention_norm", hf+"post_attention_layernorm.weight", []int64{H}, []string{dH}, ClassNorm, ComponentText)
		mlp(p, hf, ComponentText, false)
	}
	add(NameFinalNorm, "model.norm.weight", []int64{H}, []string{dH}, ClassNorm, ComponentText)
	if !c.TieWordEmbeddings {
		add(NameOutputHead, "lm_head.weight", []int64{V, H}, []string{dV, dH}, ClassOutputHead, ComponentText)
	}
	if c.MTPNumHiddenLayers > 0 {
		add("mtp/fc", "mtp.fc.weight", []int64{H, 2 * H}, []string{dH, dFC}, ClassMTPFC, ComponentMTP)
		add("mtp/pre_fc_norm_embedding", "mtp.pre_fc_norm_embedding.weight", []int64{H}, []string{dH}, ClassNorm, ComponentMTP)
		add("mtp/pre_fc_norm_hidden", "mtp.pre_fc_norm_hidden.weight", []int64{H}, []string{dH}, ClassNorm, ComponentMTP)
		for l := 0; l < c.MTPNumHiddenLayers; l++ {
			p, hf := MTPLayerName(l, ""), fmt.Sprintf("mtp.layers.%d.", l)
			add(p+"input_norm", hf+"input_layernorm.weight", []int64{H}, []string{dH}, ClassNorm, ComponentMTP)
			attn(p, hf, ComponentMTP, true)
			add(p+"post_attention_norm", hf+"post_attention_layernorm.weight", []int64{H}, []string{dH}, ClassNorm, ComponentMTP)
			mlp(p, hf, ComponentMTP, true)
		}
		add("mtp/norm", "mtp.norm.weight", []int64{H}, []string{dH}, ClassNorm, ComponentMTP)
	}
	return out
}

// HFNameFor converts a text-only checkpoint name to the name used by a
// checkpoint with the given layout.
func HFNameFor(textOnly string, layout Layout) string {
	if layout == LayoutMultimodal && strings.HasPrefix(textOnly, "model.") {
		return "model.language_model." + strings.TrimPrefix(textOnly, "model.")
	}
	return textOnly
}

// IgnoredHFName reports whether a checkpoint tensor is deliberately skipped
// (the vision tower).
func IgnoredHFName(name string) bool {
	return strings.HasPrefix(name, "model.visual.") || strings.HasPrefix(name, "visual.")
}
