package cliutil

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every tool prepared with Prepare has --version: version, commit, Go
// version, backends and CPU ISA levels, on stdout, exit 0.
func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	app := Prepare(&cli.App{Name: "ninfer-x", Action: func(*cli.Context) error { t.Error("action ran"); return nil }}, &stdout, &stderr)
	if got := FlagNames(app.Flags, false); len(got) != 1 || got[0] != "version" {
		t.Errorf("flags %v, want [version] (documented in docs/CLI.md)", got)
	}
	if code := Run(app, []string{"ninfer-x", "--version"}, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d stderr %q", code, stderr.String())
	}
	out := stdout.String()
	for _, w := range []string{"ninfer-x ", "\nmodule: ", "\ncommit: ", "\ngo: go", "\nbackends: cpu", "\ncpu isa: scalar"} {
		if !strings.Contains(out, w) {
			t.Errorf("--version lacks %q:\n%s", w, out)
		}
	}
	b := ReadBuildInfo()
	if b.Commit == "" || (CUDABuilt != strings.Contains(out, "cuda")) {
		t.Errorf("build info %+v", b)
	}
}

// An empty positional argument (” from an unset shell variable) is a usage
// error (exit 2) naming its position, in every tool that uses AddVersion.
func TestEmptyArgumentIsUsageError(t *testing.T) {
	for _, args := range [][]string{{"t", ""}, {"t", "a", ""}} {
		var out, errb strings.Builder
		app := Prepare(&cli.App{Name: "t", Action: func(*cli.Context) error { return nil }}, &out, &errb)
		if code := Run(app, args, &errb); code != 2 || !strings.Contains(errb.String(), fmt.Sprintf("argument %d is empty", len(args)-1)) {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb strings.Builder
	app := Prepare(&cli.App{Name: "t", Action: func(*cli.Context) error { return nil }}, &out, &errb)
	if code := Run(app, []string{"t", "a", "b"}, &errb); code != 0 {
		t.Errorf("non-empty arguments: exit %d, stderr %q", code, errb.String())
	}
}

// A string flag given explicitly with an empty value is a usage error
// naming the flag as typed (and its value's placeholder), in the app's
// flags and a subcommand's; unset flags, non-empty values and other flag
// kinds pass.
func TestEmptyFlagValueIsUsageError(t *testing.T) {
	newApp := func() *cli.App {
		var out, errb strings.Builder
		return Prepare(&cli.App{
			Name: "t",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write to `PATH`"},
				&cli.StringFlag{Name: "spec", Value: "none", Usage: "none or mtp"},
				&cli.StringSliceFlag{Name: "weights", Aliases: []string{"m"}, Usage: "model `PATH`"},
				&cli.PathFlag{Name: "dir", Usage: "a `DIR`"},
				&cli.IntFlag{Name: "n"},
			},
			Action: func(*cli.Context) error { return nil },
			Commands: []*cli.Command{{
				Name:   "sub",
				Flags:  []cli.Flag{&cli.StringFlag{Name: "run-a", Usage: "run `ID`"}, &cli.StringFlag{Name: "output-file", Aliases: []string{"o"}}},
				Action: func(*cli.Context) error { return nil },
			}},
		}, &out, &errb)
	}
	for _, tc := range []struct {
		args []string
		msg  string // "" = exit 0
	}{
		{[]string{"--output-file", ""}, "t: --output-file: empty value (want PATH)\n"},
		{[]string{"-o", ""}, "t: -o: empty value (want PATH)\n"},
		{[]string{"--output-file="}, "t: --output-file: empty value (want PATH)\n"},
		{[]string{"--spec", ""}, "t: --spec: empty value\n"},
		{[]string{"-m", "a", "-m", ""}, "t: -m: empty value (want PATH)\n"},
		{[]string{"--dir", ""}, "t: --dir: empty value (want DIR)\n"},
		{[]string{"sub", "--run-a", ""}, "t: --run-a: empty value (want ID)\n"},
		{[]string{"sub", "-o", ""}, "t: -o: empty value\n"},
		{[]string{"sub", "a", ""}, "t: argument 2 is empty (a path is expected)\n"},
		{[]string{"-o", "x", "sub", "a"}, ""}, // the parent's -o is not the subcommand's
		{[]string{"sub", "--run-a", "r", "a"}, ""},
		{[]string{"-o", "x", "--spec", "mtp", "-m", "a", "--n", "0", "a"}, ""},
		{nil, ""},
	} {
		var errb strings.Builder
		code := Run(newApp(), append([]string{"t"}, tc.args...), &errb)
		if tc.msg == "" {
			if code != 0 || errb.Len() != 0 {
				t.Errorf("%q: exit %d, stderr %q; want 0", tc.args, code, errb.String())
			}
			continue
		}
		if code != 2 || errb.String() != tc.msg {
			t.Errorf("%q: exit %d, stderr %q; want 2, %q", tc.args, code, errb.String(), tc.msg)
		}
	}
}
