package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenizerFileNamedOnce: a --tokenizer file that does not load is
// named once, by the path given, and a bad tokenizer_config.json beside it
// by its own path: not "dir/tokenizer.json: tokenizer.json: …" (issue #22).
func TestTokenizerFileNamedOnce(t *testing.T) {
	good, err := os.ReadFile(shakespeareTok)
	if err != nil {
		t.Fatal(err)
	}
	write := func(dir, name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notJSON := t.TempDir()
	noModel := t.TempDir()
	renamed := t.TempDir()
	badConfig := t.TempDir()
	write(badConfig, "tokenizer.json", string(good))
	cfg := write(badConfig, "tokenizer_config.json", "{x")
	for _, tc := range []struct {
		name, path, want string
	}{
		{"not JSON", write(notJSON, "tokenizer.json", "x"), ": invalid character 'x' looking for beginning of value (at byte 1)"},
		{"no model", write(noModel, "tokenizer.json", "{}"), ": missing model"},
		{"other file name", write(renamed, "my-tok.json", "{}"), ": missing model"},
		{"bad config", filepath.Join(badConfig, "tokenizer.json"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runCmd(t, "a\n", "--tokenizer", tc.path)
			want := name + ": " + tc.path + tc.want + "\n"
			if tc.want == "" { // the config's own path names it
				want = name + ": " + cfg + ": invalid character 'x' looking for beginning of object key string (at byte 2)\n"
			}
			if o.code != 1 || o.stderr != want {
				t.Errorf("exit %d, stderr %q; want 1, %q", o.code, o.stderr, want)
			}
			if strings.Contains(o.stderr, ".json: tokenizer") {
				t.Errorf("stderr %q names a file twice", o.stderr)
			}
		})
	}
}
