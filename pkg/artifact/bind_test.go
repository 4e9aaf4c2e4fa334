package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// modelEntries is the whole tensor inventory of cfg (matrices q8, vectors
// bf16, GDN controls fp32), a proposal head, an NVFP4-style input divisor and
// a resource: a file the model binding accepts.
func modelEntries(cfg qwen35.Config) []planEntry {
	es := []planEntry{{id: "frontend/tokenizer.json", component: ComponentFrontend, size: 301}}
	for _, t := range cfg.Tensors() {
		f := format.Q8G32
		switch {
		case t.Class == qwen35.ClassControl:
			f = format.FP32
		case len(t.Shape) == 1:
			f = format.BF16
		}
		es = append(es, planEntry{id: t.Name, component: t.Component, f: f, shape: t.Shape})
		if t.Name == "text/layers/1/mlp/down_proj" {
			es = append(es, planEntry{id: t.Name + "/input_scale_divisor", component: t.Component, f: format.FP32, shape: []int64{}})
		}
	}
	return append(es,
		planEntry{id: qwen35.NameDraftHead, component: ComponentProposal, f: format.Q4G64, shape: []int64{16, int64(cfg.HiddenSize)}},
		planEntry{id: qwen35.NameDraftIDs, component: ComponentProposal, f: format.Int32, shape: []int64{16}})
}

