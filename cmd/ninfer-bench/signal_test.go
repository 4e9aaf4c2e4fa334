package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// childEnv makes the test binary run as ninfer-bench (see TestMain).
const childEnv = "NINFER_BENCH_TEST_CHILD"

// child is the test binary started as ninfer-bench in its own process, so
// that real signals reach the real signal handling of main.
type child struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr []byte
	done   chan struct{} // closed when the process has exited
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], args...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.Stdout = &c.stdout
	pipe, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pipe.Read(buf)
			c.mu.Lock()
			c.stderr = append(c.stderr, buf[:n]...)
			c.mu.Unlock()
			if err != nil {
				break
			}
		}
		io.Copy(io.Discard, pipe)
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *child) errText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.stderr)
}

// waitFor waits until stderr contains s (a progress line: that rep runs,
// the ones before it are finished).
func (c *child) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(c.errText(), s) {
		select {
		case <-c.done:
			t.Fatalf("exited before %q on stderr: %s", s, c.errText())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q on stderr after 2 minutes: %s", s, c.errText())
		}
	}
}

func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v (stderr %s)", sig, err, c.errText())
	}
}

// wait returns the exit status; death by a signal fails the test.
func (c *child) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running 2 minutes after the signal: %s", c.errText())
	}
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("killed by %v (the finished reps are lost); stderr: %s", ws.Signal(), c.errText())
	}
	return ws.ExitStatus()
}

// checkLines checks that data is complete JSON lines: the run line, then
// the rep lines of each test with consecutive rep indices, test_end lines
// only after a test's reps. It returns the number of rep lines per test
// label and the labels with a test_end.
func checkLines(t *testing.T, data string) (reps map[string]int, ended map[string]bool) {
	t.Helper()
	if !strings.HasSuffix(data, "\n") {
		t.Fatalf("output does not end in a complete line: %q", tail(data))
	}
	reps, ended = map[string]int{}, map[string]bool{}
	for i, s := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
		l, err := benchfmt.ParseLineString(s)
		if err != nil {
			t.Fatalf("line %d: %v: %q", i+1, err, s)
		}
		switch {
		case i == 0 && l.Run == nil:
			t.Fatalf("line 1 is not the run line: %q", s)
		case l.Rep != nil:
			if ended[l.Rep.Label] || l.Rep.RepIndex != int64(reps[l.Rep.Label]) {
				t.Fatalf("line %d: rep %d of %s out of order", i+1, l.Rep.RepIndex, l.Rep.Label)
			}
			reps[l.Rep.Label]++
		case l.TestEnd != nil:
			ended[l.TestEnd.Label] = true
		}
	}
	return reps, ended
}

func tail(s string) string { return s[max(0, len(s)-200):] }

// checkOnlyFile fails when dir holds anything but the output file (a
// temporary file left by an interrupted write).
func checkOnlyFile(t *testing.T, dir, file string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != file {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want only %s", dir, names, file)
	}
}

