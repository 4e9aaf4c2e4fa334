package testmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// PreTokenizerPattern is the Qwen3.5 pre-tokenizer split regex.
const PreTokenizerPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Special tokens, in id order after the BPE vocabulary.
const (
	TokEndOfText = "<|endoftext|>"
	TokIMStart   = "<|im_start|>"
	TokIMEnd     = "<|im_end|>"
	TokThink     = "<think>"
	TokThinkEnd  = "</think>"
)

// SpecialTokens lists the added tokens in id order; the bool tells whether
// the token is "special" (Qwen marks the think tags non-special).
var SpecialTokens = []struct {
	Content string
	Special bool
}{
	{TokEndOfText, true}, {TokIMStart, true}, {TokIMEnd, true}, {TokThink, false}, {TokThinkEnd, false},
}

// ChatTemplateText is a Qwen im_start chat template (Jinja).
const ChatTemplateText = `{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}
{{- '<think>\n\n</think>\n\n' -}}
{%- endif -%}
{%- endif -%}
`

// ByteToUnicode returns the GPT-2 byte-level alphabet: printable Latin-1
// bytes map to themselves, the others to U+0100 upwards. The second result
// is the byte order of the base vocabulary (printable bytes first).
func ByteToUnicode() (m [256]rune, order [256]byte) {
	var mapped [256]bool
	n := 0
	add := func(lo, hi int) {
		for b := lo; b <= hi; b++ {
			m[b], mapped[b] = rune(b), true
			order[n] = byte(b)
			n++
		}
	}
	add('!', '~')
	add(0xA1, 0xAC)
	add(0xAE, 0xFF)
	extra := 0
	for b := 0; b < 256; b++ {
		if !mapped[b] {
			m[b] = rune(256 + extra)
			extra++
			order[n] = byte(b)
			n++
		}
	}
	return m, order
}

// Tokenizer is a trained byte-level BPE: Vocab[id] is the token string in
// the byte-level alphabet, Merges in rank order.
type Tokenizer struct {
	Vocab   []string
	Merges  [][2]string
	Special map[string]int // added tokens → id
}

// Size is the number of token ids (BPE vocabulary plus added tokens).
func (t *Tokenizer) Size() int { return len(t.Vocab) + len(t.Special) }

// ID returns the id of an added token.
func (t *Tokenizer) ID(tok string) int { return t.Special[tok] }

var preTokRE = regexp2.MustCompile(PreTokenizerPattern, regexp2.None)

// PreTokenize splits NFC-normalized text with the Qwen3.5 pattern.
func PreTokenize(text string) ([]string, error) {
	runes := []rune(norm.NFC.String(text))
	var out []string
	pos := 0
	m, err := preTokRE.FindRunesMatch(runes)
	for ; err == nil && m != nil; m, err = preTokRE.FindNextMatch(m) {
		if m.Index > pos {
			out = append(out, string(runes[pos:m.Index]))
		}
		if m.Length > 0 {
			out = append(out, string(runes[m.Index:m.Index+m.Length]))
		}
		pos = m.Index + m.Length
	}
	if err != nil {
		return nil, fmt.Errorf("pre-tokenize: %w", err)
	}
	if pos < len(runes) {
		out = append(out, string(runes[pos:]))
	}
	return out, nil
}

// TrainTokenizer learns up to maxMerges byte-level BPE merges over text,
// deterministically: the most frequent adjacent pair wins, ties go to the
// lexicographically smallest pair.
func TrainTokenizer(text string, maxMerges int) (*Tokenizer, error) {
	b2u, order := ByteToUnicode()
	tok := &Tokenizer{Special: map[string]int{}}
	known := map[string]bool{}
	for _, b := range order {
		s := string(b2u[b])
		tok.Vocab = append(tok.Vocab, s)
		known[s] = true
	}
	pieces, err := PreTokenize(text)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, p := range pieces {
		counts[p]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type word struct {
		syms  []string
		count int
	}
	words := make([]word, 0, len(keys))
	for _, k := range keys {
		var syms []string
		for _, c := range []byte(k) {
			syms = append(syms, string(b2u[c]))
		}
		words = append(words, word{syms, counts[k]})
	}
	for len(tok.Merges) < maxMerges {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		if len(pairs) == 0 {
			break
		}
		var best [2]string
		bestN := 0
		for p, n := range pairs {
			if n > bestN || (n == bestN && (p[0] < best[0] || (p[0] == best[0] && p[1] < best[1]))) {
				best, bestN = p, n
			}
		}
		merged := best[0] + best[1]
		tok.Merges = append(tok.Merges, best)
		if !known[merged] {
			known[merged] = true
			tok.Vocab = append(tok.Vocab, merged)
		}
		for wi := range words {
			s := words[wi].syms
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, merged)
					i++
					continue
				}
				out = append(out, s[i])
			}
			words[wi].syms = out
		}
	}
	for i, st := range SpecialTokens {
		tok.Special[st.Content] = len(tok.Vocab) + i
	}
	return tok, nil
}

