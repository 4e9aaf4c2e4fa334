package benchfmt

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Line types of the JSON-lines stream (docs/BENCH-LINES.md).
const (
	LineRun     = "run"
	LineRep     = "rep"
	LineTestEnd = "test_end"
)

// RunLine is the first line of a run: everything of the document except the
// tests.
type RunLine struct {
	RunID         string
	SchemaVersion int64
	Command       string
	Environment   Environment
	Artifact      Artifact
	Load          Load
	Memory        Memory
	Config        Config
}

// RepLine is one measured repetition, self-contained: it repeats the test's
// identity so that a truncated stream still aggregates.
type RepLine struct {
	RunID                 string
	TestIndex             int64 // 0-based position in the test matrix
	Label                 string
	Kind                  string
	NPrompt               int64
	NGen                  int64
	RequestedOutputTokens int64
	NDepth                int64 // tokens in the context before the test (untimed prefill, -d); 0 = none, written only when > 0
	RepIndex              int64 // 0-based index among the measured reps
	Rep                   Rep
}

// TestEndLine closes a test with its workspace peaks (warmups included).
type TestEndLine struct {
	RunID                       string
	TestIndex                   int64
	Label                       string
	WorkspacePeakBytes          int64
	WorkspaceAllocatorPeakBytes int64
}

// Line is one decoded line; exactly one of Run, Rep, TestEnd is set for the
// known types. For an unknown type only Type is set.
type Line struct {
	Type    string
	Run     *RunLine
	Rep     *RepLine
	TestEnd *TestEndLine
}

// NewRunID returns a fresh run id: UTC time plus 8 random hex digits, e.g.
// "20261201T082308Z-3f9a1c0e".
func NewRunID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; fall back to time.
		return time.Now().UTC().Format("20060102T150405.000000000Z")
	}
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// AppendRunLine appends the run line (with '\n').
func AppendRunLine(dst []byte, r *RunLine) []byte {
	e := &emitter{buf: dst, compact: true}
	e.open('{', false, false)
	e.str("type", LineRun)
	e.str("run_id", r.RunID)
	e.i64("schema_version", r.SchemaVersion)
	e.str("command", r.Command)
	e.environment("environment", r.Environment)
	e.artifact("artifact", r.Artifact)
	e.load("load", r.Load)
	e.memory("memory", r.Memory)
	e.config("config", r.Config)
	e.close('}')
	return append(e.buf, '\n')
}

// AppendRepLine appends the rep line (with '\n').
func AppendRepLine(dst []byte, r *RepLine) []byte {
	e := &emitter{buf: dst, compact: true}
	e.open('{', false, false)
	e.str("type", LineRep)
	e.str("run_id", r.RunID)
	e.i64("test_index", r.TestIndex)
	e.str("label", r.Label)
	e.str("kind", r.Kind)
	e.i64("n_prompt", r.NPrompt)
	e.i64("n_gen", r.NGen)
	e.i64("requested_output_tokens", r.RequestedOutputTokens)
	if r.NDepth != 0 {
		e.i64("n_depth", r.NDepth)
	}
	e.i64("rep_index", r.RepIndex)
	e.repBody(r.Rep)
	e.close('}')
	return append(e.buf, '\n')
}

// AppendTestEndLine appends the test_end line (with '\n').
func AppendTestEndLine(dst []byte, t *TestEndLine) []byte {
	e := &emitter{buf: dst, compact: true}
	e.open('{', false, false)
	e.str("type", LineTestEnd)
	e.str("run_id", t.RunID)
	e.i64("test_index", t.TestIndex)
	e.str("label", t.Label)
	e.i64("workspace_peak_bytes", t.WorkspacePeakBytes)
	e.i64("workspace_allocator_peak_bytes", t.WorkspaceAllocatorPeakBytes)
	e.close('}')
	return append(e.buf, '\n')
}

// LineWriter writes stream lines, each with a single Write call followed by
// a Flush when the writer has one (e.g. *bufio.Writer), so an interrupted
// benchmark leaves only complete lines behind.
type LineWriter struct {
	w   io.Writer
	buf []byte
}

// NewLineWriter returns a LineWriter on w.
func NewLineWriter(w io.Writer) *LineWriter { return &LineWriter{w: w} }

func (lw *LineWriter) write(kind string) error {
	if _, err := lw.w.Write(lw.buf); err != nil {
		return fmt.Errorf("write %s line: %w", kind, err)
	}
	if f, ok := lw.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("flush %s line: %w", kind, err)
		}
	}
	return nil
}

// WriteRun writes the run line.
func (lw *LineWriter) WriteRun(r *RunLine) error {
	lw.buf = AppendRunLine(lw.buf[:0], r)
	return lw.write(LineRun)
}

// WriteRep writes a rep line.
func (lw *LineWriter) WriteRep(r *RepLine) error {
	lw.buf = AppendRepLine(lw.buf[:0], r)
	return lw.write(LineRep + " " + strconv.FormatInt(r.TestIndex, 10) + "/" + strconv.FormatInt(r.RepIndex, 10))
}

// WriteTestEnd writes a test_end line.
func (lw *LineWriter) WriteTestEnd(t *TestEndLine) error {
	lw.buf = AppendTestEndLine(lw.buf[:0], t)
	return lw.write(LineTestEnd)
}
