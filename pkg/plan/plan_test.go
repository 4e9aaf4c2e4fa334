package plan

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// model returns a Qwen3.5 config with every 4th layer full attention.
func model(layers, hidden, inter, vocab, nh, nkv, hd, nk, nv, dk, mtp int) qwen35.Config {
	c := qwen35.Config{
		VocabSize: vocab, HiddenSize: hidden, NumHiddenLayers: layers, IntermediateSize: inter,
		NumAttentionHeads: nh, NumKeyValueHeads: nkv, HeadDim: hd, LinearConvKernelDim: 4,
		LinearKeyHeadDim: dk, LinearValueHeadDim: dk, LinearNumKeyHeads: nk, LinearNumValueHeads: nv,
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, MTPNumHiddenLayers: mtp,
		MaxPositionEmbeddings: 262144,
	}
	for i := 0; i < layers; i++ {
		t := qwen35.LinearAttention
		if (i+1)%4 == 0 {
			t = qwen35.FullAttention
		}
		c.LayerTypes = append(c.LayerTypes, t)
	}
	return c
}

// q27b is the 27B shape: 64 layers (16 full), kv_heads 4, head_dim 256,
// GDN nv 48, dk = dv 128, conv_dim 10240, hidden 5120, one MTP layer.
func q27b() qwen35.Config { return model(64, 5120, 17408, 248320, 24, 4, 256, 16, 48, 128, 1) }

func tiny() qwen35.Config { return model(4, 64, 128, 1000, 2, 1, 32, 2, 4, 16, 1) }

const (
	seedWeights   = 17487992064
	seedA         = 7420313600
	seedWorkspace = 159981568
	seedSeqOther  = 19446016
	seedStartup   = 6508052480
)

func seedOptions() Options {
	return Options{MaxContext: 16384, KVCapacity: 16384, KVDtype: KVFP8, PrefillChunk: 1024,
		Spec: SpecMTP, DraftTokens: 2, LMHeadDraft: true, UseCUDAGraph: true,
		AvailableAfterWeightsBytes: seedA}
}

func TestBytesPerTokenHead(t *testing.T) {
	tests := []struct {
		d    KVDtype
		hd   int
		want int64
	}{
		{KVBF16, 256, 1024}, {KVInt8, 256, 528}, {KVFP8, 256, 516},
		{KVBF16, 128, 512}, {KVInt8, 128, 264}, {KVFP8, 128, 260},
		{KVInt8, 96, 200}, {KVBF16, 32, 128},
		// the engine's fp8 keeps one fp16 scale per head vector (the
		// reference fp8-row256 would have 648 at d = 320)
		{KVFP8, 320, 644},
	}
	for _, tc := range tests {
		if got := tc.d.BytesPerTokenHead(tc.hd); got != tc.want {
			t.Errorf("%s d=%d: %d, want %d", tc.d, tc.hd, got, tc.want)
		}
	}
	for in, want := range map[string]string{"bf16": "bf16", "int8": "int8-group64", "FP8": "fp8-e4m3-row256"} {
		d, err := ParseKVDtype(in)
		if err != nil || d.CacheName() != want {
			t.Errorf("ParseKVDtype(%q) = %v %v, cache name %q, want %q", in, d, err, d.CacheName(), want)
		}
	}
	if _, err := ParseKVDtype("nvfp4"); err == nil {
		t.Error("ParseKVDtype(nvfp4) succeeded")
	}
}

// TestSeedReconciliation reproduces the seed report's memory object: 27B,
// MTP k=2, fp8 KV, explicit 16,384 tokens, with the seed's measured
// workspace, other-sequence bytes, A and startup free memory as inputs,
// one GDN state slot (upstream's replay-record design), upstream's bf16
// conv state and the reference MTP KV formula (257 pages: one extra page for
// the k−1 = 1 draft position beyond the context).
func TestSeedReconciliation(t *testing.T) {
	o := seedOptions()
	o.WorkspaceBytesOverride, o.SequenceOtherBytesOverride = seedWorkspace, seedSeqOther
	o.GDNStateSlots, o.ConvStateBytes, o.ReferenceMTPKV = 1, 2, true
	o.AvailableAfterStartupBytes = seedStartup
	objs := []Object{{ID: "all-weights", Component: "text", Bytes: seedWeights}}
	p, err := New(q27b(), objs, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.KV.PayloadBytes() != 575013888 || p.GDN.SlotBytes != 153944064 || p.GraphAllowanceBytes != 85983232 || p.KV.Pages != 256 {
		t.Errorf("payload %d slot %d graph %d pages %d, want 575013888 153944064 85983232 256",
			p.KV.PayloadBytes(), p.GDN.SlotBytes, p.GraphAllowanceBytes, p.KV.Pages)
	}
	m := p.Memory
	if m.MinimumRuntimeReservationBytes != 994368768 || m.PlannedSlackBytes != 6425944832 || m.Sequence.CapacityBytes != 748403968 {
		t.Errorf("min res %d slack %d sequence %d, want 994368768 6425944832 748403968",
			m.MinimumRuntimeReservationBytes, m.PlannedSlackBytes, m.Sequence.CapacityBytes)
	}
	got, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/seed_memory.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("memory object differs from the seed report:\n got %s\nwant %s", got, want)
	}
}

