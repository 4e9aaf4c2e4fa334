package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// maxMessage bounds the message after "ninfer-report: FILE:LINE: " for an
// input line that is not JSON.
const maxMessage = 200

// TestNotJSONInput: a binary file, a megabyte line of terminal escapes or
// plain text given as input is an error naming the file and line, with the
// byte position where decoding failed and an escaped excerpt, one short
// inert line (issue #22). A cut-off last line keeps its own warning.
func TestNotJSONInput(t *testing.T) {
	dir := t.TempDir()
	esc := strings.Repeat("\x1b]0;pwned\x07\x1b[2J\r\u009b", 5<<20/17) // 5 MB of ESC, BEL, CR, C1
	model := "NINFER\x00\x01\x00\x00\xff\xfe\x80\x9b" + strings.Repeat("\x00\x1b\xff", 4096)
	cases := []struct {
		name, file, text string
		want             string // after "FILE:1: not valid JSON at byte "
	}{
		{"binary model", "m.ninfer", model + "\n" + model, "1 of 12302: invalid character 'N' looking for beginning of value; starts \"NINFER\\x00\\x01\\x00\\x00\\xff\\xfe\\x80\\x9b\\x00\\x1b\""},
		{"5 MB line of escapes", "esc.jsonl", esc + "\n", fmt.Sprintf("1 of %d: invalid character '\\x1b' looking for beginning of value; starts \"\\x1b]0;pwned\\a\\x1b[2J\\r\"…", len(esc))},
		{"escapes in a string", "str.jsonl", `{"type":"run","run_id":"` + esc + "\"}\n", fmt.Sprintf("25 of %d: invalid character '\\x1b' in string literal; starts \"{\\\"type\\\":\\\"run\\\",\\\"r\"…", len(esc)+26)},
		{"plain text", "notes.txt", "my notes\nline two\n", "1 of 8: invalid character 'm' looking for beginning of value; starts \"my notes\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.file)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI("", p)
			prefix := "ninfer-report: " + p + ":1: not valid JSON at byte "
			if code != 1 || out != "" || !strings.HasPrefix(errOut, prefix) || !strings.HasSuffix(errOut, "\n") || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d, stdout %.100q, stderr %.400q: want exit 1 and one line starting %q", code, out, errOut, prefix)
			}
			msg := strings.TrimSuffix(strings.TrimPrefix(errOut, prefix), "\n")
			if !strings.HasPrefix(msg, c.want) {
				t.Errorf("stderr %q: want %q after the prefix", errOut, c.want)
			}
			if termsafe.HasControl(msg) {
				t.Errorf("stderr %q holds raw control bytes", errOut)
			}
			if n := len(errOut) - len("ninfer-report: "+p+":1: "); n > maxMessage {
				t.Errorf("message is %d bytes, want at most %d: %q", n, maxMessage, errOut)
			}
		})
	}

	// Unterminated (the file's only line, cut off or binary without a
	// newline): the documented warning, now with the position, and the
	// "no run" error, each a short line.
	p := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(p, []byte(esc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("", p)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	warning := "ninfer-report: warning: " + p + ":1: dropped unterminated last line (interrupted write?): not valid JSON at byte 1 of " + fmt.Sprint(len(esc)) + ": "
	if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], warning) || !strings.HasPrefix(lines[1], "ninfer-report: no run in "+p) {
		t.Fatalf("exit %d, stderr %.600q: want exit 1, the unterminated-line warning and the no-run error", code, errOut)
	}
	if termsafe.HasControl(lines[0]) || termsafe.HasControl(lines[1]) || len(lines[0]) > len(warning)+maxMessage {
		t.Errorf("warning %q: want a short inert line", lines[0])
	}
}
