package cliutil

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestCheckThreads: the --threads check names the flag as the user typed
// it (an alias, one dash or two), through the same Typed that the parse
// errors use; before, it always said "--threads".
func TestCheckThreads(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"--threads", "0"}, ""}, {[]string{"-t", "1"}, ""}, {[]string{"--threads", "256"}, ""}, {nil, ""},
		{[]string{"--threads", "-1"}, "--threads -1: out of range (want 0..256; 0 = all cores)"},
		{[]string{"-t", "10000"}, "-t 10000: out of range (want 0..256; 0 = all cores)"},
		{[]string{"-threads=100000"}, "-threads 100000: out of range (want 0..256; 0 = all cores)"},
		{[]string{"-threads", "1", "--threads", "300"}, "--threads 300: out of range (want 0..256; 0 = all cores)"},
		{[]string{"--t", "300", "-t", "257"}, "-t 257: out of range (want 0..256; 0 = all cores)"},
	} {
		var gotErr error
		app := Prepare(&cli.App{
			Name:  "tool",
			Flags: []cli.Flag{&cli.IntFlag{Name: "threads", Aliases: []string{"t"}}},
			Action: func(c *cli.Context) error {
				gotErr = CheckThreads(c, c.Int("threads"))
				return gotErr
			},
		}, io.Discard, io.Discard)
		var stderr strings.Builder
		code := Run(app, append([]string{"tool"}, tc.args...), &stderr)
		if tc.want == "" {
			if code != 0 || gotErr != nil {
				t.Errorf("%q: exit %d, %v", tc.args, code, gotErr)
			}
			continue
		}
		var ue UsageError
		if gotErr == nil || gotErr.Error() != tc.want || !errors.As(gotErr, &ue) || code != 2 || stderr.String() != "tool: "+tc.want+"\n" {
			t.Errorf("%q: exit %d, %v (stderr %q), want exit 2 and %q", tc.args, code, gotErr, stderr.String(), tc.want)
		}
	}
}

// TestCheckFlagAndOutOfRange: CheckFlag names a flag as typed and
// OutOfRange words a range that is not an integer interval the same way.
func TestCheckFlagAndOutOfRange(t *testing.T) {
	if err := CheckRange("-n", -1, 0, 5, ""); err == nil || err.Error() != "-n -1: out of range (want 0..5)" {
		t.Errorf("CheckRange: %v", err)
	}
	if err := CheckRange("-n", 5, 0, 5, ""); err != nil {
		t.Errorf("CheckRange in range: %v", err)
	}
	var ue UsageError
	if err := OutOfRange("--top-p", "1.5", "0..1"); err == nil || err.Error() != "--top-p 1.5: out of range (want 0..1)" || !errors.As(err, &ue) {
		t.Errorf("OutOfRange: %v", err)
	}
	if got := Typed(nil, "max-new"); got != "--max-new" {
		t.Errorf("Typed(nil) = %q", got)
	}
}

func TestFlagAsGiven(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"b", "-p", "0"}, "-p"},
		{[]string{"b", "--n-prompt=0"}, "--n-prompt"},
		{[]string{"b", "-n-prompt", "0"}, "-n-prompt"},
		{[]string{"b", "-p", "1", "--n-prompt", "0"}, "--n-prompt"},
		{[]string{"b"}, "--n-prompt"},
		{[]string{"b", "--", "-p"}, "--n-prompt"},
	} {
		if got := FlagAsGiven(tc.args, "n-prompt", "p"); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestMemory(t *testing.T) {
	n, ok := parseMemAvailable([]byte("MemTotal: 100 kB\nMemAvailable:    2048 kB\n"))
	if !ok || n != 2048<<10 {
		t.Fatalf("%d %v", n, ok)
	}
	if _, ok := parseMemAvailable([]byte("MemTotal: 100 kB\n")); ok {
		t.Error("no MemAvailable line: ok")
	}
	if err := checkMemory("the model", 1<<40, 1<<30); err == nil || !strings.Contains(err.Error(), "needs about 1024.0 GiB of memory, 1.0 GiB is available") {
		t.Errorf("got %v", err)
	}
	if err := checkMemory("the model", 1<<20, 1<<30); err != nil {
		t.Error(err)
	}
}
