package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/bench"
	"github.com/ninfer/ninfer/pkg/cliutil"
)

// typed is the spelling of flag long as the user typed it (-p or
// --n-prompt), from the arguments run stored in the app's Metadata.
func typed(c *cli.Context, long string) string {
	args, _ := c.App.Metadata["args"].([]string)
	names := []string{long}
	for short, l := range longNames {
		if l == long {
			names = append(names, short)
		}
	}
	return cliutil.FlagAsGiven(args, names...)
}

// listError words a bad -p/-n/-pg/-d value as a usage error naming the
// flag as typed, the value and the valid range.
func listError(c *cli.Context, long, value string, _ error) error {
	want := "comma-separated integers in 1..2147483647"
	switch long {
	case "prompt-gen":
		want = "P,G pairs separated by ';', each in 1..2147483647"
	case "n-depth":
		want = "comma-separated integers in 0..2147483647"
	}
	if value == "" {
		return cliutil.Usagef("%s: empty value (want %s)", typed(c, long), want)
	}
	return cliutil.Usagef("%s %s: out of range or not a number (want %s)", typed(c, long), value, want)
}

// countError words a bad count flag (-r, --warmup, --threads, ...) the
// same way: CheckRange for an int64 beyond the range, else the shared
// cliutil.NumberError (an integer too large for int64, or not an integer).
func countError(c *cli.Context, long, value string, lo int64, _ error) error {
	hi, note := int64(1<<32-1), ""
	if long == "threads" {
		hi, note = cliutil.MaxThreads, "0 = all cores"
	}
	if v, perr := strconv.ParseInt(value, 10, 64); perr == nil {
		return cliutil.CheckRange(typed(c, long), v, lo, hi, note)
	}
	want := fmt.Sprintf("%d..%d", lo, hi)
	if note != "" {
		want += "; " + note
	}
	return cliutil.NumberError(typed(c, long), value, want)
}

// checkBenchInputs runs the shared checks: --threads in range, the model
// and --corpus regular files, and --output-file neither of them.
func checkBenchInputs(c *cli.Context, p bench.Params) error {
	if err := cliutil.CheckThreads(c, p.Threads); err != nil {
		return err
	}
	return cliutil.CheckIO("--output-file", p.OutputFile, p.Weights, p.Corpus)
}
