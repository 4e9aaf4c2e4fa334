package cliutil

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestRunEscapesControlBytes: a file name with ESC/CR/BEL in an error
// reaches stderr as visible escapes, on one line (issue #22 item 11).
func TestRunEscapesControlBytes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	app := Prepare(&cli.App{
		Name: "t",
		Action: func(*cli.Context) error {
			return fmt.Errorf("open x\x1b]0;pwned\x07\r.ids\u009b: no such file\nsecond")
		},
	}, &stdout, &stderr)
	if got := Run(app, []string{"t"}, &stderr); got != 1 {
		t.Fatalf("exit %d", got)
	}
	want := "t: open x\\x1b]0;pwned\\x07\\r.ids\\u009b: no such file second\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
	if strings.ContainsAny(stderr.String(), "\x1b\x07\r") {
		t.Errorf("raw control bytes on stderr: %q", stderr.String())
	}
	if got := WarningLine("t", "a\x1bb"); got != "t: warning: a\\x1bb\n" {
		t.Errorf("WarningLine = %q", got)
	}
}
