package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// Mismatch is one stored value that disagrees with its recomputation.
type Mismatch struct {
	Path       string // e.g. tests[1].decode_seconds_stddev
	Stored     string
	Recomputed string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s: stored %s, recomputed %s", m.Path, m.Stored, m.Recomputed)
}

// CheckResult is the outcome of Check.
type CheckResult struct {
	Checked    int // values compared
	Exact      int // doubles equal as %.10g text, plus integers, strings, nulls
	Rounding   int // doubles accepted within the input-rounding tolerance
	Mismatches []Mismatch
}

// Check recomputes every aggregate of a schema-15 document from its reps and
// reports each disagreement.
//
// Test level: the 14 <series>_mean/_stddev values (null exactly where the
// series is empty), the SPEC sums and ratios, requested_output_tokens and the
// label from kind/n_prompt/n_gen. Rep level: generated_output_tokens,
// decode_output_tokens, decode_engine_tokens (rounds+accepted+fallback with
// speculation), the per-rep acceptance ratios and Σ accepted_per_position =
// accepted_tokens.
//
// Doubles: the stored aggregate was printed with %.10g from rep values that
// had full precision, while the recomputation only sees the reps as printed
// with %.10g. A stored double passes when its %.10g text equals the
// recomputed one's, or else when it is within one unit of its own 10th
// significant digit plus the largest change that rounding every input rep
// value by half a unit in its 10th digit can cause (propagated: Σu/n for a
// mean, sqrt(Σu²/(n−1)) for a stddev, first order for rates). Stddevs of
// nearly equal values are sensitive to that rounding (the seed's
// decode_seconds_stddev can only be reproduced to about 7 digits), so exact
// text equality would reject documents the reference itself wrote; a fixed
// relative 1e-9 would too. Anything beyond the propagated bound is a real
// mismatch.
func Check(doc *benchfmt.Document) CheckResult {
	var res CheckResult
	for ti := range doc.Tests {
		t := &doc.Tests[ti]
		p := fmt.Sprintf("tests[%d]", ti)
		res.checkTest(p, t)
	}
	return res
}

func (res *CheckResult) mismatch(path, stored, recomputed string) {
	res.Mismatches = append(res.Mismatches, Mismatch{path, stored, recomputed})
}

func (res *CheckResult) int(path string, stored, want int64) {
	res.Checked++
	if stored != want {
		res.mismatch(path, strconv.FormatInt(stored, 10), strconv.FormatInt(want, 10))
		return
	}
	res.Exact++
}

func (res *CheckResult) str(path, stored, want string) {
	res.Checked++
	if stored != want {
		res.mismatch(path, benchfmt.QuoteString(stored), benchfmt.QuoteString(want))
		return
	}
	res.Exact++
}

func optIntText(v *int64) string {
	if v == nil {
		return "null"
	}
	return strconv.FormatInt(*v, 10)
}

func (res *CheckResult) optInt(path string, stored, want *int64) {
	res.Checked++
	if optIntText(stored) != optIntText(want) {
		res.mismatch(path, optIntText(stored), optIntText(want))
		return
	}
	res.Exact++
}

func optFloatText(v *float64) string {
	if v == nil {
		return "null"
	}
	return benchfmt.FormatDouble(*v)
}

// double compares a stored double with a recomputed one whose inputs carry
// absolute uncertainty u (0 for values computed from exact integers).
func (res *CheckResult) double(path string, stored, want *float64, u float64) {
	res.Checked++
	st, wt := optFloatText(stored), optFloatText(want)
	switch {
	case st == wt && (want == nil || !math.IsNaN(*want)):
		res.Exact++
		return
	case stored == nil || want == nil || math.IsNaN(*want) || math.IsInf(*want, 0):
	default:
		tol := unit10(*stored) + u
		if math.Abs(*stored-*want) <= tol {
			res.Rounding++
			return
		}
	}
	res.mismatch(path, st, wt)
}

// unit10 is one unit in the 10th significant digit of v.
func unit10(v float64) float64 {
	if v == 0 {
		return 0
	}
	return math.Pow(10, math.Floor(math.Log10(math.Abs(v)))-9)
}

