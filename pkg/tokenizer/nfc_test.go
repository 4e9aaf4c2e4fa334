package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"

	"github.com/ninfer/ninfer/internal/numtest"
)

type nfcFixture struct {
	Text        string  `json:"text"`
	NFC         string  `json:"nfc"`
	Qwen3       []int32 `json:"qwen3"`
	Qwen35Regex []int32 `json:"qwen35regex"`
	SmallA      []int32 `json:"small_a"`
}

// TestNFCMatchesHF compares nfc and Encode with Hugging Face tokenizers
// 0.23.3 (testdata/nfc.jsonl, testdata/gen_nfc_fixtures.py) on texts with
// runs of 29 to 100 combining marks in several scripts and on the marks
// HF's Unicode 9.0 tables know as starters. Go's norm inserts U+034F after
// 30 marks, so "a"+"\u0301"×31 used to normalize and tokenize differently.
func TestNFCMatchesHF(t *testing.T) {
	fx := readJSONL[nfcFixture](t, "nfc.jsonl")
	toks := map[string]*Tokenizer{}
	for _, name := range []string{"qwen3", "qwen35regex", "small_a"} {
		toks[name] = loadNamed(t, name)
	}
	fails := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if fails < 10 {
			t.Errorf(format, args...)
		}
		fails++
	}
	for i, f := range fx {
		if got := nfc(f.Text); got != f.NFC {
			fail("fixture %d %+q: nfc\n got  %+q\n want %+q", i, f.Text, got, f.NFC)
		}
		for name, want := range map[string][]int32{"qwen3": f.Qwen3, "qwen35regex": f.Qwen35Regex, "small_a": f.SmallA} {
			tok := toks[name]
			ids := tok.Encode(f.Text, true)
			if !slices.Equal(ids, want) {
				fail("fixture %d %+q: %s Encode\n got  %v\n want %v", i, f.Text, name, ids, want)
			}
			if got := tok.Decode(ids, false); got != f.NFC {
				fail("fixture %d %+q: %s Decode(Encode) = %+q, want the NFC text", i, f.Text, name, got)
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d of %d fixture checks failed", fails, 7*len(fx))
	}
}

// TestNFCLongText: on text longer than a slow-path piece (nfcPieceBytes),
// the fixtures joined by spaces (a space composes with nothing, so HF's NFC
// of the whole is the join of the fixtures' NFC) come out as one.
func TestNFCLongText(t *testing.T) {
	fx := readJSONL[nfcFixture](t, "nfc.jsonl")
	var in, want []string
	for rep := 0; rep < 3; rep++ {
		for _, f := range fx {
			in, want = append(in, f.Text), append(want, f.NFC)
		}
		in, want = append(in, strings.Repeat("plain text ", 100)), append(want, strings.Repeat("plain text ", 100))
	}
	s := strings.Join(in, " ")
	if len(s) < 20*nfcPieceBytes {
		t.Fatalf("text of %d bytes is too short to test the pieces", len(s))
	}
	if got, w := nfc(s), strings.Join(want, " "); got != w {
		i := 0
		for i < len(got) && i < len(w) && got[i] == w[i] {
			i++
		}
		t.Errorf("nfc of %d bytes differs from HF's at byte %d: got %+q, want %+q", len(s), i, got[i:min(len(got), i+40)], w[i:min(len(w), i+40)])
	}
}

// TestNFC checks hand-worked cases of NFC without stream-safe segmentation.
func TestNFC(t *testing.T) {
	acute := func(n int) string { return strings.Repeat("\u0301", n) }
	tests := []struct {
		name, in, want string
	}{
		{"ascii", "hello", "hello"},
		{"composes", "e\u0301", "é"},
		{"30 marks", "a" + acute(30), "á" + acute(29)},
		{"31 marks: no U+034F", "a" + acute(31), "á" + acute(30)},
		{"100 marks", "a" + acute(100), "á" + acute(99)},
		{"composes past 30 lower-class marks", "e" + strings.Repeat("\u0316", 30) + "\u0301", "é" + strings.Repeat("\u0316", 30)},
		{"reorders the whole run", "a" + strings.Repeat("\u0301\u0316", 20), "á" + strings.Repeat("\u0316", 20) + acute(19)},
		{"input U+034F stays", "a" + acute(31) + "\u034f" + acute(1), "á" + acute(30) + "\u034f" + acute(1)},
		{"leading marks", acute(35) + "a" + acute(1), acute(35) + "á"},
		{"hangul LV+T blocked by marks", "\u1100\u1161" + strings.Repeat("\u0300", 31) + "\u11a8", "가" + strings.Repeat("\u0300", 31) + "\u11a8"},
		{"hangul composes", "\u1100\u1161\u11a8" + acute(31), "각" + acute(31)},
		{"U+07FD is a starter in HF's data", "a\u07fd\u0301", "a\u07fd\u0301"},
		{"U+07FD is not reordered", "x\u0345\u07fd", "x\u0345\u07fd"},
		{"U+11938 is not decomposed", "\U00011938", "\U00011938"},
		{"U+11935 U+11930 does not compose", "\U00011935\U00011930", "\U00011935\U00011930"},
	}
	for _, tc := range tests {
		if got := nfc(tc.in); got != tc.want {
			t.Errorf("%s: nfc(%+q) = %+q, want %+q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestComposeHFMatchesNorm: on text norm normalizes without U+034F and
// without the Unicode 9.0 differences, composeHF (the slow path) and norm's
// NFC agree; random strings over bases, marks of many classes, Hangul jamo
// and composites.
func TestComposeHFMatchesNorm(t *testing.T) {
	r := numtest.Seeded(t)
	pool := []rune{'a', 'e', 'o', 'u', 'A', 'n', 'z', ' ', 'é', 'ộ', 'Å', 'ᾂ', 'α', 'ω', 'ش', 'क', 'ก', '가', '각', '日', '😀',
		0x0300, 0x0301, 0x0302, 0x0303, 0x0308, 0x030A, 0x0313, 0x0316, 0x031B, 0x0323, 0x0327, 0x0334, 0x0345, 0x035C,
		0x0344, 0x0F73, 0x0F71, 0x0F72, 0x0F80, 0x064E, 0x0651, 0x05B0, 0x093C, 0x094D, 0x0B47, 0x0B3E, 0x0B57, 0x0DD9, 0x0DCF,
		0x1100, 0x1161, 0x1175, 0x11A8, 0x11C2, 0x3099, 0x304B, 0x212B, 0x2126, 0x0F43, 0xFB1D, 0x1109A, 0x11099, 0x110BA, 0x034F}
	for i := 0; i < 20000; i++ {
		n := 1 + r.IntN(12)
		rs := make([]rune, n)
		for j := range rs {
			rs[j] = pool[r.IntN(len(pool))]
		}
		s := string(rs)
		want := norm.NFC.String(s)
		if got := composeHF(s); got != want {
			t.Fatalf("composeHF(%+q) = %+q, norm.NFC = %+q", s, got, want)
		}
	}
}

// TestNFCTables checks the Unicode 9.0 difference list against norm's
// Unicode 15.0 data: every hfStarters code point is a non-starter without
// a decomposition there, the ranges are sorted and disjoint, and U+11938
// decomposes to U+11935 U+11930.
func TestNFCTables(t *testing.T) {
	for i, e := range hfStarters {
		if e[0] > e[1] || i > 0 && hfStarters[i-1][1] >= e[0] {
			t.Errorf("hfStarters[%d] %U..%U out of order", i, e[0], e[1])
		}
		for r := e[0]; r <= e[1]; r++ {
			p := norm.NFD.PropertiesString(string(r))
			if p.CCC() == 0 || len(p.Decomposition()) != 0 || !isHFStarter(r) || hfCCC(r) != 0 {
				t.Errorf("%U: ccc %d, decomposition %q in norm", r, p.CCC(), p.Decomposition())
			}
		}
		if isHFStarter(e[0]-1) && (i == 0 || hfStarters[i-1][1] != e[0]-1) || isHFStarter(e[1]+1) {
			t.Errorf("isHFStarter wrong at the edges of %U..%U", e[0], e[1])
		}
	}
	if d := norm.NFD.String(string(rune(hfNoDecomp))); d != string([]rune{hfNoCompose1, hfNoCompose2}) {
		t.Errorf("norm's NFD of U+11938 = %+q", d)
	}
}

func BenchmarkNFC(b *testing.B) {
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	b.Run("nfc", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			nfc(text)
		}
	})
	b.Run("norm", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			norm.NFC.String(text)
		}
	})
	// the slow path: the same text with a run of 40 marks per 4 KiB, and
	// one 100,000-mark run
	var sb strings.Builder
	for i := 0; i+4096 <= len(text); i += 4096 {
		sb.WriteString(strings.ToValidUTF8(text[i:i+4096], ""))
		sb.WriteString("e" + strings.Repeat("\u0316\u0301", 20))
	}
	long := sb.String()
	zalgo := "a" + strings.Repeat("\u0301\u0316", 50000)
	b.Run("nfc-long-runs", func(b *testing.B) {
		b.SetBytes(int64(len(long)))
		for i := 0; i < b.N; i++ {
			nfc(long)
		}
	})
	b.Run("nfc-100k-marks", func(b *testing.B) {
		b.SetBytes(int64(len(zalgo)))
		for i := 0; i < b.N; i++ {
			nfc(zalgo)
		}
	})
}

// loadHFUnicode reads testdata/hf_unicode.json: HF tokenizers' Unicode
// data probed over every code point by gen_nfc_fixtures.py, as [lo, hi]
// ranges by name, and the tokenizers version.
func loadHFUnicode(t *testing.T) (map[string][][2]rune, string) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(readFile(t, "hf_unicode.json"), &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string][][2]rune{}
	var version string
	for k, v := range raw {
		if k == "tokenizers" {
			if err := json.Unmarshal(v, &version); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var rs [][2]rune
		if err := json.Unmarshal(v, &rs); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[k] = rs
	}
	return out, version
}

// rangeSet reports membership in sorted [lo, hi] ranges.
func rangeSet(rs [][2]rune) func(rune) bool {
	return func(r rune) bool {
		i := sort.Search(len(rs), func(i int) bool { return rs[i][1] >= r })
		return i < len(rs) && rs[i][0] <= r
	}
}

// TestNFCDataMatchesHF checks nfc's data against HF's over every code
// point: the code points with a canonical decomposition, and those with a
// non-zero canonical combining class, are the same in both (norm's Unicode
// 15.0 data with hfStarters and U+11938 taken out is HF's Unicode 9.0
// data). Canonical combining classes and decompositions of assigned
// characters never change (Unicode's normalization stability policy), so
// set equality is data equality. A Go toolchain with newer norm tables
// fails here until hfStarters is extended.
func TestNFCDataMatchesHF(t *testing.T) {
	hf, version := loadHFUnicode(t)
	hfDec, hfNonStarter := rangeSet(hf["decomposable"]), rangeSet(hf["non_starters"])
	var bad []string
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		dec := r != hfNoDecomp && norm.NFD.String(string(r)) != string(r)
		if dec != hfDec(r) {
			bad = append(bad, fmt.Sprintf("%U decomposes: ours %v, HF %v", r, dec, hfDec(r)))
			continue
		}
		if !dec && (hfCCC(r) != 0) != hfNonStarter(r) {
			bad = append(bad, fmt.Sprintf("%U ccc: ours %d, HF non-starter %v", r, hfCCC(r), hfNonStarter(r)))
		}
	}
	if len(bad) > 0 {
		t.Errorf("nfc's data (norm %s) differs from HF tokenizers %s at %d code points (update hfStarters, docs/TOKENIZER.md):\n%s",
			norm.Version, version, len(bad), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}
}

// TestUnicodeClassesVsHF pins what docs/TOKENIZER.md says about the
// pre-tokenizer's classes: Go's \p{L}, \p{N}, \p{M} (regexp2 and the fast
// splitters use Go's unicode tables) are subsets of HF's (Oniguruma), \s is
// the same, and every code point only HF matches is unassigned in Go's
// tables (assigned by a later Unicode version).
func TestUnicodeClassesVsHF(t *testing.T) {
	hf, version := loadHFUnicode(t)
	space := regexp2.MustCompile(`^\s$`, regexp2.None|regexp2.Unicode)
	classes := []struct {
		name string
		ours func(rune) bool
	}{
		{"L", unicode.IsLetter},
		{"N", unicode.IsNumber},
		{"M", unicode.IsMark},
		{"s", func(r rune) bool { ok, _ := space.MatchString(string(r)); return ok }},
	}
	cn := unicode.Categories["Cn"] // unassigned
	if cn == nil {
		t.Fatal("unicode has no Cn table")
	}
	assigned := func(r rune) bool { return !unicode.Is(cn, r) }
	for _, c := range classes {
		in := rangeSet(hf[c.name])
		hfOnly := 0
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			switch ours, theirs := c.ours(r), in(r); {
			case ours && !theirs:
				t.Errorf("%s: %U matches in Go (Unicode %s) but not in HF tokenizers %s", c.name, r, unicode.Version, version)
			case !ours && theirs:
				hfOnly++
				if assigned(r) {
					t.Errorf("%s: %U is assigned in Go's tables but only HF tokenizers %s matches it", c.name, r, version)
				}
			}
		}
		t.Logf(`\p{%s}: %d code points only HF matches (Go unicode %s)`, c.name, hfOnly, unicode.Version)
	}
}
