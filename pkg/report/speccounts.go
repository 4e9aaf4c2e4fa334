package report

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// checkSpecCounts compares a rep's stored spec_counts with its derived
// members recomputed from its measured ones and the rep's SPEC counters,
// and checks that the phases add up to the decode phase. spec_counts is a
// rep-level record (no test-level sum): absent is fine.
func (res *CheckResult) checkSpecCounts(p string, r *benchfmt.Rep) {
	s := r.SpecCounts
	if s == nil {
		return
	}
	want := s.WithDerived(r.Speculative)
	ph := s.Phases()
	res.int(p+".decode.launches", s.Decode.Launches, ph.Launches)
	res.int(p+".decode.weight_bytes", s.Decode.WeightBytes, ph.WeightBytes)
	rate := func(name string, stored, want *benchfmt.OpRate) {
		res.str(name+".present", fmt.Sprint(stored != nil), fmt.Sprint(want != nil))
		if stored == nil || want == nil {
			return
		}
		res.double(name+".launches", &stored.Launches, &want.Launches, 1e-9*max(1, abs(want.Launches)))
		res.double(name+".weight_bytes", &stored.WeightBytes, &want.WeightBytes, 1e-9*max(1, abs(want.WeightBytes)))
	}
	rate(p+".plain_step", s.PlainStep, want.PlainStep)
	res.str(p+".verify_per_pass_by_width", fmt.Sprint(len(s.VerifyPerPassByWidth)), fmt.Sprint(len(want.VerifyPerPassByWidth)))
	for i := range min(len(s.VerifyPerPassByWidth), len(want.VerifyPerPassByWidth)) {
		rate(fmt.Sprintf("%s.verify_per_pass_by_width[%d]", p, i), s.VerifyPerPassByWidth[i], want.VerifyPerPassByWidth[i])
	}
	rate(p+".verify_per_round", s.VerifyPerRound, want.VerifyPerRound)
	rate(p+".draft_per_token", s.DraftPerToken, want.DraftPerToken)
	rate(p+".accept_per_round", s.AcceptPerRound, want.AcceptPerRound)
	rate(p+".verify_over_plain_step", s.VerifyOverPlainStep, want.VerifyOverPlainStep)
}
