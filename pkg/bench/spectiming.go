package bench

import (
	"fmt"
	"time"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/spec"
)

// PlainProbeSteps is the most ordinary decode steps timed before each rep
// of a --spec mtp decoding test (fewer when G is smaller): the plain step
// time that spec_timing compares the MTP rounds with.
const PlainProbeSteps = 64

// plainProbe times min(G, PlainProbeSteps) ordinary single-token steps of
// the target model (greedy, argmax on the host as a plain rep does) at the
// context the rep decodes in: the depth and the test's prompt prefilled
// first, untimed. It runs on the MTP sequence's own target sequence, so
// the engine is the one the rounds run on (same state slots and logits
// rows), and leaves it to be reset by the rep. The clock is the decoder's
// (monotonic time.Now).
func (r *repRunner) plainProbe(t Test) (int, time.Duration, error) {
	n := min(t.NGen, PlainProbeSteps)
	if n <= 0 {
		return 0, 0, nil
	}
	s := r.mseq.Sequence()
	if err := r.mseq.Reset(); err != nil {
		return 0, 0, err
	}
	if err := r.fillDepth(t, func(ids []int32) error { _, err := s.Prefill(ids, false); return err }); err != nil {
		return 0, 0, err
	}
	logits, err := s.Prefill(r.corpus[t.NDepth:t.NDepth+t.PromptTokens()], false)
	if err != nil {
		return 0, 0, fmt.Errorf("plain probe prefill: %w", err)
	}
	tok := argmax(logits)
	var c0 backend.OpCounts
	if r.counts != nil { // the op counts of the same steps (spec_counts)
		c0 = r.counts.read()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if logits, err = s.Decode(tok); err != nil {
			return 0, 0, fmt.Errorf("plain probe step %d: %w", i, err)
		}
		tok = argmax(logits)
	}
	d := time.Since(start)
	if r.counts != nil {
		r.counts.plainSteps, r.counts.plain = n, work(r.counts.read().Sub(c0))
	}
	r.last = logits
	return n, d, nil
}

// specTiming is the rep's spec_timing: the decoder's breakdown of its last
// Generate (k drafts per round) with the plain probe's steps, derived
// members from the rep's SPEC and decode seconds. nil for tests without
// decode.
func specTiming(t Test, bd spec.Breakdown, k, plainSteps int, plain time.Duration, rep benchfmt.Rep) *benchfmt.SpecTiming {
	if !t.HasDecode() {
		return nil
	}
	s := benchfmt.SpecTiming{PlainSteps: int64(plainSteps), PlainSeconds: plain.Seconds(),
		VerifyPassesByWidth: make([]int64, k+1), VerifySecondsByWidth: make([]float64, k+1),
		DraftTokens: int64(bd.DraftTokens), DraftSeconds: bd.Draft.Seconds(),
		AcceptSeconds: bd.Accept.Seconds(), FallbackSeconds: bd.Fallback.Seconds()}
	for w := 1; w <= k+1 && w < len(bd.Verify); w++ {
		s.VerifyPassesByWidth[w-1] = int64(bd.VerifyPasses[w])
		s.VerifySecondsByWidth[w-1] = bd.Verify[w].Seconds()
	}
	s = s.WithDerived(rep.Speculative, int64(t.NGen), rep.Timings.DecodeSeconds)
	return &s
}
