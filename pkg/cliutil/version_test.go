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
