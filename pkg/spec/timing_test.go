package spec

import (
	"testing"
	"time"
)

// manualClock moves only when a fake component ticks it, so every bucket
// of a Breakdown is known exactly.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time       { return c.t }
func (c *manualClock) tick(d time.Duration) { c.t = c.t.Add(d) }
func ms(n int) time.Duration                { return time.Duration(n) * time.Millisecond }
func msPer(n int, per int) time.Duration    { return ms(n * per) }

// clocked charges fixed costs to the clock: a verify pass of width w costs
// 7+w ms, an ordinary step 5 ms, an accept 2 ms, each draft token 3 ms.
type clocked struct {
	*markov
	c *manualClock
}

func (m clocked) Decode(id int32) ([]float32, error) { m.c.tick(ms(5)); return m.markov.Decode(id) }
func (m clocked) Verify(ids []int32) ([]float32, error) {
	m.c.tick(ms(7 + len(ids)))
	return m.markov.Verify(ids)
}
func (m clocked) Accept(n int) error { m.c.tick(ms(2)); return m.markov.Accept(n) }

type clockedDrafter struct {
	d Drafter
	c *manualClock
}

func (d clockedDrafter) Draft(next int32, n int) ([]int32, error) {
	d.c.tick(msPer(3, n))
	return d.d.Draft(next, n)
}

// TestBreakdownAddsUp: the Breakdown buckets hold exactly the fake costs of
// the decode phase (verify by width, drafts after the first round, accept,
// fallback steps), and they add up to Timing.Decode.
func TestBreakdownAddsUp(t *testing.T) {
	r, seed := seeded(t)
	for _, c := range []struct {
		name   string
		maxNew int
		plan   []int
		k      int
	}{
		{"rejected-clamp-then-fallback", 4, []int{0, 0}, 2},
		{"clamped-last-round", 6, []int{2, 1}, 2},
		{"random-k3", 80, nil, 3},
		{"random-k1", 50, nil, 1},
	} {
		clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
		m := &markov{V: 30, maxCtx: 200, limit: c.k + 1, salt: seed}
		or := &oracle{m: m, plan: c.plan, r: r, pWrong: 0.3}
		dc := mustDecoder(t, clocked{m, clk}, clockedDrafter{or, clk}, Options{K: c.k, IgnoreEOS: true, Now: clk.Now})
		out, st, err := dc.Generate([]int32{1, 2, 3}, c.maxNew, nil)
		if err != nil || len(out) != c.maxNew {
			t.Fatalf("%s: %d tokens, %v", c.name, len(out), err)
		}
		b := dc.Breakdown()
		var wantVerify time.Duration
		passes := 0
		for w := range b.Verify {
			if b.Verify[w] != time.Duration(b.VerifyPasses[w])*ms(7+w) {
				t.Fatalf("%s: verify width %d: %v for %d passes", c.name, w, b.Verify[w], b.VerifyPasses[w])
			}
			if b.VerifyPasses[w] > 0 && (w < 2 || w > c.k+1) {
				t.Fatalf("%s: verify width %d outside 2..%d", c.name, w, c.k+1)
			}
			wantVerify += b.Verify[w]
			passes += b.VerifyPasses[w]
		}
		// The first round's drafts were made in the prefill phase.
		firstDrafts := or.asked[0]
		if passes != st.Rounds || b.FallbackSteps != st.FallbackSteps || b.DraftTokens != st.DraftedTokens-firstDrafts {
			t.Fatalf("%s: breakdown %+v vs stats %+v (first drafts %d)", c.name, b, st, firstDrafts)
		}
		if b.Draft != msPer(3, b.DraftTokens) || b.Accept != ms(2*st.Rounds) || b.Fallback != ms(5*st.FallbackSteps) {
			t.Fatalf("%s: draft %v (%d tokens), accept %v (%d rounds), fallback %v (%d steps)",
				c.name, b.Draft, b.DraftTokens, b.Accept, st.Rounds, b.Fallback, st.FallbackSteps)
		}
		if tot, dec := b.Total(), dc.Timing().Decode; tot != dec || tot != wantVerify+b.Draft+b.Accept+b.Fallback {
			t.Fatalf("%s: breakdown total %v, decode %v", c.name, tot, dec)
		}
		if p := dc.Timing().Prefill; p != msPer(3, firstDrafts) {
			t.Fatalf("%s: prefill %v, want the first drafts' %v", c.name, p, msPer(3, firstDrafts))
		}
	}
}

// TestLapDoesNotAllocate: the timers on the round's hot path allocate
// nothing.
func TestLapDoesNotAllocate(t *testing.T) {
	dc := &Decoder{}
	dc.last = time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		dc.bd.Verify[2] += dc.lap()
		dc.bd.VerifyPasses[2]++
		dc.bd.Accept += dc.lap()
		dc.bd.Draft += dc.lap()
	}); n != 0 {
		t.Fatalf("%v allocations per round of laps", n)
	}
}
