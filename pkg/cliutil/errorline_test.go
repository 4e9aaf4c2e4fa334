package cliutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

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

// A message quoting a huge input whole (a tensor name of a damaged file)
// still prints as one bounded line that keeps its start and end.
func TestErrorLineBounded(t *testing.T) {
	cases := []struct {
		name string
		msg  string
		cut  bool
	}{
		{"short", "m.ninfer: tensor \"a\": bad", false},
		{"at the bound", strings.Repeat("x", MaxErrorLine), false},
		{"huge ascii", "f.safetensors: tensor \"" + strings.Repeat("x", 5<<20) + "\": unknown dtype", true},
		{"huge multibyte", "id \"" + strings.Repeat("é", 1<<20) + "\" end", true},
	}
	for _, c := range cases {
		got := ErrorLine(c.msg)
		if !c.cut {
			if got != c.msg {
				t.Errorf("%s: changed to %q", c.name, got)
			}
			continue
		}
		if len(got) > MaxErrorLine+64 || !strings.Contains(got, "bytes cut") || !utf8.ValidString(got) ||
			!strings.HasPrefix(got, c.msg[:10]) || !strings.HasSuffix(got, c.msg[len(c.msg)-3:]) {
			t.Errorf("%s: %d bytes, %q…", c.name, len(got), got[:min(len(got), 80)])
		}
	}
}

// TestErrorTextJSONPosition: a JSON decoding error from a large file
// (config.json, tokenizer.json, a model file given as JSON) names the byte
// where decoding failed; other errors, and messages that already name the
// position, are unchanged.
func TestErrorTextJSONPosition(t *testing.T) {
	jsonErr := func(data string, v any) error {
		err := json.Unmarshal([]byte(data), v)
		if err == nil {
			t.Fatalf("%q: no error", data)
		}
		return fmt.Errorf("m/tokenizer.json: %w", err)
	}
	var obj map[string]any
	var typed struct{ A []string }
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"syntax", jsonErr("NINFER\x00\x03", &obj), `m/tokenizer.json: invalid character 'N' looking for beginning of value (at byte 1)`},
		{"syntax deep", jsonErr(`{"a": [1, 2, x]}`, &obj), `m/tokenizer.json: invalid character 'x' looking for beginning of value (at byte 14)`},
		{"control byte", jsonErr("{\"a\":\x1b}", &obj), `m/tokenizer.json: invalid character '\x1b' looking for beginning of value (at byte 6)`},
		{"type", jsonErr(`{"A": 1}`, &typed), `m/tokenizer.json: json: cannot unmarshal number into Go struct field .A of type []string (at byte 7)`},
		{"already placed", fmt.Errorf("x: at byte 1: %w", &json.SyntaxError{Offset: 1}), "x: at byte 1: "},
		{"other", errors.New("plain"), "plain"},
	}
	for _, c := range cases {
		if got := ErrorText(c.err); got != c.want {
			t.Errorf("%s: ErrorText = %q, want %q", c.name, got, c.want)
		}
	}
	// Through Run: the error line carries the position.
	var stdout, stderr bytes.Buffer
	app := Prepare(&cli.App{Name: "t", Action: func(*cli.Context) error { return jsonErr("\x00", &obj) }}, &stdout, &stderr)
	if got := Run(app, []string{"t"}, &stderr); got != 1 {
		t.Fatalf("exit %d", got)
	}
	if want := "t: m/tokenizer.json: invalid character '\\x00' looking for beginning of value (at byte 1)\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
