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
	"time"

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

// Every file of HF_DIR is an input: a named pipe there (config.json) used
// to block the conversion forever, and tokenizer.json linked to a device
// was skipped as missing, the artifact written without its tokenizer. Both
// are refused up front, as are HF_DIR naming a file and a negative
// --draft-head given with its corpus (which was told "go together").
func TestConvertHFDirEntries(t *testing.T) {
	corpus := filepath.Join(t.TempDir(), "c.ids")
	os.WriteFile(corpus, []byte("1 2 3\n"), 0o644)
	fifoDir := testfixture.HFDir(t, nil)
	cfg := filepath.Join(fifoDir, "config.json")
	os.Remove(cfg)
	if err := syscall.Mkfifo(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	devDir := testfixture.HFDir(t, nil)
	tok := filepath.Join(devDir, "tokenizer.json")
	os.Remove(tok)
	if err := os.Symlink("/dev/zero", tok); err != nil {
		t.Fatal(err)
	}
	plain := testfixture.HFDir(t, nil)
	file := filepath.Join(plain, "config.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--recipe", "q8", fifoDir}, cfg + ": not a regular file (a named pipe)"},
		{[]string{"--recipe", "q8", devDir}, tok + ": not a regular file (a character device)"},
		{[]string{"--recipe", "q8", file}, file + ": not a directory (want the Hugging Face model directory HF_DIR)"},
		{[]string{"--recipe", "q8", "--draft-head", "-4", "--draft-corpus", corpus, plain}, "--draft-head -4: out of range (want 0..9223372036854775807; 0 = none)"},
		{[]string{"--recipe", "q8", "-draft-head=-4", "--draft-corpus", corpus, plain}, "-draft-head -4: out of range (want 0..9223372036854775807; 0 = none)"},
		{[]string{"--recipe", "q8", "-threads", "999", plain}, "-threads 999: out of range (want 0..256; 0 = all cores)"},
	} {
		out := filepath.Join(t.TempDir(), "m.ninfer")
		done := make(chan struct{})
		var code int
		var errs string
		go func() { code, _, errs = runConvert(append(tc.args, out)...); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%v: still running after 20 s (blocked on a pipe?)", tc.args)
		}
		if code != 2 || errs != "ninfer-convert: "+tc.want+"\n" {
			t.Errorf("%v: exit %d stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", tc.args, out)
		}
	}
}
