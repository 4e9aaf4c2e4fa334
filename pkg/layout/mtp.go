package layout

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// MTP arena names (pkg/engine/mtp.go allocates each as its own arena; its
// step workspace lives in the target's workspace arena: MTPWorkspace).
const (
	MTPWeightsArena  = "mtp.weights"
	MTPSequenceArena = "mtp.sequence"
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

// MTP workspace phases: the MTP step allocates from the target's workspace
// arena (Workspace), after the target step it follows, like the target's
// phases (see the package doc and MTPWorkspace).
const (
	PhaseMTPInput     = "mtp.input"
	PhaseMTPAttention = "mtp.attention"
	PhaseMTPMLP       = "mtp.mlp"
	PhaseMTPLogits    = "mtp.logits"
)

// MTPWorkspace returns the workspace phases of one MTP step of up to rows
// rows that follows a target step of T tokens, with logitRows rows of
// logits, each laid out from offset 0 in the order pkg/engine/mtp.go
// allocates from the target's workspace arena, and the largest phase.
// Every phase starts with (fp32 [rows, cols] unless noted)
//
//	x [T, H]        the target step's residual (its first allocation, at
//	                offset 0), kept live: the MTP may run between a target
//	                step and the capture of that step's rows
//	mtp.x, mtp.x_norm [H]
//
// then one of
//
//	mtp.input      mtp.embed [H], mtp.concat [2H]        (released after fc)
//	mtp.attention  attn.q_gate [2·nh·hd], attn.q [nh·hd], attn.k, attn.v [nkv·hd], attn.out [nh·hd]
//	mtp.mlp        mlp.gate, mlp.up [I]
//	mtp.logits     mtp.hidden_norm [H], logits fp32 [logitRows, V], argmax int32 [logitRows]
//
// (the proposal head has at most V rows, so its logits fit the same term).
// The engine's workspace capacity is the largest of these and the target's
// phases (Workspace).
func MTPWorkspace(c qwen35.Config, T, rows, logitRows int) ([]Arena, int64) {
	f := func(name string, r, cols int) Term { return Term{Name: name, Bytes: 4 * int64(r) * int64(cols)} }
	H, hd, nh, nkv, I := c.HiddenSize, c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads, c.IntermediateSize
	R := rows
	var phases []Arena
	var capacity int64
	add := func(name string, terms ...Term) {
		a := Lay(name, append([]Term{f("x", T, H), f("mtp.x", R, H), f("mtp.x_norm", R, H)}, terms...))
		phases = append(phases, a)
		capacity = max(capacity, a.Capacity)
	}
	add(PhaseMTPInput, f("mtp.embed", R, H), f("mtp.concat", R, 2*H))
	add(PhaseMTPAttention, f("attn.q_gate", R, 2*nh*hd), f("attn.q", R, nh*hd), f("attn.k", R, nkv*hd), f("attn.v", R, nkv*hd), f("attn.out", R, nh*hd))
	add(PhaseMTPMLP, f("mlp.gate", R, I), f("mlp.up", R, I))
	add(PhaseMTPLogits, f("mtp.hidden_norm", R, H), f("logits", logitRows, c.VocabSize), f("argmax", logitRows, 1))
	return phases, capacity
}

// WorkspaceWithMTP is the engine's workspace with the MTP head loaded: the
// target's phases (Workspace) for steps of T tokens, then the MTP step's
// (MTPWorkspace, rows = MTPRows(T, stateSlots)), and the capacity: the
// largest phase of either.
func WorkspaceWithMTP(c qwen35.Config, T, stateSlots, logitRows int) ([]Arena, int64) {
	phases, capacity := Workspace(c, T, logitRows)
	mtp, mcap := MTPWorkspace(c, T, MTPRows(T, stateSlots), logitRows)
	return append(phases, mtp...), max(capacity, mcap)
}
