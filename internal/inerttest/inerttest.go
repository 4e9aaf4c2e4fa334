// Package inerttest checks that an error about untrusted input is one short,
// inert line (the termsafe contract): shared by the parsers' quote tests.
package inerttest

import (
	"strings"
	"testing"
)

// CheckError fails unless err is a short, one-line message: no control
// byte (< 0x20 or 0x7f) and under 1 KiB, with want (the quoted form of the
// untrusted string; "" for no check) in it.
func CheckError(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c == 0x7f {
			t.Fatalf("error holds control byte %#x at %d: %q", c, i, msg)
		}
	}
	if len(msg) >= 1024 {
		t.Fatalf("error is %d bytes long: %.200q…", len(msg), msg)
	}
	if !strings.Contains(msg, want) {
		t.Fatalf("error %q does not contain %q", msg, want)
	}
}
