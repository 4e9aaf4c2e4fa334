// Package tokenizer implements byte-level BPE tokenization compatible with
// Hugging Face tokenizer.json files of the GPT-2/Qwen family: added-token
// literals, NFC normalization (as Hugging Face computes it: nfc.go), regex Split and ByteLevel pre-tokenization,
// lowest-rank BPE merges, and ByteLevel decoding (including a streaming
// decoder that only emits complete UTF-8).
package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Tokenizer is a loaded byte-level BPE tokenizer. It is safe for concurrent
// use.
type Tokenizer struct {
	vocab        map[string]int32
	tokens       []string // vocab token (byte-level form) by id
	present      []bool   // tokens[id] is a vocab entry
	byteID       [256]int32
	merges       map[uint64]merge
	ignoreMerges bool

	nfc       bool
	steps     []preStep
	byteLevel bool

	added      []addedToken
	addedByID  map[int32]int // index into added
	addedByStr map[string]int
	rawMatch   *literalMatcher // added tokens with normalized=false
	normMatch  *literalMatcher // added tokens with normalized=true

	idBytes   [][]byte // decoded bytes by id (vocab and added)
	vocabSize int

	eos []int32

	cache *wordCache
}

type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

type preStep struct {
	re          *regexp2.Regexp
	fast        fastKind // hand-written matcher for re, if any
	removed     bool     // Split behavior Removed: drop the matches
	prefixSpace bool     // ByteLevel add_prefix_space
}

type addedToken struct {
	ID         int32
	Content    string
	match      string // Content, NFC-normalized for normalized tokens when the normalizer is NFC
	LStrip     bool
	RStrip     bool
	Normalized bool
	Special    bool
	SingleWord bool
}

func (t *Tokenizer) setAdded(added []addedToken) error {
	t.added = added
	t.addedByID = make(map[int32]int, len(added))
	t.addedByStr = make(map[string]int, len(added))
	var raw, normed []int
	for i := range added {
		added[i].match = added[i].Content
		if added[i].Normalized && t.nfc {
			added[i].match = nfc(added[i].Content)
		}
	}
	for i, a := range added {
		if j, dup := t.addedByID[a.ID]; dup {
			return fmt.Errorf("added token id %d is used by both %s and %s", a.ID, termsafe.Quote(added[j].Content), termsafe.Quote(a.Content))
		}
		t.addedByID[a.ID] = i
		for _, k := range []string{a.Content, a.match} {
			if _, dup := t.addedByStr[k]; !dup {
				t.addedByStr[k] = i
			}
		}
		if a.Normalized {
			normed = append(normed, i)
		} else {
			raw = append(raw, i)
		}
	}
	t.rawMatch = newLiteralMatcher(added, raw)
	t.normMatch = newLiteralMatcher(added, normed)

	n := len(t.tokens)
	for _, a := range added {
		if int(a.ID)+1 > n {
			n = int(a.ID) + 1
		}
	}
	t.vocabSize = n
	t.idBytes = make([][]byte, n)
	for id, s := range t.tokens {
		if t.present[id] {
			t.idBytes[id] = byteLevelDecode(s)
		}
	}
	for _, a := range added {
		// HF runs added tokens through the ByteLevel decoder too: content
		// made only of byte-level alphabet runes (e.g. "é" → byte 0xE9) is
		// mapped, anything else passes through as UTF-8.
		// For normalized tokens HF keeps the normalized content as the
		// token's text (id_to_token), so that is what gets decoded.
		t.idBytes[a.ID] = byteLevelDecode(a.match)
	}
	return nil
}

// VocabSize is one more than the largest token id (vocab or added token),
// i.e. the number of logits rows a model over this tokenizer needs at least.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token given by its text: an added token's
// content, or a vocab entry in its byte-level form (e.g. "Ġthe").
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	if i, ok := t.addedByStr[s]; ok {
		return t.added[i].ID, true
	}
	id, ok := t.vocab[s]
	return id, ok
}

// Token returns the text of a token id: an added token's content (NFC'd for
// normalized added tokens when the normalizer is NFC, as HF's id_to_token)
// or the vocab entry's byte-level form. ok is false for an unknown id.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if i, ok := t.addedByID[id]; ok {
		return t.added[i].match, true
	}
	if id >= 0 && int(id) < len(t.tokens) && t.present[id] {
		return t.tokens[id], true
	}
	return "", false
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int32) bool {
	i, ok := t.addedByID[id]
	return ok && t.added[i].Special
}

// EOSIDs returns the end-of-sequence ids: those of generation_config.json if
// SetGenerationConfig was called, else tokenizer_config.json's eos_token, else
// none. The slice is a copy.
func (t *Tokenizer) EOSIDs() []int32 { return append([]int32(nil), t.eos...) }

