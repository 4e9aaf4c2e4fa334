package cliutil

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// flagRangesKey is the app.Metadata key of the table SetFlagRanges stores.
const flagRangesKey = "flagRanges"

// SetFlagRanges records the valid range of the app's numeric flags, by long
// name ("threads": "0..256; 0 = all cores"), for the message of a value the
// flag package cannot parse (an integer beyond the flag's type, a negative
// --seed, a word): see NumberError. A numeric flag not in the table gets its
// type's range. It returns app.
func SetFlagRanges(app *cli.App, ranges map[string]string) *cli.App {
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[flagRangesKey] = ranges
	return app
}

// ThreadsRange is the --threads range in the words of CheckThreads.
var ThreadsRange = fmt.Sprintf("0..%d; 0 = all cores", MaxThreads)

// NumberError is the shared usage error for a numeric flag value that is
// not a number within want (the valid range in words, "1..1024"), flag as
// the user typed it: "FLAG VALUE: out of range (want …)" when VALUE is an
// integer (too large for the flag's type, or negative for an unsigned one:
// the words of CheckRange), else "FLAG VALUE: not an integer (want …)";
// "FLAG: empty value (want …)" for an empty one.
func NumberError(flag, value, want string) error {
	return numberError(flag, value, want, false, "an integer")
}

// numberError is NumberError for a value that is not noun ("an integer",
// "a number"); overflow says the flag package found it out of range.
func numberError(flag, value, want string, overflow bool, noun string) error {
	if want != "" {
		want = " (want " + want + ")"
	}
	switch {
	case strings.TrimSpace(value) == "":
		return Usagef("%s: empty value%s", flag, want)
	case overflow || isInteger(value):
		return Usagef("%s %s: out of range%s", flag, value, want)
	}
	return Usagef("%s %s: not %s%s", flag, value, noun, want)
}

// isInteger reports whether s is an integer as strconv.ParseInt(s, 0, _)
// spells them, of any size.
func isInteger(s string) bool {
	_, ok := new(big.Int).SetString(s, 0)
	return ok
}

// numberFlagError rewrites the flag package's error for a numeric flag
// value it cannot parse ("invalid value \"X\" for flag -name: parse error"
// or "…: value out of range") as NumberError, with the range from the
// app's SetFlagRanges table or else the flag's type; ok is false for any
// other error.
func numberFlagError(c *cli.Context, err error) (error, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "invalid value ")
	if !ok || c == nil {
		return nil, false
	}
	i := strings.LastIndex(rest, " for flag -")
	if i < 0 {
		return nil, false
	}
	value, uerr := strconv.Unquote(rest[:i])
	if uerr != nil {
		return nil, false
	}
	name, why, _ := strings.Cut(rest[i+len(" for flag -"):], ": ")
	f := lookupFlag(c, name)
	if f == nil {
		return nil, false
	}
	noun := "an integer"
	if _, ok := f.(*cli.Float64Flag); ok {
		noun = "a number"
	}
	want, known := "", false
	if c.App != nil {
		if ranges, _ := c.App.Metadata[flagRangesKey].(map[string]string); ranges != nil {
			want, known = ranges[f.Names()[0]]
		}
	}
	if !known {
		switch f.(type) {
		case *cli.IntFlag, *cli.Int64Flag:
			want = fmt.Sprintf("%d..%d", math.MinInt64, math.MaxInt64)
		case *cli.UintFlag, *cli.Uint64Flag:
			want = fmt.Sprintf("0..%d", uint64(math.MaxUint64))
		case *cli.Float64Flag:
		default:
			return nil, false
		}
	}
	var args []string
	if c.App != nil {
		args, _ = c.App.Metadata["args"].([]string)
	}
	return numberError(FlagAsGiven(args, name), value, want, strings.Contains(why, "out of range"), noun), true
}

// lookupFlag finds the flag named name (any of its names) among the
// command's and the app's flags.
func lookupFlag(c *cli.Context, name string) cli.Flag {
	var sets [][]cli.Flag
	if c.Command != nil {
		sets = append(sets, c.Command.Flags)
	}
	if c.App != nil {
		sets = append(sets, c.App.Flags)
	}
	for _, flags := range sets {
		for _, f := range flags {
			for _, n := range f.Names() {
				if n == name {
					return f
				}
			}
		}
	}
	return nil
}
