package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/ninfer/ninfer/pkg/bench"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// output is the run's sink and destination. JSON lines to stdout stream
// (one flushed line per rep); everything else, and any --output-file, is
// written once, by finish: when the run ends (also after the first stopping
// signal, once the rep in progress is done) or, on a repeated signal, from
// the signal handler while a rep is still running (hardStop). The lock
// keeps the two apart: a line is never cut and what is finished is written
// exactly once.
type output struct {
	mu      sync.Mutex
	written bool // finish ran: nothing more goes out
	quiet   bool // --quiet: no 'wrote' line
	format  string
	path    string // --output-file; "" = stdout
	stdout  io.Writer
	stderr  io.Writer
	lines   *bench.LineSink // jsonl: to stdout or into buf
	buf     bytes.Buffer    // jsonl for --output-file
	collect bench.Collect   // the other formats
}

func newOutput(p bench.Params, stdout, stderr io.Writer) *output {
	o := &output{format: p.Output, path: p.OutputFile, stdout: stdout, stderr: stderr}
	switch {
	case p.Output == bench.OutputJSONL && p.OutputFile == "":
		o.lines = bench.NewLineSink(stdout)
	case p.Output == bench.OutputJSONL:
		o.lines = bench.NewLineSink(&o.buf)
	}
	return o
}

// errWritten: a line after the output was written (a hard stop is ending
// the process).
var errWritten = fmt.Errorf("output already written")

func (o *output) sink() (bench.Sink, error) {
	if o.written {
		return nil, errWritten
	}
	if o.lines != nil {
		return o.lines, nil
	}
	return &o.collect, nil
}

// Run records the run line.
func (o *output) Run(l *benchfmt.RunLine) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, err := o.sink()
	if err != nil {
		return err
	}
	return s.Run(l)
}

// Rep records a rep line.
func (o *output) Rep(l *benchfmt.RepLine) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, err := o.sink()
	if err != nil {
		return err
	}
	return s.Rep(l)
}

// TestEnd records a test_end line.
func (o *output) TestEnd(l *benchfmt.TestEndLine) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, err := o.sink()
	if err != nil {
		return err
	}
	return s.TestEnd(l)
}

// finish writes what was measured: the aggregated document (json, table,
// csv) to stdout or --output-file, or the buffered JSON lines to
// --output-file (atomically). It reports whether anything was measured.
func (o *output) finish() (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.finishLocked()
}

func (o *output) finishLocked() (bool, error) {
	if o.written {
		return true, nil
	}
	o.written = true
	if o.lines != nil && o.path == "" {
		return true, nil // streamed line by line
	}
	data := o.buf.Bytes()
	if o.lines == nil {
		if len(o.collect.Lines) == 0 {
			return false, nil
		}
		out, warnings, err := o.collect.Render(o.format)
		if err != nil {
			return true, fmt.Errorf("--format %s: %w", o.format, err)
		}
		for _, w := range warnings {
			fmt.Fprintf(o.stderr, "%s: warning: %s\n", name, w)
		}
		if o.path == "" {
			if _, err := o.stdout.Write(out); err != nil {
				return true, fmt.Errorf("write output: %w", err)
			}
			return true, nil
		}
		data = out
	}
	if len(data) == 0 {
		return false, nil
	}
	if err := cliutil.WriteFileAtomic(o.path, data); err != nil {
		return true, fmt.Errorf("--output-file %s: %w", o.path, err)
	}
	if !o.quiet {
		fmt.Fprintf(o.stderr, "%s: wrote %s\n", name, termsafe.Path(o.path))
	}
	return true, nil
}

// hardStop is the repeated signal's hook: it writes what is finished now,
// while the rep in progress still runs, and keeps the lock until the
// process exits, so that no later line is half written. why is the first
// signal's Stopped.
func (o *output) hardStop(why error, status io.Writer) {
	o.mu.Lock() // held: the process exits after this hook
	measured, err := o.finishLocked()
	switch {
	case err != nil:
		fmt.Fprintf(status, "%s: %v, then again: stopped at once; %v\n", name, why, err)
	case !measured:
		fmt.Fprintf(status, "%s: %v, then again: stopped at once, before anything was measured\n", name, why)
	default:
		fmt.Fprintf(status, "%s: %v, then again: stopped at once; the output holds the reps finished before the one in progress\n", name, why)
	}
}
