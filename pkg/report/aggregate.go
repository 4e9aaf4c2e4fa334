// Package report turns ninfer-bench output into schema-15 documents and
// views of them: aggregation of the JSON-lines stream (Collector,
// Aggregate), recomputation checks of stored documents (Check), Welch
// comparisons of two runs (Compare) and markdown/CSV rendering.
package report

import (
	"fmt"
	"sort"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Metric names a per-rep series of a test; its document fields are
// <name>_mean and <name>_stddev.
type Metric int

// The seven series of reference §3, in document order.
const (
	PrefillTokS Metric = iota
	DecodeOutputTokS
	DecodeEngineTokS
	PrepareSeconds
	PrefillSeconds
	DecodeSeconds
	TotalSeconds
	numMetrics
)

var metricNames = [numMetrics]string{
	"prefill_tok_s", "decode_output_tok_s", "decode_engine_tok_s",
	"prepare_seconds", "prefill_seconds", "decode_seconds", "total_seconds",
}

func (m Metric) String() string {
	if m == Gain {
		return "gain"
	}
	return metricNames[m]
}

// Metrics lists all series in document order.
func Metrics() []Metric {
	return []Metric{PrefillTokS, DecodeOutputTokS, DecodeEngineTokS, PrepareSeconds, PrefillSeconds, DecodeSeconds, TotalSeconds}
}

// statField returns a pointer to the test's Stat for m.
func statField(t *benchfmt.Test, m Metric) *benchfmt.Stat {
	switch m {
	case PrefillTokS:
		return &t.PrefillTokS
	case DecodeOutputTokS:
		return &t.DecodeOutputTokS
	case DecodeEngineTokS:
		return &t.DecodeEngineTokS
	case PrepareSeconds:
		return &t.PrepareSeconds
	case PrefillSeconds:
		return &t.PrefillSeconds
	case DecodeSeconds:
		return &t.DecodeSeconds
	default:
		return &t.TotalSeconds
	}
}

// point is one series value with the absolute uncertainty it inherits from
// rep values that were printed at %.10g (used by Check).
type point struct{ v, u float64 }

// halfUnit10 is half a unit in the 10th significant digit of v: the most a
// value printed with %.10g can be off from the value that was measured.
func halfUnit10(v float64) float64 {
	if v == 0 {
		return 0
	}
	return 0.5 * unit10(v)
}

// rateU is the uncertainty of num/secs when secs carries uncertainty us
// (first order, with a 1% margin).
func rateU(num, secs, us float64) float64 {
	return 1.01 * num * us / (secs * secs)
}

// seriesPoints computes the per-rep values of m for a test (reference §3
// "Rate and time series"): rate series skip reps with non-positive seconds;
// prefill series exist only for kinds with a prefill (tg tests report null
// although their reps carry prefill seconds) and decode series only for
// decoding kinds.
func seriesPoints(kind string, nPrompt, nGen int64, reps []benchfmt.Rep, m Metric) []point {
	var out []point
	switch m {
	case PrefillTokS:
		if !benchfmt.HasPrefill(kind) {
			return nil
		}
		for _, r := range reps {
			if s := r.Timings.PrefillSeconds; s > 0 {
				p := float64(nPrompt)
				out = append(out, point{p / s, rateU(p, s, halfUnit10(s))})
			}
		}
	case DecodeOutputTokS, DecodeEngineTokS:
		if !benchfmt.HasDecode(kind) {
			return nil
		}
		for _, r := range reps {
			s := r.Timings.DecodeSeconds
			if s <= 0 {
				continue
			}
			n := float64(nGen)
			if m == DecodeEngineTokS && r.DecodeEngineTokens != nil {
				n = float64(*r.DecodeEngineTokens)
			}
			out = append(out, point{n / s, rateU(n, s, halfUnit10(s))})
		}
	case PrepareSeconds:
		for _, r := range reps {
			out = append(out, point{r.Timings.PrepareSeconds, halfUnit10(r.Timings.PrepareSeconds)})
		}
	case TotalSeconds:
		for _, r := range reps {
			out = append(out, point{r.Timings.TotalSeconds, halfUnit10(r.Timings.TotalSeconds)})
		}
	case PrefillSeconds:
		if !benchfmt.HasPrefill(kind) {
			return nil
		}
		for _, r := range reps {
			out = append(out, point{r.Timings.PrefillSeconds, halfUnit10(r.Timings.PrefillSeconds)})
		}
	case DecodeSeconds:
		if !benchfmt.HasDecode(kind) {
			return nil
		}
		for _, r := range reps {
			out = append(out, point{r.Timings.DecodeSeconds, halfUnit10(r.Timings.DecodeSeconds)})
		}
	}
	return out
}

// Series returns the per-rep values of m for test t.
func Series(t *benchfmt.Test, m Metric) []float64 {
	pts := seriesPoints(t.Kind, t.NPrompt, t.NGen, t.Reps, m)
	xs := make([]float64, len(pts))
	for i, p := range pts {
		xs[i] = p.v
	}
	return xs
}

// StatOf is the document Stat of xs: mean and sample stddev, both nil for
// an empty series.
func StatOf(xs []float64) benchfmt.Stat {
	mean, sd, ok := MeanStddev(xs)
	if !ok {
		return benchfmt.Stat{}
	}
	return benchfmt.Stat{Mean: &mean, Stddev: &sd}
}

// SumSpec is the test-level SPEC of reference §3: counters summed over reps,
// accepted_per_position summed elementwise (padded to the longest), enabled
// OR-ed, draft_window the max, backend the last rep's, ratios recomputed
// from the sums. With no reps it is benchfmt.SpecNone().
func SumSpec(reps []benchfmt.Rep) benchfmt.Spec {
	if len(reps) == 0 {
		return benchfmt.SpecNone()
	}
	s := benchfmt.Spec{AcceptedPerPosition: []int64{}}
	for _, r := range reps {
		x := r.Speculative
		s.Backend = x.Backend
		s.Enabled = s.Enabled || x.Enabled
		s.DraftWindow = max(s.DraftWindow, x.DraftWindow)
		s.Rounds += x.Rounds
		s.DraftedTokens += x.DraftedTokens
		s.AcceptedTokens += x.AcceptedTokens
		s.FallbackSteps += x.FallbackSteps
		for i, n := range x.AcceptedPerPosition {
			if i >= len(s.AcceptedPerPosition) {
				s.AcceptedPerPosition = append(s.AcceptedPerPosition, 0)
			}
			s.AcceptedPerPosition[i] += n
		}
	}
	return s.WithDerived()
}

// Summarize fills every aggregate of t (the seven stats and the SPEC) from
// t.Reps, t.Kind, t.NPrompt and t.NGen. Workspace peaks are left as they are.
func Summarize(t *benchfmt.Test) {
	for _, m := range Metrics() {
		*statField(t, m) = StatOf(Series(t, m))
	}
	t.Speculative = SumSpec(t.Reps)
	t.SpecTiming = SumSpecTiming(t)
}

// Run is one aggregated benchmark run.
type Run struct {
	RunID    string
	Source   string // where the run line came from (file:line), or the document file
	Document benchfmt.Document
	Warnings []string // e.g. missing test_end lines of an interrupted run
}

// Loc is where a line came from: File:Line, or "line N" without a file.
type Loc struct {
	File string
	Line int
}

func (l Loc) String() string {
	if l.File == "" {
		return fmt.Sprintf("line %d", l.Line)
	}
	return fmt.Sprintf("%s:%d", l.File, l.Line)
}

// shown is s for a message: as is when it is printable text, quoted (Go
// syntax) when it holds a control or line-breaking character or invalid
// UTF-8, so that every error and warning stays one line whatever a run id
// or label in the input holds.
func shown(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

type repAt struct {
	rep benchfmt.Rep
	loc Loc
}

type testAcc struct {
	index                  int64
	label, kind            string
	nPrompt, nGen, request int64
	nDepth                 int64 // n_depth (ninfer-bench -d), 0 without
	identLoc               Loc
	hasIdent               bool
	reps                   map[int64]repAt
	end                    *benchfmt.TestEndLine
	endLoc                 Loc
}

type runAcc struct {
	id      string
	run     *benchfmt.RunLine
	runLoc  Loc
	firstAt Loc
	tests   map[int64]*testAcc
	// warnings about single lines (reps with timings that no series can
	// use), in input order, given before the run's own warnings
	warnings []string
}

// Collector gathers stream lines (from one or more files) and aggregates
// them per run_id. Locations ("file:line") are only used in messages.
type Collector struct {
	runs  map[string]*runAcc
	order []string
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{runs: map[string]*runAcc{}} }

func (c *Collector) runFor(id string, loc Loc) *runAcc {
	r, ok := c.runs[id]
	if !ok {
		r = &runAcc{id: id, firstAt: loc, tests: map[int64]*testAcc{}}
		c.runs[id] = r
		c.order = append(c.order, id)
	}
	return r
}

func (r *runAcc) test(index int64) *testAcc {
	t, ok := r.tests[index]
	if !ok {
		t = &testAcc{index: index, reps: map[int64]repAt{}}
		r.tests[index] = t
	}
	return t
}

// Add records one decoded line. Lines of unknown type are ignored (the
// caller may warn). It fails on inconsistent or duplicated input.
func (c *Collector) Add(loc Loc, l benchfmt.Line) error {
	switch {
	case l.Run != nil:
		r := c.runFor(l.Run.RunID, loc)
		if r.run != nil {
			return fmt.Errorf("%s: second run line for run_id %s (first at %s)", loc, termsafe.Quote(l.Run.RunID), r.runLoc)
		}
		r.run, r.runLoc = l.Run, loc
	case l.Rep != nil:
		x := l.Rep
		if !benchfmt.ValidKind(x.Kind) {
			return fmt.Errorf("%s: kind %s is not pp, tg or pp+tg", loc, termsafe.Quote(x.Kind))
		}
		if x.TestIndex < 0 || x.RepIndex < 0 {
			return fmt.Errorf("%s: negative test_index or rep_index", loc)
		}
		t := c.runFor(x.RunID, loc).test(x.TestIndex)
		if !t.hasIdent {
			t.label, t.kind, t.nPrompt, t.nGen, t.request = x.Label, x.Kind, x.NPrompt, x.NGen, x.RequestedOutputTokens
			t.nDepth = x.NDepth
			t.identLoc, t.hasIdent = loc, true
		} else if t.label != x.Label || t.kind != x.Kind || t.nPrompt != x.NPrompt || t.nGen != x.NGen || t.request != x.RequestedOutputTokens {
			return fmt.Errorf("%s: test %d of run %s is %s (%s, P=%d, G=%d) but %s says %s (%s, P=%d, G=%d)",
				loc, x.TestIndex, termsafe.Quote(x.RunID), shown(x.Label), x.Kind, x.NPrompt, x.NGen, t.identLoc, shown(t.label), t.kind, t.nPrompt, t.nGen)
		} else if t.nDepth != x.NDepth {
			return fmt.Errorf("%s: test %d of run %s is %s at depth %d but %s says depth %d",
				loc, x.TestIndex, termsafe.Quote(x.RunID), shown(x.Label), x.NDepth, t.identLoc, t.nDepth)
		}
		if t.end != nil && t.end.Label != x.Label {
			return fmt.Errorf("%s: rep label %s does not match test_end label %s at %s", loc, termsafe.Quote(x.Label), termsafe.Quote(t.end.Label), t.endLoc)
		}
		if prev, dup := t.reps[x.RepIndex]; dup {
			return fmt.Errorf("%s: duplicate rep %d of test %d (%s) in run %s (first at %s)", loc, x.RepIndex, x.TestIndex, shown(x.Label), termsafe.Quote(x.RunID), prev.loc)
		}
		t.reps[x.RepIndex] = repAt{x.Rep, loc}
		if w := badTimings(x.Kind, x.Rep.Timings); w != "" {
			r := c.runs[x.RunID]
			r.warnings = append(r.warnings, fmt.Sprintf("%s: rep %d of test %d (%s) in run %s has %s", loc, x.RepIndex, x.TestIndex, shown(x.Label), shown(x.RunID), w))
		}
	case l.TestEnd != nil:
		x := l.TestEnd
		if x.TestIndex < 0 {
			return fmt.Errorf("%s: negative test_index", loc)
		}
		t := c.runFor(x.RunID, loc).test(x.TestIndex)
		if t.end != nil {
			return fmt.Errorf("%s: duplicate test_end for test %d in run %s (first at %s)", loc, x.TestIndex, termsafe.Quote(x.RunID), t.endLoc)
		}
		if t.hasIdent && t.label != x.Label {
			return fmt.Errorf("%s: test_end label %s does not match rep label %s at %s", loc, termsafe.Quote(x.Label), termsafe.Quote(t.label), t.identLoc)
		}
		t.end, t.endLoc = x, loc
	}
	return nil
}

// Runs aggregates every run seen, in order of first appearance.
func (c *Collector) Runs() ([]Run, error) {
	out := make([]Run, 0, len(c.order))
	for _, id := range c.order {
		r, err := c.runs[id].aggregate()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (r *runAcc) aggregate() (Run, error) {
	if r.run == nil {
		return Run{}, fmt.Errorf("run_id %s: no run line (first line of that run at %s)", termsafe.Quote(r.id), r.firstAt)
	}
	run := Run{RunID: r.id, Source: r.runLoc.String(), Warnings: append([]string(nil), r.warnings...)}
	doc := benchfmt.NewDocument()
	doc.Command = r.run.Command
	doc.Environment = r.run.Environment
	doc.Artifact = r.run.Artifact
	doc.Load = r.run.Load
	doc.Memory = r.run.Memory
	doc.Config = r.run.Config
	doc.Tests = []benchfmt.Test{}

	indexes := make([]int64, 0, len(r.tests))
	for i := range r.tests {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(i, j int) bool { return indexes[i] < indexes[j] })

	var lastWS, lastAlloc int64 // last known workspace peaks (0 before any test_end)
	for pos, idx := range indexes {
		ta := r.tests[idx]
		if int64(pos) != idx {
			run.Warnings = append(run.Warnings, fmt.Sprintf("run %s: no lines for test index %d", shown(r.id), pos))
		}
		t := benchfmt.Test{Label: ta.label, Kind: ta.kind, NPrompt: ta.nPrompt, NGen: ta.nGen, RequestedOutputTokens: ta.request, NDepth: ta.nDepth}
		if !ta.hasIdent {
			kind, p, g, err := benchfmt.ParseLabel(ta.end.Label)
			if err != nil {
				return Run{}, fmt.Errorf("%s: test %d has no rep lines and %w", ta.endLoc, idx, err)
			}
			t = benchfmt.Test{Label: ta.end.Label, Kind: kind, NPrompt: p, NGen: g, RequestedOutputTokens: benchfmt.RequestedOutputTokens(kind, g)}
			run.Warnings = append(run.Warnings, fmt.Sprintf("run %s: test %d (%s) has no rep lines", shown(r.id), idx, shown(t.Label)))
		}
		repIdx := make([]int64, 0, len(ta.reps))
		for i := range ta.reps {
			repIdx = append(repIdx, i)
		}
		sort.Slice(repIdx, func(i, j int) bool { return repIdx[i] < repIdx[j] })
		t.Reps = make([]benchfmt.Rep, len(repIdx))
		for i, ri := range repIdx {
			t.Reps[i] = ta.reps[ri].rep
		}
		if n := int64(len(repIdx)); n > 0 && repIdx[n-1] != n-1 {
			run.Warnings = append(run.Warnings, fmt.Sprintf("run %s: test %d (%s) has rep indexes with gaps (%d reps, last index %d)", shown(r.id), idx, shown(t.Label), n, repIdx[n-1]))
		}
		if reps := r.run.Config.Repetitions; reps > 0 && int64(len(repIdx)) < reps {
			run.Warnings = append(run.Warnings, fmt.Sprintf("run %s: test %d (%s) has %d of %d reps", shown(r.id), idx, shown(t.Label), len(repIdx), reps))
		}
		if ta.end != nil {
			lastWS, lastAlloc = ta.end.WorkspacePeakBytes, ta.end.WorkspaceAllocatorPeakBytes
		} else {
			run.Warnings = append(run.Warnings, fmt.Sprintf("run %s: test %d (%s) has no test_end line (interrupted?); workspace peaks = last known values %d/%d", shown(r.id), idx, shown(t.Label), lastWS, lastAlloc))
		}
		t.WorkspacePeakBytes, t.WorkspaceAllocatorPeakBytes = lastWS, lastAlloc
		Summarize(&t)
		doc.Tests = append(doc.Tests, t)
	}
	run.Document = doc
	return run, nil
}

// Aggregate builds the document of a stream holding exactly one run.
// Locations in errors are "line N" (1-based positions in lines).
func Aggregate(lines []benchfmt.Line) (benchfmt.Document, error) {
	c := NewCollector()
	for i, l := range lines {
		if err := c.Add(Loc{Line: i + 1}, l); err != nil {
			return benchfmt.Document{}, err
		}
	}
	runs, err := c.Runs()
	if err != nil {
		return benchfmt.Document{}, err
	}
	if len(runs) != 1 {
		return benchfmt.Document{}, fmt.Errorf("want exactly one run, got %d", len(runs))
	}
	return runs[0].Document, nil
}
