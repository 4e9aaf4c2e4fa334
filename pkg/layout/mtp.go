package layout

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// MTP arena names (pkg/engine/mtp.go allocates each as its own arena).
const (
	MTPWeightsArena   = "mtp.weights"
	MTPSequenceArena  = "mtp.sequence"
	MTPWorkspaceArena = "mtp.workspace"
)

// MTPWeights lays out the MTP head's weights arena from (object id, bound
// bytes) terms in binding order: the mtp/* tensors in inventory order
// (layout.BoundBytes: vectors widened to fp32), then, with the proposal head,
// text/draft_head (encoded payload) and text/draft_head_token_ids (int32
// [N]).
func MTPWeights(terms []Term) Arena { return Lay(MTPWeightsArena, terms) }

// MTPRows is the most rows one MTP step processes: a prefill chunk (or a
// verify pass of state-slot tokens) plus the row pending from the previous
// target step.
func MTPRows(stepTokens, stateSlots int) int { return max(stepTokens, stateSlots) + 1 }

// MTPKVLayers is the number of KV layers of the MTP head's cache: the engine
// runs MTP layer 0 at every draft step (qwen35.md: layer index = step %
// mtp_num_hidden_layers, always 0 for Qwen3.5), so one layer.
const MTPKVLayers = 1

// MTPGeometry is the KV geometry of the MTP head's cache: MTPKVLayers layer
// of Pages(MaxContext) pages (the target's page count), planes as in
// SeqGeometry.KVPlanes; no GDN state.
func MTPGeometry(c qwen35.Config, o SequenceOptions) (SeqGeometry, error) {
	if o.MaxContext < 1 || o.StepTokens < 1 || o.StateSlots < 1 {
		return SeqGeometry{}, fmt.Errorf("layout: mtp sequence needs a positive max context (%d), step tokens (%d) and state slots (%d)",
			o.MaxContext, o.StepTokens, o.StateSlots)
	}
	code, scale, err := KVPlaneBytes(o.KVDtype, c.HeadDim)
	if err != nil {
		return SeqGeometry{}, err
	}
	g := SeqGeometry{Pages: Pages(o.MaxContext), KVCode: code, KVScale: scale, KVLayers: MTPKVLayers}
	g.KVVectors = int64(g.Pages) * int64(c.NumKeyValueHeads) * KVPage
	g.KVLayerBytes = 2 * g.KVVectors * (code + scale)
	return g, nil
}

// MTPSequenceTerms are the state term (the MTP KV cache "kv.mtp") and the
// other buffers of the MTP sequence arena, in arena order:
//
//	kv.mtp           [K | V | K scale | V scale] of MTPKVLayers layer
//	mtp.block_table  int32 [pages]
//	mtp.ids          int32 [rows]      token ids of an MTP step
//	mtp.pos          int32 [rows]      positions of an MTP step
//	mtp.hidden       fp32 [rows, H]    pending post-final-norm target rows
//	mtp.last_hidden  fp32 [1, H]       post-mtp.norm hidden of the last row
//
// with rows = MTPRows(o.StepTokens, o.StateSlots). o.ConvElemBytes is
// ignored.
func MTPSequenceTerms(c qwen35.Config, o SequenceOptions) (state, other []Term, g SeqGeometry, err error) {
	if g, err = MTPGeometry(c, o); err != nil {
		return nil, nil, g, err
	}
	R, H := int64(MTPRows(o.StepTokens, o.StateSlots)), int64(c.HiddenSize)
	state = []Term{{Name: "kv.mtp", Bytes: g.KVPayloadBytes()}}
	other = []Term{
		{Name: "mtp.block_table", Bytes: 4 * int64(g.Pages)},
		{Name: "mtp.ids", Bytes: 4 * R},
		{Name: "mtp.pos", Bytes: 4 * R},
		{Name: "mtp.hidden", Bytes: 4 * R * H},
		{Name: "mtp.last_hidden", Bytes: 4 * H},
	}
	return state, other, g, nil
}

// MTPSequence is the MTP head's per-sequence arena ("mtp.sequence").
func MTPSequence(c qwen35.Config, o SequenceOptions) (Arena, SeqGeometry, error) {
	state, other, g, err := MTPSequenceTerms(c, o)
	if err != nil {
		return Arena{}, g, err
	}
	return Lay(MTPSequenceArena, append(state, other...)), g, nil
}

// MTPWorkspace is the MTP head's step workspace ("mtp.workspace") for steps
// of up to rows rows with logitRows rows of logits. Unlike the target's
// workspace it is carved once: every buffer lives for the whole step, in the
// order the step uses them (fp32 [rows, cols] unless noted):
//
//	mtp.embed [H], mtp.concat [2H], x [H], x_norm [H],
//	attn.q_gate [2·nh·hd], attn.q [nh·hd], attn.k, attn.v [nkv·hd], attn.out [nh·hd],
//	mlp.gate, mlp.up [I], mtp.hidden_norm [H],
//	logits fp32 [logitRows, V], argmax int32 [logitRows]
//
// (the proposal head has at most V rows, so its logits fit the same term).
func MTPWorkspace(c qwen35.Config, rows, logitRows int) Arena {
	f := func(name string, r, cols int) Term { return Term{Name: name, Bytes: 4 * int64(r) * int64(cols)} }
	H, hd, nh, nkv, I := c.HiddenSize, c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads, c.IntermediateSize
	R := rows
	return Lay(MTPWorkspaceArena, []Term{
		f("mtp.embed", R, H), f("mtp.concat", R, 2*H), f("x", R, H), f("x_norm", R, H),
		f("attn.q_gate", R, 2*nh*hd), f("attn.q", R, nh*hd), f("attn.k", R, nkv*hd), f("attn.v", R, nkv*hd), f("attn.out", R, nh*hd),
		f("mlp.gate", R, I), f("mlp.up", R, I), f("mtp.hidden_norm", R, H),
		f("logits", logitRows, c.VocabSize), f("argmax", logitRows, 1),
	})
}
