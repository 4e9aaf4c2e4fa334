package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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
// --prefill-chunk and --draft-tokens name their own ranges, the ones
// bench.Params.Validate checks (validateError).
func countError(c *cli.Context, long, value string, lo int64, _ error) error {
	hi, note := int64(1<<32-1), ""
	switch long {
	case "threads":
		hi, note = cliutil.MaxThreads, "0 = all cores"
	case "draft-tokens":
		hi = bench.MaxMTPDraftTokens
	case "prefill-chunk":
		if isInt(value) {
			return cliutil.OutOfRange(typed(c, long), value, bench.PrefillChunkWant)
		}
		return cliutil.NumberError(typed(c, long), value, bench.PrefillChunkWant)
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

// isInt reports whether s is a decimal integer of any size.
func isInt(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// validateError is a bench.Params.Validate error as a usage error: a value
// out of range (bench.RangeError) in the shared words of cliutil.OutOfRange,
// the flag named as typed; the reference's other messages as they are, less
// the dflash/dflash2 backends ninfer does not offer.
func validateError(c *cli.Context, err error) error {
	if re := (bench.RangeError{}); errors.As(err, &re) {
		return cliutil.OutOfRange(typed(c, re.Flag), re.Value, re.Want)
	}
	return cliutil.Usagef("%s", strings.Replace(err.Error(), "--spec mtp|dflash|dflash2", "--spec mtp", 1))
}

// checkBenchInputs runs the shared checks: --threads in range, the model
// and --corpus regular files, and --output-file neither of them.
func checkBenchInputs(c *cli.Context, p bench.Params) error {
	if err := cliutil.CheckThreads(c, p.Threads); err != nil {
		return err
	}
	return cliutil.CheckIO("--output-file", p.OutputFile, p.Weights, p.Corpus)
}
