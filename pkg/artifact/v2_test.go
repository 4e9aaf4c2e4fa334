package artifact

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// v2Directory is a small v2 directory: a resource, then W8/BF16/I32/Q4
// tensors (incl. a draft head), 256-aligned, with a gap.
const v2Directory = `{"identity":{"model_id":"qwen3.6-27b","weights_id":"groupwise-int"},"objects":[` +
	`{"name":"frontend/tokenizer.json","kind":"resource","encoding":"raw-bytes-v1","offset":0,"bytes":10},` +
	`{"name":"text/layers/0/attention/q_proj","kind":"tensor","shape":[4,200],"format":"W8G32_F16S","layout":"row-split-k128-v1","offset":256,"bytes":1088},` +
	`{"name":"text/final_norm","kind":"tensor","shape":[64],"format":"BF16","layout":"contiguous-le-v1","offset":1536,"bytes":128},` +
	`{"name":"text/draft_head_token_ids","kind":"tensor","shape":[16],"format":"I32","layout":"contiguous-le-v1","offset":1792,"bytes":64},` +
	`{"name":"vision/blocks/0/qkv","kind":"tensor","shape":[2,130],"format":"Q5G64_F16S","layout":"row-split-k128-v1","offset":2048,"bytes":528}]}`

func v2File(t *testing.T, js string) []byte {
	t.Helper()
	r := newRand(t)
	payload := make([]byte, 2048+528)
	for i := range payload {
		payload[i] = byte(r.Uint32() | 1)
	}
	return assembleV2([]byte(js), payload)
}

func TestOpenV2(t *testing.T) {
	b := v2File(t, v2Directory)
	path := filepath.Join(t.TempDir(), "legacy.ninfer")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenMapped(path)
	if err != nil {
		t.Fatalf("Open v2: %v", err)
	}
	defer f.Close()
	if f.Version != 2 || f.Identity == nil || f.Identity.ModelID != "qwen3.6-27b" || f.Identity.WeightsID != "groupwise-int" {
		t.Fatalf("version %d identity %+v", f.Version, f.Identity)
	}
	if f.PayloadStart != 4096 || f.PayloadBytes != int64(len(b))-4096 {
		t.Fatalf("payload start %d bytes %d", f.PayloadStart, f.PayloadBytes)
	}
	if _, err := f.Config(); err == nil || !strings.Contains(err.Error(), "artifact v2 has no model config") {
		t.Fatalf("Config() on v2: %v", err)
	}
	if _, err := f.PrefillSignature(); err == nil {
		t.Fatalf("PrefillSignature on v2 succeeded")
	}
	want := []struct {
		id, comp string
		f        format.Format
		l        format.Layout
	}{
		{"frontend/tokenizer.json", "frontend", "", ""},
		{"text/layers/0/attention/q_proj", "text", format.Q8G32, format.RowSplit},
		{"text/final_norm", "text", format.BF16, format.Contiguous},
		{"text/draft_head_token_ids", "proposal", format.Int32, format.Contiguous},
		{"vision/blocks/0/qkv", "vision", format.Q5G64, format.RowSplit},
	}
	for i, w := range want {
		o := f.Objects[i]
		if o.ID != w.id || o.Component != w.comp || o.Format != w.f || o.Layout != w.l {
			t.Errorf("object %d = %+v, want %+v", i, o, w)
		}
	}
	if f.Objects[0].Encoding != ResourceEncoding || len(f.Resources) != 1 {
		t.Errorf("resource %+v, resources %v", f.Objects[0], f.Resources)
	}
	if got := f.Bytes(&f.Objects[1]); !bytes.Equal(got, b[4096+256:4096+256+1088]) {
		t.Errorf("mapped v2 bytes differ")
	}
	if got := strings.Join(f.Formats(), ","); got != "bf16,int32,q5_g64_fp16,q8_g32_fp16" {
		t.Errorf("Formats = %s", got)
	}
}

func TestRejectV2(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"build_id in identity", `"weights_id":"groupwise-int"}`, `"weights_id":"groupwise-int","build_id":"x"}`, `identity: unexpected member "build_id"`},
		{"empty model id", `"model_id":"qwen3.6-27b"`, `"model_id":""`, "must be non-empty"},
		{"v3 encoding", `"raw-bytes-v1"`, `"raw_bytes_v1"`, `unknown resource encoding "raw_bytes_v1"`},
		{"v3 format name", `"W8G32_F16S"`, `"q8_g32_fp16"`, `unknown v2 tensor format "q8_g32_fp16"`},
		{"v3 layout name", `"contiguous-le-v1","offset":1536`, `"contiguous_le_v1","offset":1536`, `unknown v2 storage layout`},
		{"bytes mismatch", `"offset":256,"bytes":1088`, `"offset":256,"bytes":1000`, `object "text/layers/0/attention/q_proj": bytes 1000 != 1088 for q8_g32_fp16 [4,200]`},
		{"misaligned", `"offset":1536`, `"offset":1537`, `object "text/final_norm": tensor offset 1537 is not 256-byte aligned`},
		{"beyond eof", `"offset":2048`, `"offset":4096`, `object "vision/blocks/0/qkv": range [4096,4624) extends beyond the payload`},
		{"v3 id member", `"name":"text/final_norm"`, `"id":"text/final_norm"`, `missing member "name"`},
		{"extra root", `{"identity"`, `{"version":2,"identity"`, `unexpected member "version"`},
		{"float offset", `"offset":1792`, `"offset":1792.0`, `offset must be a non-negative integer, got 1792.0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js := strings.Replace(v2Directory, tc.old, tc.new, 1)
			if js == v2Directory {
				t.Fatalf("replacement %q not found", tc.old)
			}
			b := v2File(t, js)
			_, err := Parse("legacy.ninfer", bytes.NewReader(b), int64(len(b)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want substring %q", err, tc.want)
			}
		})
	}
}
