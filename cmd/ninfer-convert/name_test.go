package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNameWithControlCharacters: a model name is printed by inspect and
// the bench/report tables, so --name with ESC/CR/newline is refused with
// one clear line and exit 2, before any work (issue #22 item 11).
func TestNameWithControlCharacters(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.ninfer")
	for _, name := range []string{"evil\x1b]0;pwned\x07", "two\nlines", "cr\rname", "c1\u009bx", "bad\xffutf8"} {
		code, stdout, errs := runConvert("--name", name, filepath.Join(dir, "hf"), out)
		if code != 2 || stdout != "" || !strings.HasPrefix(errs, "ninfer-convert: --name ") ||
			!strings.Contains(errs, "control characters are not allowed in a model name") ||
			strings.Count(errs, "\n") != 1 || strings.ContainsAny(errs, "\x1b\x07\r\u009b") {
			t.Errorf("--name %q: exit %d, stdout %q, stderr %q", name, code, stdout, errs)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("--name %q: output written", name)
		}
	}
	// A directory name with control characters needs --name.
	code, _, errs := runConvert(filepath.Join(dir, "hf\x1b[2J"), out)
	if code != 2 || !strings.Contains(errs, "holds control characters; give --name") || strings.Contains(errs, "\x1b") {
		t.Errorf("control characters in HF_DIR's name: exit %d, stderr %q", code, errs)
	}
}
