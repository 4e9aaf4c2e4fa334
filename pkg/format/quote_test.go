package format

import (
	"strings"
	"testing"
)

// TestParseErrorsQuoteUntrustedNames feeds format and layout names holding
// terminal escapes, or 100,000 bytes long, through the parsers a .ninfer
// directory's strings go through: the error must stay one short inert line.
func TestParseErrorsQuoteUntrustedNames(t *testing.T) {
	const ctrl = "\x1b[31mred\x07"
	long := strings.Repeat("n", 100_000)
	const ctrlQ, longQ = `"\x1b[31mred\a"`, "(100000 bytes)"
	parsers := []struct {
		name  string
		parse func(string) error
	}{
		{"Parse", func(s string) error { _, err := Parse(s); return err }},
		{"ParseV2", func(s string) error { _, err := ParseV2(s); return err }},
		{"ParseLayout", func(s string) error { _, err := ParseLayout(s); return err }},
		{"ParseLayoutV2", func(s string) error { _, err := ParseLayoutV2(s); return err }},
		{"EncodedSize", func(s string) error { _, err := EncodedSize(Format(s), []int64{2, 2}); return err }},
	}
	inputs := []struct{ name, in, want string }{
		{"ctrl", ctrl, ctrlQ},
		{"long", long, longQ},
	}
	for _, p := range parsers {
		for _, in := range inputs {
			t.Run(p.name+"/"+in.name, func(t *testing.T) {
				err := p.parse(in.in)
				if err == nil {
					t.Fatal("no error")
				}
				msg := err.Error()
				for i := 0; i < len(msg); i++ {
					if b := msg[i]; b < 0x20 || b == 0x7f {
						t.Fatalf("error holds control byte %#x at %d: %q", b, i, msg)
					}
				}
				if len(msg) >= 1024 {
					t.Fatalf("error is %d bytes long: %.200q…", len(msg), msg)
				}
				if !strings.Contains(msg, in.want) {
					t.Fatalf("error %q does not contain %q", msg, in.want)
				}
			})
		}
	}
}
