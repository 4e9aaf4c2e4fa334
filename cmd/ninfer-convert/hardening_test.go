package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// Concurrent conversions to one output without --force: exactly one wins,
// the others fail with one line and leave no temporary file. Before the
// fix the "exists" check was not atomic and every run replaced the output.
// The runs are separate processes (the test binary as ninfer-convert, see
// TestMain), as two users' runs are.
func TestConcurrentConvertsOneWins(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "m.ninfer")
	const n = 4
	var wg sync.WaitGroup
	codes, errs := make([]int, n), make([]string, n)
	cmds := make([]*exec.Cmd, n)
	bufs := make([]bytes.Buffer, n)
	for i := range n {
		cmds[i] = exec.Command(os.Args[0], "--quiet", "--recipe", "q8", src, out)
		cmds[i].Env = append(os.Environ(), childEnv+"=1")
		cmds[i].Stderr = &bufs[i]
	}
	for i := range n {
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmds[i].Wait()
			codes[i], errs[i] = cmds[i].ProcessState.ExitCode(), bufs[i].String()
		}()
	}
	wg.Wait()
	wins := 0
	for i := range n {
		switch {
		case codes[i] == 0:
			wins++
		case codes[i] != 1 || !strings.Contains(errs[i], out+" exists (use --force to overwrite)") || strings.Count(errs[i], "\n") != 1:
			t.Errorf("run %d: exit %d stderr %q", i, codes[i], errs[i])
		}
	}
	if wins != 1 {
		t.Errorf("%d runs succeeded, want exactly 1 (exits %v, stderr %q)", wins, codes, errs)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in %s: %v", dir, names)
	}
}

// The output may not be one of the inputs (a file of HF_DIR, the
// --draft-corpus), even with --force; a FIFO as --draft-corpus is refused
// before it is opened.
func TestConvertOutputNotInput(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	corpus := filepath.Join(t.TempDir(), "c.ids")
	os.WriteFile(corpus, []byte("1 2 3\n"), 0o644)
	fifo := filepath.Join(t.TempDir(), "fifo.ids")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(src, "model.safetensors")
	before, _ := os.Stat(weights)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--force", "--recipe", "q8", src, weights}, 2, weights + ": is the input " + weights},
		{[]string{"--force", "--recipe", "q8", "--draft-head", "8", "--draft-corpus", corpus, src, corpus}, 2, corpus + ": is the input " + corpus},
		{[]string{"--recipe", "q8", "--draft-head", "8", "--draft-corpus", fifo, src, filepath.Join(t.TempDir(), "m.ninfer")}, 2, fifo + ": not a regular file (a named pipe)"},
		{[]string{"--threads", "100000", src, filepath.Join(t.TempDir(), "m.ninfer")}, 2, "--threads 100000: out of range (want 0..256; 0 = all cores)"},
	} {
		code, _, errs := runConvert(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d stderr %q, want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if after, err := os.Stat(weights); err != nil || !os.SameFile(before, after) || after.Size() != before.Size() {
		t.Errorf("the input was replaced")
	}
}
