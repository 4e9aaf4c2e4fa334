package cliutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A named pipe (or any non-regular file) given as an input is refused with
// one line before it is opened: opening a FIFO with no writer blocks
// forever.
func TestCheckRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	reg := filepath.Join(dir, "m.ninfer")
	os.WriteFile(reg, []byte("x"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(fifo, link)
	for _, tc := range []struct {
		path, want string
	}{
		{fifo, fifo + ": not a regular file (a named pipe)"},
		{link, link + ": not a regular file (a named pipe)"},
		{dir, dir + ": not a regular file (a directory)"},
		{"/dev/null", "/dev/null: not a regular file (a character device)"},
		{reg, ""},
		{"-", ""},
		{"", ""},
		{filepath.Join(dir, "missing"), ""}, // the open reports it
	} {
		err := CheckRegularFile(tc.path)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.path, err)
			}
			continue
		}
		var ue UsageError
		if err == nil || err.Error() != tc.want || !errors.As(err, &ue) {
			t.Errorf("%s: got %v, want usage error %q", tc.path, err, tc.want)
		}
	}
}

// An output that is an input of the same run, by name, through a link of
// the output, of its parent directory or of the input, or a hard link, is
// refused naming both paths.
func TestCheckOutputNotInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.ninfer")
	os.WriteFile(in, []byte("model"), 0o644)
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte("{}"), 0o644)
	sym := filepath.Join(dir, "sym.ninfer")
	os.Symlink(in, sym)
	hard := filepath.Join(dir, "hard.ninfer")
	os.Link(in, hard)
	subLink := filepath.Join(dir, "d")
	os.Symlink(dir, subLink)
	for _, tc := range []struct {
		name, out string
		inputs    []string
		refused   bool
	}{
		{"same path", in, []string{in}, true},
		{"other spelling", filepath.Join(dir, ".", "m.ninfer"), []string{in}, true},
		{"output is a symlink to the input", sym, []string{in}, true},
		{"input is a symlink to the output", in, []string{sym}, true},
		{"hard link", hard, []string{in}, true},
		{"through a linked parent", filepath.Join(subLink, "m.ninfer"), []string{in}, true},
		{"one of several inputs", in, []string{"", "-", other, in}, true},
		{"another file", other, []string{in}, false},
		{"new file", filepath.Join(dir, "new.json"), []string{in}, false},
		{"no output", "", []string{in}, false},
		{"stdout", "-", []string{in}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputNotInput("--output-file", tc.out, tc.inputs...)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ue UsageError
			if err == nil || !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "--output-file "+tc.out+": is the input ") ||
				strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestCheckIOFifo(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "corpus.ids")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	if err := CheckIO("--output-file", filepath.Join(dir, "out.json"), "", fifo); err == nil ||
		err.Error() != fifo+": not a regular file (a named pipe)" {
		t.Fatalf("got %v", err)
	}
}
