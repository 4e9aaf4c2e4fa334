package cliutil

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckThreads(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""}, {1, ""}, {MaxThreads, ""},
		{-1, "--threads -1: out of range (want 0..256; 0 = all cores)"},
		{10000, "--threads 10000: out of range (want 0..256; 0 = all cores)"},
		{100000, "--threads 100000: out of range (want 0..256; 0 = all cores)"},
	} {
		err := CheckThreads("--threads", tc.n)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%d: %v", tc.n, err)
			}
			continue
		}
		var ue UsageError
		if err == nil || err.Error() != tc.want || !errors.As(err, &ue) {
			t.Errorf("%d: got %v, want %q", tc.n, err, tc.want)
		}
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
