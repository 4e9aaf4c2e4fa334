package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/convert"
)

func TestMain(m *testing.M) { testfixture.Main(m) }

func runInspect(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"ninfer-inspect"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// copyArtifact copies the shared fixture so a test may corrupt it.
func copyArtifact(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "m.ninfer")
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestInspectText(t *testing.T) {
	path := testfixture.Artifact(t, "groupwise-int", nil)
	code, out, errs := runInspect(path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"architecture:      Qwen3_5ForCausalLM", "recipe:            groupwise-int",
		"formats:           [bf16 fp32 q4_g64_fp16 q5_g64_fp16 q6_g64_fp16 q8_g32_fp16]", "prefill_signature:",
		"text/layers/3/attention/q_proj", "frontend/tokenizer.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, summary, _ := runInspect("--summary", path)
	if strings.Contains(summary, "text/layers/3/attention/q_proj") {
		t.Error("--summary printed the object table")
	}
}

func TestInspectJSONAndVerify(t *testing.T) {
	path := testfixture.Artifact(t, "q8", nil)
	code, out, errs := runInspect("--json", "--verify", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Architecture     string `json:"architecture"`
		PrefillSignature string `json:"prefill_signature"`
		ObjectCount      int    `json:"object_count"`
		Objects          []struct {
			ID     string `json:"id"`
			SHA256 string `json:"sha256"`
		} `json:"objects"`
		Verify struct {
			Objects        int `json:"objects"`
			HashesChecked  int `json:"hashes_checked"`
			TensorsChecked int `json:"tensors_checked"`
		} `json:"verify"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	f, err := artifact.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := f.PrefillSignature()
	n := len(f.Objects)
	f.Close()
	if doc.Architecture != "Qwen3_5ForCausalLM" || doc.PrefillSignature != sig || doc.ObjectCount != n || len(doc.Objects) != n {
		t.Errorf("json summary: arch %q sig %q count %d/%d objects, want sig %q count %d", doc.Architecture, doc.PrefillSignature, doc.ObjectCount, len(doc.Objects), sig, n)
	}
	if doc.Verify.Objects != n || doc.Verify.HashesChecked != n || doc.Verify.TensorsChecked == 0 {
		t.Errorf("verify report %+v, want %d objects and hashes", doc.Verify, n)
	}
}

func TestInspectVerifyFindsCorruption(t *testing.T) {
	path := copyArtifact(t, testfixture.Artifact(t, "q8", nil))
	f, err := artifact.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := f.Object("text/layers/1/mlp/down_proj")
	off := f.PayloadStart + o.Offset + 5
	f.Close()
	b, _ := os.ReadFile(path)
	b[off] ^= 0x40
	os.WriteFile(path, b, 0o644)
	if code, _, _ := runInspect("--summary", path); code != 0 {
		t.Fatalf("header-only inspect of a payload-corrupted file exit %d, want 0 (payload is not read)", code)
	}
	code, _, errs := runInspect("--verify", "--summary", path)
	if code != 1 || !strings.Contains(errs, `"text/layers/1/mlp/down_proj"`) || !strings.Contains(errs, "sha256 mismatch") {
		t.Fatalf("--verify on a corrupted object: exit %d, stderr %q", code, errs)
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.ninfer")
	os.WriteFile(bad, []byte("not an artifact at all, definitely not"), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "expected one FILE.ninfer"},
		{[]string{"a", "b"}, 2, "expected one FILE.ninfer"},
		{[]string{"--bogus", "x"}, 2, "flag provided but not defined"},
		{[]string{filepath.Join(dir, "missing.ninfer")}, 1, "missing.ninfer"},
		{[]string{bad}, 1, "bad.ninfer"},
	}
	for _, c := range cases {
		code, _, errs := runInspect(c.args...)
		if code != c.code || !strings.HasPrefix(errs, "ninfer-inspect: ") || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d stderr %q; want exit %d containing %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// editDirectory rewrites old as new (same length) inside the directory of
// the artifact at path, as a hand edit would.
func editDirectory(t *testing.T, path, old, new string) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("edit %q → %q changes the length", old, new)
	}
	f, err := artifact.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	end := int(artifact.HeaderSize + f.JSONBytes)
	f.Close()
	b, _ := os.ReadFile(path)
	i := bytes.Index(b[:end], []byte(old))
	if i < 0 {
		t.Fatalf("directory has no %q", old)
	}
	copy(b[i:], new)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// stripDigest blanks metadata.directory_sha256 with spaces: the artifact
// then reads like one written before the digest existed.
func stripDigest(t *testing.T, path string) {
	t.Helper()
	b, _ := os.ReadFile(path)
	key := []byte(`"directory_sha256":"`)
	i := bytes.Index(b, key)
	if i < 0 {
		t.Fatal("no directory_sha256")
	}
	end := i + len(key) + 65
	if b[end] == ',' {
		end++
	} else {
		i--
	}
	copy(b[i:end], bytes.Repeat([]byte(" "), end-i))
	os.WriteFile(path, b, 0o644)
}

// The issue: --verify said "verified" for an artifact whose config was
// edited inside the directory. Now opening fails (so plain inspect, plan,
// run and bench fail too) and names the cause.
func TestInspectRejectsEditedConfig(t *testing.T) {
	src := testfixture.Artifact(t, "q8", nil)
	f, err := artifact.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := f.Config()
	f.Close()
	vocab := fmt.Sprintf(`"vocab_size":%d`, cfg.VocabSize)
	vocabPlus := fmt.Sprintf(`"vocab_size":%d`, cfg.VocabSize+100) // same digit count for 512
	cases := []struct {
		name      string
		legacy    bool // digest stripped first
		old, new  string
		code      int
		want      string
		verifyOut string
	}{
		{"vocab_size", false, vocab, vocabPlus, 1, "directory sha256 mismatch", ""},
		{"rms_norm_eps", false, `"rms_norm_eps":0.000001`, `"rms_norm_eps":0.000009`, 1, "directory sha256 mismatch", ""},
		{"legacy vocab_size", true, vocab, vocabPlus, 1,
			fmt.Sprintf(`object "text/token_embedding": shape [%d,%d] does not match the config: [vocab_size, hidden_size] = [%d,%d]`, cfg.VocabSize, cfg.HiddenSize, cfg.VocabSize+100, cfg.HiddenSize), ""},
		{"legacy rms_norm_eps", true, `"rms_norm_eps":0.000001`, `"rms_norm_eps":0.000009`, 0, "", "the directory is NOT covered (no metadata.directory_sha256"},
		{"legacy intact", true, `"format":"ninfer"`, `"format":"ninfer"`, 0, "", "the directory is NOT covered"},
		{"intact", false, `"format":"ninfer"`, `"format":"ninfer"`, 0, "", ": directory sha256, "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := copyArtifact(t, src)
			if tc.legacy {
				stripDigest(t, path)
			}
			editDirectory(t, path, tc.old, tc.new)
			for _, args := range [][]string{{"--summary", path}, {"--verify", "--summary", path}} {
				code, _, errs := runInspect(args...)
				if code != tc.code || !strings.Contains(errs, tc.want) {
					t.Fatalf("%v: exit %d stderr %q; want exit %d containing %q", args, code, errs, tc.code, tc.want)
				}
				if args[0] == "--verify" && !strings.Contains(errs, tc.verifyOut) {
					t.Fatalf("--verify stderr %q lacks %q", errs, tc.verifyOut)
				}
			}
		})
	}
}

func TestInspectShowsDirectoryAndDefaults(t *testing.T) {
	// A converted config.json without rope_parameters: the summary names
	// the defaulted fields.
	hf := testfixture.HFDir(t, nil)
	cfgPath := filepath.Join(hf, "config.json")
	b, _ := os.ReadFile(cfgPath)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "rope_parameters")
	b, _ = json.Marshal(m)
	os.WriteFile(cfgPath, b, 0o644)
	path := filepath.Join(t.TempDir(), "d.ninfer")
	if _, err := convert.Convert(context.Background(), hf, path, convert.Options{Recipe: testfixture.Recipe(t, "bf16"), Workers: 1}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runInspect("--summary", path)
	if code != 0 || !strings.Contains(out, "config defaults:   partial_rotary_factor=0.25, rope_theta=10000 (left out of config.json: transformers defaults)") ||
		!strings.Contains(out, "directory sha256:  ") || strings.Contains(out, "directory sha256:  none") {
		t.Fatalf("exit %d stderr %q, summary:\n%s", code, errs, out)
	}
	code, out, errs = runInspect("--json", "--verify", path)
	var doc struct {
		DirectorySHA256 string         `json:"directory_sha256"`
		ConfigDefaults  map[string]any `json:"config_defaults"`
		Verify          struct {
			DirectoryChecked bool `json:"directory_checked"`
		} `json:"verify"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, errs)
	}
	if len(doc.DirectorySHA256) != 64 || !doc.Verify.DirectoryChecked || doc.ConfigDefaults["rope_theta"] != 10000.0 || len(doc.ConfigDefaults) != 2 {
		t.Errorf("json: %+v", doc)
	}
	// Older artifacts: nothing recorded, said so.
	stripDigest(t, path)
	code, out, _ = runInspect("--summary", path)
	if code != 0 || !strings.Contains(out, "directory sha256:  none: written before ninfer recorded it; nothing covers the directory") {
		t.Errorf("legacy summary (exit %d):\n%s", code, out)
	}
}
