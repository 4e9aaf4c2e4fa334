package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// NFC as Hugging Face tokenizers computes it (docs/TOKENIZER.md). HF's NFC
// normalizer is the unicode-normalization-alignments crate: plain UAX #15
// composition, with
//
//   - no stream-safe segmentation: golang.org/x/text/unicode/norm inserts
//     U+034F COMBINING GRAPHEME JOINER after 30 non-starters in a row (UAX
//     #15 §13), which changes the text, its reordering and its composition;
//     HF reorders and composes the whole run;
//   - Unicode 9.0 data: the marks that Unicode 10.0-15.0 gave a non-zero
//     canonical combining class (hfStarters) are starters there (ccc 0: not
//     reordered, and they block composition), and U+11938 DIVES AKURU VOWEL
//     SIGN O (Unicode 13.0) has no decomposition, so U+11935 U+11930 does
//     not compose to it.
//
// Text without those runes and without a run of more than 30 non-starters
// (almost all text) takes norm's NFC, which is then the same; the rest
// takes composeHF.

// hfStarters are the code points with a non-zero canonical combining class
// in Unicode 15.0 (Go's norm tables) and 0 in HF's Unicode 9.0 tables, as
// ranges [lo, hi]. Found by comparing HF's NFC with norm's over every code
// point (TestNFCTables checks the list against norm's data).
var hfStarters = [][2]rune{
	{0x07FD, 0x07FD}, {0x0898, 0x089F}, {0x08CA, 0x08D3}, {0x09FE, 0x09FE}, {0x0C3C, 0x0C3C},
	{0x0D3B, 0x0D3C}, {0x0EBA, 0x0EBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA},
	{0xA82C, 0xA82C}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
	{0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A},
	{0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47},
	{0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97}, {0x11F41, 0x11F42},
	{0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF},
	{0x1E4EC, 0x1E4EF},
}

// The Unicode 13.0 decomposition HF's tables lack: U+11938 → U+11935 U+11930.
const (
	hfNoDecomp   = 0x11938
	hfNoCompose1 = 0x11935
	hfNoCompose2 = 0x11930
)

func isHFStarter(r rune) bool {
	// fast exits for the common scripts (CJK, Hangul, ...) between ranges
	if r < 0x07FD || r > 0x1DFA && r < 0xA82C || r > 0xA82C && r < 0x10D24 {
		return false
	}
	_, found := slices.BinarySearchFunc(hfStarters, r, func(e [2]rune, r rune) int {
		switch {
		case e[1] < r:
			return -1
		case e[0] > r:
			return 1
		}
		return 0
	})
	return found
}

// hfDiffers reports whether s holds a rune whose normalization differs
// between norm's Unicode 15.0 data and HF's Unicode 9.0 data.
func hfDiffers(s string) bool {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == hfNoDecomp || r == hfNoCompose2 || isHFStarter(r) {
			return true
		}
		i += n
	}
	return false
}

// nfc returns s in NFC exactly as Hugging Face tokenizers' NFC normalizer
// does.
func nfc(s string) string {
	if !hfDiffers(s) {
		out := norm.NFC.String(s)
		// norm inserts U+034F only after more than 30 non-starters; an
		// input U+034F is never removed, so equal counts mean none was.
		if !insertedCGJ(s, out) {
			return out
		}
	}
	// Piece by piece, split where both data sets have a normalization
	// boundary: only the pieces that need it take the slow path.
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		n := pieceEnd(s, nfcPieceBytes)
		p := s[:n]
		if !hfDiffers(p) {
			if out := norm.NFC.String(p); !insertedCGJ(p, out) {
				b.WriteString(out)
				s = s[n:]
				continue
			}
		}
		b.WriteString(composeHF(p))
		s = s[n:]
	}
	return b.String()
}

// nfcPieceBytes is the size from which nfc's slow path cuts a piece.
const nfcPieceBytes = 256

// insertedCGJ reports whether norm's NFC out of in has a U+034F that in
// does not: norm inserts one only after more than 30 non-starters, and
// never removes an input U+034F.
func insertedCGJ(in, out string) bool {
	return strings.Contains(out, norm.GraphemeJoiner) &&
		strings.Count(out, norm.GraphemeJoiner) != strings.Count(in, norm.GraphemeJoiner)
}

