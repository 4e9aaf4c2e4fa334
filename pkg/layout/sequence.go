package layout

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// SequenceOptions are the inputs of the per-sequence arena.
type SequenceOptions struct {
	MaxContext int    // tokens (KV pages = ceil(MaxContext/64))
	StepTokens int    // StepTokens(max context, prefill chunk)
	KVDtype    string // bf16, int8, fp8 or fp32
	StateSlots int    // GDN state slots per layer (≥ 1)
	// ConvElemBytes overrides the conv state element size (0 =
	// ConvStateElemBytes, the engine's); planning only, e.g. the
	// reference's bf16 state for the seed reconciliation.
	ConvElemBytes int
	// DeviceSampler adds the term ctl.sampler (SamplerBytes(vocab)): the
	// penalty state, RNG position and drawn id of sampling on the device
	// (the CUDA backend; the CPU samples on the host).
	DeviceSampler bool
}

// SeqGeometry describes the terms of a sequence arena.
type SeqGeometry struct {
	Pages          int
	KVVectors      int64 // vectors per plane of one layer: pages·kv_heads·64
	KVCode         int64 // bytes per vector, code plane
	KVScale        int64 // bytes per vector, scale plane (0: none)
	KVLayers       int
	KVLayerBytes   int64 // one layer: 2·KVVectors·(KVCode+KVScale)
	GDNLayers      int
	Slots          int
	SSMSlotBytes   int64 // one layer, one slot: nv·dk·dv·4
	ConvSlotBytes  int64 // one layer, one slot: conv_dim·(K−1)·ConvStateElemBytes
	ConvSlotFloats int64 // conv_dim·(K−1) elements per slot
}

// BytesPerTokenHead is K+V of one token of one KV head.
func (g SeqGeometry) BytesPerTokenHead() int64 { return 2 * (g.KVCode + g.KVScale) }

// KVPayloadBytes is the KV planes of all full-attention layers.
func (g SeqGeometry) KVPayloadBytes() int64 { return int64(g.KVLayers) * g.KVLayerBytes }

// KVPlanes are the offsets of the K, V, K-scale and V-scale planes of full
// layer l within the kv.text term (scales are meaningful when KVScale > 0).
func (g SeqGeometry) KVPlanes(l int) (k, v, ks, vs int64) {
	base := int64(l) * g.KVLayerBytes
	c, s := g.KVVectors*g.KVCode, g.KVVectors*g.KVScale
	return base, base + c, base + 2*c, base + 2*c + s
}

// SSMOffset and ConvOffset are the offsets of GDN layer l's slots within
// the gdn.ssm_state / gdn.conv_state terms.
func (g SeqGeometry) SSMOffset(l int) int64 { return int64(l) * int64(g.Slots) * g.SSMSlotBytes }
func (g SeqGeometry) ConvOffset(l int) int64 {
	return int64(l) * int64(g.Slots) * g.ConvSlotBytes
}

// Geometry computes the sequence geometry of c.
func Geometry(c qwen35.Config, o SequenceOptions) (SeqGeometry, error) {
	if o.MaxContext < 1 || o.StepTokens < 1 || o.StateSlots < 1 {
		return SeqGeometry{}, fmt.Errorf("layout: sequence needs a positive max context (%d), step tokens (%d) and state slots (%d)",
			o.MaxContext, o.StepTokens, o.StateSlots)
	}
	code, scale, err := KVPlaneBytes(o.KVDtype, c.HeadDim)
	if err != nil {
		return SeqGeometry{}, err
	}
	g := SeqGeometry{Pages: Pages(o.MaxContext), KVCode: code, KVScale: scale,
		KVLayers: len(c.FullLayers()), GDNLayers: len(c.LinearLayers()), Slots: o.StateSlots}
	g.KVVectors = int64(g.Pages) * int64(c.NumKeyValueHeads) * KVPage
	g.KVLayerBytes = 2 * g.KVVectors * (code + scale)
	g.SSMSlotBytes = 4 * int64(c.LinearNumValueHeads) * int64(c.LinearKeyHeadDim) * int64(c.LinearValueHeadDim)
	g.ConvSlotFloats = int64(c.ConvDim()) * int64(c.LinearConvKernelDim-1)
	elem := int64(ConvStateElemBytes)
	if o.ConvElemBytes > 0 {
		elem = int64(o.ConvElemBytes)
	}
	g.ConvSlotBytes = elem * g.ConvSlotFloats
	return g, nil
}

// SequenceTerms are the state terms (KV and GDN) and the other buffers
// (block table and control) of the sequence arena, in arena order: the
// state terms first, then the others.
func SequenceTerms(c qwen35.Config, o SequenceOptions) (state, other []Term, g SeqGeometry, err error) {
	if g, err = Geometry(c, o); err != nil {
		return nil, nil, g, err
	}
	slots := int64(g.GDNLayers) * int64(g.Slots)
	state = []Term{
		{Name: "kv.text", Bytes: g.KVPayloadBytes()},
		{Name: "gdn.ssm_state", Bytes: slots * g.SSMSlotBytes},
		{Name: "gdn.conv_state", Bytes: slots * g.ConvSlotBytes},
	}
	T := int64(o.StepTokens)
	other = []Term{
		{Name: "block_table", Bytes: 4 * int64(g.Pages)},
		{Name: "ctl.ids", Bytes: 4 * T},
		{Name: "ctl.pos", Bytes: 4 * T},
		{Name: "ctl.in_slot", Bytes: 4},
	}
	if o.DeviceSampler {
		other = append(other, Term{Name: "ctl.sampler", Bytes: SamplerBytes(c.VocabSize)})
	}
	return state, other, g, nil
}

// Sequence is the per-sequence arena of the engine.
func Sequence(c qwen35.Config, o SequenceOptions) (Arena, SeqGeometry, error) {
	state, other, g, err := SequenceTerms(c, o)
	if err != nil {
		return Arena{}, g, err
	}
	return Lay("sequence", append(state, other...)), g, nil
}

// SamplerBytes is the ctl.sampler term for vocab tokens: the sampler state
// of backend.Sample (int32 counts[vocab], then uint8 seen[vocab] padded to
// 4 bytes) padded to 8, the int64 RNG position and the int32 drawn id
// (padded to 8).
func SamplerBytes(vocab int) int64 {
	v := int64(vocab)
	state := 4*v + (v+3)/4*4
	return (state+7)/8*8 + 8 + 8
}
