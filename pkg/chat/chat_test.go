package chat

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fixtures: scripts/tokenizer-fixtures/gen_chat_fixtures.py renders the Qwen3
// chat_template with jinja2 as transformers does.
type fixture struct {
	Name                string            `json:"name"`
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	EnableThinking      *bool             `json:"enable_thinking"`
	Text                string            `json:"text"`
}

func readFixtures(t *testing.T) []fixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "qwen3_chat.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fixture
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var fx fixture
		if err := json.Unmarshal(sc.Bytes(), &fx); err != nil {
			t.Fatal(err)
		}
		out = append(out, fx)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("only %d fixtures", len(out))
	}
	return out
}

func TestRenderMatchesJinja(t *testing.T) {
	for _, fx := range readFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			opts := Options{
				AddGenerationPrompt: fx.AddGenerationPrompt,
				DisableThinking:     fx.EnableThinking != nil && !*fx.EnableThinking,
				Tools:               fx.Tools,
			}
			got, err := Render(fx.Messages, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != fx.Text {
				t.Errorf("Render mismatch\n got: %q\nwant: %q", got, fx.Text)
			}
		})
	}
}

func TestRenderBasics(t *testing.T) {
	got, err := Render([]Message{{Role: "user", Content: "hi"}}, Options{AddGenerationPrompt: true, DisableThinking: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// DisableThinking without a generation prompt adds nothing.
	got, _ = Render([]Message{{Role: "user", Content: "hi"}}, Options{DisableThinking: true})
	if got != "<|im_start|>user\nhi<|im_end|>\n" {
		t.Errorf("got %q", got)
	}
}

func TestRenderErrors(t *testing.T) {
	cases := []struct {
		name    string
		msgs    []Message
		opts    Options
		wantErr string
	}{
		{"empty", nil, Options{}, "no messages"},
		{"bad role", []Message{{Role: "robot", Content: "x"}}, Options{}, `unknown role "robot"`},
		{"tool calls on user", []Message{{Role: "user", ToolCalls: []ToolCall{{}}}}, Options{}, "tool_calls on a user"},
		{"bad tool json", []Message{{Role: "user", Content: "x"}}, Options{Tools: []json.RawMessage{json.RawMessage(`{"a":`)}}, "tools[0]"},
		{"missing arguments", []Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []ToolCall{{}}}}, Options{}, "arguments: missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(c.msgs, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, c.wantErr)
			}
		})
	}
}

func TestPyJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1,"b":[true,false,null],"c":{}}`, `{"a": 1, "b": [true, false, null], "c": {}}`},
		{`{"z":"é\n\t\"\\<>&\u0001\u2028","a":[]}`, "{\"z\": \"é\\n\\t\\\"\\\\<>&\\u0001\u2028\", \"a\": []}"},
		{` [ 1.5 , -2e3 ] `, `[1.5, -2e3]`},
	}
	for _, c := range cases {
		var b strings.Builder
		if err := writePyJSON(&b, json.RawMessage(c.in)); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if b.String() != c.want {
			t.Errorf("pyjson(%s) = %s, want %s", c.in, b.String(), c.want)
		}
	}
	var b strings.Builder
	if err := writePyJSON(&b, json.RawMessage(`{} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
}
