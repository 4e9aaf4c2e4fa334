package termsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxExcerpt is the most characters of input text that Quote shows: an
// error about a 5 MB token or a model file read as text quotes a short
// excerpt, not the whole input.
const MaxExcerpt = 64

// Quote is s for an error message: quoted in Go syntax (control
// characters, invalid UTF-8 and other non-printable runes escaped, so the
// message stays one inert line), and when s is longer than MaxExcerpt
// characters, its first MaxExcerpt characters followed by "…" and the
// full length: "abc…" (5242880 bytes). Callers give the position (file,
// line, token or byte offset) themselves.
func Quote(s string) string { return quoteCut(s, MaxExcerpt) }

// quoteCut is s quoted in Go syntax, cut after n characters as Quote
// describes.
func quoteCut(s string, n int) string {
	cut, ok := cutRunes(s, n)
	if ok {
		return strconv.Quote(s)
	}
	return strconv.Quote(cut) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// MaxPath is the most characters of a file path that Path shows whole:
// more than any real path needs, few enough to keep a status line short.
const MaxPath = 256

// Path is a user-given file path for a status or error line ("wrote
// PATH", "loading PATH"): as it is when it is printable text of at most
// MaxPath characters, so that ordinary paths, spaces and non-ASCII letters
// included, read as typed; otherwise quoted in Go syntax like Quote (ESC,
// BEL, CR, newline, C1, other non-printable runes and invalid UTF-8
// escaped, so that the path can neither drive the terminal nor split the
// line), and cut after MaxPath characters with the full length. The empty
// path is shown as "".
func Path(p string) string {
	if p != "" && printable(p) && utf8.RuneCountInString(p) <= MaxPath {
		return p
	}
	return quoteCut(p, MaxPath)
}

// QuoteBytes is Quote of b.
func QuoteBytes(b []byte) string {
	if len(b) > 4*MaxExcerpt+4 {
		cut, _ := cutRunes(string(b[:4*MaxExcerpt+4]), MaxExcerpt)
		return strconv.Quote(cut) + "… (" + strconv.Itoa(len(b)) + " bytes)"
	}
	return Quote(string(b))
}

// cutRunes returns the first n characters of s (an invalid byte counts as
// one) and whether that is all of s.
func cutRunes(s string, n int) (string, bool) {
	i := 0
	for k := 0; k < n; k++ {
		if i >= len(s) {
			return s, true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i >= len(s) {
		return s, true
	}
	return s[:i], false
}

// Name is s (a file name, model name, run id or label) for a message or a
// table cell: as it is when it is printable text, quoted in Go syntax when
// it holds a control character (ESC, CR, newline, C1), another
// non-printable rune or invalid UTF-8, so that it cannot drive a terminal
// or break the line. Long names are not cut.
func Name(s string) string {
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Escape returns s with every control character shown as a visible escape
// like Writer does (ESC as \x1b, CR as \r, C1 as \u009b), newlines and
// tabs included (\n, \t), so that s prints as one inert line. Printable
// text, including non-ASCII, is unchanged.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case r >= 0x80 && r <= 0x9f:
			b.WriteString(`\u00`)
			b.WriteString(hex2(byte(r)))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f }

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// HasControl reports whether s holds a control character (C0, DEL or C1)
// or invalid UTF-8: text that should not be stored as a name that tools
// print.
func HasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.IndexFunc(s, isControl) >= 0
}