// boundPlan plans entries with the model binding on (as NewPlan does).
func boundPlan(t testing.TB, meta Meta, entries []planEntry) (*Plan, error) {
	t.Helper()
	p := NewPlan(meta)
	for _, e := range entries {
		var err error
		if e.f == "" {
			err = p.AddResource(e.id, e.component, e.size)
		} else {
			err = p.AddTensor(e.id, e.component, e.f, e.shape)
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// modelFile writes a bound artifact of testConfig and returns its bytes.
func modelFile(t *testing.T) []byte {
	t.Helper()
	p, err := boundPlan(t, testMeta(), modelEntries(testConfig()))
	if err != nil {
		t.Fatal(err)
	}
	path := writeArtifact(t, t.TempDir(), p, randomPayloads(rand.New(rand.NewPCG(3, 4)), p))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseBytes(b []byte) (*File, error) {
	return Parse("model.ninfer", bytes.NewReader(b), int64(len(b)))
}

func TestBoundFileOpens(t *testing.T) {
	f, err := parseBytes(modelFile(t))
	if err != nil {
		t.Fatalf("a file holding the config's whole inventory is rejected: %v", err)
	}
	if len(f.DirectorySHA256) != 64 {
		t.Fatalf("DirectorySHA256 = %q", f.DirectorySHA256)
	}
}

// TestBindRejectsConfigEdits: a config edited inside the directory no longer
// describes the tensors, and Open says which tensor and which config field
// disagree. The digest is recomputed after each edit (as by a tool that
// rewrites directories, or on an artifact too old to record one), so the
// binding alone must catch it.
func TestBindRejectsConfigEdits(t *testing.T) {
	js, payload := splitFile(t, modelFile(t))
	config := func(m map[string]any) map[string]any {
		return m["components"].(map[string]any)["text"].(map[string]any)["config"].(map[string]any)
	}
	objectByID := func(m map[string]any, id string) map[string]any {
		for _, o := range objectsOf(m) {
			if o.(map[string]any)["id"] == id {
				return o.(map[string]any)
			}
		}
		t.Fatalf("no object %q", id)
		return nil
	}
	cases := []struct {
		name string
		mut  mutation
		want string
	}{
		{"vocab_size", func(m map[string]any) { config(m)["vocab_size"] = 356 },
			`model.ninfer: object "text/token_embedding": shape [256,64] does not match the config: [vocab_size, hidden_size] = [356,64]`},
		{"hidden_size", func(m map[string]any) { config(m)["hidden_size"] = 128 },
			`object "text/token_embedding": shape [256,64] does not match the config: [vocab_size, hidden_size] = [256,128]`},
		{"head_dim", func(m map[string]any) { config(m)["head_dim"] = 64 },
			`object "text/layers/1/attention/q_proj": shape [128,64] does not match the config: [2·num_attention_heads·head_dim, hidden_size] = [256,64]`},
		{"linear_num_value_heads", func(m map[string]any) { config(m)["linear_num_value_heads"] = 4 },
			`object "text/layers/0/gdn/in_proj_qkv": shape [96,64] does not match the config`},
		{"more layers", func(m map[string]any) {
			config(m)["num_hidden_layers"] = 3
			config(m)["layer_types"] = []any{"linear_attention", "full_attention", "full_attention"}
		}, `model.ninfer: tensor "text/layers/2/input_norm" of the config's tensor inventory is missing (layer_types[2] is full_attention)`},
		{"fewer layers", func(m map[string]any) {
			config(m)["num_hidden_layers"] = 1
			config(m)["layer_types"] = []any{"linear_attention"}
		}, `object "text/layers/1/input_norm": tensor is not in the config's tensor inventory (num_hidden_layers is 1)`},
		{"layer kinds swapped", func(m map[string]any) { config(m)["layer_types"] = []any{"full_attention", "linear_attention"} },
			`object "text/layers/0/gdn/in_proj_qkv": tensor is not in the config's tensor inventory (layer_types[0] is full_attention)`},
		{"tied", func(m map[string]any) { config(m)["tie_word_embeddings"] = true },
			`object "text/output_head": tensor is not in the config's tensor inventory (tie_word_embeddings is true)`},
		{"unknown tensor", func(m map[string]any) { objectByID(m, "text/final_norm")["id"] = "text/final_norm_v2" },
			`object "text/final_norm_v2": tensor is not in the config's tensor inventory`},
		{"wrong component", func(m map[string]any) { objectByID(m, "text/final_norm")["component"] = "proposal" },
			`object "text/final_norm": component "proposal", but the config's tensor inventory puts it in "text"`},
		{"divisor of a vector", func(m map[string]any) {
			objectByID(m, "text/layers/1/mlp/down_proj/input_scale_divisor")["id"] = "text/final_norm/input_scale_divisor"
		}, `object "text/final_norm/input_scale_divisor": is not the input_scale_divisor of a matrix`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeDir(t, js)
			tc.mut(m)
			file := assembleV3(reseal(encodeDir(t, m)), payload)
			if _, err := parse("model.ninfer", bytes.NewReader(file), int64(len(file)), false); err != nil {
				t.Fatalf("the edit breaks the container, not just the binding: %v", err)
			}
			_, err := parseBytes(file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant substring %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not a one-line ErrInvalid", err)
			}
		})
	}
	// Changing only values the shapes do not depend on passes the binding.
	m := decodeDir(t, js)
	config(m)["rms_norm_eps"] = 9e-6
	if _, err := parseBytes(assembleV3(reseal(encodeDir(t, m)), payload)); err != nil {
		t.Fatalf("rms_norm_eps edit with a recomputed digest: %v", err)
	}
}

// TestCreateBindsModel: the writer refuses what Open would refuse.
func TestCreateBindsModel(t *testing.T) {
	good := modelEntries(testConfig())
	drop := func(id string) []planEntry {
		var out []planEntry
		for _, e := range good {
			if e.id != id {
				out = append(out, e)
			}
		}
		return out
	}
	reshape := func(id string, shape ...int64) []planEntry {
		out := append([]planEntry(nil), good...)
		for i := range out {
			if out[i].id == id {
				out[i].shape = shape
			}
		}
		return out
	}
	cases := []struct {
		name string
		ents []planEntry
		want string
	}{
		{"missing tensor", drop("text/layers/1/attention/k_norm"), `tensor "text/layers/1/attention/k_norm" of the config's tensor inventory is missing (layer_types[1] is full_attention)`},
		{"missing output head", drop(qwen35.NameOutputHead), `tensor "text/output_head" of the config's tensor inventory is missing (tie_word_embeddings is false)`},
		{"missing mtp", drop("mtp/norm"), `tensor "mtp/norm" of the config's tensor inventory is missing (mtp_num_hidden_layers is 1)`},
		{"draft head width", reshape(qwen35.NameDraftHead, 16, 128), `object "text/draft_head": shape [16,128] does not match the config: want [rows, hidden_size] = [rows,64]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := boundPlan(t, testMeta(), tc.ents)
			if err == nil {
				_, err = Create(filepath.Join(dir, "model.ninfer"), p)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant substring %q", err, tc.want)
			}
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Fatalf("files left behind: %v", names)
			}
		})
	}
}

// specDigest recomputes the directory digest the way docs/FORMAT.md §2.5
// tells another implementation to: find the value of
// metadata.directory_sha256 in the directory text, hash the text with its
// 64 digits replaced by '0'.
func specDigest(t *testing.T, js []byte) (recorded, computed string) {
	t.Helper()
	key := []byte(`"directory_sha256":"`)
	i := bytes.Index(js, key)
	if i < 0 || bytes.Count(js, key) != 1 {
		t.Fatalf("directory has %d directory_sha256 members", bytes.Count(js, key))
	}
	start := i + len(key)
	recorded = string(js[start : start+64])
	zeroed := append([]byte(nil), js...)
	copy(zeroed[start:], strings.Repeat("0", 64))
	sum := sha256.Sum256(zeroed)
	return recorded, hex.EncodeToString(sum[:])
}

// editDirectory replaces old by new (same length) inside the directory of
// the v3 file b, leaving everything else as written.
func editDirectory(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("edit %q → %q changes the length", old, new)
	}
	js, _ := splitFile(t, b)
	i := bytes.Index(js, []byte(old))
	if i < 0 {
		t.Fatalf("directory has no %q", old)
	}
	out := append([]byte(nil), b...)
	copy(out[HeaderSize+i:], new)
	return out
}

// stripDigest blanks the directory_sha256 member (and its comma) with
// spaces: the file then reads as one written before the digest existed.
func stripDigest(t *testing.T, b []byte) []byte {
	t.Helper()
	js, _ := splitFile(t, b)
	key := []byte(`"directory_sha256":"`)
	i := bytes.Index(js, key)
	if i < 0 {
		t.Fatal("no directory_sha256")
	}
	end := i + len(key) + 65 // 64 digits and the closing quote
	if js[end] == ',' {
		end++
	} else if js[i-1] == ',' {
		i--
	}
	out := append([]byte(nil), b...)
	copy(out[HeaderSize+i:HeaderSize+end], bytes.Repeat([]byte(" "), end-i))
	return out
}

func TestDirectoryDigest(t *testing.T) {
	b := modelFile(t)
	js, _ := splitFile(t, b)
	recorded, computed := specDigest(t, js)
	if recorded != computed {
		t.Fatalf("directory_sha256 %s, but the documented recipe gives %s", recorded, computed)
	}
	f, err := parseBytes(b)
	if err != nil || f.DirectorySHA256 != recorded {
		t.Fatalf("DirectorySHA256 %q, %v; want %s", f.DirectorySHA256, err, recorded)
	}
	if _, ok := f.Metadata[MetaDirectorySHA256]; !ok || f.Metadata["recipe"] != "test" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	legacy := stripDigest(t, b)
	cases := []struct {
		name string
		file []byte
		want string // "" = accepted
	}{
		{"intact", b, ""},
		{"rms_norm_eps edited", editDirectory(t, b, `"rms_norm_eps":0.000001`, `"rms_norm_eps":0.000009`), "model.ninfer: directory sha256 mismatch: the directory hashes to "},
		{"vocab_size edited", editDirectory(t, b, `"vocab_size":256`, `"vocab_size":356`), "directory sha256 mismatch"},
		{"name edited", editDirectory(t, b, `"name":"tiny-qwen3.5"`, `"name":"tiny-qwen3.6"`), "directory sha256 mismatch"},
		{"object hash edited", editDirectory(t, b, `"sha256":"`+f.Objects[1].SHA256[:8], `"sha256":"00000000`), "directory sha256 mismatch"},
		{"digest edited", editDirectory(t, b, recorded, strings.Repeat("a", 64)), "metadata.directory_sha256 records aaaaaaaa"},
		{"digest upper case", editDirectory(t, b, recorded, strings.ToUpper(recorded)), "metadata.directory_sha256 must be a string of 64 lowercase hex digits written without escapes"},
		{"digest not a string", editDirectory(t, b, `"directory_sha256":"`+recorded+`"`, `"directory_sha256":`+strings.Repeat("1", 66)), "directory_sha256 must be a string"},
		{"no digest (older writer)", legacy, ""},
		{"no digest, rms_norm_eps edited", editDirectory(t, legacy, `"rms_norm_eps":0.000001`, `"rms_norm_eps":0.000009`), ""},
		{"no digest, vocab_size edited", editDirectory(t, legacy, `"vocab_size":256`, `"vocab_size":356`), `object "text/token_embedding": shape [256,64] does not match the config: [vocab_size, hidden_size] = [356,64]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseBytes(tc.file)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if strings.HasPrefix(tc.name, "no digest") != (f.DirectorySHA256 == "") {
					t.Fatalf("DirectorySHA256 = %q", f.DirectorySHA256)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant substring %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not a one-line ErrInvalid", err)
			}
		})
	}
}

// TestDigestSlotRules covers the digest member rules a reader enforces on
// any directory text: escapes and duplicates are errors, absence is not.
func TestDigestSlotRules(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	cases := []struct {
		js   string
		slot int
		want string
	}{
		{`{"metadata":{}}`, -1, ""},
		{`{"a":[1,{"directory_sha256":"x"}],"metadata":{"k":"v"}}`, -1, ""},
		{`{"metadata":{"directory_sha256":"` + hex64 + `"}}`, 33, ""},
		{`{ "metadata" : { "x":1, "directory_sha256" : "` + hex64 + `" } }`, 46, ""},
		{`{"metadata":{"directory_sha256":"\u0061` + hex64[1:] + `"}}`, 0, "written without escapes"},
		{`{"metadata":{"directory_sha256":"` + hex64 + `","directory_sha256":"` + hex64 + `"}}`, 0, "two directory_sha256 members"},
		{`{"metadata":"x"}`, 0, "metadata must be an object"},
	}
	for _, tc := range cases {
		slot, err := digestSlot([]byte(tc.js))
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v, want %q", tc.js, err, tc.want)
			}
			continue
		}
		if err != nil || slot != tc.slot {
			t.Errorf("%s: slot %d, %v; want %d", tc.js, slot, err, tc.slot)
		}
		if slot >= 0 && tc.js[slot:slot+64] != hex64 {
			t.Errorf("%s: slot %d does not hold the digits", tc.js, slot)
		}
	}
}

// TestWriterOwnsDigest: a directory_sha256 handed in through Meta.Metadata
// (say, copied from another artifact) is replaced; sparse files carry one.
func TestWriterOwnsDigest(t *testing.T) {
	meta := testMeta()
	meta.Metadata = map[string]any{"recipe": "x", MetaDirectorySHA256: strings.Repeat("f", 64)}
	p, err := boundPlan(t, meta, modelEntries(testConfig()))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, sparse := range []bool{false, true} {
		path := filepath.Join(dir, "model.ninfer")
		if sparse {
			path = filepath.Join(dir, "sparse.ninfer")
			if err := WriteSparse(path, p); err != nil {
				t.Fatal(err)
			}
		} else {
			writeArtifact(t, dir, p, randomPayloads(rand.New(rand.NewPCG(5, 6)), p))
		}
		f, err := Open(path)
		if err != nil {
			t.Fatalf("sparse %t: %v", sparse, err)
		}
		if len(f.DirectorySHA256) != 64 || f.DirectorySHA256 == strings.Repeat("f", 64) {
			t.Errorf("sparse %t: digest %q", sparse, f.DirectorySHA256)
		}
		f.Close()
	}
	if meta.Metadata[MetaDirectorySHA256] != strings.Repeat("f", 64) {
		t.Errorf("the writer modified the caller's metadata map")
	}
}
