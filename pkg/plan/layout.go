package plan

import (
	"fmt"
	"sort"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Term is one named buffer of an arena (layout.Term).
type Term = layout.Term

// Arena is a list of terms laid out back to back at 256-byte alignment
// (layout.Arena).
type Arena = layout.Arena

// KVGeometry describes the paged KV pools of the sequence arena. Pool
// "kv.text" holds TextLayers layers of LayerBytes each (layer-major, in
// full-attention layer order; within a layer the K, V, K-scale and V-scale
// planes of layout.SeqGeometry.KVPlanes); with MTP, "kv.mtp" (the first term
// of the MTP head's mtp.sequence arena) holds MTPLayers layers of
// MTPLayerBytes: the engine's cache (layout.MTPGeometry: one layer over the
// main pages), or with Options.ReferenceMTPKV the reference formula
// (L_mtp layers of pages + C·ceil((k−1)/64) pages).
type KVGeometry struct {
	Pages             int64 // main page groups (kv_capacity / 64)
	MTPPages          int64 // pages (engine) or pages + C·ceil((k−1)/64) (reference) with MTP, else 0
	KVHeads, HeadDim  int
	BytesPerTokenHead int64
	TextLayers        int
	MTPLayers         int
	LayerBytes        int64 // Pages·64·kv_heads·B
	MTPLayerBytes     int64 // MTPPages·64·kv_heads·B
	TextBytes         int64
	MTPBytes          int64
}

// PayloadBytes is kv_payload_bytes: text KV + MTP KV.
func (g KVGeometry) PayloadBytes() int64 { return g.TextBytes + g.MTPBytes }

// GDNGeometry describes the GDN state of the sequence arena: "gdn.ssm_state"
// fp32 [layer][slot][nv][dk][dv] and "gdn.conv_state"
// [layer][slot][conv_dim][K−1] of layout.ConvStateElemBytes, layers in
// GDN-layer order.
type GDNGeometry struct {
	Layers             int
	Slots              int
	StateBytesPerLayer int64 // one slot: nv·dk·dv·4
	ConvBytesPerLayer  int64 // one slot: conv_dim·(K−1)·layout.ConvStateElemBytes
	SlotBytes          int64 // Σ over layers of both, one slot
}

// gdnSlots is the number of GDN state slots: the override, else 1 without
// speculation and k+1 with MTP k.
func gdnSlots(o Options) int {
	if o.GDNStateSlots > 0 {
		return o.GDNStateSlots
	}
	if o.Spec == SpecMTP {
		return o.DraftTokens + 1
	}
	return 1
}

// seqOptions are the layout inputs of the sequence arena for a max context
// of maxCtx tokens with KV pages page groups (the engine sizes its KV by
// ceil(max_ctx/64) pages, which equals the resolved pages with C = 1).
func seqOptions(o Options, maxCtx, pages int64) layout.SequenceOptions {
	return layout.SequenceOptions{MaxContext: int(pages * PageTokens), StepTokens: layout.StepTokens(int(maxCtx), int(o.PrefillChunk)),
		KVDtype: string(o.KVDtype), StateSlots: gdnSlots(o), ConvElemBytes: o.ConvStateBytes, DeviceSampler: o.Backend == BackendCUDA}
}

// sequenceArena is the persistent per-sequence memory at the given pages:
// the engine's layout.Sequence (KV pages sized to the capacity) and, with
// MTP, the MTP head's layout.MTPSequence, as the engine allocates them
// (two arenas). It returns both arenas concatenated (the MTP terms after the
// target's, at the target's capacity plus their offset in mtp.sequence:
// capacity = the sum of both) and the mtp.sequence arena alone. The step
// tokens (ctl.ids, ctl.pos) are min(prefill chunk, max context).
//
// SequenceOtherBytesOverride replaces the non-state terms of both arenas by
// one term; ReferenceMTPKV sizes kv.mtp by the reference formula. Either
// makes the result a reconciliation figure, not the engine's arenas.
func sequenceArena(c qwen35.Config, o Options, maxCtx, pages int64) (Arena, Arena, KVGeometry, GDNGeometry, error) {
	so := seqOptions(o, maxCtx, pages)
	state, other, g, err := layout.SequenceTerms(c, so)
	if err != nil {
		return Arena{}, Arena{}, KVGeometry{}, GDNGeometry{}, err
	}
	kv := KVGeometry{Pages: pages, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, BytesPerTokenHead: g.BytesPerTokenHead(),
		TextLayers: g.KVLayers, LayerBytes: g.KVLayerBytes, TextBytes: g.KVPayloadBytes()}
	gdn := GDNGeometry{Layers: g.GDNLayers, Slots: g.Slots, StateBytesPerLayer: g.SSMSlotBytes, ConvBytesPerLayer: g.ConvSlotBytes}
	gdn.SlotBytes = int64(gdn.Layers) * (gdn.StateBytesPerLayer + gdn.ConvBytesPerLayer)
	var mState, mOther []Term
	if o.Spec == SpecMTP {
		var mg layout.SeqGeometry
		if mState, mOther, mg, err = layout.MTPSequenceTerms(c, so); err != nil {
			return Arena{}, Arena{}, KVGeometry{}, GDNGeometry{}, err
		}
		kv.MTPLayers, kv.MTPPages, kv.MTPLayerBytes = mg.KVLayers, int64(mg.Pages), mg.KVLayerBytes
		if o.ReferenceMTPKV {
			kv.MTPLayers = c.MTPNumHiddenLayers
			kv.MTPPages = pages + int64(o.MaxConcurrency)*ceilDiv(int64(o.DraftTokens-1), PageTokens)
			kv.MTPLayerBytes = kv.MTPPages * PageTokens * int64(c.NumKeyValueHeads) * kv.BytesPerTokenHead
		}
		kv.MTPBytes = int64(kv.MTPLayers) * kv.MTPLayerBytes
		mState[0].Bytes = kv.MTPBytes // "kv.mtp"
	}
	terms := state
	if o.SequenceOtherBytesOverride > 0 {
		terms = append(terms, Term{Name: "seq.other_measured", Bytes: o.SequenceOtherBytesOverride})
		mOther = nil
	} else {
		terms = append(terms, other...)
	}
	mtpSeq := layout.Lay(layout.MTPSequenceArena, append(mState, mOther...))
	terms = append(terms, mtpSeq.Terms...)
	return layout.Lay("sequence", terms), mtpSeq, kv, gdn, nil
}

// workspacePhases are the engine's workspace phases for steps of
// min(prefill chunk, max context) tokens (layout.Workspace), with MTP
// followed by the MTP step's phases in the same arena
// (layout.WorkspaceWithMTP); on cuda the op-scratch term after them
// (layout.CUDAOpScratch: attention calls of up to the step's rows, with MTP
// the MTP step's too; a zero term on cpu); and the capacity: the largest
// phase plus the op scratch, or the measured override.
func workspacePhases(c qwen35.Config, o Options, maxCtx int64) (phases []Arena, scratch Term, needs []Term, capacity int64) {
	T := layout.StepTokens(int(maxCtx), int(o.PrefillChunk))
	attnRows := T
	if o.Spec == SpecMTP {
		phases, capacity = layout.WorkspaceWithMTP(c, T, gdnSlots(o), int(o.LogitsRows))
		attnRows = max(T, layout.MTPRows(T, gdnSlots(o)))
	} else {
		phases, capacity = layout.Workspace(c, T, int(o.LogitsRows))
	}
	if o.Backend == BackendCUDA {
		var need int64
		needs, need = layout.CUDAOpScratch(c, T, attnRows)
		scratch, capacity = layout.WithOpScratch(capacity, need)
	}
	if o.WorkspaceBytesOverride > 0 {
		capacity = o.WorkspaceBytesOverride
	}
	return phases, scratch, needs, capacity
}

// weightsArena lays out the device objects as the engine binds them, in two
// arenas: "weights" (the text objects of the tensor inventory in inventory
// order, then any other non-MTP, non-proposal object in input order) and
// "mtp.weights" (layout.MTPWeights: the mtp/* objects in inventory order,
// then the proposal head text/draft_head, its id map
// text/draft_head_token_ids and any other mtp or proposal object in input
// order).
// Inventory objects get layout.BoundBytes (norm, conv and control vectors
// widened to fp32), the others their encoded size. It returns both arenas
// concatenated (the mtp.weights terms after the target's; capacity = the
// sum of both) and the mtp.weights arena alone.
func weightsArena(c qwen35.Config, dev []Object) (Arena, Arena, error) {
	type inv struct {
		pos int
		t   qwen35.Tensor
	}
	known := map[string]inv{}
	for i, t := range c.Tensors() {
		known[t.Name] = inv{i, t}
	}
	proposalPos := map[string]int{qwen35.NameDraftHead: len(known), qwen35.NameDraftIDs: len(known) + 1}
	type item struct {
		pos  int
		mtp  bool
		term Term
	}
	items := make([]item, len(dev))
	for i, d := range dev {
		it := item{pos: len(known) + 2 + i, term: Term{Name: d.ID, Bytes: d.Bytes},
			mtp: d.Component == qwen35.ComponentMTP || d.IsProposal()}
		if k, ok := known[d.ID]; ok {
			n, err := format.Elements(k.t.Shape)
			if err != nil {
				return Arena{}, Arena{}, fmt.Errorf("object %s: %w", d.ID, err)
			}
			it.pos, it.term.Bytes = k.pos, layout.BoundBytes(k.t.Class, n, d.Bytes)
		} else if p, ok := proposalPos[d.ID]; ok {
			it.pos = p
		}
		items[i] = it
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].pos < items[b].pos })
	var text, mtp []Term
	for _, it := range items {
		if it.mtp {
			mtp = append(mtp, it.term)
		} else {
			text = append(text, it.term)
		}
	}
	m := layout.MTPWeights(mtp)
	return layout.Weights(append(text, m.Terms...)), m, nil
}

// graphAllowance is the CUDA-graph memory allowance for a KV capacity of
// kvTokens: MTP 12 MiB if min(kvTokens, max_ctx+2k) ≤ 4096 else 82 MiB;
// no spec 12 MiB; ×C; 0 with graphs off or on the CPU backend.
func graphAllowance(o Options, maxCtx, kvTokens int64) int64 {
	if !o.UseCUDAGraph || o.Backend == BackendCPU {
		return 0
	}
	per := graphSmallBytes
	if o.Spec == SpecMTP && min(kvTokens, maxCtx+2*int64(o.DraftTokens)) > graphSmallCtx {
		per = graphLargeBytes
	}
	return per * int64(o.MaxConcurrency)
}

func checkConfig(c qwen35.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.LinearConvKernelDim < 2 {
		return fmt.Errorf("config: linear_conv_kernel_dim %d must be ≥ 2", c.LinearConvKernelDim)
	}
	return nil
}
