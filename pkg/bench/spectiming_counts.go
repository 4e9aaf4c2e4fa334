package bench

import (
	"time"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/spec"
)

// The work counts of the MTP round breakdown (spec_counts): on a backend
// that counts its ops (backend.OpCounter: CUDA, on a GPU or under the host
// SIMT harness) the bench reads the counters at every reading of the
// decoder's clock (spec.Options.Now), the boundaries of spec_timing's laps,
// and charges the ops queued since the previous reading to the phase of
// the lap. The phase is the target or drafter call the lap made, seen by
// wrappers around the decoder's target and drafter: Verify (of its width),
// Draft, Accept or Decode (a fallback step); a lap with Prefill in it is
// the prefill phase (target prefill and the first drafts), whose end
// starts the decode phase. The plain probe reads them around its timed
// steps as it reads the clock.

// lapPhase is the phase a lap of the decoder's clock is charged to.
type lapPhase uint8

const (
	lapNone     lapPhase = iota // before the first call of a Generate: not charged
	lapPrefill                  // Prefill (and the first drafts)
	lapVerify                   // Verify of width specCounter.width
	lapDraft                    // Draft
	lapAccept                   // Accept (the acceptance decision and rollback)
	lapFallback                 // Decode (an ordinary step)
)

// specCounter accumulates one Generate's counts per phase.
type specCounter struct {
	read func() backend.OpCounts

	phase    lapPhase
	width    int
	prev     backend.OpCounts
	inDecode bool
	start    backend.OpCounts // the reading that ended the prefill phase
	end      backend.OpCounts // the last reading of the decode phase

	verify                  [spec.MaxDraftTokens + 2]benchfmt.OpWork // index = width
	draft, accept, fallback benchfmt.OpWork
	plainSteps              int
	plain                   benchfmt.OpWork
}

// newSpecCounter returns the counter of be, nil when be does not count.
func newSpecCounter(be backend.Backend) *specCounter {
	c, ok := be.(backend.OpCounter)
	if !ok {
		return nil
	}
	return &specCounter{read: c.OpCounts}
}

func work(d backend.OpCounts) benchfmt.OpWork {
	return benchfmt.OpWork{Launches: d.Launches, WeightBytes: d.WeightBytes}
}

// begin starts the counts of a Generate.
func (c *specCounter) begin() {
	*c = specCounter{read: c.read, prev: c.read(), plainSteps: c.plainSteps, plain: c.plain}
}

// now is the decoder's clock: time.Now (as without counters), and the
// counters charged to the lap it ends.
func (c *specCounter) now() time.Time {
	t := time.Now()
	cur := c.read()
	d := work(cur.Sub(c.prev))
	c.prev = cur
	switch c.phase {
	case lapPrefill:
		c.inDecode, c.start = true, cur
	case lapVerify:
		c.verify[c.width] = c.verify[c.width].Add(d)
	case lapDraft:
		c.draft = c.draft.Add(d)
	case lapAccept:
		c.accept = c.accept.Add(d)
	case lapFallback:
		c.fallback = c.fallback.Add(d)
	}
	if c.inDecode {
		c.end = cur
	}
	c.phase = lapNone
	return t
}

// enter marks the phase of the current lap (a prefill lap stays one).
func (c *specCounter) enter(p lapPhase) {
	if c.phase != lapPrefill {
		c.phase = p
	}
}

// counts is the rep's spec_counts: the last Generate's phases (k drafts per
// round) with the plain probe's steps, passes and draft tokens from the
// decoder's breakdown, derived members from the rep's SPEC counters. nil
// for tests without decode.
func (c *specCounter) counts(t Test, bd spec.Breakdown, k int, rep benchfmt.Rep) *benchfmt.SpecCounts {
	if !t.HasDecode() {
		return nil
	}
	s := benchfmt.SpecCounts{PlainSteps: int64(c.plainSteps), Plain: c.plain,
		VerifyPassesByWidth: make([]int64, k+1), VerifyByWidth: make([]benchfmt.OpWork, k+1),
		DraftTokens: int64(bd.DraftTokens), Draft: c.draft, Accept: c.accept, Fallback: c.fallback,
		Decode: work(c.end.Sub(c.start))}
	for w := 1; w <= k+1 && w < len(bd.VerifyPasses); w++ {
		s.VerifyPassesByWidth[w-1] = int64(bd.VerifyPasses[w])
		s.VerifyByWidth[w-1] = c.verify[w]
	}
	s = s.WithDerived(rep.Speculative)
	return &s
}

// countedTarget and countedDrafter tell the counter which phase a lap is.
type countedTarget struct {
	spec.Target
	c *specCounter
}

func (t countedTarget) Prefill(ids []int32) ([]float32, error) {
	t.c.enter(lapPrefill)
	return t.Target.Prefill(ids)
}

func (t countedTarget) Decode(id int32) ([]float32, error) {
	t.c.enter(lapFallback)
	return t.Target.Decode(id)
}

func (t countedTarget) Verify(ids []int32) ([]float32, error) {
	t.c.enter(lapVerify)
	if t.c.phase == lapVerify {
		t.c.width = min(len(ids), len(t.c.verify)-1)
	}
	return t.Target.Verify(ids)
}

func (t countedTarget) Accept(n int) error {
	t.c.enter(lapAccept)
	return t.Target.Accept(n)
}

type countedDrafter struct {
	spec.Drafter
	c *specCounter
}

func (d countedDrafter) Draft(next int32, n int) ([]int32, error) {
	d.c.enter(lapDraft)
	return d.Drafter.Draft(next, n)
}