// pieceEnd returns the offset of the first normalization boundary in s at
// or after min bytes, or len(s). A rune norm puts a boundary before (a
// starter that combines with nothing before it) is one in HF's data too:
// HF's data has only more starters and fewer compositions.
func pieceEnd(s string, min int) int {
	for i := min; i < len(s); {
		if !utf8.RuneStart(s[i]) {
			i++
			continue
		}
		p := norm.NFC.PropertiesString(s[i:])
		if p.BoundaryBefore() {
			return i
		}
		i += max(1, p.Size())
	}
	return len(s)
}

type cccRune struct {
	r   rune
	ccc uint8
}

// hfCCC is the canonical combining class of r in HF's tables.
func hfCCC(r rune) uint8 {
	if isHFStarter(r) {
		return 0
	}
	var b [utf8.UTFMax]byte
	return norm.NFD.Properties(b[:utf8.EncodeRune(b[:], r)]).CCC()
}

// composeHF is UAX #15 NFC without stream-safe segmentation, over HF's
// data: full canonical decomposition, canonical ordering of every run of
// non-starters, then canonical composition.
func composeHF(s string) string {
	// Decompose rune by rune (one code point never reaches norm's
	// 30-non-starter limit).
	var d []cccRune
	var buf []byte
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == hfNoDecomp {
			d = append(d, cccRune{r, 0})
			i += n
			continue
		}
		buf = norm.NFD.AppendString(buf[:0], s[i:i+n])
		for j := 0; j < len(buf); {
			c, m := utf8.DecodeRune(buf[j:])
			d = append(d, cccRune{c, hfCCC(c)})
			j += m
		}
		i += n
	}
	// Canonical ordering: a stable sort of each run of non-starters.
	for i := 0; i < len(d); {
		if d[i].ccc == 0 {
			i++
			continue
		}
		j := i
		for j < len(d) && d[j].ccc != 0 {
			j++
		}
		slices.SortStableFunc(d[i:j], func(a, b cccRune) int { return int(a.ccc) - int(b.ccc) })
		i = j
	}
	// Canonical composition: c joins the last starter L when no rune
	// between them is a starter or has a class ≥ c's (with the runs
	// sorted, the last rune kept decides) and <L, c> has a primary
	// composite.
	out := d[:0] // composition only shrinks d
	last := -1   // index in out of the last starter
	for _, c := range d {
		if last >= 0 {
			prev := out[len(out)-1].ccc
			adjacent := len(out)-1 == last
			if (adjacent || prev < c.ccc) && mayCombineBackward(c) {
				if p, ok := composePair(out[last].r, c.r); ok {
					out[last].r = p
					continue
				}
			}
		}
		if c.ccc == 0 {
			last = len(out)
		}
		out = append(out, c)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range out {
		b.WriteRune(c.r)
	}
	return b.String()
}

// mayCombineBackward reports whether c can be the second rune of a primary
// composite (a non-starter, or a starter such as a Hangul vowel or
// trailing consonant that norm does not put a boundary before).
func mayCombineBackward(c cccRune) bool {
	if c.r == hfNoCompose2 || isHFStarter(c.r) {
		return false // no composite in HF's data (11930 only forms 11938)
	}
	if c.ccc != 0 {
		return true
	}
	var b [utf8.UTFMax]byte
	return !norm.NFC.Properties(b[:utf8.EncodeRune(b[:], c.r)]).BoundaryBefore()
}

// composePair returns the primary composite of starter l and c, if any:
// norm's NFC of the pair is one rune exactly when it exists (l is either
// fully decomposed or a composite whose marks sort before c).
func composePair(l, c rune) (rune, bool) {
	var pair [2 * utf8.UTFMax]byte
	n := utf8.EncodeRune(pair[:], l)
	n += utf8.EncodeRune(pair[n:], c)
	var out [2 * utf8.UTFMax]byte
	res := norm.NFC.Append(out[:0], pair[:n]...)
	r, size := utf8.DecodeRune(res)
	if size != len(res) || r == utf8.RuneError {
		return 0, false
	}
	return r, true
}
