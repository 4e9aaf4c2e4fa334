package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ninfer/ninfer/pkg/cliutil"
)

// Size flags out of what the model format allows are usage errors naming
// the flag as typed and its range. Before the fix --layers -1 panicked with
// a goroutine dump and --vocab 2147483648 passed validation and ran out of
// memory.
func TestSizeFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--layers", "-1"}, 2, "--layers -1: out of range (want 1..1024)"},
		{[]string{"--layers", "0"}, 2, "--layers 0: out of range (want 1..1024)"},
		{[]string{"--layers", "1025"}, 2, "--layers 1025: out of range (want 1..1024)"},
		{[]string{"--vocab", "2147483648"}, 2, "--vocab 2147483648: out of range (want 261..2147483647)"},
		{[]string{"--hidden", "-5"}, 2, "--hidden -5: out of range"},
		{[]string{"--intermediate", "0"}, 2, "--intermediate 0: out of range"},
		{[]string{"--mtp-layers", "-1"}, 2, "--mtp-layers -1: out of range (want 0..1024)"},
		{[]string{"--shards", "0"}, 2, "--shards 0: out of range"},
		// In range but far more than any machine has: refused by the
		// memory estimate before anything is allocated or written.
		{[]string{"--vocab", "2147483647", "--hidden", "128"}, 1, "of memory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "m")
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{name}, tc.args...), out), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stderr.String(), name+": ") || !strings.Contains(stderr.String(), tc.msg) ||
				strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.msg)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %d entries behind", len(ents))
			}
		})
	}
}

// A stop (SIGTERM here) exits 128 + the signal with one line and leaves no
// hidden temporary directory and no output. Before the fix ninfer-testmodel
// had no signal handling at all.
func TestStopLeavesNothing(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(cliutil.SignalName(sig), func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(cliutil.Stopped{Signal: sig})
			saved := interruptContext
			interruptContext = func() (context.Context, context.CancelFunc) { return ctx, func() {} }
			defer func() { interruptContext = saved }()
			dir := t.TempDir()
			out := filepath.Join(dir, "m")
			var stdout, stderr bytes.Buffer
			code := run([]string{name, "--hidden", "64", "--intermediate", "96", out}, &stdout, &stderr)
			want := name + ": " + cliutil.Stopped{Signal: sig}.Error() + ": " + out + " was not written\n"
			if code != 128+int(sig) || stderr.String() != want {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, stderr.String(), 128+int(sig), want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %s behind", ents[0].Name())
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{name, "--version"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d stderr %q", code, stderr.String())
	}
	for _, w := range []string{name + " ", "commit: ", "go: go", "backends: cpu", "cpu isa: scalar"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("--version lacks %q: %q", w, stdout.String())
		}
	}
}

// OUT_DIR is checked before any work: the current directory (or one that
// contains it), a file, and with --force a non-empty directory that is not
// a model directory are usage errors (exit 2) naming the path; a non-empty
// directory without --force stays a runtime error (exit 1). Before the fix
// "--force ." generated the model and then failed to rename the working
// directory, and "--force DIR" silently deleted a directory of other files.
func TestOutDirCheckedFirst(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	other := filepath.Join(root, "other")
	model := filepath.Join(root, "model")
	ctrl := filepath.Join(root, "\x1b[31mred")
	for _, d := range []string{work, other, ctrl} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(other, "precious.txt"), filepath.Join(ctrl, "precious.txt"), filepath.Join(root, "file")} {
		if err := os.WriteFile(f, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code := run([]string{name, "-q", "--hidden", "64", "--intermediate", "96", model}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("making the model directory: exit %d", code)
	}
	if err := os.Symlink(work, filepath.Join(root, "link-to-work")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string // the whole line after "ninfer-testmodel: "
	}{
		{"force_dot", []string{"--force", "."}, 2, ". is the current directory or one that contains it (give a new directory path)"},
		{"dot", []string{"."}, 2, ". is the current directory or one that contains it (give a new directory path)"},
		{"parent", []string{"--force", ".."}, 2, ".. is the current directory or one that contains it (give a new directory path)"},
		{"absolute_cwd", []string{"--force", work}, 2, work + " is the current directory or one that contains it (give a new directory path)"},
		{"link_to_cwd", []string{"--force", "../link-to-work"}, 2, "../link-to-work is the current directory or one that contains it (give a new directory path)"},
		{"file", []string{"--force", "../file"}, 2, "../file exists and is not a directory (want OUT_DIR, a directory path)"},
		{"force_not_model_dir", []string{"--force", "../other"}, 2, "../other is a non-empty directory that is not a model directory (no config.json and weights); --force replaces only a model directory"},
		{"force_ctrl_not_model_dir", []string{"--force", ctrl}, 2, `"` + root + `/\x1b[31mred" is a non-empty directory`},
		{"not_empty", []string{"../other"}, 1, "../other: output directory is not empty (use --force to replace it)"},
		{"under_file", []string{"../file/sub"}, 1, "../file/sub: not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := interruptContext
			interruptContext = func() (context.Context, context.CancelFunc) {
				t.Error("the generation started")
				return context.WithCancel(context.Background())
			}
			defer func() { interruptContext = saved }()
			var stdout, stderr bytes.Buffer
			code := run(append([]string{name}, tc.args...), &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stderr.String(), name+": "+tc.msg) || strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, stderr.String(), tc.code, name+": "+tc.msg)
			}
		})
	}
	for _, f := range []string{filepath.Join(other, "precious.txt"), filepath.Join(ctrl, "precious.txt")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if ents, _ := os.ReadDir(work); len(ents) != 0 {
		t.Errorf("left %d entries in the working directory", len(ents))
	}
	// --force replaces a model directory, also through a relative path.
	var stderr bytes.Buffer
	if code := run([]string{name, "--force", "--seed", "9", "--hidden", "64", "--intermediate", "96", "../model"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--force over a model directory: exit %d %q", code, stderr.String())
	}
}