// TestSeedEngineLayout checks the same configuration with ninfer's own
// layout (pkg/layout): k+1 = 3 GDN slots, the engine's conv state element
// size and its block table and control buffers, the engine's MTP KV cache
// (one layer over the 256 main pages) and MTP sequence buffers, the
// engine's workspace phases for 1024-token steps with k+1 = 3 logits rows
// and the MTP step's phases (1025 rows) in the same workspace.
func TestSeedEngineLayout(t *testing.T) {
	p, err := New(q27b(), []Object{{ID: "w", Component: "text", Bytes: seedWeights}}, seedOptions())
	if err != nil {
		t.Fatal(err)
	}
	if p.GDN.Slots != 3 {
		t.Fatalf("GDN slots %d, want k+1 = 3", p.GDN.Slots)
	}
	// Our GDN slot: 48 × (fp32 S 48·128·128·4 = 3,145,728 + fp32 conv
	// window 10240·3·4 = 122,880) = 156,893,184 (the seed's bf16 window
	// gives 153,944,064: TestSeedReconciliation).
	conv := int64(122880)
	// kv_payload: text 16 layers × 256 pages + the engine's MTP cache, one
	// layer × 256 pages (the seed's reference formula has 257: 575,013,888).
	payload := int64(516 * 4 * 64 * 256 * 17)
	if layout.ConvStateElemBytes != 4 || p.GDN.SlotBytes != 156893184 || p.KV.PayloadBytes() != payload || payload != 574881792 ||
		p.KV.MTPLayers != 1 || p.KV.MTPPages != 256 {
		t.Errorf("GDN slot %d payload %d (mtp %d layers × %d pages), want 156893184 574881792 (1 × 256)",
			p.GDN.SlotBytes, p.KV.PayloadBytes(), p.KV.MTPLayers, p.KV.MTPPages)
	}
	// block_table (256 pages), ctl.ids, ctl.pos (1024 tokens), ctl.in_slot,
	// ctl.sampler (cuda: 248320·(4+1) + 8 + 8 = 1,241,616 → 1,241,856 aligned)
	other := int64(1024 + 4096 + 4096 + 256 + 1241856)
	// mtp.block_table, mtp.ids and mtp.pos (1025 rows: 4100 → 4352 B aligned),
	// mtp.hidden [1025, 5120] fp32, mtp.last_hidden [5120] fp32
	mtpOther := int64(1024 + 4352 + 4352 + 1025*5120*4 + 5120*4)
	want := payload + 3*48*(3145728+conv) + other + mtpOther
	if p.Sequence.Capacity != want || p.MTP.Sequence.Capacity != 516*4*64*256+mtpOther {
		t.Errorf("sequence %d (mtp.sequence %d), want %d (%d)", p.Sequence.Capacity, p.MTP.Sequence.Capacity, want, 516*4*64*256+mtpOther)
	}
	for name, bytes := range map[string]int64{"kv.text": 516 * 4 * 64 * 256 * 16, "kv.mtp": 516 * 4 * 64 * 256,
		"gdn.ssm_state": 48 * 3 * 3145728, "gdn.conv_state": 48 * 3 * conv, "block_table": 1024, "ctl.ids": 4096, "ctl.in_slot": 4,
		"mtp.block_table": 1024, "mtp.ids": 4100, "mtp.pos": 4100, "mtp.hidden": 1025 * 5120 * 4, "mtp.last_hidden": 5120 * 4} {
		if tm, ok := p.Sequence.Term(name); !ok || tm.Bytes != bytes {
			t.Errorf("%s = %+v, want %d bytes", name, tm, bytes)
		}
	}
	// The MTP terms follow the target's at the target's capacity plus
	// their offset in mtp.sequence.
	target := p.Sequence.Capacity - p.MTP.Sequence.Capacity
	if tm, _ := p.Sequence.Term("kv.mtp"); tm.Offset != target || p.MTP.Sequence.Terms[0].Name != "kv.mtp" {
		t.Errorf("kv.mtp at %d, want the target capacity %d", tm.Offset, target)
	}
	for _, mt := range p.MTP.Sequence.Terms {
		if tm, _ := p.Sequence.Term(mt.Name); tm.Offset != target+mt.Offset || tm.Bytes != mt.Bytes {
			t.Errorf("%s: %+v in the sequence, %+v in mtp.sequence", mt.Name, tm, mt)
		}
	}
	// workspace: fp32 [1024, cols] buffers; the GDN phase is the largest.
	T := int64(1024 * 4)
	gdn := T * (2*5120 + 2*10240 + 6144 + 4*48 + 2*6144)
	attn := T * (2*5120 + 2*24*256 + 24*256 + 2*4*256 + 24*256)
	mlp := T * (2*5120 + 2*17408)
	logits := 2*T*5120 + layout.AlignUp(3*248320*4)
	for name, want := range map[string]int64{layout.PhaseGDN: gdn, layout.PhaseAttention: attn, layout.PhaseMLP: mlp, layout.PhaseLogits: logits} {
		if ph, ok := p.Phase(name); !ok || ph.Capacity != want {
			t.Errorf("phase %s = %d, want %d", name, ph.Capacity, want)
		}
	}
	// The MTP step's phases in the same arena: the target's residual
	// [1024, 5120] stays live, then mtp.x, mtp.x_norm [1025, 5120] and one
	// phase of 1025-row fp32 buffers: input (embed, concat 2H), attention
	// (q_gate 12288, q 6144, k, v 1024, out 6144), mlp (gate, up 17408),
	// logits (hidden_norm, logits [3, 248320], argmax int32 [3]).
	R := int64(1025 * 4)
	base := T*5120 + 2*R*5120
	mtp := map[string]int64{layout.PhaseMTPInput: base + R*3*5120, layout.PhaseMTPAttention: base + R*(12288+6144+2*1024+6144),
		layout.PhaseMTPMLP: base + R*2*17408, layout.PhaseMTPLogits: base + R*5120 + 3*248320*4 + 256}
	for name, want := range mtp {
		if ph, ok := p.Phase(name); !ok || ph.Capacity != want || ph.Terms[0] != (Term{Name: "x", Bytes: T * 5120}) {
			t.Errorf("phase %s = %d (first %+v), want %d", name, ph.Capacity, ph.Terms, want)
		}
	}
	// Workspace: the largest phase, the MTP step's MLP (it was the GDN phase
	// 202,113,024 + a separate mtp.workspace arena 380,836,096 = 582,949,120),
	// then the op scratch: the chunked GDN of 16 chunks × 48 v-heads ×
	// (64² + 64·(128+128) + 64 = 20,544 floats) × 4 = 63,111,168 bytes.
	if mtp[layout.PhaseMTPMLP] != 205701120 || p.Workspace != mtp[layout.PhaseMTPMLP]+63111168 || p.OpScratch.Offset != mtp[layout.PhaseMTPMLP] ||
		p.Workspace <= gdn || len(p.Phases) != 8 {
		t.Errorf("workspace %d (%d phases, op scratch %+v), want the mtp.mlp phase %d + 63111168 (target gdn %d)", p.Workspace, len(p.Phases),
			p.OpScratch, mtp[layout.PhaseMTPMLP], gdn)
	}
	if p.Memory.RuntimeReservationBytes != p.Sequence.Capacity+p.Workspace+85983232 {
		t.Errorf("reservation %d != sequence + workspace + graph", p.Memory.RuntimeReservationBytes)
	}
	checkArena(t, p.Sequence)
	checkArena(t, p.MTP.Sequence)
	for _, ph := range p.Phases {
		checkArena(t, ph)
		if ph.Capacity > p.Workspace {
			t.Errorf("phase %s %d exceeds workspace %d", ph.Name, ph.Capacity, p.Workspace)
		}
	}
}