// TestStoppingSignals: SIGTERM, SIGHUP and SIGINT delivered twice at once
// (timeout -s INT: to the child, then to its process group) each stop the
// run like the first Ctrl-C: the reps finished before the signal are in
// the output (--output-file or stdout; JSON lines or the document of what
// was measured), the exit status is 128 + the signal, no temporary file is
// left. Before the fix SIGTERM and SIGHUP killed the process and
// --output-file was never written.
func TestStoppingSignals(t *testing.T) {
	model, corpusPath := fixture(t)
	INT, TERM, HUP := syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP
	for _, tc := range []struct {
		name    string
		format  string
		file    string // --output-file name; "" = stdout
		signals []syscall.Signal
		code    int
		why     string
	}{
		{"SIGTERM jsonl to file", "jsonl", "r.jsonl", []syscall.Signal{TERM}, 143, "interrupted by SIGTERM"},
		{"SIGHUP jsonl to file", "jsonl", "r.jsonl", []syscall.Signal{HUP}, 129, "interrupted by SIGHUP"},
		{"SIGINT twice at once jsonl to file", "jsonl", "r.jsonl", []syscall.Signal{INT, INT}, 130, "interrupted"},
		{"SIGTERM json document to file", "json", "r.json", []syscall.Signal{TERM}, 143, "interrupted by SIGTERM"},
		{"SIGINT twice at once json document to file", "json", "r.json", []syscall.Signal{INT, INT}, 130, "interrupted"},
		{"SIGHUP csv to stdout", "csv", "", []syscall.Signal{HUP}, 129, "interrupted by SIGHUP"},
		{"SIGTERM jsonl to stdout", "jsonl", "", []syscall.Signal{TERM}, 143, "interrupted by SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testfixture.SkipIfSignalsIgnored(t, tc.signals)
			dir := filepath.Join(t.TempDir(), "out")
			args := []string{"--weights", model, "--corpus", corpusPath, "--backend", "cpu", "--threads", "1",
				"-n", "8", "-r", "100000", "--warmup", "0", "--output", tc.format}
			if tc.file != "" {
				args = append(args, "--output-file", filepath.Join(dir, tc.file))
			}
			c := startChild(t, args...)
			c.waitFor(t, "rep 4/100000") // reps 1-3 are finished
			for _, sig := range tc.signals {
				c.signal(t, sig)
			}
			code := c.wait(t)
			stderr := c.errText()
			if code != tc.code || !strings.Contains(stderr, name+": "+tc.why) {
				t.Fatalf("exit %d, want %d with %q; stderr %q", code, tc.code, tc.why, tail(stderr))
			}
			data := c.stdout.String()
			if tc.file != "" {
				if data != "" {
					t.Errorf("stdout %q, want nothing (--output-file)", tail(data))
				}
				b, err := os.ReadFile(filepath.Join(dir, tc.file))
				if err != nil {
					t.Fatalf("the finished reps were not written: %v; stderr %q", err, tail(stderr))
				}
				data = string(b)
				checkOnlyFile(t, dir, tc.file)
			}
			switch tc.format {
			case "jsonl":
				reps, ended := checkLines(t, data)
				if reps["tg8"] < 3 || ended["tg8"] {
					t.Errorf("%d tg8 reps (test_end %t), want ≥ 3 finished reps and no test_end", reps["tg8"], ended["tg8"])
				}
			case "json":
				d, err := benchfmt.DecodeDocument([]byte(data))
				if err != nil {
					t.Fatalf("document: %v", err)
				}
				if len(d.Tests) != 1 || d.Tests[0].Label != "tg8" || len(d.Tests[0].Reps) < 3 {
					t.Fatalf("document tests %+v, want tg8 with ≥ 3 reps", d.Tests)
				}
			case "csv":
				rows := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
				if len(rows) != 2 || !strings.Contains(rows[1], "tg8") {
					t.Errorf("csv %q, want a header and the tg8 row", data)
				}
			}
		})
	}
}

// slowModel is a model whose decode steps are slow enough that a tg4000
// rep takes seconds.
func slowModel(t *testing.T) string {
	return testfixture.Artifact(t, "q8", func(o *testmodel.Options) {
		o.Layers, o.Hidden, o.Intermediate = 8, 256, 512
	})
}

// TestRepeatedSignalDuringLongRep: a second SIGINT well after the first,
// while a long rep runs, stops at once (it does not wait for the rep) and
// still writes the finished reps: the pp16 test and its test_end, no tg
// rep. Exit 130, the first signal's status. Before the fix the second
// Ctrl-C killed the process and --output-file was never written.
func TestRepeatedSignalDuringLongRep(t *testing.T) {
	model := slowModel(t)
	_, corpusPath := fixture(t)
	for _, tc := range []struct {
		format, file string
		first        syscall.Signal
		code         int
	}{
		{"jsonl", "r.jsonl", syscall.SIGINT, 130},
		{"json", "r.json", syscall.SIGTERM, 143},
	} {
		t.Run(tc.format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			c := startChild(t, "--weights", model, "--corpus", corpusPath, "--backend", "cpu", "--threads", "1",
				"-p", "16", "-n", "4000", "-r", "2", "--warmup", "0", "--output", tc.format, "--output-file", filepath.Join(dir, tc.file))
			c.waitFor(t, "[2/2] tg4000 rep 1/2") // pp16 is finished, the long rep runs
			c.signal(t, tc.first)
			time.Sleep(4 * cliutil.RepeatWindow) // a new request, not the same one twice
			c.signal(t, syscall.SIGINT)
			code := c.wait(t)
			stderr := c.errText()
			if code != tc.code || !strings.Contains(stderr, "then again: stopped at once; the output holds the reps finished") {
				t.Fatalf("exit %d, want %d and a hard stop; stderr %q", code, tc.code, tail(stderr))
			}
			b, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatalf("the finished reps were not written: %v", err)
			}
			checkOnlyFile(t, dir, tc.file)
			if tc.format == "jsonl" {
				reps, ended := checkLines(t, string(b))
				if reps["pp16"] != 2 || !ended["pp16"] || reps["tg4000"] != 0 {
					t.Errorf("reps %v ended %v, want pp16's 2 reps and test_end, no tg4000 rep", reps, ended)
				}
				return
			}
			d, err := benchfmt.DecodeDocument(b)
			if err != nil {
				t.Fatalf("document: %v", err)
			}
			if len(d.Tests) != 1 || d.Tests[0].Label != "pp16" || len(d.Tests[0].Reps) != 2 {
				t.Fatalf("document tests %+v, want pp16 with 2 reps", d.Tests)
			}
		})
	}
}
