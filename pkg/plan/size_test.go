package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"24GiB": 24 << 30, "24gib": 24 << 30, "24GB": 24000000000, "24000000000": 24000000000,
		"512MiB": 512 << 20, "1.5GiB": 3 << 29, "100B": 100, "2 TB": 2e12, "4KiB": 4096, " 7 MB ": 7000000,
	}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-5GiB", "0", "12XB", "1.5", "0.3B", "1e3", "99999999999TiB", "24 G"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestParseSizeOrZero: zero in any spelling is accepted (--headroom 0,
// --runtime-overhead 0), everything else as ParseSize.
func TestParseSizeOrZero(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""}, {"0B", 0, ""}, {"0GiB", 0, ""}, {"0.0 MiB", 0, ""}, {" 0 ", 0, ""},
		{"512MiB", 512 << 20, ""}, {"1.5GiB", 3 << 29, ""},
		{"-1", 0, `invalid size "-1"`}, {"", 0, "invalid size"}, {"0XB", 0, "invalid size"},
		{"0.3B", 0, "must be a non-negative whole number of bytes"},
	}
	for _, tc := range tests {
		got, err := ParseSizeOrZero(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseSizeOrZero(%q) = %d, %v; want %d, error %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	if _, err := ParseSize("0"); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("ParseSize(\"0\") = %v, want the positive-size error", err)
	}
}

func TestFromRecipeAndTable(t *testing.T) {
	c := q27b()
	r, err := recipe.Lookup("groupwise-int")
	if err != nil {
		t.Fatal(err)
	}
	objs, as, err := FromRecipe(c, r, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(c.Tensors())+2 || len(as) != len(objs) {
		t.Fatalf("%d objects for %d tensors + 2", len(objs), len(c.Tensors()))
	}
	var text, mtp, prop int64
	for _, o := range objs {
		switch {
		case o.IsProposal():
			prop += o.Bytes
		case o.Component == "mtp":
			mtp += o.Bytes
		default:
			text += o.Bytes
		}
	}
	// the q4 draft head [131072,5120] plus its int32 ids
	if prop != 131072*80*34+131072*4 || mtp <= 0 || text <= 0 {
		t.Errorf("text %d mtp %d proposal %d", text, mtp, prop)
	}
	o := Options{KVDtype: KVInt8, Spec: SpecMTP, DraftTokens: 3, LMHeadDraft: true, UseCUDAGraph: true,
		MaxContext: 65536, DeviceTotalBytes: 143771 << 20}
	p, err := New(c, objs, o)
	if err != nil {
		t.Fatal(err)
	}
	// The engine binds norm, conv and control vectors widened to fp32.
	class := map[string]qwen35.Tensor{}
	for _, t := range c.Tensors() {
		class[t.Name] = t
	}
	var widened int
	bound := make([]Object, len(objs))
	for i, o := range objs {
		bound[i] = o
		if t, ok := class[o.ID]; ok && (t.Class == qwen35.ClassNorm || t.Class == qwen35.ClassConv || t.Class == qwen35.ClassControl) {
			n := int64(1)
			for _, d := range t.Shape {
				n *= d
			}
			bound[i].Bytes = 4 * n
			widened++
		}
	}
	if want := alignSum(bound); p.Weights.Capacity != want || widened == 0 || want == alignSum(objs) {
		t.Errorf("weights %d, want Σ aligned bound sizes %d (%d widened vectors; encoded %d)", p.Weights.Capacity, want, widened, alignSum(objs))
	}
	if p.Weights.Terms[0].Name != c.Tensors()[0].Name || p.Weights.Terms[len(objs)-1].Name != qwen35.NameDraftIDs {
		t.Errorf("weights order: first %s last %s, want inventory order, then the proposal head", p.Weights.Terms[0].Name, p.Weights.Terms[len(objs)-1].Name)
	}
	var b bytes.Buffer
	if err := p.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| section", "kv.text (16 layers × 1024 pages)", "gdn.ssm_state (48 layers × 4 slots)",
		"int8-group64, 528 B per token·kv_head", "phase gdn", "kv.mtp (1 layers × 1024 pages)", "mtp.hidden", "phase mtp.mlp", "op scratch need: gdn_chunked", "capacity (largest target or mtp phase + op scratch)", "ctl.sampler", group(p.Memory.PlannedSlackBytes), "device total"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func alignSum(objs []Object) int64 {
	var n int64
	for _, o := range objs {
		n += (o.Bytes + 255) / 256 * 256
	}
	return n
}
