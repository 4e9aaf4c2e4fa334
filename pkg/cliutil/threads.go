package cliutil

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// MaxThreads is the largest --threads value any tool accepts: the CPU
// backend's thread pool limit (kernels/cpu NI_MAX_THREADS, which
// backend.MaxCPUThreads reports; a test in cmd/ninfer-run checks the two
// agree). The converter's encoder goroutines take the same bound.
const MaxThreads = 256

// CheckRange is the shared out-of-range usage error: "FLAG VALUE: out of
// range (want LO..HI[; note])", flag as the user typed it (CheckFlag finds
// that spelling).
func CheckRange(flag string, v, lo, hi int64, note string) error {
	if v >= lo && v <= hi {
		return nil
	}
	want := fmt.Sprintf("%d..%d", lo, hi)
	if note != "" {
		want += "; " + note
	}
	return OutOfRange(flag, strconv.FormatInt(v, 10), want)
}

// OutOfRange is the same usage error for a valid value that is not an
// interval of integers, want in words ("a positive multiple of 128",
// "0..1; 0 or 1 = off"): "FLAG VALUE: out of range (want WANT)".
func OutOfRange(flag, value, want string) error {
	return Usagef("%s %s: out of range (want %s)", flag, value, want)
}

// CheckFlag is CheckRange for the flag named name (its long name or any
// alias), named as the user typed it (Typed): "-t 999", "-threads 999" and
// "--threads 999" each see their own spelling.
func CheckFlag(c *cli.Context, name string, v, lo, hi int64, note string) error {
	if v >= lo && v <= hi {
		return nil
	}
	return CheckRange(Typed(c, name), v, lo, hi, note)
}

// CheckThreads checks the --threads value of c: 0 (all cores) to
// MaxThreads, the flag named as typed.
func CheckThreads(c *cli.Context, n int) error {
	return CheckFlag(c, "threads", int64(n), 0, MaxThreads, "0 = all cores")
}

// Typed is the flag named name (its long name or any alias) as the user
// typed it ("-n", "--max-new", "-max-new"; the last occurrence wins), from
// the arguments Run keeps in app.Metadata["args"], as the messages of
// OnUsageError name it; "--" + its long name when it was not typed.
func Typed(c *cli.Context, name string) string {
	names := []string{name}
	var args []string
	if c != nil {
		if f := lookupFlag(c, name); f != nil {
			names = f.Names()
		}
		if c.App != nil {
			args, _ = c.App.Metadata["args"].([]string)
		}
	}
	return FlagAsGiven(args, names...)
}

// FlagAsGiven is the spelling the user typed for the flag whose names
// (without dashes) are names, the last occurrence in args winning ("-p",
// "--n-prompt", "-n-prompt"); "--" + names[0] when it does not appear.
func FlagAsGiven(args []string, names ...string) string {
	typed := ""
	for i, a := range args {
		if i == 0 {
			continue
		}
		if a == "--" {
			break
		}
		f, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(f, "-") {
			continue
		}
		for _, n := range names {
			if strings.TrimLeft(f, "-") == n {
				typed = f
			}
		}
	}
	if typed == "" && len(names) > 0 {
		typed = "--" + names[0]
	}
	return typed
}
