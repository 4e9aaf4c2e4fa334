package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// defaultModelDir is the committed default model (models/tiny-shakespeare),
// found by walking up to go.mod.
func defaultModelDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "models", "tiny-shakespeare")
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		t.Fatal("no go.mod above the working directory")
	}
}

// TestDefaultModelTokenizerMatchesHF: the default model's byte-level BPE
// (trained with HF tokenizers by scripts/train-default/prepare.py) encodes
// held-out lines and edge cases (empty, whitespace runs, CRLF, specials
// inside text, non-ASCII) to exactly the ids HF tokenizers gave
// (tokenizer_check.json, written by evaluate.py), and decodes them back.
func TestDefaultModelTokenizerMatchesHF(t *testing.T) {
	dir := defaultModelDir(t)
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(tj, tc)
	if err != nil {
		t.Fatal(err)
	}
	var check struct {
		Cases []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"cases"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_check.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &check); err != nil {
		t.Fatal(err)
	}
	if len(check.Cases) < 64 || tok.VocabSize() != 4096 {
		t.Fatalf("%d cases, vocab %d: want ≥ 64 cases over 4096 tokens", len(check.Cases), tok.VocabSize())
	}
	for i, c := range check.Cases {
		got := tok.Encode(c.Text, true)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("case %d %q: ids %v, HF %v", i, c.Text, got, c.IDs)
			continue
		}
		if back := tok.Decode(got, false); back != c.Text {
			t.Errorf("case %d %q: decodes to %q", i, c.Text, back)
		}
	}
	if eos := tok.EOSIDs(); len(eos) != 1 || eos[0] != 0 {
		t.Errorf("EOS ids %v, want [0] (<|endoftext|>)", eos)
	}
}
