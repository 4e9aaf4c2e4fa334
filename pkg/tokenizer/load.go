package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dlclark/regexp2"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// gpt2Pattern is the regex the ByteLevel pre-tokenizer applies when its
// use_regex flag is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

type fileJSON struct {
	AddedTokens  []addedTokenJSON `json:"added_tokens"`
	Normalizer   json.RawMessage  `json:"normalizer"`
	PreTokenizer json.RawMessage  `json:"pre_tokenizer"`
	Decoder      json.RawMessage  `json:"decoder"`
	Model        *modelJSON       `json:"model"`
}

type addedTokenJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int64  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

type typedJSON struct {
	Type string `json:"type"`
}

type configFileJSON struct {
	AddedTokensDecoder map[string]addedTokenJSON `json:"added_tokens_decoder"`
	EOSToken           json.RawMessage           `json:"eos_token"`
}

// Load builds a Tokenizer from the bytes of a Hugging Face tokenizer.json and,
// optionally (nil or empty to skip), the model's tokenizer_config.json, whose
// added_tokens_decoder entries are merged into the added tokens and whose
// eos_token sets the default EOS id.
//
// Supported: model BPE (byte-level, no dropout, no byte fallback, no subword
// prefix/suffix), normalizer null/NFC/Sequence of NFC, pre-tokenizer
// Split(regex or string, Isolated or Removed, not inverted) and ByteLevel
// (last), alone or in a Sequence, decoder ByteLevel; added tokens with any
// of the special, lstrip, rstrip, normalized and single_word flags (as HF
// applies them). Anything else is an error naming the unsupported element.
// The post_processor is ignored: Encode never adds BOS/EOS.
func Load(tokenizerJSON []byte, tokenizerConfigJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, &FileError{File: "tokenizer.json", Err: err}
	}
	if f.Model == nil {
		return nil, &FileError{File: "tokenizer.json", Err: errors.New("missing model")}
	}
	initBMPClass()
	t := &Tokenizer{cache: newWordCache(wordCacheEntries)}
	if err := t.loadModel(f.Model); err != nil {
		return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("model: %w", err)}
	}
	if err := t.loadNormalizer(f.Normalizer); err != nil {
		return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("normalizer: %w", err)}
	}
	if err := t.loadPreTokenizer(f.PreTokenizer); err != nil {
		return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("pre_tokenizer: %w", err)}
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("decoder: %w", err)}
	}

	added := make([]addedToken, 0, len(f.AddedTokens))
	for i, a := range f.AddedTokens {
		if a.ID == nil {
			return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("added_tokens[%d] (%s): missing id", i, termsafe.Quote(a.Content))}
		}
		at, err := a.toAdded(*a.ID)
		if err == nil {
			err = checkIDSpan(int64(at.ID), len(t.vocab)+len(f.AddedTokens))
		}
		if err != nil {
			return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("added_tokens[%d]: %w", i, err)}
		}
		added = append(added, at)
	}

	var cfg configFileJSON
	if len(tokenizerConfigJSON) > 0 {
		if err := json.Unmarshal(tokenizerConfigJSON, &cfg); err != nil {
			return nil, &FileError{File: "tokenizer_config.json", Err: err}
		}
		keys := make([]string, 0, len(cfg.AddedTokensDecoder))
		for k := range cfg.AddedTokensDecoder {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		byID := make(map[int32]int, len(added))
		for i, a := range added {
			byID[a.ID] = i
		}
		for _, k := range keys {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return nil, &FileError{File: "tokenizer_config.json", Err: fmt.Errorf("added_tokens_decoder key %s is not an id", termsafe.Quote(k))}
			}
			at, err := cfg.AddedTokensDecoder[k].toAdded(id)
			if err == nil {
				err = checkIDSpan(int64(at.ID), len(t.vocab)+len(added)+len(keys))
			}
			if err != nil {
				return nil, &FileError{File: "tokenizer_config.json", Err: fmt.Errorf("added_tokens_decoder[%s]: %w", k, err)}
			}
			if i, ok := byID[at.ID]; ok {
				if added[i].Content != at.Content {
					return nil, &FileError{File: "tokenizer_config.json", Err: fmt.Errorf("added_tokens_decoder[%s] is %s but tokenizer.json has %s for that id", k, termsafe.Quote(at.Content), termsafe.Quote(added[i].Content))}
				}
				continue
			}
			byID[at.ID] = len(added)
			added = append(added, at)
		}
	}
	if err := t.setAdded(added); err != nil {
		return nil, &FileError{File: "tokenizer.json", Err: fmt.Errorf("added_tokens: %w", err)} // a duplicate id: config entries never are
	}
	if len(cfg.EOSToken) > 0 && string(cfg.EOSToken) != "null" {
		name, err := tokenContent(cfg.EOSToken)
		if err != nil {
			return nil, &FileError{File: "tokenizer_config.json", Err: fmt.Errorf("eos_token: %w", err)}
		}
		id, ok := t.TokenID(name)
		if !ok {
			return nil, &FileError{File: "tokenizer_config.json", Err: fmt.Errorf("eos_token %s is not in the vocabulary", termsafe.Quote(name))}
		}
		t.eos = []int32{id}
	}
	return t, nil
}

