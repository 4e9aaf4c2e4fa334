package bench

import (
	"io"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
)

// Sink receives the stream lines of a run as they are produced.
type Sink interface {
	Run(*benchfmt.RunLine) error
	Rep(*benchfmt.RepLine) error
	TestEnd(*benchfmt.TestEndLine) error
}

// LineSink writes the JSON lines to w, one Write (and Flush, when w has
// one) per line, so an interrupted run leaves a valid prefix.
type LineSink struct{ w *benchfmt.LineWriter }

// NewLineSink returns a LineSink on w.
func NewLineSink(w io.Writer) *LineSink { return &LineSink{benchfmt.NewLineWriter(w)} }

// Run writes the run line.
func (s *LineSink) Run(r *benchfmt.RunLine) error { return s.w.WriteRun(r) }

// Rep writes a rep line.
func (s *LineSink) Rep(r *benchfmt.RepLine) error { return s.w.WriteRep(r) }

// TestEnd writes a test_end line.
func (s *LineSink) TestEnd(t *benchfmt.TestEndLine) error { return s.w.WriteTestEnd(t) }

// Collect keeps the lines in memory, in order.
type Collect struct{ Lines []benchfmt.Line }

// Run records the run line.
func (c *Collect) Run(r *benchfmt.RunLine) error {
	c.Lines = append(c.Lines, benchfmt.Line{Type: benchfmt.LineRun, Run: r})
	return nil
}

// Rep records a rep line.
func (c *Collect) Rep(r *benchfmt.RepLine) error {
	c.Lines = append(c.Lines, benchfmt.Line{Type: benchfmt.LineRep, Rep: r})
	return nil
}

// TestEnd records a test_end line.
func (c *Collect) TestEnd(t *benchfmt.TestEndLine) error {
	c.Lines = append(c.Lines, benchfmt.Line{Type: benchfmt.LineTestEnd, TestEnd: t})
	return nil
}

// Runs aggregates the collected lines with pkg/report (the code
// ninfer-report uses), returning the runs and the aggregation warnings
// (e.g. a test without test_end after an interruption).
func (c *Collect) Runs() ([]report.Run, error) {
	col := report.NewCollector()
	for i, l := range c.Lines {
		if err := col.Add(report.Loc{Line: i + 1}, l); err != nil {
			return nil, err
		}
	}
	return col.Runs()
}

// Render renders the collected run in an --output format other than jsonl:
// json (the schema-15 document), table (markdown) or csv.
func (c *Collect) Render(output string) ([]byte, []string, error) {
	runs, err := c.Runs()
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	for _, r := range runs {
		warnings = append(warnings, r.Warnings...)
	}
	format := output
	if output == OutputTable {
		format = report.FormatMD
	}
	out, err := report.Render(format, runs)
	return out, warnings, err
}
