package layout

import (
	"testing"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// tiny is a 4-layer config (layer 3 full attention): H 64, I 128, V 1000,
// nh 2, nkv 1, hd 32, nk 2, nv 4, dk = dv 16, conv_dim 128, K 4.
func tiny() qwen35.Config {
	return qwen35.Config{VocabSize: 1000, HiddenSize: 64, NumHiddenLayers: 4, IntermediateSize: 128,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 32, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 16, LinearValueHeadDim: 16, LinearNumKeyHeads: 2, LinearNumValueHeads: 4,
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25,
		LayerTypes: []string{qwen35.LinearAttention, qwen35.LinearAttention, qwen35.LinearAttention, qwen35.FullAttention}}
}

func TestLay(t *testing.T) {
	a := Lay("a", []Term{{Name: "x", Bytes: 1}, {Name: "empty"}, {Name: "y", Bytes: 256}, {Name: "z", Bytes: 257, Offset: 99}})
	want := []Term{{"x", 0, 1}, {"y", 256, 256}, {"z", 512, 257}}
	if a.Capacity != 1024 || len(a.Terms) != 3 {
		t.Fatalf("arena %+v, want capacity 1024 and 3 terms", a)
	}
	for i, w := range want {
		if a.Terms[i] != w {
			t.Errorf("term %d = %+v, want %+v", i, a.Terms[i], w)
		}
	}
	if _, ok := a.Term("empty"); ok || a.Bytes("z") != 257 || a.Bytes("nope") != 0 {
		t.Errorf("lookups: empty present or z %d", a.Bytes("z"))
	}
}

func TestKVPlaneBytes(t *testing.T) {
	tests := []struct {
		dtype       string
		hd          int
		code, scale int64
	}{
		{"bf16", 256, 512, 0}, {"", 64, 128, 0}, {"int8", 256, 256, 8}, {"int8", 96, 96, 4},
		{"fp8", 256, 256, 2}, {"fp8", 320, 320, 2}, {"fp32", 32, 128, 0},
	}
	for _, tc := range tests {
		c, s, err := KVPlaneBytes(tc.dtype, tc.hd)
		if err != nil || c != tc.code || s != tc.scale {
			t.Errorf("%q hd %d: %d+%d %v, want %d+%d", tc.dtype, tc.hd, c, s, err, tc.code, tc.scale)
		}
	}
	if _, _, err := KVPlaneBytes("fp16", 64); err == nil {
		t.Error("fp16 accepted")
	}
}

// TestSequence pins the sequence arena of the tiny config: 130 tokens
// (3 pages), 100-token steps, int8 KV, 2 state slots.
func TestSequence(t *testing.T) {
	a, g, err := Sequence(tiny(), SequenceOptions{MaxContext: 130, StepTokens: 100, KVDtype: "int8", StateSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	vecs := int64(3 * 1 * 64)
	kv := 2 * vecs * (32 + 2) // K, V codes + fp16 scales, one layer
	ssm := int64(4 * 16 * 16 * 4)
	conv := int64(128 * 3 * ConvStateElemBytes)
	want := []Term{
		{"kv.text", 0, kv},
		{"gdn.ssm_state", AlignUp(kv), 3 * 2 * ssm},
		{"gdn.conv_state", AlignUp(kv) + 3*2*ssm, 3 * 2 * conv},
		{"block_table", AlignUp(kv) + 3*2*ssm + AlignUp(3*2*conv), 12},
	}
	for i, w := range want {
		if a.Terms[i] != w {
			t.Errorf("term %d = %+v, want %+v", i, a.Terms[i], w)
		}
	}
	if a.Bytes("ctl.ids") != 400 || a.Bytes("ctl.pos") != 400 || a.Bytes("ctl.in_slot") != 4 || len(a.Terms) != 7 {
		t.Errorf("control terms %+v", a.Terms)
	}
	if a.Capacity != want[3].Offset+256+512+512+256 {
		t.Errorf("capacity %d", a.Capacity)
	}
	k, v, ks, vs := g.KVPlanes(0)
	if k != 0 || v != vecs*32 || ks != 2*vecs*32 || vs != 2*vecs*32+vecs*2 || g.BytesPerTokenHead() != 68 || g.KVPayloadBytes() != kv {
		t.Errorf("planes %d %d %d %d, B %d", k, v, ks, vs, g.BytesPerTokenHead())
	}
	if g.SSMOffset(2) != 2*2*ssm || g.ConvOffset(1) != 2*conv || g.Pages != 3 {
		t.Errorf("slot offsets %d %d pages %d", g.SSMOffset(2), g.ConvOffset(1), g.Pages)
	}
	if _, _, err := Sequence(tiny(), SequenceOptions{MaxContext: 64, StepTokens: 64, StateSlots: 0}); err == nil {
		t.Error("zero state slots accepted")
	}
	if _, _, err := Sequence(tiny(), SequenceOptions{MaxContext: 64, StepTokens: 64, StateSlots: 1, KVDtype: "nvfp4"}); err == nil {
		t.Error("unknown KV dtype accepted")
	}
	h, _, _ := Sequence(tiny(), SequenceOptions{MaxContext: 64, StepTokens: 64, StateSlots: 1, ConvElemBytes: 2})
	if h.Bytes("gdn.conv_state") != 3*128*3*2 {
		t.Errorf("bf16 conv override: %d", h.Bytes("gdn.conv_state"))
	}
}

// TestWorkspace pins the phases of the tiny config for 10-token steps and
// 3 logits rows; x is always at offset 0 (mtp.go reads the residual there).
func TestWorkspace(t *testing.T) {
	phases, capacity := Workspace(tiny(), 10, 3)
	a := func(cols int64) int64 { return AlignUp(4 * 10 * cols) }
	want := map[string]int64{
		PhaseAttention: 2*a(64) + a(128) + a(64) + 2*a(32) + a(64),
		PhaseGDN:       2*a(64) + 2*a(128) + a(64) + 4*a(4) + 2*a(64),
		PhaseMLP:       2*a(64) + 2*a(128),
		PhaseLogits:    2*a(64) + AlignUp(4*3*1000),
	}
	if len(phases) != 4 {
		t.Fatalf("%d phases", len(phases))
	}
	var best int64
	for _, p := range phases {
		if p.Capacity != want[p.Name] || p.Terms[0] != (Term{"x", 0, 4 * 10 * 64}) || p.Terms[1].Name != "x_norm" {
			t.Errorf("phase %s = %d (first %+v), want %d", p.Name, p.Capacity, p.Terms[0], want[p.Name])
		}
		best = max(best, want[p.Name])
	}
	if capacity != best || best != want[PhaseGDN] {
		t.Errorf("capacity %d, want the gdn phase %d", capacity, best)
	}
	c := tiny()
	c.LayerTypes = []string{qwen35.FullAttention, qwen35.FullAttention, qwen35.FullAttention, qwen35.FullAttention}
	if ph, _ := Workspace(c, 10, 1); len(ph) != 3 || ph[0].Name != PhaseAttention {
		t.Errorf("attention-only model: phases %v", ph)
	}
}

func TestBoundBytesAndSteps(t *testing.T) {
	if BoundBytes(qwen35.ClassNorm, 64, 128) != 256 || BoundBytes(qwen35.ClassConv, 512, 1024) != 2048 ||
		BoundBytes(qwen35.ClassControl, 4, 16) != 16 || BoundBytes(qwen35.ClassEmbedding, 100, 777) != 777 {
		t.Error("BoundBytes")
	}
	if StepTokens(24, 1024) != 24 || StepTokens(4096, 128) != 128 || Pages(1) != 1 || Pages(64) != 1 || Pages(65) != 2 {
		t.Error("StepTokens/Pages")
	}
}

// TestMTPSequence pins the MTP head's sequence arena of the tiny config:
// 130 tokens (3 pages), 100-token steps, 2 state slots (101 rows), int8 KV.
func TestMTPSequence(t *testing.T) {
	a, g, err := MTPSequence(tiny(), SequenceOptions{MaxContext: 130, StepTokens: 100, KVDtype: "int8", StateSlots: 2, ConvElemBytes: 2})
	if err != nil {
		t.Fatal(err)
	}
	vecs := int64(3 * 1 * 64)
	kv := 2 * vecs * (32 + 2) // one layer: K, V codes + fp16 scales
	want := []Term{
		{"kv.mtp", 0, kv},
		{"mtp.block_table", AlignUp(kv), 12},
		{"mtp.ids", AlignUp(kv) + 256, 404},
		{"mtp.pos", AlignUp(kv) + 256 + 512, 404},
		{"mtp.hidden", AlignUp(kv) + 256 + 1024, 101 * 64 * 4},
		{"mtp.last_hidden", AlignUp(kv) + 256 + 1024 + AlignUp(101*64*4), 64 * 4},
	}
	if a.Name != MTPSequenceArena || len(a.Terms) != len(want) {
		t.Fatalf("arena %s with %d terms %+v", a.Name, len(a.Terms), a.Terms)
	}
	for i, w := range want {
		if a.Terms[i] != w {
			t.Errorf("term %d = %+v, want %+v", i, a.Terms[i], w)
		}
	}
	if a.Capacity != want[5].Offset+256 || g.KVLayers != 1 || g.GDNLayers != 0 || g.KVPayloadBytes() != kv || g.Pages != 3 {
		t.Errorf("capacity %d, geometry %+v", a.Capacity, g)
	}
	if k, v, ks, vs := g.KVPlanes(0); k != 0 || v != vecs*32 || ks != 2*vecs*32 || vs != 2*vecs*32+2*vecs {
		t.Errorf("planes %d %d %d %d", k, v, ks, vs)
	}
	// A verify of more state slots than step tokens sets the rows.
	if MTPRows(4, 6) != 7 || MTPRows(1024, 3) != 1025 {
		t.Errorf("MTPRows %d %d", MTPRows(4, 6), MTPRows(1024, 3))
	}
	for _, bad := range []SequenceOptions{{MaxContext: 64, StepTokens: 64, StateSlots: 0}, {MaxContext: 64, StepTokens: 64, StateSlots: 1, KVDtype: "q4"}} {
		if _, _, err := MTPSequence(tiny(), bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestMTPWorkspaceAndWeights pins the MTP step's workspace phases of the
// tiny config after a 10-token target step, for 11-row steps with 3 logits
// rows, the combined capacity, and the weights arena's name.
func TestMTPWorkspaceAndWeights(t *testing.T) {
	phases, capacity := MTPWorkspace(tiny(), 10, 11, 3)
	r := func(cols int64) int64 { return AlignUp(4 * 11 * cols) }
	base := AlignUp(4*10*64) + 2*r(64) // target x [10, 64], mtp.x, mtp.x_norm [11, 64]
	want := []struct {
		name  string
		terms int
		cap   int64
	}{
		{PhaseMTPInput, 5, base + r(64) + r(128)},                       // embed, concat
		{PhaseMTPAttention, 8, base + r(128) + r(64) + 2*r(32) + r(64)}, // q_gate, q, k, v, out
		{PhaseMTPMLP, 5, base + 2*r(128)},                               // gate, up
		{PhaseMTPLogits, 6, base + r(64) + AlignUp(4*3*1000) + 256},     // hidden_norm, logits [3, 1000], argmax int32 [3]
	}
	if len(phases) != len(want) {
		t.Fatalf("%d phases", len(phases))
	}
	var best int64
	for i, w := range want {
		p := phases[i]
		if p.Name != w.name || len(p.Terms) != w.terms || p.Capacity != w.cap {
			t.Errorf("phase %d = %s (%d terms) %d, want %s (%d) %d", i, p.Name, len(p.Terms), p.Capacity, w.name, w.terms, w.cap)
		}
		// The target's residual stays at offset 0, the MTP rows follow.
		if p.Terms[0] != (Term{"x", 0, 4 * 10 * 64}) || p.Terms[1] != (Term{"mtp.x", AlignUp(4 * 10 * 64), 4 * 11 * 64}) || p.Terms[2].Name != "mtp.x_norm" {
			t.Errorf("phase %s starts %+v", p.Name, p.Terms[:3])
		}
		best = max(best, w.cap)
	}
	if capacity != best || best != want[3].cap {
		t.Errorf("capacity %d, want the logits phase %d", capacity, best)
	}
	if lg := phases[3]; lg.Bytes("argmax") != 12 || lg.Bytes("logits") != 12000 {
		t.Errorf("logits terms %+v", lg.Terms)
	}
	// With the target: the largest phase of either; rows = MTPRows(T, slots).
	all, c := WorkspaceWithMTP(tiny(), 10, 3, 3)
	tp, tcap := Workspace(tiny(), 10, 3)
	mp, mcap := MTPWorkspace(tiny(), 10, MTPRows(10, 3), 3)
	if len(all) != len(tp)+len(mp) || c != max(tcap, mcap) || all[len(tp)].Name != PhaseMTPInput || all[0].Name != PhaseAttention {
		t.Errorf("with MTP: %d phases capacity %d, want %d+%d phases, max(%d, %d)", len(all), c, len(tp), len(mp), tcap, mcap)
	}
	// A wide vocabulary makes the MTP logits phase the largest.
	wide := tiny()
	wide.VocabSize = 100000
	_, wt := Workspace(wide, 10, 3)
	_, wm := MTPWorkspace(wide, 10, 11, 3)
	if _, wc := WorkspaceWithMTP(wide, 10, 1, 3); wm <= wt || wc != wm {
		t.Errorf("wide vocab: target %d mtp %d combined %d", wt, wm, wc)
	}
	w := MTPWeights([]Term{{Name: "mtp/fc", Bytes: 300}, {Name: "mtp/norm", Bytes: 256}})
	if w.Name != MTPWeightsArena || w.Capacity != 768 || w.Terms[1].Offset != 512 {
		t.Errorf("mtp weights %+v", w)
	}
}
