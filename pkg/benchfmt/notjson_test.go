package benchfmt

import (
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// maxNotJSON bounds the "not valid JSON" message (the caller's file:line
// prefix aside), however long or binary the text.
const maxNotJSON = 200

// TestNotJSONMessage: a line or document that is not JSON gives a short,
// inert error with where decoding failed and an escaped excerpt of the
// text's start (issue #22).
func TestNotJSONMessage(t *testing.T) {
	ctl := strings.Repeat("\x1b[2J\x07\r\u009b", 5<<20/8) // 8 bytes: ESC, BEL, CR, C1 CSI
	cases := []struct {
		name, in string
		want     []string // substrings
	}{
		{"binary", "NINF\x00\x01\x02\x03\xff\xfe\xfd\n\x00" + strings.Repeat("\x00\xff", 1000),
			[]string{"at byte 1 of 2013: invalid character 'N' looking for beginning of value", `starts "NINF\x00\x01\x02\x03\xff\xfe\xfd\n\x00\x00\xff\x00"…`}},
		{"5 MB of control bytes", ctl,
			[]string{"at byte 1 of 5242880: invalid character '\\x1b'", `starts "\x1b[2J\a\r\u009b\x1b[2J\a\r\u009b"…`}},
		{"5 MB string with control bytes", `{"type":"` + ctl + `"}`,
			[]string{"at byte 10 of 5242891: invalid character '\\x1b' in string literal", `starts "{\"type\":\"\x1b[2J\a\r"…`}},
		{"plain text", "hello, world",
			[]string{"at byte 1 of 12: invalid character 'h' looking for beginning of value", `starts "hello, world"`}},
		{"cut-off line", `{"type":"rep","run_id":"r"`,
			[]string{"at byte 26 of 26: unexpected end of JSON input", `starts "{\"type\":\"rep\",\"r"…`}},
		{"two values", `{"type":"x"}{"type":"x"}`,
			[]string{"at byte 13 of 24: invalid character '{' after top-level value"}},
		{"non-printable runes", strings.Repeat("\U000f0000\u202e", 1000),
			[]string{"at byte 1 of 7000:", `starts "\U000f0000\u202e\U000f0000\u202e"…`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, lerr := ParseLineString(c.in)
			_, derr := DecodeDocument([]byte(c.in))
			for _, err := range []error{lerr, derr} {
				if err == nil {
					t.Fatal("no error")
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "not valid JSON at byte ") {
					t.Errorf("%q: want the position after \"not valid JSON\"", msg)
				}
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%q lacks %q", msg, w)
					}
				}
				if termsafe.HasControl(msg) {
					t.Errorf("%q holds control bytes or invalid UTF-8", msg)
				}
				if len(msg) > maxNotJSON {
					t.Errorf("message is %d bytes, want at most %d: %q", len(msg), maxNotJSON, msg)
				}
			}
		})
	}
}

// TestNotJSONWorstCase: the longest syntax error (a 7-digit position, the
// longest encoding/json wording) with the most escaped excerpt (4 bytes of
// message a byte) stays within the bound.
func TestNotJSONWorstCase(t *testing.T) {
	maxExcerpt := 4*excerptBytes + len(`""…`)
	for _, in := range []string{strings.Repeat("\x00", 100), strings.Repeat("\xff", 100), strings.Repeat("\u0085", 100), strings.Repeat("\U000f0000", 100)} {
		if got := excerpt(in, excerptBytes); len(got) > maxExcerpt {
			t.Errorf("excerpt %s is %d bytes, want at most %d", got, len(got), maxExcerpt)
		}
	}
	_, err := ParseLineString(`{` + strings.Repeat(" ", 5<<20) + "\x85") // shown as '\u0085'
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	head, _, ok := strings.Cut(msg, "; starts ")
	if !ok || !strings.Contains(head, "at byte 5242882 of 5242882: invalid character '\\u0085' looking for beginning of object key string") {
		t.Fatalf("error %q: want the position and encoding/json's wording", msg)
	}
	if n := len(head) + len("; starts ") + maxExcerpt; n > maxNotJSON {
		t.Errorf("worst case is %d bytes, want at most %d: %q", n, maxNotJSON, msg)
	}
}
