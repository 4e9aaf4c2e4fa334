package tokenizer

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz targets for the readers of a model's tokenizer files: Load
// (tokenizer.json + tokenizer_config.json) and ParseGenerationEOS /
// SetGenerationConfig (generation_config.json). Run with
//
//	go test ./pkg/tokenizer -run '^$' -fuzz FuzzLoad -fuzztime 10m -parallel 1
//	go test ./pkg/tokenizer -run '^$' -fuzz FuzzGenerationConfig -fuzztime 10m -parallel 1
//
// (make fuzz); the seeds and the kept findings under testdata/fuzz/ run in
// every go test.

// tinyTokenizerJSON is a complete byte-level BPE tokenizer.json: the 256
// byte symbols (id = byte), three merges, the Qwen2 Split and ByteLevel, and
// (withAdded) a special and a non-special added token.
func tinyTokenizerJSON(withAdded bool) []byte {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["he"], vocab["Ġt"], vocab["Ġthe"] = 256, 257, 258
	added := []map[string]any{}
	if withAdded {
		added = append(added,
			map[string]any{"id": 259, "content": "<|im_end|>", "special": true, "normalized": false},
			map[string]any{"id": 260, "content": "<think>", "special": false, "normalized": false, "rstrip": true})
	}
	doc := map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwen2Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "byte_fallback": false,
			"vocab": vocab, "merges": []any{"h e", []string{"Ġ", "t"}, "Ġt he"}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

// checkLoadError asserts that a Load error is one line naming the file it
// is about.
func checkLoadError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") ||
		!(strings.HasPrefix(msg, "tokenizer.json: ") || strings.HasPrefix(msg, "tokenizer_config.json: ")) {
		t.Fatalf("error is not one line naming tokenizer.json or tokenizer_config.json: %q", msg)
	}
}

// lossless reports whether Decode(Encode(s)) must give s back for valid
// UTF-8 s: no added tokens (their text may be byte-level runes that decode
// to other bytes, or lstrip/rstrip whitespace), no NFC, no step that drops
// or adds text (Split Removed, add_prefix_space), and every byte in the
// vocabulary.
func (t *Tokenizer) lossless() bool {
	if len(t.added) > 0 || t.nfc {
		return false
	}
	for _, st := range t.steps {
		if st.removed || st.prefixSpace {
			return false
		}
	}
	for _, id := range t.byteID {
		if id < 0 {
			return false
		}
	}
	return true
}

// boundRegexps gives the loaded Split patterns a match timeout. A pattern
// from the fuzzer can backtrack exponentially (a regexp2 property, as with
// the Oniguruma engine Hugging Face uses); the harness bounds that so a run
// keeps going, and splitRegex keeps the text after a timeout as one piece.
func (t *Tokenizer) boundRegexps() {
	for _, st := range t.steps {
		if st.re != nil {
			st.re.MatchTimeout = 200 * time.Millisecond
		}
	}
}

// FuzzLoad checks Load on arbitrary tokenizer.json and tokenizer_config.json
// bytes and an encode of text: Load is deterministic (two loads agree on
// the vocabulary size, added tokens, EOS ids and the encoding of text); an
// error is one line naming the file; the id space is bounded by the input
// size (VocabSize ≤ 4·input bytes + 65536: no huge tables from a few bytes);
// every id Encode returns is a known token below VocabSize; Decode gives
// valid UTF-8 that equals the StreamDecoder's output; EOS ids are tokens;
// and for a lossless tokenizer Decode(Encode(text)) == text.
func FuzzLoad(f *testing.F) {
	tiny, tinyPlain := tinyTokenizerJSON(true), tinyTokenizerJSON(false)
	cfg := `{"eos_token": "<|im_end|>", "added_tokens_decoder": {"261": {"content": "<cfg>", "special": false}}}`
	f.Add(tiny, []byte(cfg), "<think> the hello<|im_end|> 12345 café\n\n")
	f.Add(tinyPlain, []byte(nil), "Hello the world's 1½ 😀 \t\r\n x")
	f.Add(tinyPlain, []byte(`{"eos_token": {"content": "Ġthe"}}`), " the the")
	f.Add(tiny, readFile(f, "qwen3/tokenizer_config.json"), "<|im_start|>user\nhi<|im_end|>")
	f.Add(readFile(f, "small_b.json"), []byte(nil), "Hello world")
	f.Add(readFile(f, "small_c.json"), []byte(`{"eos_token": null}`), "e\u0301 ﬁ")
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`), []byte(nil), "a")
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":2147483646}},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`), []byte(nil), "a")
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0}},"added_tokens":[{"id":2147483646,"content":"x"}],"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`), []byte(nil), "x")
	f.Fuzz(func(t *testing.T, tj, cj []byte, text string) {
		tok, err := Load(tj, cj)
		tok2, err2 := Load(tj, cj)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Load is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			checkLoadError(t, err)
			return
		}
		if limit := 4*(len(tj)+len(cj)) + 65536; tok.VocabSize() > limit {
			t.Fatalf("VocabSize %d from %d input bytes", tok.VocabSize(), len(tj)+len(cj))
		}
		tok.boundRegexps()
		tok2.boundRegexps()
		if tok.VocabSize() != tok2.VocabSize() || !slices.Equal(tok.AddedTokens(), tok2.AddedTokens()) || !slices.Equal(tok.EOSIDs(), tok2.EOSIDs()) {
			t.Fatal("two loads of the same files differ")
		}
		for _, id := range tok.EOSIDs() {
			if _, ok := tok.Token(id); !ok {
				t.Fatalf("EOS id %d is not a token", id)
			}
		}
		if len(text) > 512 {
			text = text[:512]
		}
		for _, special := range []bool{true, false} {
			ids := tok.Encode(text, special)
			if again := tok.Encode(text, special); !slices.Equal(ids, again) {
				t.Fatalf("Encode(%q) differs on a second call (word cache): %v / %v", text, ids, again)
			}
			if other := tok2.Encode(text, special); !slices.Equal(ids, other) {
				t.Fatalf("Encode(%q) differs between two loads: %v / %v", text, ids, other)
			}
			for _, id := range ids {
				if _, ok := tok.Token(id); !ok || id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) returned id %d: not a token below VocabSize %d", text, id, tok.VocabSize())
				}
			}
			dec := tok.Decode(ids, false)
			if !utf8.ValidString(dec) {
				t.Fatalf("Decode gave invalid UTF-8 %q", dec)
			}
			sd := tok.NewStreamDecoder()
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(sd.Add(id))
			}
			b.WriteString(sd.Flush())
			if b.String() != dec {
				t.Fatalf("StreamDecoder %q != Decode %q", b.String(), dec)
			}
			if tok.lossless() && utf8.ValidString(text) && dec != text {
				t.Fatalf("lossless tokenizer: Decode(Encode(%q)) = %q (ids %v)", text, dec, ids)
			}
		}
	})
}

