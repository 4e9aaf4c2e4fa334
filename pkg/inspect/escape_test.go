package inspect

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteTextEscapesName: a stored model name with ESC/CR is printed as
// visible escapes, not as bytes that drive the terminal (issue #22 item 11).
func TestWriteTextEscapesName(t *testing.T) {
	var b bytes.Buffer
	s := Summary{Path: "m\x1b[2J.ninfer", Architecture: "qwen3_5", Name: "evil\x1b]0;pwned\x07\rx", Recipe: "q8"}
	if err := WriteText(&b, s, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r") || !strings.Contains(out, `evil\x1b]0;pwned\x07\rx`) || !strings.Contains(out, `m\x1b[2J.ninfer`) {
		t.Errorf("WriteText:\n%q", out)
	}
}
