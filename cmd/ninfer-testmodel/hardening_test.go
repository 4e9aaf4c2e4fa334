package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ninfer/ninfer/pkg/cliutil"
)

// Size flags out of what the model format allows are usage errors naming
// the flag as typed and its range. Before the fix --layers -1 panicked with
// a goroutine dump and --vocab 2147483648 passed validation and ran out of
// memory.
func TestSizeFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--layers", "-1"}, 2, "--layers -1: out of range (want 1..1024)"},
		{[]string{"--layers", "0"}, 2, "--layers 0: out of range (want 1..1024)"},
		{[]string{"--layers", "1025"}, 2, "--layers 1025: out of range (want 1..1024)"},
		{[]string{"--vocab", "2147483648"}, 2, "--vocab 2147483648: out of range (want 261..2147483647)"},
		{[]string{"--hidden", "-5"}, 2, "--hidden -5: out of range"},
		{[]string{"--intermediate", "0"}, 2, "--intermediate 0: out of range"},
		{[]string{"--mtp-layers", "-1"}, 2, "--mtp-layers -1: out of range (want 0..1024)"},
		{[]string{"--shards", "0"}, 2, "--shards 0: out of range"},
		// In range but far more than any machine has: refused by the
		// memory estimate before anything is allocated or written.
		{[]string{"--vocab", "2147483647", "--hidden", "128"}, 1, "of memory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "m")
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{name}, tc.args...), out), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stderr.String(), name+": ") || !strings.Contains(stderr.String(), tc.msg) ||
				strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.msg)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %d entries behind", len(ents))
			}
		})
	}
}

// A stop (SIGTERM here) exits 128 + the signal with one line and leaves no
// hidden temporary directory and no output. Before the fix ninfer-testmodel
// had no signal handling at all.
func TestStopLeavesNothing(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(cliutil.SignalName(sig), func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(cliutil.Stopped{Signal: sig})
			saved := interruptContext
			interruptContext = func() (context.Context, context.CancelFunc) { return ctx, func() {} }
			defer func() { interruptContext = saved }()
			dir := t.TempDir()
			out := filepath.Join(dir, "m")
			var stdout, stderr bytes.Buffer
			code := run([]string{name, "--hidden", "64", "--intermediate", "96", out}, &stdout, &stderr)
			want := name + ": " + cliutil.Stopped{Signal: sig}.Error() + ": " + out + " was not written\n"
			if code != 128+int(sig) || stderr.String() != want {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, stderr.String(), 128+int(sig), want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %s behind", ents[0].Name())
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{name, "--version"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d stderr %q", code, stderr.String())
	}
	for _, w := range []string{name + " ", "commit: ", "go: go", "backends: cpu", "cpu isa: scalar"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("--version lacks %q: %q", w, stdout.String())
		}
	}
}
