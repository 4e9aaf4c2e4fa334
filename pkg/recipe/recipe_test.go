package recipe

import (
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// cfg returns a Qwen3.5 config with every 4th layer full attention.
func cfg(layers, hidden, inter, vocab, nh, nkv, hd, nk, nv, dk, mtp int) qwen35.Config {
	c := qwen35.Config{
		VocabSize: vocab, HiddenSize: hidden, NumHiddenLayers: layers, IntermediateSize: inter,
		NumAttentionHeads: nh, NumKeyValueHeads: nkv, HeadDim: hd, LinearConvKernelDim: 4,
		LinearKeyHeadDim: dk, LinearValueHeadDim: dk, LinearNumKeyHeads: nk, LinearNumValueHeads: nv,
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, MTPNumHiddenLayers: mtp, MaxPositionEmbeddings: 262144,
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

func configs() map[string]qwen35.Config {
	tiny := cfg(4, 64, 96, 1000, 2, 1, 32, 2, 4, 16, 1) // nvfp4 gate/up N=96 and down K=96: fallbacks
	tiny.TieWordEmbeddings = true
	return map[string]qwen35.Config{
		"27b":  cfg(64, 5120, 17408, 248320, 24, 4, 256, 16, 48, 128, 1),
		"9b":   cfg(32, 4096, 12288, 248320, 16, 4, 256, 16, 32, 128, 0),
		"tiny": tiny,
		"odd":  cfg(8, 200, 300, 517, 4, 2, 48, 2, 2, 40, 1), // K=200 not a multiple of 64
	}
}

func TestPresetsValid(t *testing.T) {
	if len(Names()) < 4 {
		t.Fatalf("Names() = %v, want at least bf16, q8, groupwise-int, nvfp4-mlp", Names())
	}
	for _, n := range []string{"bf16", "q8", "groupwise-int", "nvfp4-mlp", "fp8"} {
		r, err := Lookup(n)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", n, err)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := Lookup("q3"); err == nil || !strings.Contains(err.Error(), "groupwise-int") {
		t.Errorf("Lookup(q3) error = %v, want an error listing the presets", err)
	}
}

// TestEveryTensorAssigned checks that every preset gives every tensor of
// several configs a format valid for its shape, with the fixed classes exact.
func TestEveryTensorAssigned(t *testing.T) {
	for cname, c := range configs() {
		if err := c.Validate(); err != nil {
			t.Fatalf("config %s: %v", cname, err)
		}
		tensors := append(c.Tensors(), ProposalTensors(c)...)
		for _, rname := range Names() {
			r, _ := Lookup(rname)
			as, err := r.Assign(tensors)
			if err != nil {
				t.Fatalf("%s/%s: %v", cname, rname, err)
			}
			if len(as) != len(tensors) {
				t.Fatalf("%s/%s: %d assignments for %d tensors", cname, rname, len(as), len(tensors))
			}
			for _, a := range as {
				if err := format.CheckShape(a.Format, a.Tensor.Shape); err != nil {
					t.Errorf("%s/%s: %s gets %s: %v", cname, rname, a.Tensor.Name, a.Format, err)
				}
				want, _ := format.EncodedSize(a.Format, a.Tensor.Shape)
				if a.Bytes != want || a.Bytes <= 0 {
					t.Errorf("%s/%s: %s bytes %d, want %d", cname, rname, a.Tensor.Name, a.Bytes, want)
				}
				fix := map[qwen35.Class]format.Format{qwen35.ClassNorm: format.BF16, qwen35.ClassConv: format.BF16,
					qwen35.ClassControl: format.FP32, qwen35.ClassDraftIDs: format.Int32}
				if rname == "fp32" && (a.Tensor.Class == qwen35.ClassNorm || a.Tensor.Class == qwen35.ClassConv) {
					fix[a.Tensor.Class] = format.FP32 // the exact preset keeps norms and conv in fp32
				}
				if f, ok := fix[a.Tensor.Class]; ok && a.Format != f {
					t.Errorf("%s/%s: %s (%s) is %s, want %s", cname, rname, a.Tensor.Name, a.Tensor.Class, a.Format, f)
				}
				if a.FellBack != (a.Reason != "") {
					t.Errorf("%s/%s: %s fellBack=%v but reason %q", cname, rname, a.Tensor.Name, a.FellBack, a.Reason)
				}
			}
		}
	}
}

func TestGroupwiseInt27B(t *testing.T) {
	c := configs()["27b"]
	r, _ := Lookup("groupwise-int")
	want := map[string]format.Format{
		qwen35.NameEmbedding:                       format.Q6G64,
		qwen35.NameOutputHead:                      format.Q6G64,
		qwen35.LayerName(3, "attention/q_proj"):    format.Q5G64,
		qwen35.LayerName(3, "attention/k_proj"):    format.Q4G64,
		qwen35.LayerName(3, "attention/v_proj"):    format.Q5G64,
		qwen35.LayerName(3, "attention/o_proj"):    format.Q5G64,
		qwen35.LayerName(0, "gdn/in_proj_qkv"):     format.Q5G64,
		qwen35.LayerName(0, "gdn/in_proj_z"):       format.Q5G64,
		qwen35.LayerName(0, "gdn/in_proj_a"):       format.BF16,
		qwen35.LayerName(0, "gdn/in_proj_b"):       format.BF16,
		qwen35.LayerName(0, "gdn/conv1d"):          format.BF16,
		qwen35.LayerName(0, "gdn/a_log"):           format.FP32,
		qwen35.LayerName(0, "gdn/dt_bias"):         format.FP32,
		qwen35.LayerName(0, "gdn/out_proj"):        format.Q5G64,
		qwen35.LayerName(0, "mlp/gate_proj"):       format.Q4G64,
		qwen35.LayerName(0, "mlp/up_proj"):         format.Q4G64,
		qwen35.LayerName(0, "mlp/down_proj"):       format.Q5G64,
		qwen35.LayerName(0, "input_norm"):          format.BF16,
		"mtp/fc":                                   format.Q8G32,
		qwen35.MTPLayerName(0, "attention/q_proj"): format.Q8G32,
		qwen35.MTPLayerName(0, "mlp/down_proj"):    format.Q8G32,
		qwen35.NameDraftHead:                       format.Q4G64,
		qwen35.NameDraftIDs:                        format.Int32,
	}
	as, err := r.Assign(append(c.Tensors(), ProposalTensors(c)...))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Assignment{}
	for _, a := range as {
		got[a.Tensor.Name] = a
		if a.FellBack {
			t.Errorf("27B %s fell back: %s", a.Tensor.Name, a.Reason)
		}
	}
	for name, f := range want {
		if got[name].Format != f {
			t.Errorf("%s = %q, want %s", name, got[name].Format, f)
		}
	}
	// q4 [17408,5120]: 80 groups/row; base 32 B, scale 2 B per group.
	if b := got[qwen35.LayerName(0, "mlp/gate_proj")].Bytes; b != 17408*80*34 {
		t.Errorf("gate_proj bytes %d, want %d", b, 17408*80*34)
	}
	// draft head [131072,5120] q4.
	if a := got[qwen35.NameDraftHead]; a.Bytes != 131072*80*34 || a.Tensor.Shape[0] != 131072 {
		t.Errorf("draft head %v bytes %d, want [131072 5120] %d", a.Tensor.Shape, a.Bytes, 131072*80*34)
	}
	if fs := Formats(as); strings.Join(fs, ",") != "bf16,fp32,int32,q4_g64_fp16,q5_g64_fp16,q6_g64_fp16,q8_g32_fp16" {
		t.Errorf("Formats = %v", fs)
	}
}

// TestNVFP4Fallbacks checks that the nvfp4-mlp recipe uses nvfp4 where the
// shape allows and reports each fallback with the failed constraint.
func TestNVFP4Fallbacks(t *testing.T) {
	r, _ := Lookup("nvfp4-mlp")
	tests := []struct {
		cfg, name string
		want      format.Format
		fellBack  bool
	}{
		{"27b", qwen35.LayerName(0, "mlp/gate_proj"), format.NVFP4, false},
		{"27b", qwen35.LayerName(5, "mlp/down_proj"), format.NVFP4, false},
		{"27b", qwen35.LayerName(3, "attention/k_proj"), format.Q4G64, false},
		{"tiny", qwen35.LayerName(0, "mlp/gate_proj"), format.Q4G64, true}, // N=96
		{"tiny", qwen35.LayerName(0, "mlp/up_proj"), format.Q4G64, true},
		{"tiny", qwen35.LayerName(0, "mlp/down_proj"), format.Q5G64, true}, // N=64
		{"odd", qwen35.LayerName(1, "mlp/gate_proj"), format.Q4G64, true},  // N=300, K=200
	}
	cs := configs()
	for _, tc := range tests {
		var found bool
		for _, tn := range cs[tc.cfg].Tensors() {
			if tn.Name != tc.name {
				continue
			}
			found = true
			f, fb, why := r.FormatFor(tn)
			if f != tc.want || fb != tc.fellBack {
				t.Errorf("%s %s = %s fellBack=%v (%s), want %s %v", tc.cfg, tc.name, f, fb, why, tc.want, tc.fellBack)
			}
			if fb && (!strings.Contains(why, "nvfp4") || !strings.Contains(why, "fell back to "+string(tc.want))) {
				t.Errorf("%s %s: reason %q does not name the constraint and the fallback", tc.cfg, tc.name, why)
			}
		}
		if !found {
			t.Fatalf("%s has no tensor %s", tc.cfg, tc.name)
		}
	}
}

func TestFormatForUnknownClass(t *testing.T) {
	r, _ := Lookup("q8")
	f, fb, why := r.FormatFor(qwen35.Tensor{Name: "x", Shape: []int64{4, 4}, Class: "mystery"})
	if f != format.BF16 || !fb || !strings.Contains(why, "mystery") {
		t.Errorf("unknown class: %s %v %q", f, fb, why)
	}
}

func TestValidateRejects(t *testing.T) {
	r, _ := Lookup("q8")
	bad := Recipe{Name: "bad", Rules: map[qwen35.Class]Rule{}}
	for c, x := range r.Rules {
		bad.Rules[c] = x
	}
	bad.Rules[qwen35.ClassNorm] = Rule{format.Q8G32, format.Q8G32}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "norm") {
		t.Errorf("norm in q8: Validate = %v", err)
	}
	delete(bad.Rules, qwen35.ClassNorm)
	bad.Rules[qwen35.ClassNorm] = fixed[qwen35.ClassNorm]
	delete(bad.Rules, qwen35.ClassMLPUp)
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "mlp_up") {
		t.Errorf("missing mlp_up: Validate = %v", err)
	}
}
