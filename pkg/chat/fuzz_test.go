package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRender fuzzes the chat JSON input: a conversation in the fixture form
// (OpenAI/transformers message dicts, tool definitions, the template flags)
// decoded and rendered, tool JSON included (go test ./pkg/chat -run '^$'
// -fuzz FuzzRender -fuzztime 10m -parallel 1; make fuzz).

// conversation is the JSON form of one Render call (the fixtures' form).
type conversation struct {
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	EnableThinking      *bool             `json:"enable_thinking"`
}

func (c conversation) options() Options {
	return Options{AddGenerationPrompt: c.AddGenerationPrompt, DisableThinking: c.EnableThinking != nil && !*c.EnableThinking, Tools: c.Tools}
}

// decodeJSONValue decodes JSON text to a comparable value (numbers as their
// literal text).
func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// FuzzRender checks, for any conversation JSON that decodes: Render is
// deterministic; an error is one line starting with "chat: "; the
// generation prompt is exactly a suffix (Render with it = Render without it
// + "<|im_start|>assistant\n" [+ the empty think block]); the conversation
// re-encoded with encoding/json and decoded again renders to the same text;
// each tool's Python-style JSON (writePyJSON) is valid JSON with the same
// value as the tool, and writing it again gives the same text.
func FuzzRender(f *testing.F) {
	fh, err := os.Open(filepath.Join("testdata", "qwen3_chat.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f.Add(append([]byte(nil), sc.Bytes()...))
	}
	fh.Close()
	if err := sc.Err(); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"messages": [{"role": "assistant", "content": "a</think>b</think>\n\nc", "tool_calls": [{"function": {"name": "f\"", "arguments": "{\"x\":1}"}}, {"function": {"name": "g", "arguments": {"k": [1, 2.5e3, "\u00e9\n", null, true]}}}]}], "add_generation_prompt": true, "enable_thinking": false}`,
		`{"messages": [{"role": "tool", "content": "r"}, {"role": "tool", "content": "s"}], "tools": [{"type": "function", "function": {"name": "t", "parameters": {}}}, [], "x", 1e400]}`,
		`{"messages": [{"role": "user", "content": "<tool_response>x</tool_response>"}, {"role": "assistant", "content": "", "reasoning_content": "\n\nr\n"}]}`,
		`{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]}`,
		`{"messages": [{"role": "user", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}]}`,
		`{"messages": [{"role": "robot", "content": "x"}]}`,
		`{"messages": []}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c conversation
		if json.Unmarshal(data, &c) != nil {
			return // not a conversation: encoding/json's business
		}
		opts := c.options()
		out, err := Render(c.Messages, opts)
		out2, err2 := Render(c.Messages, opts)
		if out != out2 || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Render is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "chat: ") {
				t.Fatalf("error is not one line starting with chat: %q", msg)
			}
			if out != "" {
				t.Fatalf("error with output %q", out)
			}
			return
		}
		// The generation prompt is a pure suffix.
		plain := opts
		plain.AddGenerationPrompt, plain.DisableThinking = false, false
		base, err := Render(c.Messages, plain)
		if err != nil {
			t.Fatalf("Render without the generation prompt fails: %v", err)
		}
		want := base
		if opts.AddGenerationPrompt {
			want += "<|im_start|>assistant\n"
			if opts.DisableThinking {
				want += "<think>\n\n</think>\n\n"
			}
		}
		if out != want {
			t.Fatalf("generation prompt is not a suffix:\n%q\n%q", out, want)
		}
		// The conversation survives a trip through its JSON form.
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("conversation does not re-encode: %v", err)
		}
		var back conversation
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("re-encoded conversation does not decode: %v", err)
		}
		if again, err := Render(back.Messages, back.options()); err != nil || again != out {
			t.Fatalf("re-encoded conversation renders differently: %v\n%q\n%q", err, out, again)
		}
		// Python-style JSON of each tool: valid, same value, a fixed point.
		for i, tool := range c.Tools {
			var b strings.Builder
			if err := writePyJSON(&b, tool); err != nil {
				t.Fatalf("tools[%d] rendered but writePyJSON fails: %v", i, err)
			}
			py := b.String()
			if !utf8.ValidString(py) {
				t.Fatalf("tools[%d]: invalid UTF-8 %q", i, py)
			}
			v1, err1 := decodeJSONValue(tool)
			v2, err2 := decodeJSONValue([]byte(py))
			if err1 != nil || err2 != nil || !reflect.DeepEqual(v1, v2) {
				t.Fatalf("tools[%d]: %s is written as %s (%v, %v)", i, tool, py, err1, err2)
			}
			var b2 strings.Builder
			if err := writePyJSON(&b2, json.RawMessage(py)); err != nil || b2.String() != py {
				t.Fatalf("tools[%d]: writePyJSON is not a fixed point: %q → %q (%v)", i, py, b2.String(), err)
			}
		}
	})
}
