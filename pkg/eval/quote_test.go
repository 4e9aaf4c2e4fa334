package eval

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/inerttest"
)

// TestOpenLogitsQuotesHeaderStrings: a logits file whose header format or
// encoding is a control-character or 100,000-character string is refused
// with one bounded line (no byte < 0x20 or 0x7f, < 1 KiB).
func TestOpenLogitsQuotesHeaderStrings(t *testing.T) {
	long := strings.Repeat("x", 100000)
	for _, tc := range []struct {
		name string
		edit func(h map[string]any)
	}{
		{"format control", func(h map[string]any) { h["format"] = "\x1b[31mred\x07" }},
		{"format long", func(h map[string]any) { h["format"] = long }},
		{"encoding control", func(h map[string]any) { h["encoding"] = "\x1b[31mred\x07" }},
		{"encoding long", func(h map[string]any) { h["encoding"] = long }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]any{"format": LogitsFormat, "version": LogitsVersion, "encoding": LogitsEncoding}
			tc.edit(h)
			js, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte(LogitsMagic)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(js)))
			b = append(b, js...)
			p := filepath.Join(t.TempDir(), "x.logits")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			lf, err := OpenLogits(p)
			if err == nil {
				lf.Close()
			}
			inerttest.CheckError(t, err, "")
		})
	}
}
