package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Input is everything read from a set of files: aggregated runs (from
// stream lines, in order of first appearance, then documents in file order)
// and warnings for the user (stderr).
type Input struct {
	Runs     []Run
	Warnings []string
}

// ReadFiles reads each name ("-" is stdin) and aggregates it. A file is a
// schema-15 document when it parses as one JSON object with a top-level
// schema_version and no "type" (its run id is the file name); otherwise it
// is a JSON-lines stream: blank lines are skipped, a malformed line is an
// error naming file:line, except a final line without a terminating newline,
// which is what an interrupted writer leaves behind — it is dropped with a
// warning. Lines of unknown type are skipped with a warning. Stream lines
// from all files are pooled, so a run split across files aggregates as one.
func ReadFiles(names []string, stdin io.Reader) (*Input, error) {
	in := &Input{}
	c := NewCollector()
	var docs []Run
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		// The same input twice would count its reps twice (a document's
		// run_id is its file name, so nothing else would notice).
		if key := filepath.Clean(name); seen[key] {
			return nil, fmt.Errorf("%s is given twice", name)
		} else {
			seen[key] = true
		}
		data, err := readNamed(name, stdin)
		if err != nil {
			return nil, err
		}
		display := name
		if name == "-" {
			display = "<stdin>"
		}
		if isDocumentText(data) {
			doc, err := benchfmt.DecodeDocument(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", display, err)
			}
			docs = append(docs, Run{RunID: display, Source: display, Document: doc})
			in.Warnings = append(in.Warnings, documentTimingWarnings(display, &doc)...)
			continue
		}
		warns, err := addLines(c, display, data)
		if err != nil {
			return nil, err
		}
		in.Warnings = append(in.Warnings, warns...)
	}
	runs, err := c.Runs()
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		in.Warnings = append(in.Warnings, r.Warnings...)
	}
	in.Runs = append(runs, docs...)
	in.Warnings = append(in.Warnings, duplicateRunWarnings(in.Runs)...)
	if len(in.Runs) == 0 {
		shown := make([]string, len(names))
		for i, n := range names {
			shown[i] = n
			if n == "-" {
				shown[i] = "<stdin>"
			}
		}
		return in, fmt.Errorf("no run in %s (empty, or not ninfer-bench output: want its JSON lines or a schema-15 document)", strings.Join(shown, ", "))
	}
	return in, nil
}

func readNamed(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		if stdin == nil {
			return nil, fmt.Errorf("<stdin>: no standard input")
		}
		data, err := cliutil.ReadAllLimit(stdin, "<stdin>", cliutil.MaxInputBytes)
		if err != nil {
			return nil, fmt.Errorf("read %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read input: %w", err) // *PathError names the file
	}
	return data, nil
}

// isDocumentText reports whether data is a single JSON document (not a
// stream): the first value is an object with schema_version and no type.
func isDocumentText(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{' && benchfmt.IsDocument(trimmed)
}

// addLines feeds the stream lines of one file to c.
func addLines(c *Collector, name string, raw []byte) (warnings []string, err error) {
	data := string(raw) // one copy; lines are substrings of it
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var line string
		terminated := true
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data, terminated = data, "", false
		}
		line = strings.TrimRight(line, "\r")
		if len(strings.TrimSpace(line)) == 0 {
			continue
		}
		loc := Loc{File: name, Line: lineNo}
		l, perr := benchfmt.ParseLineString(line)
		if perr != nil {
			if !terminated {
				warnings = append(warnings, fmt.Sprintf("%s: dropped unterminated last line (interrupted write?): %v", loc, perr))
				break
			}
			return warnings, fmt.Errorf("%s: %w", loc, perr)
		}
		if l.Run == nil && l.Rep == nil && l.TestEnd == nil {
			warnings = append(warnings, fmt.Sprintf("%s: skipped line of unknown type %s", loc, termsafe.Quote(l.Type)))
			continue
		}
		if err := c.Add(loc, l); err != nil {
			return warnings, err
		}
	}
	return warnings, nil
}

// Select returns the run with the given id, or all runs when id is empty.
func (in *Input) Select(id string) ([]Run, error) {
	if id == "" {
		return in.Runs, nil
	}
	for _, r := range in.Runs {
		if r.RunID == id {
			return []Run{r}, nil
		}
	}
	ids := make([]string, len(in.Runs))
	for i, r := range in.Runs {
		ids[i] = r.RunID
	}
	return nil, fmt.Errorf("no run %s in the input (runs: %v)", termsafe.Quote(id), ids)
}

// WriteFileAtomic writes data to path atomically (cliutil.WriteFileAtomic:
// temp file + rename, parents created, mode 0644).
func WriteFileAtomic(path string, data []byte) error { return cliutil.WriteFileAtomic(path, data) }

// Load reads the named inputs ("-" is stdin) and selects the run id (all
// runs when id is ""). Warnings about dropped or incomplete lines are
// returned for the caller to print; they are returned with an error too.
func Load(names []string, stdin io.Reader, id string) ([]Run, []string, error) {
	in, err := ReadFiles(names, stdin)
	if err != nil {
		if in != nil {
			// e.g. "dropped unterminated last line" before "no run in f"
			return nil, in.Warnings, err
		}
		return nil, nil, err
	}
	runs, err := in.Select(id)
	return runs, in.Warnings, err
}