// FuzzGenerationConfig checks ParseGenerationEOS and SetGenerationConfig on
// arbitrary generation_config.json bytes: deterministic; errors are one line
// naming generation_config.json; accepted ids are in [0, 2³¹−2], no more
// than the input has digits, and round-trip through their JSON array form;
// SetGenerationConfig on the tiny tokenizer accepts exactly the id lists
// whose ids are all its tokens, and then EOSIDs returns them.
func FuzzGenerationConfig(f *testing.F) {
	tok, err := Load(tinyTokenizerJSON(true), []byte(`{"eos_token": "<|im_end|>"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(readFile(f, "qwen3/generation_config.json"))
	for _, s := range []string{`{"eos_token_id": 259}`, `{"eos_token_id": [259, 0, 258]}`, `{"eos_token_id": null}`, `{}`,
		`{"eos_token_id": [1, -1]}`, `{"eos_token_id": 2147483647}`, `{"eos_token_id": "2"}`, `{"eos_token_id": [1.5]}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := ParseGenerationEOS(data)
		ids2, err2 := ParseGenerationEOS(data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(ids, ids2) {
			t.Fatalf("ParseGenerationEOS is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "generation_config.json: ") {
				t.Fatalf("error is not one line naming generation_config.json: %q", msg)
			}
			if tok.SetGenerationConfig(data) == nil {
				t.Fatal("SetGenerationConfig accepts what ParseGenerationEOS rejects")
			}
			return
		}
		if len(ids) > len(data) {
			t.Fatalf("%d ids from %d bytes", len(ids), len(data))
		}
		for _, id := range ids {
			if id < 0 || id > maxID {
				t.Fatalf("id %d accepted", id)
			}
		}
		if len(ids) > 0 {
			arr, _ := json.Marshal(ids)
			back, err := ParseGenerationEOS([]byte(fmt.Sprintf(`{"eos_token_id": %s}`, arr)))
			if err != nil || !slices.Equal(back, ids) {
				t.Fatalf("ids %v do not round-trip: %v %v", ids, back, err)
			}
		}
		known := true
		for _, id := range ids {
			if _, ok := tok.Token(id); !ok {
				known = false
			}
		}
		tc := *tok // SetGenerationConfig only replaces eos
		err = tc.SetGenerationConfig(data)
		switch {
		case known && err != nil:
			t.Fatalf("SetGenerationConfig rejects known ids %v: %v", ids, err)
		case !known && err == nil:
			t.Fatalf("SetGenerationConfig accepts unknown ids %v", ids)
		case err != nil && (strings.ContainsAny(err.Error(), "\n\r") || !strings.HasPrefix(err.Error(), "generation_config.json: ")):
			t.Fatalf("error is not one line naming generation_config.json: %q", err)
		case err == nil && len(ids) > 0 && !slices.Equal(tc.EOSIDs(), ids):
			t.Fatalf("EOSIDs %v after setting %v", tc.EOSIDs(), ids)
		case err == nil && len(ids) == 0 && !slices.Equal(tc.EOSIDs(), tok.EOSIDs()):
			t.Fatalf("EOSIDs changed to %v by a config without ids", tc.EOSIDs())
		}
	})
}

// TestFuzzSeedsValid: the tiny tokenizers load (with the config seed), the
// plain one is lossless and round-trips text, and BPE merges apply.
func TestFuzzSeedsValid(t *testing.T) {
	tok, err := Load(tinyTokenizerJSON(true), []byte(`{"eos_token": "<|im_end|>", "added_tokens_decoder": {"261": {"content": "<cfg>"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("<think> x the", true); !slices.Equal(got, []int32{260, 120, 258}) || tok.VocabSize() != 262 || !slices.Equal(tok.EOSIDs(), []int32{259}) {
		t.Errorf("tiny tokenizer: Encode = %v, VocabSize %d, EOS %v", got, tok.VocabSize(), tok.EOSIDs())
	}
	plain, err := Load(tinyTokenizerJSON(false), nil)
	if err != nil || !plain.lossless() {
		t.Fatalf("plain tiny tokenizer: %v, lossless %t", err, err == nil && plain.lossless())
	}
	if s := "Hello the world's 1½ 😀"; plain.Decode(plain.Encode(s, true), false) != s {
		t.Errorf("plain tiny tokenizer does not round-trip %q", s)
	}
}