// Encode is a reference BPE encoder (no special-token splitting): NFC,
// pre-tokenize, byte-level map, then apply merges by rank.
func (t *Tokenizer) Encode(text string) ([]int, error) {
	b2u, _ := ByteToUnicode()
	rank := make(map[[2]string]int, len(t.Merges))
	for i, m := range t.Merges {
		if _, dup := rank[m]; !dup {
			rank[m] = i
		}
	}
	ids := make(map[string]int, len(t.Vocab))
	for i, v := range t.Vocab {
		ids[v] = i
	}
	pieces, err := PreTokenize(text)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range pieces {
		var syms []string
		for _, c := range []byte(p) {
			syms = append(syms, string(b2u[c]))
		}
		for len(syms) > 1 {
			bi, br := -1, 0
			for i := 0; i+1 < len(syms); i++ {
				if r, ok := rank[[2]string{syms[i], syms[i+1]}]; ok && (bi < 0 || r < br) {
					bi, br = i, r
				}
			}
			if bi < 0 {
				break
			}
			syms = append(syms[:bi+1], syms[bi+2:]...)
			syms[bi] = t.Merges[br][0] + t.Merges[br][1]
		}
		for _, s := range syms {
			id, ok := ids[s]
			if !ok {
				return nil, fmt.Errorf("encode: symbol %q not in vocabulary", s)
			}
			out = append(out, id)
		}
	}
	return out, nil
}

// orderedObject marshals as a JSON object with keys in the given order.
type orderedObject []kv

type kv struct {
	Key   string
	Value any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshalNoEscape(e.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalNoEscape(e.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalNoEscape is json.Marshal without HTML escaping (HF files keep < >).
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// indentJSON renders v as 2-space indented JSON without HTML escaping.
func indentJSON(v any) ([]byte, error) {
	raw, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func byteLevel() orderedObject {
	return orderedObject{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}
}

// TokenizerJSON renders tokenizer.json in the structure of a Qwen3.5
// tokenizer: NFC normalizer, Split(regex, Isolated) + ByteLevel
// pre-tokenizer, ByteLevel post-processor and decoder, BPE model.
func (t *Tokenizer) TokenizerJSON() ([]byte, error) {
	var added []any
	for _, st := range SpecialTokens {
		added = append(added, orderedObject{
			{"id", t.Special[st.Content]}, {"content", st.Content}, {"single_word", false},
			{"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", st.Special},
		})
	}
	vocab := make(orderedObject, len(t.Vocab))
	for i, v := range t.Vocab {
		vocab[i] = kv{v, i}
	}
	merges := make([][2]string, len(t.Merges))
	copy(merges, t.Merges)
	doc := orderedObject{
		{"version", "1.0"},
		{"truncation", nil},
		{"padding", nil},
		{"added_tokens", added},
		{"normalizer", orderedObject{{"type", "NFC"}}},
		{"pre_tokenizer", orderedObject{
			{"type", "Sequence"},
			{"pretokenizers", []any{
				orderedObject{{"type", "Split"}, {"pattern", orderedObject{{"Regex", PreTokenizerPattern}}},
					{"behavior", "Isolated"}, {"invert", false}},
				byteLevel(),
			}},
		}},
		{"post_processor", byteLevel()},
		{"decoder", byteLevel()},
		{"model", orderedObject{
			{"type", "BPE"}, {"dropout", nil}, {"unk_token", nil}, {"continuing_subword_prefix", ""},
			{"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
			{"vocab", vocab}, {"merges", merges},
		}},
	}
	return indentJSON(doc)
}

// TokenizerConfigJSON renders tokenizer_config.json (Qwen2Tokenizer class,
// added_tokens_decoder, chat_template).
func (t *Tokenizer) TokenizerConfigJSON(maxLen int) ([]byte, error) {
	var dec orderedObject
	for _, st := range SpecialTokens {
		dec = append(dec, kv{strconv.Itoa(t.Special[st.Content]), orderedObject{
			{"content", st.Content}, {"lstrip", false}, {"normalized", false},
			{"rstrip", false}, {"single_word", false}, {"special", st.Special},
		}})
	}
	doc := orderedObject{
		{"add_bos_token", false},
		{"add_prefix_space", false},
		{"added_tokens_decoder", dec},
		{"additional_special_tokens", []string{TokIMStart, TokIMEnd}},
		{"bos_token", nil},
		{"chat_template", ChatTemplateText},
		{"clean_up_tokenization_spaces", false},
		{"eos_token", TokIMEnd},
		{"errors", "replace"},
		{"model_max_length", maxLen},
		{"pad_token", TokEndOfText},
		{"split_special_tokens", false},
		{"tokenizer_class", "Qwen2Tokenizer"},
		{"unk_token", nil},
	}
	return indentJSON(doc)
}
