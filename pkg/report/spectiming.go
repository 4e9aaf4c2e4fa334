package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// RepSpecTiming is r's spec_timing with its derived members recomputed
// (n_gen output tokens of a decoding test of kind), or nil when r has none.
func RepSpecTiming(r *benchfmt.Rep, kind string, nGen int64) *benchfmt.SpecTiming {
	if r.SpecTiming == nil {
		return nil
	}
	out := r.SpecTiming.WithDerived(r.Speculative, decodeOutputs(kind, nGen), r.Timings.DecodeSeconds)
	return &out
}

func decodeOutputs(kind string, nGen int64) int64 {
	if benchfmt.HasDecode(kind) {
		return nGen
	}
	return 0
}

// SumSpecTiming is the test-level spec_timing: the reps' measured members
// summed (widths padded to the longest), the derived members recomputed
// from the sums, the summed SPEC (rounds, max draft_window), n_gen times
// the reps that carry one and their summed decode_seconds. nil when no rep
// has one.
func SumSpecTiming(t *benchfmt.Test) *benchfmt.SpecTiming {
	var s *benchfmt.SpecTiming
	var sp benchfmt.Spec
	outputs, decode := int64(0), 0.0
	for i := range t.Reps {
		r := &t.Reps[i]
		if r.SpecTiming == nil {
			continue
		}
		if s == nil {
			s = &benchfmt.SpecTiming{VerifyPassesByWidth: []int64{}, VerifySecondsByWidth: []float64{}}
		}
		s.Add(*r.SpecTiming)
		sp.Rounds += r.Speculative.Rounds
		sp.DraftWindow = max(sp.DraftWindow, r.Speculative.DraftWindow)
		outputs += decodeOutputs(t.Kind, t.NGen)
		decode += r.Timings.DecodeSeconds
	}
	if s == nil {
		return nil
	}
	out := s.WithDerived(sp, outputs, decode)
	return &out
}

// gainText is the md table's gain cell: the measured gain over plain
// decoding as "1.23x", "-" without a breakdown.
func gainText(s *benchfmt.SpecTiming) string {
	if s == nil || s.Gain == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *s.Gain)
}

// SpecTimingNote is the one-line explanation of a test's breakdown, e.g.
// "tg64: verify costs 2.50 plain steps, a draft 0.40, accept 0.05: MTP
// loses below acceptance length 2.95 (measured 1.80, gain 0.61x)"; ""
// without the measured terms.
func SpecTimingNote(label string, t *benchfmt.Test) string {
	s := t.SpecTiming
	if s == nil || s.PlainStepSeconds == nil || *s.PlainStepSeconds == 0 || s.VerifySecondsPerRound == nil ||
		s.AcceptSecondsPerRound == nil || s.BreakEvenAcceptanceLength == nil {
		return ""
	}
	p := *s.PlainStepSeconds
	var b strings.Builder
	fmt.Fprintf(&b, "%s: plain step %.3g ms; a round costs verify %.2f steps", label, 1e3*p, *s.VerifySecondsPerRound/p)
	if s.DraftSecondsPerToken != nil {
		fmt.Fprintf(&b, " + %d×draft %.2f", t.Speculative.DraftWindow, *s.DraftSecondsPerToken/p)
	}
	fmt.Fprintf(&b, " + accept %.2f: MTP loses below acceptance length %.2f", *s.AcceptSecondsPerRound/p, *s.BreakEvenAcceptanceLength)
	if l := t.Speculative.AcceptanceLength; l != nil {
		fmt.Fprintf(&b, " (measured %.2f", *l)
		if s.Gain != nil {
			fmt.Fprintf(&b, ", gain %.2fx", *s.Gain)
		}
		b.WriteString(")")
	}
	return b.String()
}

