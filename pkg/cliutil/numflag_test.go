package cliutil

import (
	"bytes"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestNumberFlagError: a numeric flag value the flag package refuses is a
// usage error naming the flag as typed, the value and the range, from the
// SetFlagRanges table or else the flag's type.
func TestNumberFlagError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--threads", "99999999999999999999"}, "t: --threads 99999999999999999999: out of range (want 0..256; 0 = all cores)\n"},
		{[]string{"-threads=x"}, "t: -threads x: not an integer (want 0..256; 0 = all cores)\n"},
		{[]string{"--threads="}, "t: --threads: empty value (want 0..256; 0 = all cores)\n"},
		{[]string{"-j", "0x1p3"}, "t: -j 0x1p3: not an integer (want 0..256; 0 = all cores)\n"},
		{[]string{"--seed", "-5"}, "t: --seed -5: out of range (want 0..18446744073709551615)\n"},
		{[]string{"--seed", "1_0000_0000_0000_0000_0000"}, "t: --seed 1_0000_0000_0000_0000_0000: out of range (want 0..18446744073709551615)\n"},
		{[]string{"--count", "1e3"}, "t: --count 1e3: not an integer (want -9223372036854775808..9223372036854775807)\n"},
		{[]string{"--temp", "1e999"}, "t: --temp 1e999: out of range\n"},
		{[]string{"--temp", "hot"}, "t: --temp hot: not a number\n"},
	} {
		var stdout, stderr bytes.Buffer
		app := SetFlagRanges(Prepare(&cli.App{
			Name: "t",
			Flags: []cli.Flag{&cli.IntFlag{Name: "threads", Aliases: []string{"j"}}, &cli.Uint64Flag{Name: "seed"},
				&cli.IntFlag{Name: "count"}, &cli.Float64Flag{Name: "temp"}},
			Action: func(*cli.Context) error { return nil },
		}, &stdout, &stderr), map[string]string{"threads": ThreadsRange})
		if got := Run(app, append([]string{"t"}, tc.args...), &stderr); got != 2 || stderr.String() != tc.want {
			t.Errorf("%q: exit %d stderr %q; want 2 and %q", tc.args, got, stderr.String(), tc.want)
		}
	}
}
