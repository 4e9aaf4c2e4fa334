package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// copyHF copies the fixture's Hugging Face directory so that a test may
// edit it.
func copyHF(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hf")
	if err := os.CopyFS(dir, os.DirFS(testfixture.HFDir(t, nil))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Inputs that converted (and inspected and verified) cleanly and failed
// only later are refused at convert time, with one line naming the file
// and the field.
func TestConvertRefusesWhatFailsLater(t *testing.T) {
	setConfig := func(key string, v any) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, "config.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m[key]; !ok {
				t.Fatalf("config.json has no %q", key)
			}
			m[key] = v
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write := func(name, content string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		edit func(t *testing.T, dir string)
		want []string
	}{
		{"tokenizer not JSON", write("tokenizer.json", "this is not json"), []string{"tokenizer.json: "}},
		{"tokenizer without model", write("tokenizer.json", `{"version":"1.0"}`), []string{"tokenizer.json: missing model"}},
		{"generation config not JSON", write("generation_config.json", "{"), []string{"generation_config.json: "}},
		{"max_position_embeddings 0", setConfig("max_position_embeddings", 0), []string{"max_position_embeddings", "got 0"}},
		{"max_position_embeddings negative", setConfig("max_position_embeddings", -4), []string{"max_position_embeddings", "got -4"}},
		{"eos outside the vocabulary", setConfig("eos_token_id", 1000000), []string{"eos_token_ids[0] is 1000000, outside the vocabulary"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyHF(t)
			c.edit(t, dir)
			out := filepath.Join(t.TempDir(), "m.ninfer")
			code, _, errs := runConvert("--recipe", "q8", dir, out)
			if code != 1 || !strings.HasPrefix(errs, "ninfer-convert: ") || strings.Count(errs, "\n") != 1 {
				t.Fatalf("exit %d stderr %q; want 1 and one line", code, errs)
			}
			t.Log(strings.TrimSpace(errs))
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an artifact was written")
			}
		})
	}
}
