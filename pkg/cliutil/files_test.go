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

// Standard input redirected from a file ("< r.jsonl") is an input too: an
// output naming that file, by any spelling, is refused
// (it used to be truncated and rewritten by the run that read it).
func TestCheckOutputNotInputStdin(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "r.jsonl")
	os.WriteFile(in, []byte("{}\n"), 0o644)
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = saved }()
	// (/dev/stdin names the process's descriptor 0, which os.Stdin here does
	// not replace; the tools' tests cover it.)
	for _, out := range []string{in, filepath.Join(dir, ".", "r.jsonl")} {
		err := CheckOutputNotInput("--output-file", out, "-")
		var ue UsageError
		if err == nil || !errors.As(err, &ue) || err.Error() != "--output-file "+out+": is the input standard input (an output never replaces an input; choose another path)" {
			t.Errorf("%s: got %v", out, err)
		}
	}
	if err := CheckOutputNotInput("--output-file", filepath.Join(dir, "other.json"), "-"); err != nil {
		t.Error(err)
	}
	// Without "-" among the inputs standard input is not read: no refusal.
	if err := CheckOutputNotInput("--output-file", in); err != nil {
		t.Error(err)
	}
}

// Two outputs of one run naming one file, existing or not, in any
// spelling or through a linked directory, are refused naming both.
func TestCheckOutputsDiffer(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "ln")
	os.Symlink(dir, link)
	a := filepath.Join(dir, "x.out")
	for _, tc := range []struct {
		b       string
		refused bool
	}{
		{a, true},
		{filepath.Join(dir, ".", "sub", "..", "x.out"), true},
		{filepath.Join(link, "x.out"), true},
		{filepath.Join(dir, "y.out"), false},
		{"", false},
		{"-", false},
	} {
		err := CheckOutputsDiffer("--output-file", a, "--save-logits", tc.b)
		var ue UsageError
		if tc.refused != (err != nil) || err != nil && (!errors.As(err, &ue) ||
			err.Error() != "--save-logits "+tc.b+": is also --output-file "+a+" (two outputs of one run must differ; choose another path)") {
			t.Errorf("%q: got %v", tc.b, err)
		}
	}
	os.WriteFile(a, []byte("x"), 0o644)
	hard := filepath.Join(dir, "hard.out")
	os.Link(a, hard)
	if err := CheckOutputsDiffer("--output-file", a, "--save-logits", hard); err == nil {
		t.Error("hard link: not refused")
	}
}

// Standard input is read with a bound: an endless source (< /dev/zero)
// fails with one line instead of reading until memory runs out.
func TestReadAllLimit(t *testing.T) {
	if b, err := ReadAllLimit(strings.NewReader("abc"), "<stdin>", 3); err != nil || string(b) != "abc" {
		t.Fatalf("got %q %v", b, err)
	}
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	_, err = ReadAllLimit(f, "<stdin>", 1<<20)
	if err == nil || err.Error() != "<stdin>: input larger than 1048576 bytes (the most a tool reads from standard input)" {
		t.Fatalf("got %v", err)
	}
}