// statOfPoints is StatOf with the propagated uncertainty of mean and stddev.
func statOfPoints(pts []point) (st benchfmt.Stat, uMean, uSD float64) {
	xs := make([]float64, len(pts))
	sumU, sumU2 := 0.0, 0.0
	for i, p := range pts {
		xs[i] = p.v
		sumU += p.u
		sumU2 += p.u * p.u
	}
	st = StatOf(xs)
	if n := float64(len(pts)); n > 0 {
		uMean = sumU / n
		if n > 1 {
			uSD = math.Sqrt(sumU2 / (n - 1))
		}
	}
	return st, uMean, uSD
}

func (res *CheckResult) checkTest(p string, t *benchfmt.Test) {
	if !benchfmt.ValidKind(t.Kind) {
		res.str(p+".kind", t.Kind, "pp|tg|pp+tg")
		return
	}
	res.str(p+".label", t.Label, benchfmt.Label(t.Kind, t.NPrompt, t.NGen))
	res.int(p+".requested_output_tokens", t.RequestedOutputTokens, benchfmt.RequestedOutputTokens(t.Kind, t.NGen))
	for _, m := range Metrics() {
		st, uMean, uSD := statOfPoints(seriesPoints(t.Kind, t.NPrompt, t.NGen, t.Reps, m))
		stored := statField(t, m)
		res.double(p+"."+m.String()+"_mean", stored.Mean, st.Mean, uMean)
		res.double(p+"."+m.String()+"_stddev", stored.Stddev, st.Stddev, uSD)
	}
	res.checkSpec(p+".speculative", t.Speculative, SumSpec(t.Reps))
	res.checkSpecTiming(p+".spec_timing", t.SpecTiming, SumSpecTiming(t))
	for ri := range t.Reps {
		r := &t.Reps[ri]
		rp := fmt.Sprintf("%s.reps[%d]", p, ri)
		res.int(rp+".generated_output_tokens", r.GeneratedOutputTokens, t.RequestedOutputTokens)
		var out, eng *int64
		if benchfmt.HasDecode(t.Kind) {
			out = benchfmt.Ptr(t.NGen)
			eng = benchfmt.Ptr(r.Speculative.EngineTokens(t.NGen))
		}
		res.optInt(rp+".decode_output_tokens", r.DecodeOutputTokens, out)
		res.optInt(rp+".decode_engine_tokens", r.DecodeEngineTokens, eng)
		res.checkSpec(rp+".speculative", r.Speculative, r.Speculative.WithDerived())
		res.checkSpecTiming(rp+".spec_timing", r.SpecTiming, RepSpecTiming(r, t.Kind, t.NGen))
		res.checkSpecCounts(rp+".spec_counts", r)
		if len(r.Speculative.AcceptedPerPosition) > 0 {
			var sum int64
			for _, n := range r.Speculative.AcceptedPerPosition {
				sum += n
			}
			res.int(rp+".speculative.accepted_tokens", r.Speculative.AcceptedTokens, sum)
		}
	}
}

func (res *CheckResult) checkSpec(p string, stored, want benchfmt.Spec) {
	res.str(p+".backend", stored.Backend, want.Backend)
	res.str(p+".enabled", strconv.FormatBool(stored.Enabled), strconv.FormatBool(want.Enabled))
	res.int(p+".draft_window", stored.DraftWindow, want.DraftWindow)
	res.int(p+".rounds", stored.Rounds, want.Rounds)
	res.int(p+".drafted_tokens", stored.DraftedTokens, want.DraftedTokens)
	res.int(p+".accepted_tokens", stored.AcceptedTokens, want.AcceptedTokens)
	res.int(p+".fallback_steps", stored.FallbackSteps, want.FallbackSteps)
	res.double(p+".acceptance_rate", stored.AcceptanceRate, want.AcceptanceRate, 0)
	res.double(p+".acceptance_length", stored.AcceptanceLength, want.AcceptanceLength, 0)
	res.str(p+".accepted_per_position", fmt.Sprint(stored.AcceptedPerPosition), fmt.Sprint(want.AcceptedPerPosition))
}
