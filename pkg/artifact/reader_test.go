package artifact

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

func TestRoundTrip(t *testing.T) {
	r := newRand(t)
	p := newPlan(t, testMeta(), testEntries)
	payloads := randomPayloads(r, p)
	path := writeArtifact(t, t.TempDir(), p, payloads)

	f, err := open(path, false)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	if f.Version != 3 || f.Name != "tiny-qwen3.5" || f.Architecture != "Qwen3_5ForCausalLM" {
		t.Fatalf("header fields: version %d name %q arch %q", f.Version, f.Name, f.Architecture)
	}
	if f.ID == ([16]byte{}) {
		t.Fatalf("artifact id is all zero")
	}
	if f.PayloadStart%PayloadAlignment != 0 || f.PayloadStart < HeaderSize+f.JSONBytes {
		t.Fatalf("payload start %d (json %d)", f.PayloadStart, f.JSONBytes)
	}
	if f.Size != f.PayloadStart+p.PayloadBytes() || f.PayloadBytes != p.PayloadBytes() {
		t.Fatalf("size %d payload %d, plan payload %d", f.Size, f.PayloadBytes, p.PayloadBytes())
	}
	cfg, err := f.Config()
	if err != nil || !reflect.DeepEqual(cfg, testConfig()) {
		t.Fatalf("Config() = %+v, %v", cfg, err)
	}
	if f.MTP == nil || f.MTP.NumLayers != 1 {
		t.Fatalf("mtp component %+v", f.MTP)
	}
	if f.Proposal == nil || f.Proposal.Rows != 16 || f.Proposal.Source != "test-frequency" {
		t.Fatalf("proposal component %+v", f.Proposal)
	}
	if want := []string{"frontend/tokenizer.json", "frontend/chat_template.jinja"}; !reflect.DeepEqual(f.Resources, want) {
		t.Fatalf("resources %v, want %v", f.Resources, want)
	}
	if f.Metadata["recipe"] != "test" || f.Provenance["source"] != "unit test" {
		t.Fatalf("metadata %v provenance %v", f.Metadata, f.Provenance)
	}
	planned := p.Objects()
	if len(f.Objects) != len(planned) {
		t.Fatalf("%d objects, planned %d", len(f.Objects), len(planned))
	}
	for i := range planned {
		got, want := f.Objects[i], planned[i]
		if len(got.SHA256) != 64 || got.SHA256 == zeroHash {
			t.Errorf("object %s: sha256 %q not filled in", got.ID, got.SHA256)
		}
		got.SHA256 = ""
		if !reflect.DeepEqual(got, want) {
			t.Errorf("object %d: got %+v want %+v", i, got, want)
		}
	}
	// Header-only: nothing mapped yet; ReadObject works through ReadAt.
	if f.Mapped() || f.Bytes(&f.Objects[0]) != nil {
		t.Fatalf("payload mapped before Map")
	}
	tok, err := f.Resource("frontend/tokenizer.json")
	if err != nil || !bytes.Equal(tok, payloads["frontend/tokenizer.json"]) {
		t.Fatalf("Resource: %v", err)
	}
	if _, err := f.Resource("text/token_embedding"); err == nil {
		t.Fatalf("Resource of a tensor succeeded")
	}
	if err := f.Map(); err != nil {
		t.Fatalf("Map: %v", err)
	}
	for i := range f.Objects {
		o := &f.Objects[i]
		if b := f.Bytes(o); !bytes.Equal(b, payloads[o.ID]) {
			t.Errorf("object %s: mapped bytes differ", o.ID)
		}
	}
	n, err := f.VerifyAll()
	if err != nil || n != len(f.Objects) {
		t.Fatalf("VerifyAll = %d, %v", n, err)
	}
}