// tokenContent reads a token given either as a string or as an object with a
// "content" field (both forms occur in tokenizer_config.json files).
func tokenContent(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string or {\"content\": ...}, got %s", oneLineJSON(raw))
	}
	return *obj.Content, nil
}

func (a addedTokenJSON) toAdded(id int64) (addedToken, error) {
	if id < 0 || id > maxID {
		return addedToken{}, fmt.Errorf("token %s: id %d out of range", termsafe.Quote(a.Content), id)
	}
	if a.Content == "" {
		return addedToken{}, fmt.Errorf("token id %d: empty content", id)
	}
	return addedToken{
		ID: int32(id), Content: a.Content, LStrip: a.LStrip, RStrip: a.RStrip,
		Normalized: a.Normalized, Special: a.Special, SingleWord: a.SingleWord,
	}, nil
}

const maxID = 1<<31 - 2

// checkIDSpan bounds the ids of a tokenizer of n tokens (vocab entries plus
// added tokens). Ids may leave some unused, but the tables indexed by id are
// sized by the largest one, so without a bound a few bytes of JSON naming id
// 2³¹−2 would allocate tens of GiB.
func checkIDSpan(id int64, n int) error {
	if limit := 4*int64(n) + 1<<16; id >= limit {
		return fmt.Errorf("id %d is too large for a tokenizer of %d tokens (ids must be below %d)", id, n, limit)
	}
	return nil
}

func (t *Tokenizer) loadModel(m *modelJSON) error {
	if m.Type != "BPE" {
		return fmt.Errorf("type %s is not supported (want BPE)", termsafe.Quote(m.Type))
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("dropout %v is not supported", *m.Dropout)
	}
	if m.ByteFallback {
		return fmt.Errorf("byte_fallback=true is not supported")
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("continuing_subword_prefix %s is not supported", termsafe.Quote(*m.ContinuingSubwordPrefix))
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("end_of_word_suffix %s is not supported", termsafe.Quote(*m.EndOfWordSuffix))
	}
	if len(m.Vocab) == 0 {
		return fmt.Errorf("empty vocab")
	}
	t.ignoreMerges = m.IgnoreMerges
	t.vocab = make(map[string]int32, len(m.Vocab))
	maxVocab := int64(-1)
	for s, id := range m.Vocab {
		if id < 0 || id > maxID {
			return vocabError(m.Vocab)
		}
		t.vocab[s] = int32(id)
		if id > maxVocab {
			maxVocab = id
		}
	}
	if err := checkIDSpan(maxVocab, len(m.Vocab)); err != nil {
		return fmt.Errorf("vocab: %w", err)
	}
	t.tokens = make([]string, maxVocab+1)
	t.present = make([]bool, maxVocab+1)
	for s, id := range t.vocab {
		if t.present[id] {
			return vocabError(m.Vocab)
		}
		t.tokens[id] = s
		t.present[id] = true
	}
	for b := 0; b < 256; b++ {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			id = -1
		}
		t.byteID[b] = id
	}

	t.merges = make(map[uint64]merge, len(m.Merges))
	for rank, raw := range m.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			return fmt.Errorf("merges[%d]: %w", rank, err)
		}
		ida, ok := t.vocab[a]
		if !ok {
			return fmt.Errorf("merges[%d]: %s is not in the vocab", rank, termsafe.Quote(a))
		}
		idb, ok := t.vocab[b]
		if !ok {
			return fmt.Errorf("merges[%d]: %s is not in the vocab", rank, termsafe.Quote(b))
		}
		idm, ok := t.vocab[a+b]
		if !ok {
			return fmt.Errorf("merges[%d]: merged token %s is not in the vocab", rank, termsafe.Quote(a+b))
		}
		key := pairKey(ida, idb)
		if _, dup := t.merges[key]; dup {
			continue // HF keeps the first (lowest) rank
		}
		t.merges[key] = merge{rank: int32(rank), id: idm}
	}
	return nil
}

// vocabError reports the first bad vocab entry in the order of the token
// strings, so that the message does not depend on map iteration order: an
// id out of range, else an id used twice.
func vocabError(vocab map[string]int64) error {
	keys := make([]string, 0, len(vocab))
	for s := range vocab {
		keys = append(keys, s)
	}
	sort.Strings(keys)
	for _, s := range keys {
		if id := vocab[s]; id < 0 || id > maxID {
			return fmt.Errorf("vocab entry %s: id %d out of range", termsafe.Quote(s), id)
		}
	}
	first := make(map[int64]string, len(keys))
	for _, s := range keys {
		id := vocab[s]
		if prev, dup := first[id]; dup {
			return fmt.Errorf("vocab: id %d is used by both %s and %s", id, termsafe.Quote(prev), termsafe.Quote(s))
		}
		first[id] = s
	}
	return fmt.Errorf("vocab: inconsistent") // not reached: called only on a bad entry
}

