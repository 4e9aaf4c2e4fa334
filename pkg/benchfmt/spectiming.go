package benchfmt

import (
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// SpecTiming is the MTP round breakdown of a speculative decode (ninfer
// extension, docs/BENCH-LINES.md "spec_timing"): written after
// "speculative" on the reps and tests of --spec mtp runs that decode (tg,
// pp+tg), absent everywhere else, so documents without speculation keep
// the reference shape. Times are seconds.
//
// The measured members (summed over the reps at test level):
// PlainSteps/PlainSeconds are ordinary single-token target steps timed
// before the rep at the rep's context (not part of any rep timing);
// VerifyPassesByWidth[w−1]/VerifySecondsByWidth[w−1] are the verify passes
// of width w (the round's token + w−1 drafts; length draft_window+1);
// DraftTokens/DraftSeconds the MTP drafting of the decode phase (the first
// round's drafts belong to prefill); AcceptSeconds the acceptance decision
// and rollback; FallbackSeconds the ordinary steps of the decode phase.
// Verify + draft + accept + fallback = decode_seconds.
//
// The derived members are recomputed from those (null when a divisor is
// 0): see WithDerived.
type SpecTiming struct {
	PlainSteps           int64
	PlainSeconds         float64
	VerifyPassesByWidth  []int64
	VerifySecondsByWidth []float64
	DraftTokens          int64
	DraftSeconds         float64
	AcceptSeconds        float64
	FallbackSeconds      float64

	PlainStepSeconds          *float64 // plain_seconds / plain_steps
	VerifySecondsPerRound     *float64 // Σ verify seconds / rounds
	DraftSecondsPerToken      *float64 // draft_seconds / draft_tokens
	AcceptSecondsPerRound     *float64 // accept_seconds / rounds
	Gain                      *float64 // plain_step_seconds · decode output tokens / decode_seconds
	BreakEvenAcceptanceLength *float64 // (verify/round + draft_window·draft/token + accept/round) / plain_step_seconds
}

// VerifySeconds is the time of all verify passes.
func (s *SpecTiming) VerifySeconds() float64 {
	v := 0.0
	for _, x := range s.VerifySecondsByWidth {
		v += x
	}
	return v
}

func ratio(num, den float64) *float64 {
	if den == 0 {
		return nil
	}
	v := num / den
	return &v
}

// WithDerived returns s with its derived members computed from its sums,
// the SPEC counters sp (rounds, draft_window), the decode output tokens
// (n_gen per rep, summed over the reps at test level) and the decode
// seconds (summed likewise).
func (s SpecTiming) WithDerived(sp Spec, outputTokens int64, decodeSeconds float64) SpecTiming {
	s.PlainStepSeconds = ratio(s.PlainSeconds, float64(s.PlainSteps))
	s.VerifySecondsPerRound = ratio(s.VerifySeconds(), float64(sp.Rounds))
	s.DraftSecondsPerToken = ratio(s.DraftSeconds, float64(s.DraftTokens))
	s.AcceptSecondsPerRound = ratio(s.AcceptSeconds, float64(sp.Rounds))
	s.Gain, s.BreakEvenAcceptanceLength = nil, nil
	if s.PlainStepSeconds == nil || *s.PlainStepSeconds == 0 {
		return s
	}
	s.Gain = ratio(*s.PlainStepSeconds*float64(outputTokens), decodeSeconds)
	if s.VerifySecondsPerRound != nil && s.DraftSecondsPerToken != nil && s.AcceptSecondsPerRound != nil {
		round := *s.VerifySecondsPerRound + float64(sp.DraftWindow)**s.DraftSecondsPerToken + *s.AcceptSecondsPerRound
		s.BreakEvenAcceptanceLength = ratio(round, *s.PlainStepSeconds)
	}
	return s
}

// Add sums the measured members of o into s (widths padded to the
// longest); the derived members are left for WithDerived.
func (s *SpecTiming) Add(o SpecTiming) {
	s.PlainSteps += o.PlainSteps
	s.PlainSeconds += o.PlainSeconds
	for len(s.VerifyPassesByWidth) < len(o.VerifyPassesByWidth) {
		s.VerifyPassesByWidth = append(s.VerifyPassesByWidth, 0)
	}
	for len(s.VerifySecondsByWidth) < len(o.VerifySecondsByWidth) {
		s.VerifySecondsByWidth = append(s.VerifySecondsByWidth, 0)
	}
	for i, n := range o.VerifyPassesByWidth {
		s.VerifyPassesByWidth[i] += n
	}
	for i, x := range o.VerifySecondsByWidth {
		s.VerifySecondsByWidth[i] += x
	}
	s.DraftTokens += o.DraftTokens
	s.DraftSeconds += o.DraftSeconds
	s.AcceptSeconds += o.AcceptSeconds
	s.FallbackSeconds += o.FallbackSeconds
}

func (e *emitter) specTiming(v *SpecTiming) {
	if v == nil {
		return
	}
	e.key("spec_timing")
	e.open('{', false, false)
	e.i64("plain_steps", v.PlainSteps)
	e.f64("plain_seconds", v.PlainSeconds)
	e.i64Array("verify_passes_by_width", v.VerifyPassesByWidth)
	e.key("verify_seconds_by_width")
	e.open('[', false, false)
	for _, x := range v.VerifySecondsByWidth {
		e.member()
		e.buf = AppendDouble(e.buf, x)
	}
	e.close(']')
	e.i64("draft_tokens", v.DraftTokens)
	e.f64("draft_seconds", v.DraftSeconds)
	e.f64("accept_seconds", v.AcceptSeconds)
	e.f64("fallback_seconds", v.FallbackSeconds)
	e.optF64("plain_step_seconds", v.PlainStepSeconds)
	e.optF64("verify_seconds_per_round", v.VerifySecondsPerRound)
	e.optF64("draft_seconds_per_token", v.DraftSecondsPerToken)
	e.optF64("accept_seconds_per_round", v.AcceptSecondsPerRound)
	e.optF64("gain", v.Gain)
	e.optF64("break_even_acceptance_length", v.BreakEvenAcceptanceLength)
	e.close('}')
}

// specTiming reads the optional spec_timing member (absent = nil).
func (d *decoder) specTiming(parent obj) *SpecTiming {
	if !parent.has("spec_timing") {
		return nil
	}
	o := parent.sub("spec_timing")
	s := &SpecTiming{
		PlainSteps:   o.i64("plain_steps"),
		PlainSeconds: o.f64("plain_seconds"),
	}
	s.VerifyPassesByWidth = d.i64Array(o, "verify_passes_by_width")
	s.VerifySecondsByWidth = []float64{}
	for i, x := range o.array("verify_seconds_by_width") {
		v, err := parseDouble(x.Raw)
		if x.Type != gjson.Number || err != nil {
			d.fail(fmt.Sprintf("%s[%d]", join(o.path, "verify_seconds_by_width"), i), "want number, got %s", rawOrType(x))
		}
		s.VerifySecondsByWidth = append(s.VerifySecondsByWidth, v)
	}
	if len(s.VerifySecondsByWidth) != len(s.VerifyPassesByWidth) {
		d.fail(join(o.path, "verify_seconds_by_width"), "%d widths, verify_passes_by_width has %d", len(s.VerifySecondsByWidth), len(s.VerifyPassesByWidth))
	}
	s.DraftTokens = o.i64("draft_tokens")
	s.DraftSeconds = o.f64("draft_seconds")
	s.AcceptSeconds = o.f64("accept_seconds")
	s.FallbackSeconds = o.f64("fallback_seconds")
	s.PlainStepSeconds = o.optF64("plain_step_seconds")
	s.VerifySecondsPerRound = o.optF64("verify_seconds_per_round")
	s.DraftSecondsPerToken = o.optF64("draft_seconds_per_token")
	s.AcceptSecondsPerRound = o.optF64("accept_seconds_per_round")
	s.Gain = o.optF64("gain")
	s.BreakEvenAcceptanceLength = o.optF64("break_even_acceptance_length")
	return s
}

// i64Array emits key: [n, …].
func (e *emitter) i64Array(k string, v []int64) {
	e.key(k)
	e.open('[', false, false)
	for _, n := range v {
		e.member()
		e.buf = strconv.AppendInt(e.buf, n, 10)
	}
	e.close(']')
}

// i64Array decodes o's member k, an array of integers (empty, not nil,
// when absent), failing each element that is not one.
func (d *decoder) i64Array(o obj, k string) []int64 {
	out := []int64{}
	for i, x := range o.array(k) {
		n, err := strconv.ParseInt(x.Raw, 10, 64)
		if x.Type != gjson.Number || err != nil {
			d.fail(fmt.Sprintf("%s[%d]", join(o.path, k), i), "want integer, got %s", rawOrType(x))
		}
		out = append(out, n)
	}
	return out
}