// specTimingNotes are the notes of every test of runs with a breakdown.
func specTimingNotes(runs []Run) []string {
	var out []string
	for i := range runs {
		d := &runs[i].Document
		for ti := range d.Tests {
			t := &d.Tests[ti]
			label := benchfmt.DisplayLabel(t.Label, t.NDepth)
			if len(runs) > 1 {
				label = specName(&d.Config) + " " + label
			}
			if n := SpecTimingNote(label, t); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// hasSpecTiming reports whether any test of runs carries a breakdown.
func hasSpecTiming(runs []Run) bool {
	for i := range runs {
		for _, t := range runs[i].Document.Tests {
			if t.SpecTiming != nil {
				return true
			}
		}
	}
	return false
}

// checkSpecTiming compares a stored spec_timing with its recomputation
// (presence, the measured sums, the derived values).
func (res *CheckResult) checkSpecTiming(p string, stored, want *benchfmt.SpecTiming) {
	if stored == nil && want == nil {
		return
	}
	res.str(p+".present", fmt.Sprint(stored != nil), fmt.Sprint(want != nil))
	if stored == nil || want == nil {
		return
	}
	tol := func(v *float64) float64 {
		if v == nil {
			return 0
		}
		return 1e-9 * max(1, abs(*v)) // sums and ratios of %.10g inputs
	}
	res.int(p+".plain_steps", stored.PlainSteps, want.PlainSteps)
	res.double(p+".plain_seconds", &stored.PlainSeconds, &want.PlainSeconds, tol(&want.PlainSeconds))
	res.str(p+".verify_passes_by_width", fmt.Sprint(stored.VerifyPassesByWidth), fmt.Sprint(want.VerifyPassesByWidth))
	res.str(p+".verify_seconds_by_width", fmt.Sprint(len(stored.VerifySecondsByWidth)), fmt.Sprint(len(want.VerifySecondsByWidth)))
	for i := range min(len(stored.VerifySecondsByWidth), len(want.VerifySecondsByWidth)) {
		res.double(fmt.Sprintf("%s.verify_seconds_by_width[%d]", p, i), &stored.VerifySecondsByWidth[i], &want.VerifySecondsByWidth[i], tol(&want.VerifySecondsByWidth[i]))
	}
	res.int(p+".draft_tokens", stored.DraftTokens, want.DraftTokens)
	res.double(p+".draft_seconds", &stored.DraftSeconds, &want.DraftSeconds, tol(&want.DraftSeconds))
	res.double(p+".accept_seconds", &stored.AcceptSeconds, &want.AcceptSeconds, tol(&want.AcceptSeconds))
	res.double(p+".fallback_seconds", &stored.FallbackSeconds, &want.FallbackSeconds, tol(&want.FallbackSeconds))
	res.double(p+".plain_step_seconds", stored.PlainStepSeconds, want.PlainStepSeconds, tol(want.PlainStepSeconds))
	res.double(p+".verify_seconds_per_round", stored.VerifySecondsPerRound, want.VerifySecondsPerRound, tol(want.VerifySecondsPerRound))
	res.double(p+".draft_seconds_per_token", stored.DraftSecondsPerToken, want.DraftSecondsPerToken, tol(want.DraftSecondsPerToken))
	res.double(p+".accept_seconds_per_round", stored.AcceptSecondsPerRound, want.AcceptSecondsPerRound, tol(want.AcceptSecondsPerRound))
	res.double(p+".gain", stored.Gain, want.Gain, tol(want.Gain))
	res.double(p+".break_even_acceptance_length", stored.BreakEvenAcceptanceLength, want.BreakEvenAcceptanceLength, tol(want.BreakEvenAcceptanceLength))
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Gain is the per-rep series of spec_timing.gain (compare only; it has no
// <name>_mean/_stddev in the document and is not in Metrics).
const Gain Metric = numMetrics

// gainSeries is the per-rep gain of t (reps without one are skipped).
func gainSeries(t *benchfmt.Test) []float64 {
	var xs []float64
	for i := range t.Reps {
		if s := RepSpecTiming(&t.Reps[i], t.Kind, t.NGen); s != nil && s.Gain != nil {
			xs = append(xs, *s.Gain)
		}
	}
	return xs
}

// gainRow compares the per-rep MTP gain of two matched tests; ok is false
// when neither side has one.
func gainRow(test string, a, b *benchfmt.Test) (CompareRow, bool) {
	xa, xb := gainSeries(a), gainSeries(b)
	if len(xa) == 0 && len(xb) == 0 {
		return CompareRow{}, false
	}
	row := CompareRow{Test: test, Metric: Gain, A: xa, B: xb}
	row.MeanA, row.SDA, _ = MeanStddev(xa)
	row.MeanB, row.SDB, _ = MeanStddev(xb)
	row.DeltaPercent = math.NaN()
	if row.MeanA != 0 && len(xa) > 0 && len(xb) > 0 {
		row.DeltaPercent = 100 * (row.MeanB - row.MeanA) / row.MeanA
	}
	row.Welch = Welch(xa, xb)
	row.Significant = row.Welch.OK && row.Welch.P < Alpha
	return row, true
}
