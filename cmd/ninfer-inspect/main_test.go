package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
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
