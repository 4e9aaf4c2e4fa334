package loader

import (
	"strings"
	"testing"
)

// TestNewBackendQuotesUntrustedName feeds --backend values holding terminal
// escapes, or 100,000 bytes long, through NewBackend: the error must stay one
// short inert line. (An artifact's architecture string cannot reach
// OpenWeights' own check: artifact.OpenMapped rejects it first.)
func TestNewBackendQuotesUntrustedName(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"ctrl", "\x1b[31mred\x07", `unknown backend "\x1b[31mred\a"`},
		{"long", strings.Repeat("n", 100_000), "(100000 bytes)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be, _, _, err := NewBackend(c.in, 0)
			if err == nil {
				be.Close()
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
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not contain %q", msg, c.want)
			}
		})
	}
}
