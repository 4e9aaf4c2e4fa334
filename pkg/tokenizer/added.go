package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// literalMatcher finds added-token literals in text, leftmost-longest like
// the Hugging Face AddedVocabulary (an Aho-Corasick automaton with
// LeftmostLongest matching). Candidates are bucketed by first byte and
// tried longest first.
type literalMatcher struct {
	tokens  []addedToken
	buckets [256][]int // indices into tokens, longest content first
	any     bool
}

func newLiteralMatcher(all []addedToken, which []int) *literalMatcher {
	m := &literalMatcher{tokens: all}
	for _, i := range which {
		b := all[i].match[0]
		m.buckets[b] = append(m.buckets[b], i)
		m.any = true
	}
	for b := range m.buckets {
		bk := m.buckets[b]
		sort.SliceStable(bk, func(x, y int) bool { return len(all[bk[x]].match) > len(all[bk[y]].match) })
	}
	return m
}

// split calls emit for each piece of text in order: matched added tokens
// with their id, and the text between them with id -1. With allowSpecial
// false, special tokens are not matched at all (they stay part of the
// surrounding text), as HF does with encode_special_tokens.
func (m *literalMatcher) split(text string, allowSpecial bool, emit func(seg string, id int32)) {
	if !m.any {
		if text != "" {
			emit(text, -1)
		}
		return
	}
	last := 0 // end of the previous match
	for i := 0; i < len(text); {
		bk := m.buckets[text[i]]
		hit := -1
		for _, ti := range bk {
			if !allowSpecial && m.tokens[ti].Special {
				continue
			}
			c := m.tokens[ti].match
			if len(text)-i >= len(c) && text[i:i+len(c)] == c {
				hit = ti
				break
			}
		}
		if hit < 0 {
			i++
			continue
		}
		tok := m.tokens[hit]
		start, end := i, i+len(tok.match)
		if tok.SingleWord && (endsWithWord(text[:start]) || startsWithWord(text[end:])) {
			// Like HF's Aho-Corasick iteration, a rejected match is
			// skipped as a whole: scanning resumes after it.
			i = end
			continue
		}
		if tok.LStrip {
			for start > last {
				r, n := utf8.DecodeLastRuneInString(text[last:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= n
			}
		}
		if tok.RStrip {
			for end < len(text) {
				r, n := utf8.DecodeRuneInString(text[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += n
			}
		}
		if start > last {
			emit(text[last:start], -1)
		}
		emit(text[start:end], tok.ID)
		last = end
		i = end
	}
	if last < len(text) {
		emit(text[last:], -1)
	}
}

// isWordRune is the Unicode \w of Rust's regex crate, which HF uses for
// single_word: Alphabetic, marks, decimal digits, connector punctuation and
// the join controls.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}
