package cliutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestFlagMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`invalid value "-1" for flag -seed: parse error`, `--seed: invalid value "-1"`},
		{`invalid value "x" for flag -n: parse error`, `-n: invalid value "x"`},
		{`invalid value "a b" for flag -top-k: strconv.ParseInt: bad`, `--top-k: invalid value "a b": strconv.ParseInt: bad`},
		{`flag provided but not defined: -zz`, `flag provided but not defined: -zz`},
	} {
		if got := FlagMessage(errors.New(tc.in)).Error(); got != tc.want {
			t.Errorf("FlagMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRunExitStatus: usage errors exit 2, runtime errors 1, interrupts 130,
// each as one "name: message" line.
func TestRunExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		actErr   error
		want     int
		wantLine string
	}{
		{"ok", nil, nil, 0, ""},
		{"runtime", nil, fmt.Errorf("read x.ninfer: boom"), 1, "t: read x.ninfer: boom\n"},
		{"usage", nil, Usagef("--foo %d must be ≥ 0", -1), 2, "t: --foo -1 must be ≥ 0\n"},
		{"interrupted", nil, fmt.Errorf("convert: %w", ErrInterrupted), 130, "t: convert: interrupted\n"},
		{"canceled", nil, fmt.Errorf("convert: %w", context.Canceled), 130, "t: convert: context canceled\n"},
		{"bad int flag", []string{"--count", "-x"}, nil, 2, "t: --count -x: not an integer (want -9223372036854775808..9223372036854775807)\n"},
		{"unknown flag", []string{"--nope"}, nil, 2, "t: flag provided but not defined: --nope\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			app := Prepare(&cli.App{
				Name:   "t",
				Flags:  []cli.Flag{&cli.IntFlag{Name: "count"}},
				Action: func(*cli.Context) error { return tc.actErr },
			}, &stdout, &stderr)
			if got := Run(app, append([]string{"t"}, tc.args...), &stderr); got != tc.want {
				t.Errorf("exit %d, want %d (stderr %q)", got, tc.want, stderr.String())
			}
			if stderr.String() != tc.wantLine {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.wantLine)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing on an error", stdout.String())
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub dir", "out.json")
	if err := WriteFileAtomic(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "two" {
		t.Fatalf("read back %q, %v; want \"two\"", got, err)
	}
	// A directory in the way: an error, and no temp file left behind.
	if err := WriteFileAtomic(dir, []byte("x")); err == nil {
		t.Fatalf("WriteFileAtomic onto a directory succeeded")
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
}

func TestUnknownFlagAsGiven(t *testing.T) {
	const p = "flag provided but not defined: "
	for _, tc := range []struct {
		args []string
		in   string
		want string
	}{
		{[]string{"t", "--bogus"}, p + "-bogus", p + "--bogus"},
		{[]string{"t", "-bogus=3"}, p + "-bogus", p + "-bogus"},
		{[]string{"t", "--weights", "m", "--bo=x"}, p + "-bo", p + "--bo"},
		{[]string{"t", "--", "--bogus"}, p + "-bogus", p + "-bogus"}, // after --: not a flag
		{[]string{"t", "--other"}, "some other error", "some other error"},
	} {
		if got := UnknownFlagAsGiven(tc.in, p, tc.args); got != tc.want {
			t.Errorf("UnknownFlagAsGiven(%q, %v) = %q, want %q", tc.in, tc.args, got, tc.want)
		}
	}
}

func TestCheckOutputFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path, hint string
		want       string // "" = ok
	}{
		{"", "--format %s", ""},
		{filepath.Join(dir, "new", "r.json"), "--format %s", ""},
		{"./md", "--format %s", ""},
		{"md", "--format %s", "--output-file md: that is a format name, not a file; for the format use --format md (for a file of that name: ./md)"},
		{"json", "", ""}, // no hint: the tool's -o is the format, a file "json" is fine
		{dir, "", "--output-file " + dir + ": is a directory (want a file path)"},
	} {
		err := CheckOutputFile("--output-file", tc.path, tc.hint)
		var ue UsageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckOutputFile(%q) = %v, want ok", tc.path, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.As(err, &ue)):
			t.Errorf("CheckOutputFile(%q) = %v, want usage error %q", tc.path, err, tc.want)
		}
	}
}

// TestWriteFileAtomicDevice: an existing device is written in place, never
// renamed over (as root, a rename would replace /dev/null itself).
func TestWriteFileAtomicDevice(t *testing.T) {
	if err := WriteFileAtomic(os.DevNull, []byte("discarded")); err != nil {
		t.Fatalf("write to %s: %v", os.DevNull, err)
	}
	fi, err := os.Stat(os.DevNull)
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device: %v, %v", os.DevNull, fi, err)
	}
	if err := CheckOutputFile("--output-file", os.DevNull, "--format %s"); err != nil {
		t.Errorf("CheckOutputFile(%s) = %v, want ok", os.DevNull, err)
	}
}

// TestWriteFileAtomicSymlink: a link (like /dev/stdout) is written through,
// not replaced by a regular file.
func TestWriteFileAtomicSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.txt")
	if err := os.WriteFile(target, []byte("old contents, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if li, err := os.Lstat(link); err != nil || li.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a symlink: %v %v", link, li, err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "new" {
		t.Fatalf("target holds %q, %v; want \"new\"", got, err)
	}
}

// TestOutputPathEndingInSeparator: a path like "out/" is refused up front
// (a usage error) and by the writer, which leaves no directory behind.
func TestOutputPathEndingInSeparator(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new") + string(os.PathSeparator)
	err := CheckOutputFile("--output-file", path, "")
	var ue UsageError
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "directory path") {
		t.Errorf("CheckOutputFile(%q) = %v, want a usage error about a directory path", path, err)
	}
	if err := WriteFileAtomic(path, []byte("x")); err == nil || !strings.Contains(err.Error(), "directory path") {
		t.Errorf("WriteFileAtomic(%q) = %v, want an error about a directory path", path, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("a refused %q left %s behind (stat: %v)", path, filepath.Join(dir, "new"), err)
	}
}

// A flag typed after the positional arguments (which urfave/cli leaves
// unparsed) is named, with where flags go, instead of an argument count.
func TestArgsFlagAfterArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"in", "out", "--recipe", "q8"}, "t: flag \"--recipe\" after the arguments (flags go first, then IN OUT)\n"},
		{[]string{"in", "out", "--recipe=q8"}, "t: flag \"--recipe\" after the arguments (flags go first, then IN OUT)\n"},
		{[]string{"in", "out", "-q"}, "t: flag \"-q\" after the arguments (flags go first, then IN OUT)\n"},
		{[]string{"in", "out", "extra"}, "t: expected IN OUT, got 3 argument(s)\n"},
		{[]string{"in"}, "t: expected IN OUT, got 1 argument(s)\n"},
		{[]string{"in", "out", "-"}, "t: expected IN OUT, got 3 argument(s)\n"},
	} {
		var stdout, stderr bytes.Buffer
		app := Prepare(&cli.App{
			Name:   "t",
			Flags:  []cli.Flag{&cli.StringFlag{Name: "recipe"}, &cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}}},
			Action: func(c *cli.Context) error { return Args(c, 2, 2, "IN OUT") },
		}, &stdout, &stderr)
		if got := Run(app, append([]string{"t"}, tc.args...), &stderr); got != 2 || stderr.String() != tc.want {
			t.Errorf("%q: exit %d, stderr %q; want 2, %q", tc.args, got, stderr.String(), tc.want)
		}
	}
}
