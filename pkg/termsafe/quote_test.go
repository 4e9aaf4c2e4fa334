package termsafe

import (
	"strconv"
	"strings"
	"testing"
)

func TestQuoteShortIsStrconvQuote(t *testing.T) {
	for in, want := range map[string]string{
		"abc":      `"abc"`,
		"a\x1b[2J": `"a\x1b[2J"`,
		"\xff":     `"\xff"`,
		"héllo":    `"héllo"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestQuoteLongIsCut: a 5 MB token is quoted as a short excerpt with its
// length, never whole (issue #22 item 10).
func TestQuoteLongIsCut(t *testing.T) {
	big := strings.Repeat("é", 5<<20)
	got := Quote(big)
	want := `"` + strings.Repeat("é", MaxExcerpt) + `"… (10485760 bytes)`
	if got != want {
		t.Fatalf("Quote(5M runes) = %.200s (len %d), want %s", got, len(got), want)
	}
	if got := QuoteBytes([]byte(big)); got != want {
		t.Fatalf("QuoteBytes = %.200s, want %s", got, want)
	}
	exact := strings.Repeat("x", MaxExcerpt)
	if got := Quote(exact); got != `"`+exact+`"` {
		t.Errorf("Quote(%d chars) = %s, want it whole", MaxExcerpt, got)
	}
}

func TestNameAndEscape(t *testing.T) {
	if got := Name("model q8"); got != "model q8" {
		t.Errorf("Name(printable) = %q", got)
	}
	if got := Name("evil\x1b]0;pwned\x07"); got != `"evil\x1b]0;pwned\a"` {
		t.Errorf("Name(control) = %s", got)
	}
	if got := Escape("a\x1b[31mb\r\nc\u009b\x7f"); got != `a\x1b[31mb\r\nc\u009b\x7f` {
		t.Errorf("Escape = %s", got)
	}
	if got := Escape("plain ünïcode"); got != "plain ünïcode" {
		t.Errorf("Escape(plain) = %s", got)
	}
	for s, want := range map[string]bool{"ok name": false, "a\x1b": true, "a\u0085": true, "\xff": true, "tab\t": true} {
		if HasControl(s) != want {
			t.Errorf("HasControl(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestPath(t *testing.T) {
	long := strings.Repeat("d/", MaxPath) // printable, 2*MaxPath characters
	for in, want := range map[string]string{
		"out/m.ninfer":        "out/m.ninfer",
		"my models/q8 é.json": "my models/q8 é.json",
		"":                    `""`,
		"\x1b[31m\a":          `"\x1b[31m\a"`,
		"a\nb\rc":             `"a\nb\rc"`,
		"x\u009b2Jy":          `"x\u009b2Jy"`,
		"bad\xff.json":        `"bad\xff.json"`,
		"rtl\u202etxt.ninfer": `"rtl\u202etxt.ninfer"`,
		long:                  `"` + long[:MaxPath] + `"… (` + strconv.Itoa(len(long)) + ` bytes)`,
		long[:MaxPath]:        long[:MaxPath],
	} {
		got := Path(in)
		if got != want {
			t.Errorf("Path(%.80q) = %.300s, want %.300s", in, got, want)
		}
		for _, b := range []byte(got) {
			if b < 0x20 || b == 0x7f {
				t.Errorf("Path(%.80q) = %q holds control byte %#x", in, got, b)
			}
		}
		if HasControl(got) {
			t.Errorf("Path(%.80q) = %q holds a control character", in, got)
		}
	}
}
