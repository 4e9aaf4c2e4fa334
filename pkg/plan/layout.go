package plan

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Term is one named buffer of an arena.
type Term struct {
	Name   string
	Offset int64 // 256-byte aligned offset in its arena (phase)
	Bytes  int64 // exact size; the next term starts at align_up(Offset+Bytes, 256)
}

// Arena is a list of terms laid out back to back at 256-byte alignment.
type Arena struct {
	Name     string
	Capacity int64 // Σ align_up(bytes, 256)
	Terms    []Term
}

// Term returns the named term, or ok=false.
func (a Arena) Term(name string) (Term, bool) {
	for _, t := range a.Terms {
		if t.Name == name {
			return t, true
		}
	}
	return Term{}, false
}

// layout lays out (name, bytes) pairs; zero-byte terms are dropped.
func layout(name string, items []Term) Arena {
	a := Arena{Name: name}
	for _, it := range items {
		if it.Bytes <= 0 {
			continue
		}
		it.Offset = a.Capacity
		a.Terms = append(a.Terms, it)
		a.Capacity += alignUp(it.Bytes)
	}
	return a
}

// KVGeometry describes the paged KV pools of the sequence arena. Pool
// "kv.text" holds TextLayers layers of LayerBytes each (layer-major, in
// full-attention layer order); "kv.mtp" holds MTPLayers layers of
// MTPLayerBytes. Within a layer the engine owns the plane order.
type KVGeometry struct {
	Pages             int64 // main page groups (kv_capacity / 64)
	MTPPages          int64 // pages + C·ceil((k−1)/64) with MTP, else 0
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
// fp32 [layer][slot][nv][dk][dv] and "gdn.conv_state" bf16
// [layer][slot][conv_dim][K−1], layers in GDN-layer order.
type GDNGeometry struct {
	Layers             int
	Slots              int
	StateBytesPerLayer int64 // one slot: nv·dk·dv·4
	ConvBytesPerLayer  int64 // one slot: conv_dim·(K−1)·2
	SlotBytes          int64 // Σ over layers of both, one slot
}

func kvGeometry(c qwen35.Config, o Options, pages int64) KVGeometry {
	g := KVGeometry{Pages: pages, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
		BytesPerTokenHead: o.KVDtype.BytesPerTokenHead(c.HeadDim), TextLayers: len(c.FullLayers())}
	perPage := PageTokens * int64(c.NumKeyValueHeads) * g.BytesPerTokenHead
	g.LayerBytes = pages * perPage
	g.TextBytes = int64(g.TextLayers) * g.LayerBytes
	if o.Spec == SpecMTP {
		g.MTPLayers = c.MTPNumHiddenLayers
		g.MTPPages = pages + int64(o.MaxConcurrency)*ceilDiv(int64(o.DraftTokens-1), PageTokens)
		g.MTPLayerBytes = g.MTPPages * perPage
		g.MTPBytes = int64(g.MTPLayers) * g.MTPLayerBytes
	}
	return g
}

func gdnGeometry(c qwen35.Config, o Options) GDNGeometry {
	g := GDNGeometry{Layers: len(c.LinearLayers()), Slots: o.GDNStateSlots}
	if g.Slots == 0 {
		g.Slots = 1
		if o.Spec == SpecMTP {
			g.Slots = o.DraftTokens + 1
		}
	}
	g.StateBytesPerLayer = int64(c.LinearNumValueHeads) * int64(c.LinearKeyHeadDim) * int64(c.LinearValueHeadDim) * 4
	g.ConvBytesPerLayer = int64(c.ConvDim()) * int64(c.LinearConvKernelDim-1) * 2
	g.SlotBytes = int64(g.Layers) * (g.StateBytesPerLayer + g.ConvBytesPerLayer)
	return g
}

// sequenceArena is the persistent per-sequence arena at the given pages.
func sequenceArena(c qwen35.Config, o Options, maxCtx, pages int64) (Arena, KVGeometry, GDNGeometry) {
	kv := kvGeometry(c, o, pages)
	gdn := gdnGeometry(c, o)
	slots := int64(gdn.Slots) * int64(gdn.Layers)
	items := []Term{
		{Name: "kv.text", Bytes: kv.TextBytes},
		{Name: "kv.mtp", Bytes: kv.MTPBytes},
		{Name: "gdn.ssm_state", Bytes: slots * gdn.StateBytesPerLayer},
		{Name: "gdn.conv_state", Bytes: slots * gdn.ConvBytesPerLayer},
	}
	if o.SequenceOtherBytesOverride > 0 {
		items = append(items, Term{Name: "seq.other_measured", Bytes: o.SequenceOtherBytesOverride})
	} else {
		items = append(items, sequenceOther(c, o, maxCtx)...)
	}
	return layout("sequence", items), kv, gdn
}

// sequenceOther are ninfer's own persistent per-sequence buffers.
func sequenceOther(c qwen35.Config, o Options, maxCtx int64) []Term {
	H, V, C := int64(c.HiddenSize), int64(c.VocabSize), int64(o.MaxConcurrency)
	k := int64(o.DraftTokens)
	chunk := min(o.PrefillChunk, maxCtx)
	t := []Term{
		{Name: "seq.prefill_hidden", Bytes: chunk * H * 2},       // bf16 [chunk, H] residual stream of a prefill chunk
		{Name: "seq.token_counts", Bytes: C * V * 4},             // int32 [C, V] repetition/presence counts
		{Name: "seq.tail_hidden", Bytes: C * H * 2},              // bf16 [C, H] last committed hidden state
		{Name: "seq.boundary_hidden", Bytes: C * H * 2},          // bf16 [C, H] turn-boundary hidden state
		{Name: "seq.round_state", Bytes: C * (16 + 2*(k+1)) * 4}, // int32: pos, rope_pos, gdn_initial_slot, accepted, produced, tokens[k+1], drafts[k+1]
		{Name: "seq.sampling_config", Bytes: C * 16 * 4},         // fp32 [C, 16] temperature, top-k/p, min-p, penalties, seed
	}
	if o.Spec == SpecMTP {
		t = append(t, Term{Name: "seq.mtp_hidden", Bytes: C * (k + 1) * H * 2}) // bf16 [C, k+1, H] verify hidden for the MTP realign
	}
	return t
}

// workspacePhases are the per-phase buffers of ninfer's workspace arena.
func workspacePhases(c qwen35.Config, o Options, maxCtx int64, proposalRows int64) []Arena {
	H, I, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	nh, nkv, hd := int64(c.NumAttentionHeads), int64(c.NumKeyValueHeads), int64(c.HeadDim)
	nv, dk, dv := int64(c.LinearNumValueHeads), int64(c.LinearKeyHeadDim), int64(c.LinearValueHeadDim)
	conv, vdim := int64(c.ConvDim()), int64(c.ValueDim())
	hasGDN := len(c.LinearLayers()) > 0
	// layer returns the per-layer activation buffers for T columns; the
	// split-KV attention partials exist only on the small-T (decode, verify,
	// draft) paths; prefill attention is a flash kernel without partials.
	layer := func(p string, T int64, gdn, splitKV bool) []Term {
		proj := 2*nh*hd + 2*nkv*hd
		mix := nh * hd
		t := []Term{{Name: p + ".x_norm", Bytes: T * H * 2}} // bf16 [T, H]
		if gdn {
			proj = max(proj, conv+vdim)
			mix = max(mix, vdim)
		}
		t = append(t, Term{Name: p + ".proj", Bytes: T * proj * 2}) // bf16 [T, q+gate|k|v] or [T, qkv|z]
		if gdn {
			t = append(t,
				Term{Name: p + ".gdn_g_beta", Bytes: T * 2 * nv * 4}, // fp32 [T, 2·nv]
				Term{Name: p + ".conv_out", Bytes: T * conv * 2})     // bf16 [T, conv_dim]
		}
		if splitKV {
			t = append(t, Term{Name: p + ".attn_partials", Bytes: T * nh * MaxAttnSplits * (hd + 2) * 4}) // fp32 split-KV partials + (max, sum)
		}
		t = append(t,
			Term{Name: p + ".mixer_out", Bytes: T * mix * 2},     // bf16 [T, max(nh·hd, value_dim)]
			Term{Name: p + ".mlp_gate_up", Bytes: T * 2 * I * 2}) // bf16 [T, 2·I]
		return t
	}
	logits := func(p string, rows, vocab int64) []Term {
		return []Term{
			{Name: p + ".logits", Bytes: rows * vocab * 4}, // fp32 [rows, vocab]
			{Name: p + ".argmax", Bytes: rows * 4},         // int32 [rows]
		}
	}
	chunk := min(o.PrefillChunk, maxCtx)
	prefill := layer("prefill", chunk, hasGDN, false)
	if hasGDN {
		prefill = append(prefill,
			Term{Name: "prefill.gdn_wu", Bytes: chunk * nv * (dk + dv) * 2},                      // bf16 W|U [T, nv, dk+dv]
			Term{Name: "prefill.gdn_chunk_states", Bytes: ceilDiv(chunk, 64) * nv * dk * dv * 2}) // bf16 h per 64-chunk
	}
	prefill = append(prefill, logits("prefill", 1, V)...)
	phases := []Arena{layout("prefill", prefill)}
	if o.Spec == SpecMTP {
		k := int64(o.DraftTokens)
		T := k + 1
		verify := append(layer("mtp_verify", T, hasGDN, true), logits("mtp_verify", T, V)...)
		phases = append(phases, layout("mtp_verify", verify))
		mp := append([]Term{{Name: "mtp_prefill.fc_in", Bytes: chunk * 2 * H * 2}}, layer("mtp_prefill", chunk, false, false)...)
		mp = append(mp, logits("mtp_prefill", 1, V)...)
		phases = append(phases, layout("mtp_prefill", mp))
		draftVocab := V
		if o.LMHeadDraft {
			draftVocab = proposalRows
		}
		md := append([]Term{{Name: "mtp_draft.fc_in", Bytes: T * 2 * H * 2}}, layer("mtp_draft", T, false, true)...)
		md = append(md, logits("mtp_draft", T, draftVocab)...)
		phases = append(phases, layout("mtp_draft", md))
	} else {
		phases = append(phases, layout("decode", append(layer("decode", 1, hasGDN, true), logits("decode", 1, V)...)))
	}
	return phases
}

// workspaceCapacity is the largest phase, or the measured override.
func workspaceCapacity(phases []Arena, o Options) int64 {
	if o.WorkspaceBytesOverride > 0 {
		return o.WorkspaceBytesOverride
	}
	var m int64
	for _, p := range phases {
		m = max(m, p.Capacity)
	}
	return m
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
