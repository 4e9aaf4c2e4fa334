package cliutil

import "strings"

// MaxThreads is the largest --threads value any tool accepts: the CPU
// backend's thread pool limit (kernels/cpu NI_MAX_THREADS, which
// backend.MaxCPUThreads reports; a test in cmd/ninfer-run checks the two
// agree). The converter's encoder goroutines take the same bound.
const MaxThreads = 256

// CheckRange is the shared out-of-range usage error: "FLAG VALUE: out of
// range (want LO..HI[; note])", flag as the user typed it.
func CheckRange(flag string, v, lo, hi int64, note string) error {
	if v >= lo && v <= hi {
		return nil
	}
	if note != "" {
		note = "; " + note
	}
	return Usagef("%s %d: out of range (want %d..%d%s)", flag, v, lo, hi, note)
}

// CheckThreads checks a --threads value: 0 (all cores) to MaxThreads.
func CheckThreads(flag string, n int) error {
	return CheckRange(flag, int64(n), 0, MaxThreads, "0 = all cores")
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
