package benchfmt

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// OpWork is the work a backend queued during one phase (or the sum of a
// phase's occurrences): Launches are the ops queued on the device's stream
// (kernel ops, device memsets and copies; a graph launch counts the ops it
// was captured from), WeightBytes the byte sizes of the weight matrices
// the matmuls among them read, summed per matmul.
type OpWork struct {
	Launches    int64
	WeightBytes int64
}

// Add returns w + o.
func (w OpWork) Add(o OpWork) OpWork {
	return OpWork{Launches: w.Launches + o.Launches, WeightBytes: w.WeightBytes + o.WeightBytes}
}

// OpRate is OpWork per unit (per step, pass, token or round), or the ratio
// of two such rates.
type OpRate struct {
	Launches    float64
	WeightBytes float64
}

// per is w / n (nil when n is 0).
func (w OpWork) per(n int64) *OpRate {
	if n == 0 {
		return nil
	}
	return &OpRate{Launches: float64(w.Launches) / float64(n), WeightBytes: float64(w.WeightBytes) / float64(n)}
}

// over is r / b member by member (nil when either is nil or a divisor is 0).
func (r *OpRate) over(b *OpRate) *OpRate {
	if r == nil || b == nil || b.Launches == 0 || b.WeightBytes == 0 {
		return nil
	}
	return &OpRate{Launches: r.Launches / b.Launches, WeightBytes: r.WeightBytes / b.WeightBytes}
}

// SpecCounts is the MTP round breakdown in work counts instead of seconds
// (ninfer extension, docs/BENCH-LINES.md "spec_counts"): what the backend
// queued in each phase that spec_timing times, read from the backend's op
// counters at the same boundaries as spec_timing's clock. Written after
// spec_timing on the reps of --spec mtp runs that decode, and only on a
// backend that counts its ops (CUDA, real or simulated): the counts mean
// the same under the host SIMT harness as on a GPU, where the times of
// spec_timing are simulation time. Not summed at test level.
//
// The measured members: PlainSteps/Plain the plain probe's steps (those of
// spec_timing.plain_steps); VerifyPassesByWidth[w−1]/VerifyByWidth[w−1]
// the verify passes of width w; DraftTokens/Draft the decode phase's MTP
// drafting; Accept the acceptance decision and rollback; Fallback the
// ordinary steps of the decode phase; Decode the decode phase as a whole,
// read at its two ends (so verify + draft + accept + fallback = decode).
//
// The derived members (nil/null when a divisor is 0) are recomputed by
// WithDerived.
type SpecCounts struct {
	PlainSteps          int64
	Plain               OpWork
	VerifyPassesByWidth []int64
	VerifyByWidth       []OpWork
	DraftTokens         int64
	Draft               OpWork
	Accept              OpWork
	Fallback            OpWork
	Decode              OpWork

	PlainStep            *OpRate   // plain / plain_steps
	VerifyPerPassByWidth []*OpRate // verify_by_width[w−1] / verify_passes_by_width[w−1]
	VerifyPerRound       *OpRate   // Σ verify / rounds (one verify pass per round)
	DraftPerToken        *OpRate   // draft / draft_tokens
	AcceptPerRound       *OpRate   // accept / rounds
	VerifyOverPlainStep  *OpRate   // verify_per_round / plain_step (≈ 1 for weight bytes: one pass reads the weights once)
}

// Verify is the work of all verify passes.
func (s *SpecCounts) Verify() OpWork {
	var v OpWork
	for _, w := range s.VerifyByWidth {
		v = v.Add(w)
	}
	return v
}

// Phases is verify + draft + accept + fallback: the decode phase's work
// charged to its parts (equal to Decode when nothing went uncounted).
func (s *SpecCounts) Phases() OpWork {
	return s.Verify().Add(s.Draft).Add(s.Accept).Add(s.Fallback)
}

// WithDerived returns s with its derived members computed from its sums
// and the SPEC counters sp (rounds).
func (s SpecCounts) WithDerived(sp Spec) SpecCounts {
	s.PlainStep = s.Plain.per(s.PlainSteps)
	s.VerifyPerPassByWidth = make([]*OpRate, len(s.VerifyByWidth))
	for i, w := range s.VerifyByWidth {
		if i < len(s.VerifyPassesByWidth) {
			s.VerifyPerPassByWidth[i] = w.per(s.VerifyPassesByWidth[i])
		}
	}
	s.VerifyPerRound = s.Verify().per(sp.Rounds)
	s.DraftPerToken = s.Draft.per(s.DraftTokens)
	s.AcceptPerRound = s.Accept.per(sp.Rounds)
	s.VerifyOverPlainStep = s.VerifyPerRound.over(s.PlainStep)
	return s
}

func (e *emitter) opWork(k string, w OpWork) {
	e.key(k)
	e.open('{', false, false)
	e.i64("launches", w.Launches)
	e.i64("weight_bytes", w.WeightBytes)
	e.close('}')
}

