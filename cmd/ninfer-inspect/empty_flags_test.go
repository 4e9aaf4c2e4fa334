package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// An explicitly empty flag value is a usage error naming the flag (the
// shared check of cliutil.AddVersion), not "unset": no output to stdout
// instead of a file, no skipped check, no silent default.
func TestEmptyFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--output-file", ""}, "--output-file: empty value (want PATH)"},
		{[]string{"-o", ""}, "-o: empty value (want PATH)"},
		{[]string{"--format="}, "--format: empty value (want FORMAT)"},
	} {
		code, stdout, stderr := runInspect(append(tc.args, "m.ninfer")...)
		if code != 2 || stderr != "ninfer-inspect: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}

// The "wrote PATH" status line shows an -o path holding control characters
// escaped (termsafe.Path): stderr carries no control byte but the final
// newline, so the path can neither drive the terminal nor split the line.
func TestWroteLineEscapesPath(t *testing.T) {
	model := testfixture.Artifact(t, "q8", nil)
	out := filepath.Join(t.TempDir(), "r\x1b[31m\a\r\nx.txt")
	code, stdout, stderr := runInspect("-o", out, model)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("output not written: %v", err)
	}
	body, ok := strings.CutSuffix(stderr, "\n")
	if !ok || !strings.HasPrefix(body, "ninfer-inspect: wrote \"") || !strings.Contains(body, `r\x1b[31m\a\r\nx.txt"`) {
		t.Errorf("stderr %q: want one line naming the path quoted", stderr)
	}
	for _, b := range []byte(body) {
		if b < 0x20 || b == 0x7f {
			t.Fatalf("stderr %q holds control byte %#x", stderr, b)
		}
	}
}