func TestQueries(t *testing.T) {
	p := newPlan(t, testMeta(), testEntries)
	f, err := open(writeArtifact(t, t.TempDir(), p, randomPayloads(newRand(t), p)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantFormats := []string{"bf16", "fp32", "fp8_e4m3fn_row_bf16", "int32", "nvfp4", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16"}
	if got := f.Formats(); !reflect.DeepEqual(got, wantFormats) {
		t.Errorf("Formats = %v", got)
	}
	if got, want := f.CountByComponent(), map[string]int{"frontend": 2, "text": 9, "proposal": 2, "mtp": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("CountByComponent = %v, want %v", got, want)
	}
	// Expected sizes from the format reference (docs/FORMAT.md examples).
	q8, _ := f.Object("text/layers/0/attention/q_proj")
	q5, _ := f.Object("text/layers/0/gdn/in_proj_qkv")
	fp8, _ := f.Object("text/output_head")
	if q8.Bytes != 1088 || q5.Bytes != 528 || fp8.Bytes != 268 {
		t.Errorf("sizes q8 %d q5 %d fp8 %d, want 1088 528 268", q8.Bytes, q5.Bytes, fp8.Bytes)
	}
	byComp := f.BytesByComponent()
	if byComp["frontend"] != 301+77 || byComp["mtp"] != 64*2+mustSize(t, format.Q8G32, 64, 128) {
		t.Errorf("BytesByComponent = %v", byComp)
	}
	byFmt := f.BytesByFormat()
	if byFmt[format.RawBytes] != 378 || byFmt[format.FP32] != 8+4 || byFmt[format.BF16] != 128+128 {
		t.Errorf("BytesByFormat = %v", byFmt)
	}
	var total int64
	for _, v := range byComp {
		total += v
	}
	if total != f.TotalObjectBytes() || total > f.PayloadBytes {
		t.Errorf("total %d, TotalObjectBytes %d, payload %d", total, f.TotalObjectBytes(), f.PayloadBytes)
	}
	if len(f.Tensors())+len(f.ResourceObjects()) != len(f.Objects) || len(f.ResourceObjects()) != 2 {
		t.Errorf("Tensors/ResourceObjects split wrong")
	}
	if _, ok := f.Object("text/missing"); ok {
		t.Errorf("Object found a missing id")
	}
}

func mustSize(t *testing.T, f format.Format, shape ...int64) int64 {
	t.Helper()
	n, err := format.EncodedSize(f, shape)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mutation edits a decoded directory; the file is rebuilt around it with the
// original payload.
type mutation func(m map[string]any)

func setObj(i int, key string, v any) mutation {
	return func(m map[string]any) { objectAt(m, i)[key] = v }
}

func delObj(i int, key string) mutation {
	return func(m map[string]any) { delete(objectAt(m, i), key) }
}

func TestRejectDirectory(t *testing.T) {
	base := validFile(t)
	js, payload := splitFile(t, base)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	config := func(m map[string]any) map[string]any {
		return m["components"].(map[string]any)["text"].(map[string]any)["config"].(map[string]any)
	}
	q8 := 1 // index of text/layers/0/attention/q_proj
	cases := []struct {
		name string
		mut  mutation
		want string
	}{
		{"bytes mismatch", setObj(q8, "bytes", 1000), `model.ninfer: object "text/layers/0/attention/q_proj": bytes 1000 != 1088 for q8_g32_fp16 [4,200]`},
		{"unknown format", setObj(q8, "format", "q3_g64_fp16"), `object "text/layers/0/attention/q_proj": unknown tensor format "q3_g64_fp16"`},
		{"v2 format name in v3", setObj(q8, "format", "W8G32_F16S"), `unknown tensor format "W8G32_F16S"`},
		{"unknown layout", setObj(q8, "layout", "row_split_k64_v1"), `unknown storage layout "row_split_k64_v1"`},
		{"layout mismatch", setObj(q8, "layout", "row_scale_v1"), `layout row_scale_v1 does not match format q8_g32_fp16 (want row_split_k128_v1)`},
		{"bad shape for format", setObj(q8, "shape", []any{800}), `shape [800] is invalid for q8_g32_fp16`},
		{"zero dimension", setObj(q8, "shape", []any{4, 0}), `shape[1] must be positive`},
		{"duplicate id", setObj(3, "id", "text/layers/0/attention/q_proj"), `object "text/layers/0/attention/q_proj": duplicate object id`},
		{"unknown kind", setObj(q8, "kind", "blob"), `unknown kind "blob"`},
		{"missing member", delObj(q8, "layout"), `object "text/layers/0/attention/q_proj": missing member "layout"`},
		{"missing id", delObj(q8, "id"), `objects[1]: missing member "id"`},
		{"extra member", setObj(q8, "dtype", "x"), `unexpected member "dtype"`},
		{"resource with shape", setObj(0, "shape", []any{1}), `object "frontend/tokenizer.json": unexpected member "shape"`},
		{"null member", setObj(q8, "offset", nil), `member "offset" is null`},
		{"string integer", setObj(q8, "bytes", "1088"), `bytes must be a non-negative integer, got a string`},
		{"float integer", setObj(q8, "bytes", raw("1088.0")), `bytes must be a non-negative integer, got 1088.0`},
		{"exponent integer", setObj(q8, "offset", raw("5e2")), `offset must be a non-negative integer, got 5e2`},
		{"negative integer", setObj(q8, "offset", raw("-256")), `offset must be a non-negative integer, got -256`},
		{"boolean integer", setObj(q8, "bytes", true), `bytes must be a non-negative integer, got a boolean`},
		{"huge integer", setObj(q8, "bytes", raw("99999999999999999999")), `bytes 99999999999999999999 is out of range`},
		{"float shape", setObj(q8, "shape", []any{raw("4.0"), 200}), `shape[0] must be a non-negative integer, got 4.0`},
		{"bad sha256", setObj(q8, "sha256", strings.Repeat("A", 64)), `is not 64 lowercase hex digits`},
		{"bad encoding", setObj(0, "encoding", "raw-bytes-v1"), `unknown resource encoding "raw-bytes-v1"`},
		{"empty id", setObj(q8, "id", ""), `object id is empty`},
		{"id with space", setObj(q8, "id", "text/a b"), `outside printable ASCII`},
		{"id empty segment", setObj(q8, "id", "text//x"), `empty path segment`},
		{"component prefix", setObj(q8, "component", "mtp"), `component "mtp" objects must be named mtp/...`},
		{"unknown component", setObj(q8, "component", "vision"), `unknown tensor component "vision"`},
		{"resource component", setObj(0, "component", "text"), `resource component is "text"`},
		{"overlap", func(m map[string]any) { objectAt(m, 4)["offset"] = objectAt(m, 3)["offset"] }, `object "text/layers/0/input_norm": offset`},
		{"misaligned", func(m map[string]any) {
			o := objectAt(m, 4)
			off, _ := o["offset"].(json.Number).Int64()
			o["offset"] = off + 16
		}, `object "text/layers/0/input_norm": tensor offset`},
		{"object beyond payload", func(m map[string]any) {
			objs := objectsOf(m)
			objs[len(objs)-1].(map[string]any)["offset"] = 1 << 40
		}, `object "mtp/norm": range [1099511627776,1099511627904) extends beyond the payload`},
		{"empty objects", func(m map[string]any) { m["objects"] = []any{} }, `objects is empty`},
		{"two files", func(m map[string]any) {
			m["files"] = append(m["files"].([]any), map[string]any{"payload_bytes": 1})
		}, `files names 2 files; only single-file artifacts are supported`},
		{"no files", func(m map[string]any) { m["files"] = []any{} }, `files names 0 files`},
		{"files extra member", func(m map[string]any) {
			m["files"].([]any)[0].(map[string]any)["path"] = "x"
		}, `files[0]: unexpected member "path"`},
		{"missing root member", func(m map[string]any) { delete(m, "metadata") }, `directory: missing member "metadata"`},
		{"extra root member", func(m map[string]any) { m["bindings"] = []any{} }, `directory: unexpected member "bindings"`},
		{"metadata not object", func(m map[string]any) { m["metadata"] = "x" }, `metadata must be an object`},
		{"wrong format", func(m map[string]any) { m["format"] = "gguf" }, `format is "gguf", want "ninfer"`},
		{"wrong version", func(m map[string]any) { m["version"] = 4 }, `version 4 does not match`},
		{"wrong architecture", func(m map[string]any) { m["architecture"] = "Qwen3NextForCausalLM" }, `unsupported architecture "Qwen3NextForCausalLM"`},
		{"missing text component", func(m map[string]any) { delete(m["components"].(map[string]any), "text") }, `components: missing member "text"`},
		{"unknown component block", func(m map[string]any) { m["components"].(map[string]any)["vision"] = map[string]any{} }, `components: unexpected member "vision"`},
		{"missing config", func(m map[string]any) {
			delete(m["components"].(map[string]any)["text"].(map[string]any), "config")
		}, `components.text: missing member "config"`},
		{"config null", func(m map[string]any) {
			m["components"].(map[string]any)["text"].(map[string]any)["config"] = nil
		}, `member "config" is null`},
		{"config invalid", func(m map[string]any) { config(m)["hidden_size"] = 0 }, `config: hidden_size must be positive, got 0`},
		{"config layer types", func(m map[string]any) { config(m)["layer_types"] = []any{"full_attention"} }, `layer_types has 1 entries`},
		{"config unknown field", func(m map[string]any) { config(m)["rope_scaling"] = 1 }, `unknown field "rope_scaling"`},
		{"config float int", func(m map[string]any) { config(m)["hidden_size"] = raw("64.5") }, `components.text.config`},
		{"resource not listed", func(m map[string]any) {
			m["components"].(map[string]any)["text"].(map[string]any)["resources"] = []any{"frontend/tokenizer.json"}
		}, `object "frontend/chat_template.jinja": resource is not listed`},
		{"listed resource missing", func(m map[string]any) {
			text := m["components"].(map[string]any)["text"].(map[string]any)
			text["resources"] = append(text["resources"].([]any), "frontend/vocab.json")
		}, `names "frontend/vocab.json", which is not an object`},
		{"mtp block missing", func(m map[string]any) { delete(m["components"].(map[string]any), "mtp") }, `mtp objects present but components.mtp is missing`},
		{"mtp layers mismatch", func(m map[string]any) {
			m["components"].(map[string]any)["mtp"] = map[string]any{"num_layers": 2}
		}, `num_layers 2 must be positive and equal config mtp_num_hidden_layers 1`},
		{"proposal missing", func(m map[string]any) { delete(m["components"].(map[string]any), "proposal") }, `proposal objects present but components.proposal is missing`},
		{"proposal rows", func(m map[string]any) {
			m["components"].(map[string]any)["proposal"].(map[string]any)["rows"] = 8
		}, `object "text/draft_head": shape [16,64] q4_g64_fp16 does not match components.proposal.rows 8`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeDir(t, js)
			tc.mut(m)
			file := assembleV3(reseal(encodeDir(t, m)), payload)
			_, err := parse("model.ninfer", bytes.NewReader(file), int64(len(file)), false)
			if err == nil {
				t.Fatalf("accepted, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant substring %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not a one-line ErrInvalid", err)
			}
		})
	}
	// The unmodified directory, re-encoded the same way (and its digest
	// recomputed), is accepted.
	file := assembleV3(reseal(encodeDir(t, decodeDir(t, js))), payload)
	if _, err := parse("model.ninfer", bytes.NewReader(file), int64(len(file)), false); err != nil {
		t.Fatalf("re-encoded valid file rejected: %v", err)
	}
}

func TestRejectFraming(t *testing.T) {
	base := validFile(t)
	js, payload := splitFile(t, base)
	edit := func(fn func(b []byte) []byte) []byte { return fn(append([]byte(nil), base...)) }
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "too short for a ninfer header"},
		{"short v3", base[:20], "too short for a v3 header"},
		{"v2 short payload", assembleV2([]byte(v2Directory), nil)[:4000], "truncated: payload starts at 4096"},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"v1", edit(func(b []byte) []byte { b[7] = 1; return b }), "artifact v1 is not supported"},
		{"v9", edit(func(b []byte) []byte { b[7] = 9; return b }), "unsupported artifact version 9"},
		{"part file", edit(func(b []byte) []byte { copy(b, "NINPRT\x00\x03"); return b }), "continuation part file"},
		{"json beyond file", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], uint64(len(b))); return b }), "extends beyond the end of the file"},
		{"json huge", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 1<<63); return b }), "extends beyond the end of the file"},
		{"json zero", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 0); return b }), "json_bytes is 0"},
		{"json cut", edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[8:], uint64(len(js)-1))
			return b
		}), "directory JSON"},
		{"truncated payload", base[:len(base)-1], "truncated: file is"},
		{"header only", base[:len(base)-len(payload)], "truncated: file is"},
		{"trailing bytes", append(append([]byte(nil), base...), 0), "trailing bytes"},
		{"invalid utf8", assembleV3(bytes.Replace(js, []byte(`"tiny-qwen3.5"`), []byte("\"tiny-\xff\""), 1), payload), "not valid UTF-8"},
		{"trailing json", assembleV3(append(append([]byte(nil), js...), []byte(" {}")...), payload), "trailing data after the root object"},
		{"duplicate key", assembleV3(bytes.Replace(js, []byte(`{"format":"ninfer",`), []byte(`{"format":"ninfer","format":"ninfer",`), 1), payload), `duplicate member "format"`},
		{"root array", assembleV3([]byte(`[1]`), payload), "want an object, got an array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse("model.ninfer", bytes.NewReader(tc.file), int64(len(tc.file)), false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want substring %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "model.ninfer: ") {
				t.Fatalf("error %q does not name the file", err)
			}
		})
	}
}

