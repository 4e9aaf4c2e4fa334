package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Hand-written matchers for the three pre-tokenizer regexes that matter in
// practice. They are equivalent to the regexp2 (backtracking) semantics of
// the patterns below, which tests check on the fixture corpus and on random
// strings, and are many times faster. Any other pattern uses regexp2.

const (
	// Qwen2 / Qwen3 Split regex.
	qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen3.5 Split regex: marks join letters.
	qwen35SplitPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

type fastKind int

const (
	fastNone fastKind = iota
	fastQwen2
	fastQwen35
	fastGPT2
)

func fastKindOf(pattern string) fastKind {
	switch pattern {
	case qwen2Pattern:
		return fastQwen2
	case qwen35SplitPattern:
		return fastQwen35
	case gpt2Pattern:
		return fastGPT2
	}
	return fastNone
}

// runeAt decodes the rune at byte offset i (utf8.RuneError, 0 at the end).
func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return utf8.RuneError, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction returns the length of 's|'t|'re|'ve|'m|'ll|'d at i (0 if
// none), case-insensitive when fold is set.
func contraction(s string, i int, fold bool) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(j int) (rune, int) {
		r, n := runeAt(s, j)
		if fold && n > 0 {
			r = unicode.ToLower(r)
		}
		return r, n
	}
	r1, n1 := lower(i + 1)
	if n1 == 0 {
		return 0
	}
	switch r1 {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v', 'l':
		r2, n2 := lower(i + 1 + n1)
		if n2 > 0 && ((r1 == 'r' && r2 == 'e') || (r1 == 'v' && r2 == 'e') || (r1 == 'l' && r2 == 'l')) {
			return 1 + n1 + n2
		}
	}
	return 0
}

// Character classes the patterns distinguish, as bit flags.
const (
	clL  uint8 = 1 << iota // \p{L}
	clM                    // \p{M}
	clN                    // \p{N}
	clS                    // \s (unicode.IsSpace, as regexp2)
	clNL                   // \r or \n
)

var (
	asciiClass [utf8.RuneSelf]uint8
	bmpOnce    sync.Once
	bmpClass   *[0x10000]uint8 // filled on first Load
)

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = classOf(r)
	}
}

// initBMPClass precomputes classOf for the Basic Multilingual Plane (64 KiB,
// a few milliseconds once per process).
func initBMPClass() {
	bmpOnce.Do(func() {
		t := new([0x10000]uint8)
		for r := rune(0); r < 0x10000; r++ {
			t[r] = classOf(r)
		}
		bmpClass = t
	})
}

func classOf(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= clL
	}
	if unicode.IsMark(r) {
		c |= clM
	}
	if unicode.IsNumber(r) {
		c |= clN
	}
	if unicode.IsSpace(r) {
		c |= clS
	}
	if r == '\r' || r == '\n' {
		c |= clNL
	}
	return c
}

// classAt returns the class and size of the rune at i (size 0 at the end).
func classAt(s string, i int) (uint8, int) {
	if i >= len(s) {
		return 0, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 && bmpClass != nil {
		return bmpClass[r], n
	}
	return classOf(r), n
}

// runAny returns the end of the run of runes whose class has a bit of want.
func runAny(s string, i int, want uint8) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// runNone returns the end of the run of runes whose class has no bit of
// avoid (and that are not at the end).
func runNone(s string, i int, avoid uint8) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c&avoid != 0 {
			break
		}
		i += n
	}
	return i
}

// matchQwen returns the end of the regex match starting at i (i < len(s))
// for the Qwen2 pattern, or the Qwen3.5 one when marks is set. Every
// position matches some alternative.
func matchQwen(s string, i int, marks bool) int {
	if n := contraction(s, i, true); n > 0 {
		return i + n
	}
	let := clL
	if marks {
		let |= clM
	}
	c0, n0 := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?[\p{L}(\p{M})]+
	if c0&(clNL|clL|clN) == 0 {
		if c1, n1 := classAt(s, i+n0); n1 > 0 && c1&let != 0 {
			return runAny(s, i+n0, let)
		}
	}
	if c0&let != 0 {
		return runAny(s, i, let)
	}
	// \p{N}
	if c0&clN != 0 {
		return i + n0
	}
	// ' ?[^\s\p{L}(\p{M})\p{N}]+[\r\n]*'
	punctAvoid := clS | let | clN
	j := i
	if s[i] == ' ' {
		j += n0
	}
	if c, n := classAt(s, j); n > 0 && c&punctAvoid == 0 {
		j = runNone(s, j, punctAvoid)
		return runAny(s, j, clNL)
	}
	return matchSpace(s, i, true)
}

// matchSpace handles the whitespace alternatives at i: (with newlines)
// \s*[\r\n]+, then \s+(?!\S), then \s+.
func matchSpace(s string, i int, newlines bool) int {
	end := runAny(s, i, clS)
	if end == i {
		_, n := classAt(s, i)
		return i + n // unreachable: every rune is L, N, space or other
	}
	if newlines {
		// up to and including the last newline of the run
		for k := end; k > i; {
			_, n := utf8.DecodeLastRuneInString(s[i:k])
			if s[k-1] == '\n' || s[k-1] == '\r' {
				return k
			}
			k -= n
		}
	}
	// the whole run at the end of the text, else all but the last
	// whitespace rune if that leaves at least one
	if end == len(s) {
		return end
	}
	_, lastN := utf8.DecodeLastRuneInString(s[i:end])
	if end-lastN > i {
		return end - lastN
	}
	return end
}

// matchGPT2 returns the end of the match at i for the GPT-2 ByteLevel regex
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func matchGPT2(s string, i int) int {
	if n := contraction(s, i, false); n > 0 {
		return i + n
	}
	j := i
	if s[i] == ' ' {
		j++
	}
	if c, n := classAt(s, j); n > 0 {
		switch {
		case c&clL != 0:
			return runAny(s, j, clL)
		case c&clN != 0:
			return runAny(s, j, clN)
		case c&clS == 0:
			return runNone(s, j, clS|clL|clN)
		}
	}
	return matchSpace(s, i, false)
}

// splitFast appends the pieces of s for a fast pattern kind (every rune is
// covered by some match, so there are no gaps).
func splitFast(dst []string, s string, kind fastKind) []string {
	for i := 0; i < len(s); {
		var end int
		switch kind {
		case fastQwen2:
			end = matchQwen(s, i, false)
		case fastQwen35:
			end = matchQwen(s, i, true)
		default:
			end = matchGPT2(s, i)
		}
		dst = append(dst, s[i:end])
		i = end
	}
	return dst
}