// checkArena checks that terms are aligned, disjoint, in order, and that
// the capacity is the sum of aligned sizes.
func checkArena(t *testing.T, a Arena) {
	t.Helper()
	var off, sum int64
	for _, tm := range a.Terms {
		if tm.Offset%ArenaAlignment != 0 || tm.Offset < off || tm.Bytes <= 0 {
			t.Errorf("arena %s: term %s at %d (%d bytes) after %d", a.Name, tm.Name, tm.Offset, tm.Bytes, off)
		}
		off = tm.Offset + tm.Bytes
		sum += (tm.Bytes + 255) / 256 * 256
	}
	if sum != a.Capacity {
		t.Errorf("arena %s: capacity %d, Σ aligned %d", a.Name, a.Capacity, sum)
	}
}

// TestWorkspaceTiny pins the workspace phases of a tiny config to
// hand-computed sizes (H 64, I 128, V 1000, nh 2, nkv 1, hd 32, nk 2, nv 4,
// dk = dv 16, conv_dim 128, value_dim 64, 128-token steps, one logits row;
// every buffer fp32).
func TestWorkspaceTiny(t *testing.T) {
	p, err := New(tiny(), nil, Options{MaxContext: 1024, KVCapacity: 1024, PrefillChunk: 128, UseCUDAGraph: true, AvailableAfterWeightsBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"attention": 2*32768 + 65536 + 32768 + 2*16384 + 32768,    // x, x_norm, q_gate, q, k, v, out
		"gdn":       2*32768 + 2*65536 + 32768 + 4*2048 + 2*32768, // x, x_norm, qkv, conv_out, z, a, b, g, beta, o, o_norm
		"mlp":       2*32768 + 2*65536,                            // x, x_norm, gate, up
		"logits":    2*32768 + 4096,                               // x, x_norm, logits [1, 1000]
	}
	if len(p.Phases) != len(want) {
		t.Fatalf("%d phases, want %d", len(p.Phases), len(want))
	}
	for name, w := range want {
		if ph, ok := p.Phase(name); !ok || ph.Capacity != w {
			t.Errorf("phase %s = %d (%v), want %d", name, ph.Capacity, ok, w)
		}
	}
	// cuda (the default): the op-scratch term after the largest phase, the
	// largest op need of 128-token steps: chunked GDN, 2 chunks × nv 4 ×
	// (64² + 64·(16+16) + 64 = 6208 floats) × 4 = 198,656 (conv halo
	// 2·3·128·4 = 3,072; attention splits (128·8·32 + 2·128·8)·4 = 139,264
	// with R = 4 rows × 2 heads; sampling 20·1000 + 256 = 20,256).
	needs := map[string]int64{"op_scratch.gdn_chunked": 198656, "op_scratch.conv_halo": 3072,
		"op_scratch.attention_split": 139264, "op_scratch.sample": 20256}
	if p.OpScratch != (Term{Name: layout.OpScratchTerm, Offset: want["gdn"], Bytes: 198656}) || p.Workspace != want["gdn"]+198656 ||
		len(p.OpScratchNeeds) != len(needs) {
		t.Errorf("workspace %d, op scratch %+v (%d needs), want the gdn phase %d + 198656", p.Workspace, p.OpScratch, len(p.OpScratchNeeds), want["gdn"])
	}
	for _, n := range p.OpScratchNeeds {
		if needs[n.Name] != n.Bytes {
			t.Errorf("op scratch need %s = %d, want %d", n.Name, n.Bytes, needs[n.Name])
		}
	}
	// The CPU has no op-scratch term (its kernel scratch is outside the arenas).
	pc, err := New(tiny(), nil, Options{MaxContext: 1024, KVCapacity: 1024, PrefillChunk: 128, Backend: BackendCPU, AvailableAfterWeightsBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if pc.Workspace != want["gdn"] || pc.OpScratch.Bytes != 0 || len(pc.OpScratchNeeds) != 0 || pc.Sequence.Bytes("ctl.sampler") != 0 {
		t.Errorf("cpu: workspace %d op scratch %+v ctl.sampler %d, want the gdn phase %d and none", pc.Workspace, pc.OpScratch,
			pc.Sequence.Bytes("ctl.sampler"), want["gdn"])
	}
	// cuda samples on the device: ctl.sampler holds counts int32[1000],
	// seen uint8[1000], the int64 RNG position and the int32 id (padded).
	if got := p.Sequence.Bytes("ctl.sampler"); got != 4000+1000+8+8 {
		t.Errorf("ctl.sampler %d, want 5016", got)
	}
	if tm, ok := p.Phases[1].Term("gdn.conv_out"); !ok || tm.Bytes != 128*128*4 || tm.Offset != 2*32768+65536 {
		t.Errorf("gdn.conv_out = %+v %v", tm, ok)
	}
	if _, ok := p.Phase("decode"); ok {
		t.Error("unexpected phase decode")
	}
	// GDN slot: 3 layers × (4·16·16·4 + 128·3·conv element).
	conv := int64(128 * 3 * layout.ConvStateElemBytes)
	if p.GDN.Slots != 1 || p.GDN.SlotBytes != 3*(4096+conv) {
		t.Errorf("GDN slots %d slot bytes %d, want 1, %d", p.GDN.Slots, p.GDN.SlotBytes, 3*(4096+conv))
	}
	// no spec: graph allowance 12 MiB, no MTP KV.
	if p.GraphAllowanceBytes != 12<<20 || p.KV.MTPBytes != 0 || p.KV.TextBytes != 16*64*1*128 {
		t.Errorf("graph %d mtp kv %d text kv %d", p.GraphAllowanceBytes, p.KV.MTPBytes, p.KV.TextBytes)
	}
	// A context below the chunk shrinks the steps: 64-token steps.
	q, err := New(tiny(), nil, Options{MaxContext: 64, KVCapacity: 64, PrefillChunk: 128, AvailableAfterWeightsBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	// Op scratch of 64-token steps: the attention splits (139,264; one GDN
	// chunk 99,328, no conv halo at 64 tokens).
	if q.Workspace != want["gdn"]/2+139264 || q.Sequence.Bytes("ctl.ids") != 4*64 {
		t.Errorf("64-token context: workspace %d ctl.ids %d, want %d %d", q.Workspace, q.Sequence.Bytes("ctl.ids"), want["gdn"]/2+139264, 4*64)
	}
}

func TestGraphAllowance(t *testing.T) {
	tests := []struct {
		name     string
		o        Options
		ctx, kv  int64
		wantMiBs int64
	}{
		{"none", Options{UseCUDAGraph: true, Spec: SpecNone, MaxConcurrency: 1}, 100000, 100032, 12},
		{"mtp small", Options{UseCUDAGraph: true, Spec: SpecMTP, DraftTokens: 2, MaxConcurrency: 1}, 4092, 4096, 12},
		{"mtp ctx+2k caps", Options{UseCUDAGraph: true, Spec: SpecMTP, DraftTokens: 5, MaxConcurrency: 1}, 4086, 4096, 12},
		{"mtp large", Options{UseCUDAGraph: true, Spec: SpecMTP, DraftTokens: 2, MaxConcurrency: 1}, 4096, 4160, 82},
		{"mtp margin crosses", Options{UseCUDAGraph: true, Spec: SpecMTP, DraftTokens: 1, MaxConcurrency: 1}, 4095, 4160, 82},
		{"graph off", Options{UseCUDAGraph: false, Spec: SpecMTP, DraftTokens: 2, MaxConcurrency: 1}, 16384, 16384, 0},
		{"cpu", Options{UseCUDAGraph: true, Backend: BackendCPU, Spec: SpecNone, MaxConcurrency: 1}, 16384, 16384, 0},
	}
	for _, tc := range tests {
		if got := graphAllowance(tc.o, tc.ctx, tc.kv); got != tc.wantMiBs<<20 {
			t.Errorf("%s: %d, want %d MiB", tc.name, got, tc.wantMiBs)
		}
	}
}

func TestSelectDevice(t *testing.T) {
	objs := []Object{
		{ID: "frontend/tokenizer.json", Component: "text", Bytes: 10, Host: true},
		{ID: "text/token_embedding", Component: "text", Bytes: 100},
		{ID: "text/draft_head", Component: "text", Bytes: 7},
		{ID: "text/draft_head_token_ids", Component: "proposal", Bytes: 3},
		{ID: "mtp/fc", Component: "mtp", Bytes: 50},
		{ID: "vision/blocks/0", Component: "vision", Bytes: 9},
	}
	ids := func(os []Object) string {
		var s []string
		for _, o := range os {
			s = append(s, o.ID)
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		spec  Spec
		draft bool
		want  string
	}{
		{SpecNone, false, "text/token_embedding"},
		{SpecNone, true, "text/token_embedding"},
		{SpecMTP, false, "text/token_embedding,mtp/fc"},
		{SpecMTP, true, "text/token_embedding,text/draft_head,text/draft_head_token_ids,mtp/fc"},
	}
	for _, tc := range tests {
		got, err := SelectDevice(objs, tc.spec, tc.draft)
		if err != nil || ids(got) != tc.want {
			t.Errorf("spec %s draft %v: %q %v, want %q", tc.spec, tc.draft, ids(got), err, tc.want)
		}
	}
	if _, err := SelectDevice([]Object{{ID: "x/y", Component: "audio", Bytes: 1}}, SpecNone, false); err == nil || !strings.Contains(err.Error(), "x/y") {
		t.Errorf("unknown component: %v", err)
	}
}

func TestWeightsArena(t *testing.T) {
	objs := []Object{{ID: "a", Component: "text", Bytes: 1}, {ID: "b", Component: "text", Bytes: 256},
		{ID: "c", Component: "text", Bytes: 257}, {ID: "m", Component: "mtp", Bytes: 1000}}
	p, err := New(tiny(), objs, Options{MaxContext: 256, KVCapacity: 256, AvailableAfterWeightsBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if p.Weights.Capacity != 1024 || len(p.Weights.Terms) != 3 || p.Weights.Terms[2].Offset != 512 {
		t.Errorf("weights arena %+v, want capacity 1024 with c at 512 and no mtp", p.Weights)
	}
	if m := p.Memory.Weights; m.CapacityBytes != 1024 || m.UsedBytes != 1024 || m.PeakUsedBytes != 1024 {
		t.Errorf("memory.weights %+v", m)
	}
	// With MTP and the proposal head: the mtp.weights arena holds the mtp/*
	// objects of the inventory in inventory order (fc is the first MTP
	// tensor, norms widened to fp32), then the draft head and its ids,
	// whatever the input order, then other objects (m); the reported
	// weights are both arenas.
	c := tiny()
	objs = append(objs, Object{ID: qwen35.NameDraftIDs, Component: "proposal", Bytes: 40},
		Object{ID: "mtp/norm", Component: "mtp", Bytes: 128}, Object{ID: qwen35.NameDraftHead, Component: "proposal", Bytes: 300},
		Object{ID: "mtp/fc", Component: "mtp", Bytes: 999})
	p, err = New(c, objs, Options{MaxContext: 256, KVCapacity: 256, Spec: SpecMTP, DraftTokens: 1, LMHeadDraft: true, AvailableAfterWeightsBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	names := func(a Arena) string {
		var n []string
		for _, tm := range a.Terms {
			n = append(n, tm.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(p.MTP.Weights); got != "mtp/fc,mtp/norm,text/draft_head,text/draft_head_token_ids,m" {
		t.Errorf("mtp.weights order %s", got)
	}
	if nb := p.MTP.Weights.Bytes("mtp/norm"); nb != 4*int64(c.HiddenSize) {
		t.Errorf("mtp/norm bound %d bytes, want fp32 %d", nb, 4*c.HiddenSize)
	}
	if p.MTP.Weights.Capacity != 1024+256+512+256+1024 || p.Weights.Capacity != 1024+p.MTP.Weights.Capacity ||
		names(p.Weights) != "a,b,c,"+names(p.MTP.Weights) || p.Memory.Weights.CapacityBytes != p.Weights.Capacity {
		t.Errorf("weights %d (%s), mtp.weights %d", p.Weights.Capacity, names(p.Weights), p.MTP.Weights.Capacity)
	}
}

// TestOfflineBudget checks A = total − weights − 512 MiB and the refusal
// when the weights do not fit.
func TestOfflineBudget(t *testing.T) {
	objs := []Object{{ID: "w", Component: "text", Bytes: 20 << 30}}
	o := Options{MaxContext: 4096, DeviceTotalBytes: 28 << 30, UseCUDAGraph: true}
	p, err := New(tiny(), objs, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(28<<30 - 20<<30 - 512<<20); p.Memory.AvailableAfterWeightsBytes != want {
		t.Errorf("A = %d, want %d", p.Memory.AvailableAfterWeightsBytes, want)
	}
	if p.Memory.KVCapacityMode != "auto" || p.Memory.KVCapacityHeadroomBytes != 1<<30 || p.Memory.KVCapacity != 4096 {
		t.Errorf("auto: mode %s headroom %d capacity %d", p.Memory.KVCapacityMode, p.Memory.KVCapacityHeadroomBytes, p.Memory.KVCapacity)
	}
	if p.Memory.PlannedSlackBytes != p.Memory.AvailableAfterWeightsBytes-p.Memory.RuntimeReservationBytes {
		t.Errorf("slack %d != A − reservation", p.Memory.PlannedSlackBytes)
	}
	o.DeviceTotalBytes = 20<<30 + 100
	_, err = New(tiny(), objs, o)
	if !errors.Is(err, ErrWeightsDoNotFit) || err.Error() != "weights do not fit: 1 device objects need 21474836480 bytes and the runtime overhead 536870912 bytes, 22011707392 bytes together, but the device has 21474836580 bytes" {
		t.Errorf("weights over the device: %v", err)
	}
	// an overhead larger than the device is no negative size either
	o.DeviceTotalBytes = 100 << 20
	_, err = New(tiny(), []Object{{ID: "w", Component: "text", Bytes: 1 << 20}}, o)
	if !errors.Is(err, ErrWeightsDoNotFit) || negative.MatchString(err.Error()) || !strings.Contains(err.Error(), "but the device has 104857600 bytes") {
		t.Errorf("overhead over the device: %v", err)
	}
}

// negative matches a negative number in a message.
var negative = regexp.MustCompile(`-[0-9]`)

// TestAutoHeadroom checks the auto-mode headroom rule, min(1 GiB, A/4),
// and --headroom's none (negative) and explicit values: small budgets keep
// three quarters of themselves (a 512 MiB CPU budget used to be refused
// with a negative figure), budgets from 4 GiB up keep the reference's 1 GiB.
func TestAutoHeadroom(t *testing.T) {
	tests := []struct {
		name          string
		A, headroom   int64 // budget and Options.HeadroomBytes
		want          int64 // headroom taken
		wantTableItem string
	}{
		{"512MiB default", 512 << 20, 0, 128 << 20, "auto headroom (min(1 GiB, A/4))"},
		{"3GiB default", 3 << 30, 0, 768 << 20, "auto headroom (min(1 GiB, A/4))"},
		{"4GiB default", 4 << 30, 0, 1 << 30, "auto headroom (min(1 GiB, A/4))"},
		{"4GiB+1 default", 4<<30 + 1, 0, 1 << 30, "auto headroom (min(1 GiB, A/4))"},
		{"80GiB default", 80 << 30, 0, 1 << 30, "auto headroom (min(1 GiB, A/4))"},
		{"odd budget rounds down", 10<<20 + 3, 0, (10<<20 + 3) / 4, "auto headroom (min(1 GiB, A/4))"},
		{"none", 512 << 20, -1, 0, "auto headroom (none)"},
		{"explicit", 512 << 20, 300 << 20, 300 << 20, "auto headroom (--headroom)"},
		{"explicit above 1GiB", 8 << 30, 2 << 30, 2 << 30, "auto headroom (--headroom)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.headroom == 0 {
				if got := AutoHeadroom(tc.A); got != tc.want {
					t.Errorf("AutoHeadroom(%d) = %d, want %d", tc.A, got, tc.want)
				}
			}
			for _, ctx := range []int64{0, 2048} { // largest context, and a given one
				o := Options{Backend: BackendCPU, MaxContext: ctx, HeadroomBytes: tc.headroom, AvailableAfterWeightsBytes: tc.A}
				p, err := New(tiny(), nil, o)
				if err != nil {
					t.Fatalf("ctx %d: %v", ctx, err)
				}
				m := p.Memory
				if p.Resolution.HeadroomBytes != tc.want || m.KVCapacityHeadroomBytes != tc.want || m.KVCapacityMode != "auto" {
					t.Errorf("ctx %d: headroom %d (memory %d), want %d", ctx, p.Resolution.HeadroomBytes, m.KVCapacityHeadroomBytes, tc.want)
				}
				if m.RuntimeReservationBytes > tc.A-tc.want || m.PlannedSlackBytes != tc.A-m.RuntimeReservationBytes {
					t.Errorf("ctx %d: reservation %d over the budget %d − %d", ctx, m.RuntimeReservationBytes, tc.A, tc.want)
				}
				var b strings.Builder
				if err := p.WriteTable(&b); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(b.String(), "| "+tc.wantTableItem+" ") {
					t.Errorf("ctx %d: table has no %q row:\n%s", ctx, tc.wantTableItem, b.String())
				}
			}
		})
	}
	// Explicit capacity takes no headroom; "none" is accepted there too.
	p, err := New(tiny(), nil, Options{KVCapacity: 1024, HeadroomBytes: -1, AvailableAfterWeightsBytes: 512 << 20})
	if err != nil || p.Resolution.HeadroomBytes != 0 {
		t.Errorf("explicit with no headroom: %v", err)
	}
}

// TestReservationErrorText checks the refusals' text: the reference's
// sentence, where the available figure comes from, which --headroom would
// fit, and never a negative size (a headroom above A used to print "only
// -N bytes are available").
func TestReservationErrorText(t *testing.T) {
	tests := []struct {
		name string
		e    ReservationError
		want string
	}{
		{"explicit", ReservationError{Required: 2000, Available: 1000, AfterWeights: 1000},
			"requested Engine runtime reservation requires 2000 bytes, but only 1000 bytes are available for runtime capacity"},
		{"headroom too large", ReservationError{Required: 300, Available: 200, AfterWeights: 1000, Headroom: 800},
			"requested Engine runtime reservation requires 300 bytes, but only 200 bytes are available for runtime capacity (1000 bytes after the weights minus the 800-byte auto-capacity headroom; --headroom 700 or less would fit it)"},
		{"no headroom fits", ReservationError{Required: 3000, Available: 750, AfterWeights: 1000, Headroom: 250},
			"requested Engine runtime reservation requires 3000 bytes, but only 750 bytes are available for runtime capacity (1000 bytes after the weights minus the 250-byte auto-capacity headroom; even --headroom 0 leaves it 2000 bytes short)"},
		{"headroom above A", *newReservationError(300, 1000, 5000),
			"requested Engine runtime reservation requires 300 bytes, but no bytes are available for runtime capacity (the 5000-byte auto-capacity headroom is not less than the 1000 bytes available after the weights; --headroom 700 or less would fit it)"},
		{"headroom equals A", *newReservationError(3000, 1000, 1000),
			"requested Engine runtime reservation requires 3000 bytes, but no bytes are available for runtime capacity (the 1000-byte auto-capacity headroom is not less than the 1000 bytes available after the weights; even --headroom 0 leaves it 2000 bytes short)"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if e := newReservationError(300, 1000, 5000); e.Available != 0 {
		t.Errorf("available %d with a headroom above A, want 0", e.Available)
	}
	// Through New: a headroom above A is refused without a negative size.
	_, err := New(tiny(), nil, Options{MaxContext: 2048, HeadroomBytes: 2 << 30, AvailableAfterWeightsBytes: 512 << 20})
	var re *ReservationError
	if !errors.As(err, &re) || negative.MatchString(err.Error()) || re.Available != 0 || !strings.Contains(err.Error(), "or less would fit it") {
		t.Errorf("headroom above A: %v", err)
	}
	_, err = New(tiny(), nil, Options{HeadroomBytes: 2 << 30, AvailableAfterWeightsBytes: 512 << 20}) // largest context
	if !errors.As(err, &re) || negative.MatchString(err.Error()) || re.Available != 0 {
		t.Errorf("headroom above A, largest context: %v", err)
	}
}

// TestAutoRefusal checks the verbatim refusal when the minimum reservation
// does not fit A − headroom, and when an explicit capacity does not fit A.
func TestAutoRefusal(t *testing.T) {
	c := q27b()
	objs := []Object{{ID: "w", Component: "text", Bytes: seedWeights}}
	o := seedOptions()
	o.KVCapacity = 0
	o.AvailableAfterWeightsBytes = 1<<30 + 500<<20 // budget 500 MiB after a 1 GiB headroom
	o.HeadroomBytes = DefaultHeadroomBytes
	_, err := New(c, objs, o)
	var re *ReservationError
	if !errors.As(err, &re) || !errors.Is(err, ErrReservationTooLarge) || re.Available != 500<<20 {
		t.Fatalf("auto refusal: %v", err)
	}
	want := "requested Engine runtime reservation requires "
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "but only 524288000 bytes are available for runtime capacity (1598029824 bytes after the weights minus the 1073741824-byte auto-capacity headroom; ") {
		t.Errorf("message %q", err)
	}
	// The default rule on this budget: a quarter of A.
	o.HeadroomBytes = 0
	if _, err := New(c, objs, o); !errors.As(err, &re) || re.Headroom != (1<<30+500<<20)/4 {
		t.Errorf("auto refusal, default headroom: %v", err)
	}
	o = seedOptions()
	o.AvailableAfterWeightsBytes = 900 << 20
	if _, err := New(c, objs, o); !errors.As(err, &re) || re.Available != 900<<20 || re.Required <= re.Available {
		t.Errorf("explicit refusal: %v", err)
	}
}

// TestAutoLargestContext checks that with no max context the auto plan
// picks the largest 64-token context that fits A − headroom.
func TestAutoLargestContext(t *testing.T) {
	c := q27b()
	objs := []Object{{ID: "w", Component: "text", Bytes: seedWeights}}
	for _, A := range []int64{3 << 30, 7420313600, 20 << 30} {
		o := Options{KVDtype: KVInt8, Spec: SpecMTP, DraftTokens: 3, UseCUDAGraph: true, AvailableAfterWeightsBytes: A}
		p, err := New(c, objs, o)
		if err != nil {
			t.Fatalf("A=%d: %v", A, err)
		}
		ctx := p.Memory.MaxContext
		budget := A - AutoHeadroom(A)
		if ctx%64 != 0 || p.Memory.KVCapacity != ctx || p.Memory.RuntimeReservationBytes > budget {
			t.Errorf("A=%d: ctx %d capacity %d reservation %d budget %d", A, ctx, p.Memory.KVCapacity, p.Memory.RuntimeReservationBytes, budget)
		}
		if ctx < 262144 {
			o.MaxContext = ctx + 64
			if _, err := New(c, objs, o); !errors.Is(err, ErrReservationTooLarge) {
				t.Errorf("A=%d: ctx %d + 64 should not fit: %v", A, ctx, err)
			}
		}
		t.Logf("A=%d → max context %d", A, ctx)
	}
}

func TestOptionErrors(t *testing.T) {
	base := func() Options { return Options{MaxContext: 1024, AvailableAfterWeightsBytes: 1 << 30} }
	noMTP := tiny()
	noMTP.MTPNumHiddenLayers = 0
	tests := []struct {
		name string
		cfg  qwen35.Config
		mod  func(*Options)
		want string
	}{
		{"draft without spec", tiny(), func(o *Options) { o.DraftTokens = 2 }, "--draft-tokens and --lm-head-draft require --spec mtp"},
		{"head without spec", tiny(), func(o *Options) { o.LMHeadDraft = true }, "--draft-tokens and --lm-head-draft require --spec mtp"},
		{"k=6", tiny(), func(o *Options) { o.Spec, o.DraftTokens = SpecMTP, 6 }, "--spec mtp requires --draft-tokens in [1,5]"},
		{"k=0", tiny(), func(o *Options) { o.Spec = SpecMTP }, "--spec mtp requires --draft-tokens in [1,5]"},
		{"chunk", tiny(), func(o *Options) { o.PrefillChunk = 100 }, "--prefill-chunk 100: out of range (want a positive multiple of 128)"},
		{"negative chunk", tiny(), func(o *Options) { o.PrefillChunk = -128 }, "--prefill-chunk -128: out of range (want a positive multiple of 128)"},
		{"two budgets", tiny(), func(o *Options) { o.DeviceTotalBytes = 1 << 34 }, "exactly one memory budget"},
		{"no budget", tiny(), func(o *Options) { o.AvailableAfterWeightsBytes = 0 }, "exactly one memory budget"},
		{"no mtp head", noMTP, func(o *Options) { o.Spec, o.DraftTokens = SpecMTP, 2 }, "mtp_num_hidden_layers 0"},
		{"capacity below ctx", tiny(), func(o *Options) { o.KVCapacity = 512 }, "below the max context 1024"},
		{"capacity above max pages", tiny(), func(o *Options) { o.KVCapacity = 4096 }, "must be within [16, 16] page groups"},
		{"ctx over model", tiny(), func(o *Options) { o.MaxContext = 300000 }, "max_position_embeddings 262144"},
		{"concurrency", tiny(), func(o *Options) { o.MaxConcurrency = 2 }, "max concurrency 2"},
		{"headroom explicit", tiny(), func(o *Options) { o.KVCapacity, o.HeadroomBytes = 1024, 5 }, "takes no headroom"},
	}
	for _, tc := range tests {
		o := base()
		tc.mod(&o)
		_, err := New(tc.cfg, nil, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRandomPlans checks plan invariants over random configs and options.
func TestRandomPlans(t *testing.T) {
	seed := numtest.Seed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	planned := 0
	defer func() {
		if planned < 100 {
			t.Errorf("seed %d: only %d of 200 random plans fit; the test checks too little", seed, planned)
		}
	}()
	for i := 0; i < 200; i++ {
		nkv := 1 + r.IntN(4)
		hd := 32 * (1 + r.IntN(8))
		nk := 1 + r.IntN(4)
		c := model(4*(1+r.IntN(4)), 64*(1+r.IntN(16)), 128*(1+r.IntN(16)), 1000+r.IntN(5000),
			nkv*(1+r.IntN(3)), nkv, hd, nk, nk*(1+r.IntN(3)), 16*(1+r.IntN(8)), r.IntN(2))
		o := Options{KVDtype: []KVDtype{KVBF16, KVInt8, KVFP8}[r.IntN(3)], PrefillChunk: 128 * int64(1+r.IntN(8)),
			UseCUDAGraph: r.IntN(2) == 0, AvailableAfterWeightsBytes: int64(1+r.IntN(8)) << 30}
		if c.MTPNumHiddenLayers > 0 && r.IntN(2) == 0 {
			o.Spec, o.DraftTokens, o.LMHeadDraft, o.ReferenceMTPKV = SpecMTP, 1+r.IntN(5), r.IntN(2) == 0, r.IntN(4) == 0
		}
		if r.IntN(2) == 0 {
			o.MaxContext = int64(1 + r.IntN(100000))
			o.KVCapacity = (o.MaxContext + 63) / 64 * 64
		}
		p, err := New(c, nil, o)
		if err != nil {
			if errors.Is(err, ErrReservationTooLarge) {
				continue
			}
			t.Fatalf("seed %d case %d: %v", seed, i, err)
		}
		planned++
		m := p.Memory
		B := o.KVDtype.BytesPerTokenHead(hd)
		wantKV := int64(len(c.FullLayers())) * m.KVCapacityPageGroups * 64 * int64(nkv) * B
		if o.Spec == SpecMTP && o.ReferenceMTPKV {
			extra := int64(0)
			if o.DraftTokens > 1 {
				extra = 1
			}
			wantKV += int64(c.MTPNumHiddenLayers) * (m.KVCapacityPageGroups + extra) * 64 * int64(nkv) * B
		} else if o.Spec == SpecMTP { // the engine's cache: one layer over the main pages
			wantKV += m.KVCapacityPageGroups * 64 * int64(nkv) * B
		}
		if m.KVPayloadBytes != wantKV || m.KVCapacity != 64*m.KVCapacityPageGroups || m.KVCapacity < m.MaxContext {
			t.Errorf("seed %d case %d: payload %d want %d, capacity %d ctx %d", seed, i, m.KVPayloadBytes, wantKV, m.KVCapacity, m.MaxContext)
		}
		if m.RuntimeReservationBytes != m.Sequence.CapacityBytes+m.Workspace.CapacityBytes+m.CUDAGraphAllowanceBytes ||
			m.PlannedSlackBytes != m.AvailableAfterWeightsBytes-m.RuntimeReservationBytes || m.PlannedSlackBytes < m.KVCapacityHeadroomBytes {
			t.Errorf("seed %d case %d: reservation/slack inconsistent: %+v", seed, i, m)
		}
		checkArena(t, p.Sequence)
		checkArena(t, p.MTP.Sequence)
		var largest int64
		mtpPhases := 0
		for _, ph := range p.Phases {
			checkArena(t, ph)
			largest = max(largest, ph.Capacity)
			if strings.HasPrefix(ph.Name, "mtp.") {
				mtpPhases++
				// The MTP step keeps the target's residual live at offset 0.
				if x := ph.Terms[0]; x.Name != "x" || x.Offset != 0 || ph.Terms[1].Name != "mtp.x" {
					t.Errorf("seed %d case %d: phase %s starts %+v", seed, i, ph.Name, ph.Terms[:2])
				}
			}
		}
		wantMTP := 0
		if o.Spec == SpecMTP {
			wantMTP = 4
		}
		var need int64
		for _, n := range p.OpScratchNeeds {
			need = max(need, n.Bytes)
		}
		wantWS := largest
		if o.Backend == BackendCUDA || o.Backend == "" {
			wantWS += layout.AlignUp(need)
			if p.OpScratch.Offset != largest || p.OpScratch.Bytes != need || need <= 0 {
				t.Errorf("seed %d case %d: op scratch %+v, want %d bytes at %d", seed, i, p.OpScratch, need, largest)
			}
		}
		if (o.Spec == SpecMTP) != (p.MTP.Sequence.Capacity > 0) || mtpPhases != wantMTP ||
			p.Workspace != wantWS || p.MTP.Sequence.Bytes("kv.mtp") != p.KV.MTPBytes {
			t.Errorf("seed %d case %d: spec %s: workspace %d = largest phase %d + op scratch (%d mtp phases)? mtp.sequence %d, kv.mtp %d of %d",
				seed, i, o.Spec, p.Workspace, largest, mtpPhases, p.MTP.Sequence.Capacity, p.MTP.Sequence.Bytes("kv.mtp"), p.KV.MTPBytes)
		}
	}
}

// TestBackendScratch: the CPU kernels' scratch is reported beside the
// arenas and changes neither the reservation nor the memory object.
func TestBackendScratch(t *testing.T) {
	o := Options{MaxContext: 256, KVCapacity: 256, Backend: BackendCPU, AvailableAfterWeightsBytes: 1 << 30}
	base, err := New(tiny(), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	o.BackendScratchBytes = 123457
	p, err := New(tiny(), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.ScratchBytes != 123457 || p.Memory != base.Memory || base.ScratchBytes != 0 {
		t.Errorf("scratch %d, memory changed: %v", p.ScratchBytes, p.Memory != base.Memory)
	}
	var b bytes.Buffer
	if err := p.WriteTable(&b); err != nil || !strings.Contains(b.String(), "kernel scratch (outside the arenas, not reserved) | 123,457") {
		t.Errorf("table (%v):\n%s", err, b.String())
	}
	o.BackendScratchBytes = -1
	if _, err := New(tiny(), nil, o); err == nil {
		t.Error("negative scratch accepted")
	}
}
