// Package chat renders chat conversations into Qwen prompt text
// (<|im_start|>role\n...<|im_end|>\n), reproducing the Qwen3 chat_template
// (Jinja) exactly as transformers' apply_chat_template renders it: system,
// user, assistant and tool turns, tool definitions and tool calls, reasoning
// (<think>) handling in the history, add_generation_prompt and the
// enable_thinking=false toggle.
package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Message is one chat turn. The JSON form matches the OpenAI/transformers
// message dicts.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// ReasoningContent, when non-nil, is the assistant's reasoning; when nil
	// the reasoning is taken from a <think>...</think> block in Content.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is an assistant's function call. Arguments is raw JSON: a JSON
// string is inserted verbatim (decoded), any other value is serialized like
// Python's json.dumps (transformers' tojson filter).
type ToolCall struct {
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Options are the template variables besides the messages.
type Options struct {
	// AddGenerationPrompt appends "<|im_start|>assistant\n".
	AddGenerationPrompt bool
	// DisableThinking is enable_thinking=false: with AddGenerationPrompt
	// the empty "<think>\n\n</think>\n\n" block is appended after the
	// assistant header. The zero value leaves enable_thinking undefined
	// (the template's default, thinking on).
	DisableThinking bool
	// Tools are JSON function definitions listed in the system turn.
	Tools []json.RawMessage
}

const toolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
	"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"

const toolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and " +
	"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, " +
	"\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"

// Render returns the prompt text for msgs. It fails on an empty
// conversation, an unknown role, or malformed tool JSON (where the Jinja
// template would raise or silently drop the turn).
func Render(msgs []Message, opts Options) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("chat: no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("chat: message %d: unknown role %s (want system, user, assistant or tool)", i, termsafe.Quote(m.Role))
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return "", fmt.Errorf("chat: message %d: tool_calls on a %s message", i, m.Role)
		}
	}
	var b strings.Builder

	if len(opts.Tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if msgs[0].Role == "system" {
			b.WriteString(msgs[0].Content)
			b.WriteString("\n\n")
		}
		b.WriteString(toolsHeader)
		for i, tool := range opts.Tools {
			b.WriteString("\n")
			if err := writePyJSON(&b, tool); err != nil {
				return "", fmt.Errorf("chat: tools[%d]: %w", i, err)
			}
		}
		b.WriteString(toolsFooter)
	} else if msgs[0].Role == "system" {
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	}

	// The last user turn that is not a wrapped tool response: assistant
	// turns after it keep their reasoning.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == "user" && !(strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>")) {
			lastQuery = i
			break
		}
	}

	for i, m := range msgs {
		first, last := i == 0, i == len(msgs)-1
		switch {
		case m.Role == "user" || (m.Role == "system" && !first):
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == "assistant":
			content, reasoning := splitReasoning(m)
			if i > lastQuery && (last || reasoning != "") {
				b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") +
					"\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>assistant\n" + content)
			}
			for j, tc := range m.ToolCalls {
				if (j == 0 && content != "") || j > 0 {
					b.WriteString("\n")
				}
				b.WriteString("<tool_call>\n{\"name\": \"" + tc.Function.Name + "\", \"arguments\": ")
				if err := writeArguments(&b, tc.Function.Arguments); err != nil {
					return "", fmt.Errorf("chat: message %d: tool_calls[%d] arguments: %w", i, j, err)
				}
				b.WriteString("}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case m.Role == "tool":
			if first || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
			if last || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
	}

	if opts.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if opts.DisableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}

// splitReasoning returns the visible content and the reasoning of an
// assistant message the way the template computes them.
func splitReasoning(m Message) (content, reasoning string) {
	content = m.Content
	if m.ReasoningContent != nil {
		return content, *m.ReasoningContent
	}
	if strings.Contains(m.Content, "</think>") {
		parts := strings.Split(m.Content, "</think>")
		content = strings.TrimLeft(parts[len(parts)-1], "\n")
		before := strings.TrimRight(parts[0], "\n")
		th := strings.Split(before, "<think>")
		reasoning = strings.TrimLeft(th[len(th)-1], "\n")
	}
	return content, reasoning
}

func writeArguments(b *strings.Builder, raw json.RawMessage) error {
	if len(raw) == 0 {
		return fmt.Errorf("missing")
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		b.WriteString(s)
		return nil
	}
	return writePyJSON(b, raw)
}