// oneLineJSON renders a JSON value from the input for a message: compacted,
// so that the message stays on one line (strings keep their escapes).
func oneLineJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return strconv.Quote(string(raw))
	}
	return b.String()
}

func parseMerge(raw json.RawMessage) (string, string, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "", err
		}
		parts := strings.Split(s, " ")
		if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			return "", "", fmt.Errorf("merge %s is not two space-separated tokens", termsafe.Quote(s))
		}
		return parts[0], parts[1], nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil {
		return "", "", fmt.Errorf("merge %s is neither \"a b\" nor [a, b]", oneLineJSON(raw))
	}
	if len(pair) != 2 || pair[0] == "" || pair[1] == "" {
		return "", "", fmt.Errorf("merge %s does not have two tokens", oneLineJSON(raw))
	}
	return pair[0], pair[1], nil
}

func (t *Tokenizer) loadNormalizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	switch n.Type {
	case "NFC":
		t.nfc = true
		return nil
	case "Sequence":
		for i, sub := range n.Normalizers {
			if err := t.loadNormalizer(sub); err != nil {
				return fmt.Errorf("normalizers[%d]: %w", i, err)
			}
		}
		return nil
	}
	return fmt.Errorf("type %s is not supported (want NFC or a Sequence of NFC)", termsafe.Quote(n.Type))
}

type splitJSON struct {
	Type    string `json:"type"`
	Pattern struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	PreTokenizers  []json.RawMessage `json:"pretokenizers"`
}

func (t *Tokenizer) loadPreTokenizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("missing (a ByteLevel pre-tokenizer is required)")
	}
	if err := t.addPreTokenizer(raw); err != nil {
		return err
	}
	if !t.byteLevel {
		return fmt.Errorf("no ByteLevel step (only byte-level BPE is supported)")
	}
	return nil
}

func (t *Tokenizer) addPreTokenizer(raw json.RawMessage) error {
	var p splitJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	if t.byteLevel {
		return fmt.Errorf("%s after ByteLevel is not supported (ByteLevel must be the last step)", p.Type)
	}
	switch p.Type {
	case "Sequence":
		for i, sub := range p.PreTokenizers {
			if err := t.addPreTokenizer(sub); err != nil {
				return fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
		}
		return nil
	case "Split":
		if p.Invert {
			return fmt.Errorf("Split with invert=true is not supported")
		}
		var pattern string
		switch {
		case p.Pattern.Regex != nil:
			pattern = *p.Pattern.Regex
		case p.Pattern.String != nil:
			pattern = regexp2.Escape(*p.Pattern.String)
		default:
			return fmt.Errorf("Split without a String or Regex pattern")
		}
		var removed bool
		switch p.Behavior {
		case "Isolated":
		case "Removed":
			removed = true
		default:
			return fmt.Errorf("Split behavior %s is not supported (want Isolated or Removed)", termsafe.Quote(p.Behavior))
		}
		re, err := regexp2.Compile(pattern, regexp2.None|regexp2.Unicode)
		if err != nil {
			// regexp2 ends its message with the raw pattern, shown quoted here
			return fmt.Errorf("Split pattern %s: %s", termsafe.Quote(pattern), strings.TrimSuffix(err.Error(), " in `"+pattern+"`"))
		}
		t.steps = append(t.steps, preStep{re: re, removed: removed, fast: fastKindOf(pattern)})
		return nil
	case "ByteLevel":
		useRegex := true // HF default
		if p.UseRegex != nil {
			useRegex = *p.UseRegex
		}
		if p.AddPrefixSpace {
			t.steps = append(t.steps, preStep{prefixSpace: true})
		}
		if useRegex {
			t.steps = append(t.steps, preStep{re: regexp2.MustCompile(gpt2Pattern, regexp2.None|regexp2.Unicode), fast: fastGPT2})
		}
		t.byteLevel = true
		return nil
	}
	return fmt.Errorf("type %s is not supported (want Split, ByteLevel or Sequence)", termsafe.Quote(p.Type))
}

func checkDecoder(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("missing (a ByteLevel decoder is required)")
	}
	var d typedJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if d.Type != "ByteLevel" {
		return fmt.Errorf("type %s is not supported (want ByteLevel)", termsafe.Quote(d.Type))
	}
	return nil
}

// FileError is a Load error in one of its two inputs, named by the usual
// file name (tokenizer.json, tokenizer_config.json): Load has only the
// bytes, so a caller that read them from a path can name the path instead
// (errors.As).
type FileError struct {
	File string // "tokenizer.json" or "tokenizer_config.json"
	Err  error
}

func (e *FileError) Error() string { return e.File + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }
