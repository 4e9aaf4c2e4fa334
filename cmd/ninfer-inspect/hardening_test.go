package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// -o never replaces the input, under any spelling, link or hard link (exit
// 2, one line naming both paths; the model unchanged), and a FIFO as the
// model is refused before it is opened (it would block forever). Before
// the fix "ninfer-inspect -f json -o m.ninfer m.ninfer" exited 0 and
// replaced the model with its JSON.
func TestOutputNeverReplacesInput(t *testing.T) {
	model := copyArtifact(t, testfixture.Artifact(t, "q8", nil))
	dir := filepath.Dir(model)
	orig, _ := os.ReadFile(model)
	sym := filepath.Join(dir, "sym.ninfer")
	os.Symlink(model, sym)
	hard := filepath.Join(dir, "hard.ninfer")
	os.Link(model, hard)
	fifo := filepath.Join(dir, "fifo.ninfer")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-f", "json", "-o", model, model}, 2, "--output-file " + model + ": is the input " + model},
		{[]string{"--output-file", sym, model}, 2, "--output-file " + sym + ": is the input " + model},
		{[]string{"-o", model, sym}, 2, "--output-file " + model + ": is the input " + sym},
		{[]string{"-o", hard, model}, 2, "--output-file " + hard + ": is the input " + model},
		{[]string{fifo}, 2, "ninfer-inspect: " + fifo + ": not a regular file (a named pipe)\n"},
	} {
		code, stdout, errs := runInspect(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || stdout != "" {
			t.Errorf("%v: exit %d stderr %q, want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if now, _ := os.ReadFile(model); string(now) != string(orig) {
		t.Fatal("the model was replaced")
	}
	if code, _, errs := runInspect("-o", filepath.Join(dir, "m.json"), model); code != 0 {
		t.Errorf("a different output: exit %d %q", code, errs)
	}
}