// opRateValue writes r as a value (an object, or null).
func (e *emitter) opRateValue(r *OpRate) {
	if r == nil {
		e.buf = append(e.buf, "null"...)
		return
	}
	e.open('{', false, false)
	e.f64("launches", r.Launches)
	e.f64("weight_bytes", r.WeightBytes)
	e.close('}')
}

func (e *emitter) opRate(k string, r *OpRate) {
	e.key(k)
	e.opRateValue(r)
}

func (e *emitter) specCounts(v *SpecCounts) {
	if v == nil {
		return
	}
	e.key("spec_counts")
	e.open('{', false, false)
	e.i64("plain_steps", v.PlainSteps)
	e.opWork("plain", v.Plain)
	e.i64Array("verify_passes_by_width", v.VerifyPassesByWidth)
	e.key("verify_by_width")
	e.open('[', false, false)
	for _, w := range v.VerifyByWidth {
		e.member()
		e.open('{', false, false)
		e.i64("launches", w.Launches)
		e.i64("weight_bytes", w.WeightBytes)
		e.close('}')
	}
	e.close(']')
	e.i64("draft_tokens", v.DraftTokens)
	e.opWork("draft", v.Draft)
	e.opWork("accept", v.Accept)
	e.opWork("fallback", v.Fallback)
	e.opWork("decode", v.Decode)
	e.opRate("plain_step", v.PlainStep)
	e.key("verify_per_pass_by_width")
	e.open('[', false, false)
	for _, r := range v.VerifyPerPassByWidth {
		e.member()
		e.opRateValue(r)
	}
	e.close(']')
	e.opRate("verify_per_round", v.VerifyPerRound)
	e.opRate("draft_per_token", v.DraftPerToken)
	e.opRate("accept_per_round", v.AcceptPerRound)
	e.opRate("verify_over_plain_step", v.VerifyOverPlainStep)
	e.close('}')
}

func (d *decoder) opWork(o obj) OpWork {
	return OpWork{Launches: o.i64("launches"), WeightBytes: o.i64("weight_bytes")}
}

// opRateValue reads an OpRate value at path (null = nil).
func (d *decoder) opRateValue(path string, r gjson.Result) *OpRate {
	if r.Type == gjson.Null {
		return nil
	}
	o := d.object(path, r)
	return &OpRate{Launches: o.f64("launches"), WeightBytes: o.f64("weight_bytes")}
}

func (d *decoder) opRate(parent obj, k string) *OpRate {
	v, ok := parent.must(k)
	if !ok {
		return nil
	}
	return d.opRateValue(join(parent.path, k), v)
}

// specCounts reads the optional spec_counts member (absent = nil).
func (d *decoder) specCounts(parent obj) *SpecCounts {
	if !parent.has("spec_counts") {
		return nil
	}
	o := parent.sub("spec_counts")
	s := &SpecCounts{PlainSteps: o.i64("plain_steps"), Plain: d.opWork(o.sub("plain"))}
	s.VerifyPassesByWidth = d.i64Array(o, "verify_passes_by_width")
	s.VerifyByWidth = []OpWork{}
	for i, x := range o.array("verify_by_width") {
		s.VerifyByWidth = append(s.VerifyByWidth, d.opWork(d.object(fmt.Sprintf("%s[%d]", join(o.path, "verify_by_width"), i), x)))
	}
	if len(s.VerifyByWidth) != len(s.VerifyPassesByWidth) {
		d.fail(join(o.path, "verify_by_width"), "%d widths, verify_passes_by_width has %d", len(s.VerifyByWidth), len(s.VerifyPassesByWidth))
	}
	s.DraftTokens = o.i64("draft_tokens")
	s.Draft = d.opWork(o.sub("draft"))
	s.Accept = d.opWork(o.sub("accept"))
	s.Fallback = d.opWork(o.sub("fallback"))
	s.Decode = d.opWork(o.sub("decode"))
	s.PlainStep = d.opRate(o, "plain_step")
	s.VerifyPerPassByWidth = []*OpRate{}
	for i, x := range o.array("verify_per_pass_by_width") {
		s.VerifyPerPassByWidth = append(s.VerifyPerPassByWidth, d.opRateValue(fmt.Sprintf("%s[%d]", join(o.path, "verify_per_pass_by_width"), i), x))
	}
	if len(s.VerifyPerPassByWidth) != len(s.VerifyByWidth) {
		d.fail(join(o.path, "verify_per_pass_by_width"), "%d widths, verify_by_width has %d", len(s.VerifyPerPassByWidth), len(s.VerifyByWidth))
	}
	s.VerifyPerRound = d.opRate(o, "verify_per_round")
	s.DraftPerToken = d.opRate(o, "draft_per_token")
	s.AcceptPerRound = d.opRate(o, "accept_per_round")
	s.VerifyOverPlainStep = d.opRate(o, "verify_over_plain_step")
	return s
}
