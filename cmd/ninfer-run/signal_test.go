package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/runner"
)

// childEnv makes the test binary run as ninfer-run (see TestMain).
const childEnv = "NINFER_RUN_TEST_CHILD"

// child is the test binary started as ninfer-run in its own process, so
// that real signals reach the real signal handling of main.
type child struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	mu             sync.Mutex
	stdout, stderr []byte
	done           chan struct{} // closed when the process has exited
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], args...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	outPipe, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, p := range []struct {
		r   io.Reader
		dst *[]byte
	}{{outPipe, &c.stdout}, {errPipe, &c.stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				n, err := p.r.Read(buf)
				c.mu.Lock()
				*p.dst = append(*p.dst, buf[:n]...)
				c.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *child) output() (stdout, stderr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.stdout), string(c.stderr)
}

// waitFor waits until ok(stdout) holds.
func (c *child) waitFor(t *testing.T, what string, ok func(stdout string) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, errs := c.output()
		if ok(out) {
			return
		}
		select {
		case <-c.done:
			t.Fatalf("exited before %s: stdout %q stderr %q", what, out, errs)
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 2 minutes: stdout %q stderr %q", what, out, errs)
		}
	}
}

// wait returns the exit status; death by a signal fails the test.
func (c *child) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("still running 2 minutes after the signal")
	}
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		_, errs := c.output()
		t.Fatalf("killed by %v (the line in progress is lost); stderr %q", ws.Signal(), errs)
	}
	return ws.ExitStatus()
}

// TestStoppingSignals: SIGTERM, SIGHUP and SIGINT delivered twice at once
// (timeout -s INT) stop generation like the first Ctrl-C: every --json
// line is complete (the prompt in progress ends with finish_reason
// "interrupted"), an --ids line in progress is terminated, and the exit
// status is 128 + the signal. Before the fix SIGTERM and SIGHUP killed the
// process mid-line.
func TestStoppingSignals(t *testing.T) {
	const maxNew = 2000
	INT, TERM, HUP := syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP
	for _, tc := range []struct {
		name    string
		json    bool
		signals []syscall.Signal
		code    int
		why     string
	}{
		{"SIGTERM --json", true, []syscall.Signal{TERM}, 143, "ninfer-run: interrupted by SIGTERM\n"},
		{"SIGHUP --json", true, []syscall.Signal{HUP}, 129, "ninfer-run: interrupted by SIGHUP\n"},
		{"SIGINT twice at once --json", true, []syscall.Signal{INT, INT}, 130, "ninfer-run: interrupted"},
		{"SIGTERM ids", false, []syscall.Signal{TERM}, 143, "ninfer-run: interrupted by SIGTERM\n"},
		{"SIGHUP ids", false, []syscall.Signal{HUP}, 129, "ninfer-run: interrupted by SIGHUP\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testfixture.SkipIfSignalsIgnored(t, tc.signals)
			args := []string{"--weights", model(t), "--backend", "cpu", "--threads", "1", "--max-ctx", "4096",
				"--prefill-chunk", "128", "--quiet", "--ignore-eos", "--ids", "--max-new", strconv.Itoa(maxNew)}
			if tc.json {
				args = append(args, "--json")
			}
			c := startChild(t, args...)
			// The first prompt runs to its end; the signal comes during the
			// second (with ids: once some of its ids are out).
			io.WriteString(c.stdin, "1 2 3\n4 5 6\n")
			lines := func(s string) int { return strings.Count(s, "\n") }
			c.waitFor(t, "the first line", func(s string) bool {
				if tc.json {
					return lines(s) >= 1
				}
				return lines(s) >= 1 && strings.Count(s[strings.Index(s, "\n"):], " ") >= 10
			})
			for _, sig := range tc.signals {
				c.cmd.Process.Signal(sig)
			}
			code := c.wait(t)
			out, errs := c.output()
			if code != tc.code || !strings.HasSuffix(errs, tc.why) && !strings.Contains(errs, tc.why) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, tc.code, errs, tc.why)
			}
			if !strings.HasSuffix(out, "\n") {
				t.Fatalf("stdout ends in a cut line: %q", out[max(0, len(out)-100):])
			}
			if !tc.json {
				ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if len(ls) != 2 || len(strings.Fields(ls[0])) != maxNew || len(strings.Fields(ls[1])) >= maxNew {
					t.Fatalf("%d lines; want the first prompt's %d ids and the second's, cut short", len(ls), maxNew)
				}
				return
			}
			js := jsonLines(t, out)
			if len(js) < 1 || len(js) > 2 || js[0].Get("finish_reason").String() != "length" || len(js[0].Get("ids").Array()) != maxNew {
				t.Fatalf("%d JSON lines; want the first prompt's complete line (then maybe the second's)", len(js))
			}
			if len(js) == 2 && (js[1].Get("finish_reason").String() != "interrupted" || len(js[1].Get("ids").Array()) >= maxNew) {
				t.Fatalf("second line finish %q with %d ids, want interrupted", js[1].Get("finish_reason").String(), len(js[1].Get("ids").Array()))
			}
		})
	}
}

// TestGuardedSinkHardStop: the repeated signal's hook leaves complete
// lines: a text or ids line in progress is terminated, nothing is written
// after it, and a --json prompt in progress writes nothing.
func TestGuardedSinkHardStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		json  bool
		ended int // prompts ended before the hard stop
		token bool
		want  string
	}{
		{"ids line in progress", false, 1, true, "7 7\n7\n"},
		{"ids between prompts", false, 1, false, "7 7\n"},
		{"json prompt in progress", true, 1, true, `"finish_reason":"length"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			var inner runner.Sink = &runner.IDSink{W: &buf}
			if tc.json {
				inner = runner.JSONSink{W: &buf}
			}
			g := &guardedSink{sink: inner, w: &buf, lines: !tc.json, flush: func() error { return nil }}
			for i := 0; i < tc.ended; i++ {
				g.Token(7, "")
				g.Token(7, "")
				g.End("", &runner.Result{IDs: []int32{7, 7}, FinishReason: runner.FinishLength})
			}
			if tc.token {
				g.Token(7, "")
			}
			var errb bytes.Buffer
			done := make(chan struct{})
			go func() { g.hardStop(cliutil.Stopped{Signal: syscall.SIGTERM}, &errb); close(done) }()
			<-done
			if tc.json {
				if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), tc.want) {
					t.Errorf("output %q, want one complete line with %s", buf.String(), tc.want)
				}
			} else if buf.String() != tc.want {
				t.Errorf("output %q, want %q", buf.String(), tc.want)
			}
			if errb.String() != "ninfer-run: interrupted by SIGTERM, then again: stopped at once, within the prompt in progress\n" {
				t.Errorf("stderr %q", errb.String())
			}
			// The lock stays held: a late token cannot reach the output.
			late := make(chan error, 1)
			go func() { late <- g.Token(8, "") }()
			select {
			case err := <-late:
				if !errors.Is(err, errStopped) {
					t.Errorf("late token: %v", err)
				}
			case <-time.After(50 * time.Millisecond):
			}
			if strings.Contains(buf.String(), "8") {
				t.Errorf("a token after the hard stop was written: %q", buf.String())
			}
		})
	}
}
