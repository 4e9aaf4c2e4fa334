package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// childEnv makes the test binary run as ninfer-convert (see TestMain).
const childEnv = "NINFER_CONVERT_TEST_CHILD"

// TestStoppingSignals: SIGTERM, SIGHUP and SIGINT (also delivered twice at
// once, as timeout -s INT does, or repeated later) during a conversion
// exit 128 + the first signal with one line, and leave neither the
// artifact nor its temporary file. Before the fix SIGTERM and SIGHUP
// killed the process and left OUT.ninfer.tmp-*.
func TestStoppingSignals(t *testing.T) {
	// About 60 MiB of bf16 weights, converted on one thread to fp8: a few
	// tenths of a second, so that the signal lands during the conversion.
	src := testfixture.HFDir(t, func(o *testmodel.Options) { o.Layers, o.Hidden, o.Intermediate = 8, 512, 2048 })
	INT, TERM, HUP := syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP
	for _, tc := range []struct {
		name    string
		signals []syscall.Signal
		later   syscall.Signal // sent again after the repeat window, if still running
		code    int
		why     string
	}{
		{"SIGTERM", []syscall.Signal{TERM}, 0, 143, "interrupted by SIGTERM"},
		{"SIGHUP", []syscall.Signal{HUP}, 0, 129, "interrupted by SIGHUP"},
		{"SIGINT twice at once", []syscall.Signal{INT, INT}, 0, 130, "interrupted"},
		{"SIGTERM then SIGINT", []syscall.Signal{TERM}, INT, 143, "interrupted by SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testfixture.SkipIfSignalsIgnored(t, tc.signals)
			// The conversion may win the race with the signal on a fast
			// machine: such an attempt proves nothing and is run again.
			for attempt := 1; ; attempt++ {
				dir := filepath.Join(t.TempDir(), "out")
				out := filepath.Join(dir, "m.ninfer")
				cmd := exec.Command(os.Args[0], "--quiet", "--threads", "1", "--recipe", "fp8", src, out)
				cmd.Env = append(os.Environ(), childEnv+"=1")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				// Wait for the temporary file: the conversion is writing.
				for started := false; !started; {
					if tmps, _ := filepath.Glob(out + ".tmp-*"); len(tmps) > 0 {
						break
					}
					select {
					case <-done:
						started = true
					case <-time.After(time.Millisecond):
					}
				}
				for _, sig := range tc.signals {
					cmd.Process.Signal(sig)
				}
				if tc.later != 0 {
					time.Sleep(2 * cliutil.RepeatWindow)
					cmd.Process.Signal(tc.later) // fails harmlessly once exited
				}
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					t.Fatalf("still running 2 minutes after the signal; stderr %q", stderr.String())
				}
				ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
				if ws.Signaled() {
					t.Fatalf("killed by %v; stderr %q", ws.Signal(), stderr.String())
				}
				if ws.ExitStatus() == 0 && attempt < 5 {
					t.Logf("attempt %d: the conversion finished before the signal; again", attempt)
					continue
				}
				want := "ninfer-convert: " + tc.why + ": " + out + " was not written\n"
				if ws.ExitStatus() != tc.code || stderr.String() != want || stdout.Len() != 0 {
					t.Fatalf("exit %d stdout %q stderr %q; want %d and %q", ws.ExitStatus(), stdout.String(), stderr.String(), tc.code, want)
				}
				ents, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(ents) != 0 {
					var names []string
					for _, e := range ents {
						names = append(names, e.Name())
					}
					t.Fatalf("left behind in %s: %s", dir, strings.Join(names, ", "))
				}
				return
			}
		})
	}
}
