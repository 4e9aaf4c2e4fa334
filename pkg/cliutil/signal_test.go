package cliutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestStoppedExitStatus(t *testing.T) {
	for _, tc := range []struct {
		sig  os.Signal
		code int
		msg  string
	}{
		{syscall.SIGINT, 130, "interrupted"},
		{syscall.SIGTERM, 143, "interrupted by SIGTERM"},
		{syscall.SIGHUP, 129, "interrupted by SIGHUP"},
	} {
		s := Stopped{tc.sig}
		if s.ExitStatus() != tc.code || s.Error() != tc.msg || !errors.Is(fmt.Errorf("x: %w", s), ErrInterrupted) {
			t.Errorf("%v: status %d message %q, want %d %q and errors.Is ErrInterrupted", tc.sig, s.ExitStatus(), s.Error(), tc.code, tc.msg)
		}
		if got := InterruptedStatus(fmt.Errorf("x: %w", s)); got != tc.code {
			t.Errorf("InterruptedStatus(%v) = %d, want %d", tc.sig, got, tc.code)
		}
	}
	if got := InterruptedStatus(ErrInterrupted); got != 130 {
		t.Errorf("InterruptedStatus(ErrInterrupted) = %d, want 130", got)
	}
}

// TestRunExitStatusSignal: cliutil.Run exits 128+signal for a Stopped error.
func TestRunExitStatusSignal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		line string
	}{
		{fmt.Errorf("%w: m.ninfer was not written", Stopped{syscall.SIGTERM}), 143, "t: interrupted by SIGTERM: m.ninfer was not written\n"},
		{fmt.Errorf("%w: m.ninfer was not written", Stopped{syscall.SIGHUP}), 129, "t: interrupted by SIGHUP: m.ninfer was not written\n"},
		{fmt.Errorf("%w: m.ninfer was not written", Stopped{syscall.SIGINT}), 130, "t: interrupted: m.ninfer was not written\n"},
	} {
		var stdout, stderr bytes.Buffer
		app := Prepare(&cli.App{Name: "t", Action: func(*cli.Context) error { return tc.err }}, &stdout, &stderr)
		if got := Run(app, []string{"t"}, &stderr); got != tc.code || stderr.String() != tc.line {
			t.Errorf("%v: exit %d stderr %q, want %d %q", tc.err, got, stderr.String(), tc.code, tc.line)
		}
	}
}

// fakeExit records the exit status the stopper asks for.
type fakeExit struct {
	mu    sync.Mutex
	codes []int
	done  chan struct{}
}

func (f *fakeExit) exit(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes = append(f.codes, code)
	if len(f.codes) == 1 {
		close(f.done)
	}
}

// TestStopperSequence feeds signal sequences (with their arrival times) to
// the handler and checks the cancellation, the hooks and the exit.
func TestStopperSequence(t *testing.T) {
	int_, term, hup := syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP
	type ev struct {
		sig os.Signal
		at  time.Duration
	}
	for _, tc := range []struct {
		name      string
		events    []ev
		hooks     int
		wantCause error // nil: not cancelled
		wantExit  int   // 0: no exit
		wantHooks int
	}{
		{"none", nil, 1, nil, 0, 0},
		{"first SIGINT cancels", []ev{{int_, 0}}, 1, Stopped{int_}, 0, 0},
		{"first SIGTERM cancels", []ev{{term, 0}}, 1, Stopped{term}, 0, 0},
		{"first SIGHUP cancels", []ev{{hup, 0}}, 1, Stopped{hup}, 0, 0},
		{"timeout's double delivery is one request", []ev{{int_, 0}, {int_, time.Millisecond}}, 1, Stopped{int_}, 0, 0},
		{"repeat runs the hooks and exits with the first signal", []ev{{int_, 0}, {int_, time.Second}}, 2, Stopped{int_}, 130, 2},
		{"SIGTERM then SIGINT exits 143", []ev{{term, 0}, {int_, time.Second}}, 1, Stopped{term}, 143, 1},
		{"repeat without a hook is ignored", []ev{{hup, 0}, {hup, time.Second}, {hup, 2 * time.Second}}, 0, Stopped{hup}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := &fakeExit{done: make(chan struct{})}
			ctx, s := newStopper(context.Background(), fx.exit)
			var mu sync.Mutex
			var ran []int
			for i := 0; i < tc.hooks; i++ {
				OnHardStop(ctx, func() { mu.Lock(); ran = append(ran, i); mu.Unlock() })
			}
			t0 := time.Unix(1_700_000_000, 0)
			for _, e := range tc.events {
				s.handle(e.sig, t0.Add(e.at))
			}
			if tc.wantExit != 0 {
				select {
				case <-fx.done:
				case <-time.After(10 * time.Second):
					t.Fatal("no exit after the hooks")
				}
			}
			fx.mu.Lock()
			codes := slices.Clone(fx.codes)
			fx.mu.Unlock()
			switch {
			case tc.wantExit == 0 && len(codes) != 0:
				t.Errorf("exit %v, want none", codes)
			case tc.wantExit != 0 && !slices.Equal(codes, []int{tc.wantExit}):
				t.Errorf("exit %v, want [%d]", codes, tc.wantExit)
			}
			mu.Lock()
			if want := []int{0, 1}[:tc.wantHooks]; !slices.Equal(ran, want) {
				t.Errorf("hooks ran %v, want %v", ran, want)
			}
			mu.Unlock()
			if tc.wantCause == nil {
				if ctx.Err() != nil {
					t.Errorf("cancelled (%v) without a signal", context.Cause(ctx))
				}
				return
			}
			if ctx.Err() == nil || StopCause(ctx) != tc.wantCause {
				t.Errorf("cause %v, want %v", StopCause(ctx), tc.wantCause)
			}
		})
	}
}

// TestStopperSignalDuringHooks: a signal while the hooks run (one stuck on
// a full pipe) exits at once; a removed hook does not run.
func TestStopperSignalDuringHooks(t *testing.T) {
	fx := &fakeExit{done: make(chan struct{})}
	ctx, s := newStopper(context.Background(), fx.exit)
	remove := OnHardStop(ctx, func() { t.Error("removed hook ran") })
	remove()
	block := make(chan struct{})
	defer close(block)
	OnHardStop(ctx, func() { <-block })
	t0 := time.Unix(1_700_000_000, 0)
	s.handle(syscall.SIGTERM, t0)
	s.handle(syscall.SIGTERM, t0.Add(time.Second)) // starts the (stuck) hook
	s.handle(syscall.SIGINT, t0.Add(2*time.Second))
	<-fx.done
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if !slices.Equal(fx.codes, []int{143}) {
		t.Errorf("exit %v, want [143]", fx.codes)
	}
}

func TestStopCausePlainCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := StopCause(ctx); err != ErrInterrupted {
		t.Errorf("StopCause = %v, want ErrInterrupted", err)
	}
	if OnHardStop(ctx, func() {}) == nil {
		t.Error("OnHardStop without a stopper returned nil")
	}
}

// TestNotifyStopRealSignals sends SIGHUP and SIGTERM to the test process:
// the first cancels the context with its cause, the repeat neither kills
// the process nor changes the cause.
func TestNotifyStopRealSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		if signal.Ignored(sig) {
			t.Skipf("%v is ignored in this process", sig)
		}
	}
	ctx, release := NotifyStop(context.Background())
	defer release()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not cancel the context")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil { // no hook: ignored
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if c := StopCause(ctx); c != (Stopped{syscall.SIGHUP}) {
		t.Errorf("cause %v, want Stopped{SIGHUP}", c)
	}
}