// IsEOS reports whether id is one of EOSIDs.
func (t *Tokenizer) IsEOS(id int32) bool {
	for _, e := range t.eos {
		if e == id {
			return true
		}
	}
	return false
}

// Encode tokenizes text. Added tokens are matched as literals first
// (leftmost-longest, as Hugging Face does); with allowSpecial false, added
// tokens marked special are not recognized and are tokenized as ordinary text
// (HF's encode_special_tokens=True), while non-special added tokens such as
// "<think>" still are. No post-processor tokens (BOS etc.) are added, i.e.
// the result matches HF encode(text, add_special_tokens=False).
// Invalid UTF-8 in text is replaced by U+FFFD first.
func (t *Tokenizer) Encode(text string, allowSpecial bool) []int32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	ids := make([]int32, 0, len(text)/3+1)
	t.rawMatch.split(text, allowSpecial, func(seg string, id int32) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		if t.nfc {
			seg = nfc(seg)
		}
		t.normMatch.split(seg, allowSpecial, func(seg string, id int32) {
			if id >= 0 {
				ids = append(ids, id)
				return
			}
			ids = t.encodeSegment(ids, seg)
		})
	})
	return ids
}

// encodeSegment runs the pre-tokenizer steps and BPE over text that contains
// no added tokens.
func (t *Tokenizer) encodeSegment(ids []int32, seg string) []int32 {
	pieces := []string{seg}
	for _, st := range t.steps {
		next := pieces[:0:0]
		for _, p := range pieces {
			if st.prefixSpace {
				if !strings.HasPrefix(p, " ") {
					p = " " + p
				}
				next = append(next, p)
				continue
			}
			if st.fast != fastNone && !st.removed {
				next = splitFast(next, p, st.fast)
			} else {
				next = splitRegex(next, p, st.re, st.removed)
			}
		}
		pieces = next
	}
	for _, p := range pieces {
		ids = t.bpeWord(ids, p)
	}
	return ids
}

// splitRegex appends the pieces of s split by re: each match and each
// non-empty gap between matches (Isolated), or only the gaps (Removed).
func splitRegex(dst []string, s string, re *regexp2.Regexp, removed bool) []string {
	if s == "" {
		return dst
	}
	runes := []rune(s)
	// byte offset of each rune index
	offs := make([]int, len(runes)+1)
	o := 0
	for i, r := range runes {
		offs[i] = o
		o += utf8.RuneLen(r)
	}
	offs[len(runes)] = o
	prev := 0
	m, err := re.FindRunesMatch(runes)
	for err == nil && m != nil {
		start, end := m.Index, m.Index+m.Length
		if start > prev {
			dst = append(dst, s[offs[prev]:offs[start]])
		}
		if !removed && end > start {
			dst = append(dst, s[offs[start]:offs[end]])
		}
		prev = end
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		// Only a match timeout can fail, and none is set; keep the rest
		// as one piece rather than losing text.
		dst = append(dst, s[offs[prev]:])
		return dst
	}
	if prev < len(runes) {
		dst = append(dst, s[offs[prev]:])
	}
	return dst
}

// Decode turns ids back into text: each token's text is mapped back to bytes
// by the ByteLevel decoder (an added token whose content has a rune outside
// the byte-level alphabet contributes its UTF-8 as is); the bytes are converted to UTF-8 replacing
// invalid sequences with U+FFFD as Hugging Face does. Unknown ids are
// skipped; with skipSpecial, special added tokens are skipped.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	var buf []byte
	for _, id := range ids {
		buf = t.appendTokenBytes(buf, id, skipSpecial)
	}
	return lossyString(buf)
}

// TokenBytes returns the raw bytes a token id decodes to (nil for an unknown
// id). The result must not be modified.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.idBytes) {
		return nil
	}
	return t.idBytes[id]
}

func (t *Tokenizer) appendTokenBytes(buf []byte, id int32, skipSpecial bool) []byte {
	if id < 0 || int(id) >= len(t.idBytes) {
		return buf
	}
	if skipSpecial && t.IsSpecial(id) {
		return buf
	}
	return append(buf, t.idBytes[id]...)
}

// AddedTokens returns the added tokens' contents sorted by id.
func (t *Tokenizer) AddedTokens() []string {
	a := append([]addedToken(nil), t.added...)
	sort.Slice(a, func(i, j int) bool { return a[i].ID < a[j].ID })
	out := make([]string, len(a))
	for i := range a {
		out[i] = a[i].Content
	}
	return out
}