// countingReader records the furthest byte read.
type countingReader struct {
	r   *bytes.Reader
	max int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > c.max {
		c.max = end
	}
	return c.r.ReadAt(p, off)
}

func TestHeaderOnlyReads(t *testing.T) {
	b := validFile(t)
	cr := &countingReader{r: bytes.NewReader(b)}
	f, err := parse("model.ninfer", cr, int64(len(b)), false)
	if err != nil {
		t.Fatal(err)
	}
	if cr.max != HeaderSize+f.JSONBytes || cr.max >= f.PayloadStart {
		t.Fatalf("Parse read up to byte %d; directory ends at %d, payload starts at %d", cr.max, HeaderSize+f.JSONBytes, f.PayloadStart)
	}
	if f.Map() == nil {
		t.Fatalf("Map succeeded without an os.File")
	}
}

func TestVerifyDetectsCorruption(t *testing.T) {
	b := validFile(t)
	f, err := parse("model.ninfer", bytes.NewReader(b), int64(len(b)), false)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := f.Object("text/layers/0/gdn/a_log")
	if ok, err := f.Verify(o); !ok || err != nil {
		t.Fatalf("Verify intact = %v, %v", ok, err)
	}
	b[f.PayloadStart+o.Offset+3] ^= 0x40
	f2, err := parse("model.ninfer", bytes.NewReader(b), int64(len(b)), false)
	if err != nil {
		t.Fatalf("payload corruption must not affect header-only Parse: %v", err)
	}
	o2, _ := f2.Object(o.ID)
	if _, err := f2.Verify(o2); err == nil || !strings.Contains(err.Error(), `object "text/layers/0/gdn/a_log": sha256 mismatch`) {
		t.Fatalf("Verify corrupted = %v", err)
	}
}

func TestOpenIOErrors(t *testing.T) {
	b := validFile(t)
	// A reader shorter than the size it claims: a short read is an I/O
	// error, not a format error.
	_, err := parse("model.ninfer", bytes.NewReader(b[:100]), int64(len(b)), false)
	if err == nil || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("short reader: %v", err)
	}
	dir := t.TempDir()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Open(directory): %v", err)
	}
	if _, err := Open(dir + "/missing.ninfer"); err == nil || !strings.Contains(err.Error(), "missing.ninfer") {
		t.Fatalf("Open(missing): %v", err)
	}
}
