package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/ninfer/ninfer/internal/numtest"
)

// splitPool mixes the character classes the patterns distinguish: letters
// of several scripts, combining marks, digits of several kinds, ASCII and
// Unicode whitespace, newlines, punctuation, apostrophes and case variants
// that stress the case-insensitive contractions.
var splitPool = []string{
	"a", "Z", "é", "ß", "中", "ك", "क", "ि", "्", "\u0301", "\u0308", "\u20dd", "\ufe0f", "\u200d",
	"1", "٣", "Ⅻ", "½", "²", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b",
	"'", "'s", "'S", "'ll", "'LL", "'Re", "'vE", "'D", "'ſ", "'K", "'\u212a", "'İ", "!", "?", ".", "-", "_", "<|", "|>",
	"😀", "👍🏽", "🇺🇸", "$", "€", "\u200b", "x", "Hello", " world",
}

func randomSplitText(r *rand.Rand) string {
	var b strings.Builder
	n := 1 + r.IntN(30)
	for i := 0; i < n; i++ {
		b.WriteString(splitPool[r.IntN(len(splitPool))])
	}
	return b.String()
}

func TestFastSplitMatchesRegexp2(t *testing.T) {
	r := numtest.Seeded(t)
	initBMPClass()
	var texts []string
	for _, name := range []string{"qwen3.jsonl", "small_b.jsonl"} {
		for _, f := range readJSONL[encodeFixture](t, name) {
			texts = append(texts, f.Text)
		}
	}
	for i := 0; i < 3000; i++ {
		texts = append(texts, randomSplitText(r))
	}
	for _, c := range []struct {
		pattern string
		kind    fastKind
	}{{qwen2Pattern, fastQwen2}, {qwen35SplitPattern, fastQwen35}, {gpt2Pattern, fastGPT2}} {
		if fastKindOf(c.pattern) != c.kind {
			t.Fatalf("fastKindOf mismatch for %d", c.kind)
		}
		re := regexp2.MustCompile(c.pattern, regexp2.None|regexp2.Unicode)
		fails := 0
		for _, text := range texts {
			want := splitRegex(nil, text, re, false)
			got := splitFast(nil, text, c.kind)
			if !slices.Equal(got, want) {
				if fails < 5 {
					t.Errorf("kind %d text %q:\n fast   %q\n regexp %q", c.kind, text, got, want)
				}
				fails++
			}
		}
		if fails > 0 {
			t.Errorf("kind %d: %d of %d texts differ", c.kind, fails, len(texts))
		}
	}
	// The constants are the patterns the rest of the package relies on.
	if qwen2Pattern != qwen3Pattern || qwen35SplitPattern != qwen35Pattern {
		t.Fatal("pattern constants disagree with the fixture patterns")
	}
}

// FuzzFastSplit checks the hand-written matchers against regexp2 on
// arbitrary valid UTF-8 (run with -fuzz=FuzzFastSplit; the seeds run in
// ordinary tests).
func FuzzFastSplit(f *testing.F) {
	for _, s := range []string{"Hello world's 12345  café\n\n  x", " \u00a0\t\r\n\r\n x", "'S'll a\u0301 क्षि 😀 ½²"} {
		f.Add(s)
	}
	res := map[fastKind]*regexp2.Regexp{
		fastQwen2:  regexp2.MustCompile(qwen2Pattern, regexp2.None|regexp2.Unicode),
		fastQwen35: regexp2.MustCompile(qwen35SplitPattern, regexp2.None|regexp2.Unicode),
		fastGPT2:   regexp2.MustCompile(gpt2Pattern, regexp2.None|regexp2.Unicode),
	}
	initBMPClass()
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for kind, re := range res {
			want := splitRegex(nil, s, re, false)
			if got := splitFast(nil, s, kind); !slices.Equal(got, want) {
				t.Fatalf("kind %d %q: fast %q regexp %q", kind, s, got, want)
			}
		}
	})
}
