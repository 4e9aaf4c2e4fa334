package termsafe

import (
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
