package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

func TestSignatureFactsGolden(t *testing.T) {
	objs := []Object{
		{ID: "text/b", Kind: KindTensor, Shape: []int64{64}, Format: format.BF16, Layout: format.Contiguous},
		{ID: "mtp/fc", Kind: KindTensor, Shape: []int64{64, 128}, Format: format.Q8G32, Layout: format.RowSplit},
		{ID: "frontend/tokenizer.json", Kind: KindResource, Encoding: ResourceEncoding},
		{ID: "text/a", Kind: KindTensor, Shape: []int64{128, 64}, Format: format.Q4G64, Layout: format.RowSplit},
		{ID: "text/s", Kind: KindTensor, Shape: []int64{}, Format: format.FP32, Layout: format.Contiguous},
	}
	want := `{"architecture":"Qwen3_5ForCausalLM","attention":[2,1,32],"ffn":[128],"gdn":[4,16,16,2,2],` +
		`"hidden_size":64,"implementation":"ninfer-qwen3_5-prefill-1","layer_types":["linear_attention","full_attention"],` +
		`"num_hidden_layers":2,"rms_norm_eps":1e-06,"rope":[1e+07,8],"vocab_size":256,"weights":[` +
		`{"format":"q4_g64_fp16","layout":"row_split_k128_v1","name":"text/a","shape":[128,64]},` +
		`{"format":"bf16","layout":"contiguous_le_v1","name":"text/b","shape":[64]},` +
		`{"format":"fp32","layout":"contiguous_le_v1","name":"text/s","shape":[]}]}`
	got := SignatureFacts(qwen35.Architecture, testConfig(), objs)
	if got != want {
		t.Fatalf("facts\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatalf("facts are not valid JSON")
	}
	sum := sha256.Sum256([]byte(want))
	if sig := PrefillSignature(qwen35.Architecture, testConfig(), objs); sig != hex.EncodeToString(sum[:]) {
		t.Fatalf("signature %s is not sha256 of the facts", sig)
	}
}

func TestSignatureInvariance(t *testing.T) {
	r := newRand(t)
	p := newPlan(t, testMeta(), testEntries)
	a, err := open(writeArtifact(t, t.TempDir(), p, randomPayloads(r, p)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Different payload bytes, metadata, name and an extra mtp-only change.
	meta := testMeta()
	meta.Name, meta.Metadata = "renamed", map[string]any{"recipe": "other"}
	entries := append([]planEntry{}, testEntries...)
	entries[len(entries)-2].f, entries[len(entries)-2].shape = format.BF16, []int64{64, 128} // mtp/fc
	entries[0].size = 999                                                                    // resource size moves every offset
	p2 := newPlan(t, meta, entries)
	b, err := open(writeArtifact(t, t.TempDir(), p2, randomPayloads(r, p2)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sa, err := a.PrefillSignature()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.PrefillSignature()
	if err != nil {
		t.Fatal(err)
	}
	if sa != sb || len(sa) != 64 {
		t.Fatalf("signature changed with payload/metadata/offsets/mtp only: %s vs %s", sa, sb)
	}
}

func TestSignatureSensitivity(t *testing.T) {
	base := newPlan(t, testMeta(), testEntries).Objects()
	ref := PrefillSignature(qwen35.Architecture, testConfig(), base)
	cfgCases := map[string]func(c *qwen35.Config){
		"vocab_size":             func(c *qwen35.Config) { c.VocabSize++ },
		"hidden_size":            func(c *qwen35.Config) { c.HiddenSize++ },
		"num_hidden_layers":      func(c *qwen35.Config) { c.NumHiddenLayers++ },
		"intermediate_size":      func(c *qwen35.Config) { c.IntermediateSize++ },
		"num_attention_heads":    func(c *qwen35.Config) { c.NumAttentionHeads++ },
		"num_key_value_heads":    func(c *qwen35.Config) { c.NumKeyValueHeads++ },
		"head_dim":               func(c *qwen35.Config) { c.HeadDim++ },
		"linear_conv_kernel_dim": func(c *qwen35.Config) { c.LinearConvKernelDim++ },
		"linear_key_head_dim":    func(c *qwen35.Config) { c.LinearKeyHeadDim++ },
		"linear_value_head_dim":  func(c *qwen35.Config) { c.LinearValueHeadDim++ },
		"linear_num_key_heads":   func(c *qwen35.Config) { c.LinearNumKeyHeads++ },
		"linear_num_value_heads": func(c *qwen35.Config) { c.LinearNumValueHeads++ },
		"rms_norm_eps":           func(c *qwen35.Config) { c.RMSNormEps = 1e-5 },
		"rope_theta":             func(c *qwen35.Config) { c.RopeTheta = 1e6 },
		"partial_rotary_factor":  func(c *qwen35.Config) { c.PartialRotaryFactor = 0.5 },
		"layer_types":            func(c *qwen35.Config) { c.LayerTypes = []string{"full_attention", "linear_attention"} },
	}
	for name, mut := range cfgCases {
		c := testConfig()
		mut(&c)
		if PrefillSignature(qwen35.Architecture, c, base) == ref {
			t.Errorf("config change %s did not change the signature", name)
		}
	}
	objCases := map[string]func(o []Object) []Object{
		"format": func(o []Object) []Object { o[1].Format, o[1].Layout = format.Q4G64, format.RowSplit; return o },
		"shape":  func(o []Object) []Object { o[4].Shape = []int64{65}; return o },
		"rename": func(o []Object) []Object { o[4].ID = "text/layers/0/input_norm2"; return o },
		"draft":  func(o []Object) []Object { o[11].Shape = []int64{32, 64}; return o },
		"added": func(o []Object) []Object {
			return append(o, Object{ID: "text/extra", Kind: KindTensor, Shape: []int64{1}, Format: format.FP32, Layout: format.Contiguous})
		},
	}
	for name, mut := range objCases {
		objs := mut(newPlan(t, testMeta(), testEntries).Objects())
		if PrefillSignature(qwen35.Architecture, testConfig(), objs) == ref {
			t.Errorf("object change %s did not change the signature", name)
		}
	}
	if PrefillSignature("Other", testConfig(), base) == ref {
		t.Errorf("architecture change did not change the signature")
	}
}
