package cliutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// StopSignals are the signals that stop a tool the way the first Ctrl-C
// does: SIGINT, SIGTERM and SIGHUP. A signal that was ignored when the
// process started (nohup, a background job of a script) stays ignored.
var StopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// RepeatWindow is how soon after the first stopping signal another one
// still counts as the same request: timeout(1) delivers its signal to the
// child and then again to its whole process group, so one stop request can
// arrive twice within microseconds.
const RepeatWindow = 50 * time.Millisecond

// Stopped is the cause of a run stopped by a signal. It matches
// ErrInterrupted under errors.Is.
type Stopped struct{ Signal os.Signal }

// Error is "interrupted" for SIGINT and "interrupted by SIGTERM" (etc.)
// for the others.
func (s Stopped) Error() string {
	if s.Signal == syscall.SIGINT {
		return "interrupted"
	}
	return "interrupted by " + SignalName(s.Signal)
}

// Is makes Stopped match ErrInterrupted.
func (s Stopped) Is(target error) bool { return target == ErrInterrupted }

// ExitStatus is 128 + the signal number (the shells' convention): 130 for
// SIGINT, 143 for SIGTERM, 129 for SIGHUP.
func (s Stopped) ExitStatus() int {
	if n, ok := s.Signal.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return ExitInterrupted
}

// SignalName is the conventional name of sig: "SIGINT", "SIGTERM", "SIGHUP".
func SignalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	if n, ok := sig.(syscall.Signal); ok {
		return fmt.Sprintf("signal %d", int(n))
	}
	return sig.String()
}

// InterruptedStatus is the exit status of a run that ended with err (which
// matches ErrInterrupted or context.Canceled): the Stopped signal's status,
// else 130.
func InterruptedStatus(err error) int {
	var s Stopped
	if errors.As(err, &s) {
		return s.ExitStatus()
	}
	return ExitInterrupted
}

// StopCause is why ctx was cancelled: the Stopped of the first stopping
// signal when NotifyStop made ctx (or an ancestor), else ErrInterrupted (a
// plain cancellation, as tests do).
func StopCause(ctx context.Context) error {
	var s Stopped
	if errors.As(context.Cause(ctx), &s) {
		return s
	}
	return ErrInterrupted
}

type stopperKey struct{}

// stopper handles the stopping signals for the life of the process: the
// first one cancels the context (the tool then stops after the unit of
// work in progress and writes what is finished); a repeat within
// RepeatWindow is the same request; a later repeat runs the hard-stop
// hooks, which write what is finished at once, and exits with the first
// signal's status. Without a hook a repeat is ignored: the stop in
// progress finishes (and cleans up) on its own. A signal during the hooks
// exits at once.
type stopper struct {
	cancel context.CancelCauseFunc
	exit   func(int)

	mu      sync.Mutex
	first   os.Signal
	at      time.Time
	hooks   map[int]func()
	nextID  int
	hooking bool
}

// NotifyStop returns a copy of parent that is cancelled, with cause
// Stopped, by the first stopping signal (StopSignals), and a release
// function that stops the handling. Call it once, first thing in main, and
// keep it for the life of the process: a repeated signal must never find
// the default action (death, with the finished output lost). Register
// what a repeated signal must write with OnHardStop.
func NotifyStop(parent context.Context) (context.Context, func()) {
	var sigs []os.Signal
	for _, s := range StopSignals {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	ctx, s := newStopper(parent, os.Exit)
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-ch:
				s.handle(sig, time.Now())
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			s.cancel(context.Canceled)
		})
	}
}

func newStopper(parent context.Context, exit func(int)) (context.Context, *stopper) {
	s := &stopper{exit: exit, hooks: map[int]func(){}}
	ctx, cancel := context.WithCancelCause(parent)
	s.cancel = cancel
	return context.WithValue(ctx, stopperKey{}, s), s
}

// handle acts on one signal received at now.
func (s *stopper) handle(sig os.Signal, now time.Time) {
	s.mu.Lock()
	switch {
	case s.first == nil:
		s.first, s.at = sig, now
		s.mu.Unlock()
		s.cancel(Stopped{sig})
		return
	case s.hooking:
		code := Stopped{s.first}.ExitStatus()
		s.mu.Unlock()
		s.exit(code)
		return
	case now.Sub(s.at) < RepeatWindow || len(s.hooks) == 0:
		s.mu.Unlock()
		return
	}
	s.hooking = true
	hooks := make([]func(), 0, len(s.hooks))
	for id := 0; id < s.nextID; id++ {
		if h, ok := s.hooks[id]; ok {
			hooks = append(hooks, h)
		}
	}
	first := s.first
	s.mu.Unlock()
	// The hooks run apart from the signal loop, so that one more signal
	// still ends a hook that cannot finish (a write to a full pipe).
	go func() {
		for _, h := range hooks {
			h()
		}
		s.exit(Stopped{first}.ExitStatus())
	}()
}

// OnHardStop registers f to run when a repeated stopping signal stops the
// process at once (see NotifyStop); f must write what is finished, safely
// against the goroutine still working. The process exits after the hooks,
// which run in registration order. It returns a function that unregisters
// f. Without a NotifyStop context it does nothing.
func OnHardStop(ctx context.Context, f func()) (remove func()) {
	s, ok := ctx.Value(stopperKey{}).(*stopper)
	if !ok {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.hooks[id] = f
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.hooks, id)
	}
}
