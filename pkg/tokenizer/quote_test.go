package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/inerttest"
)

// TestLoadErrorsQuoteUntrustedTokens feeds added-token contents holding
// terminal escapes, or 100,000 bytes long, through Load.
func TestLoadErrorsQuoteUntrustedTokens(t *testing.T) {
	const ctrl = "\x1b[31mred\x07"
	long := strings.Repeat("n", 100_000)
	const ctrlQ, longQ = `"\x1b[31mred\a"`, "(100000 bytes)"
	base := readFile(t, "small_a.json")
	sameID := func(content string) []byte {
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		m["added_tokens"] = append(m["added_tokens"].([]any),
			map[string]any{"id": 2000, "content": "<a>"},
			map[string]any{"id": 2000, "content": content})
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		json []byte
		want string
	}{
		{"ctrl_added_token_same_id", sameID(ctrl), ctrlQ},
		{"long_added_token_same_id", sameID(long), longQ},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.json, nil)
			inerttest.CheckError(t, err, c.want)
		})
	}
}
