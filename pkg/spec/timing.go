package spec

import "time"

// Breakdown splits the decode phase of one Generate (the span that
// Timing.Decode measures) into the parts of a speculative round. It is
// measured with a lap timer: every boundary reads the clock once and
// charges the time since the previous boundary to one bucket, so
// Verify + Draft + Accept + Fallback is exactly Timing.Decode (nothing in
// the decode loop goes uncounted, nothing twice). The buckets are fixed
// arrays and counters: taking a lap neither allocates nor locks.
//
//   - Verify[w] is the time of the target's verify passes of width w (the
//     round's token plus w−1 drafts; w = k+1 except in a clamped last
//     round), VerifyPasses[w] their number. A verify lap starts at the end
//     of the previous lap, so it also holds the round's setup (its ids).
//   - Draft is the time of the MTP drafting during the decode phase (the
//     MTP over the verified rows, then each draft token), DraftTokens the
//     tokens those calls returned. The first round's drafts are made before
//     the decode phase (they are part of Timing.Prefill, as in schema 15)
//     and are not counted here.
//   - Accept is the acceptance decision on the host (argmax or sampling of
//     each verified row) plus the target's Accept (state-slot selection and
//     KV rewind: the rollback) and the round's bookkeeping.
//   - Fallback is the ordinary single-token steps (FallbackSteps of them)
//     taken when no draft fits (the clamp at the end of a request).
type Breakdown struct {
	Verify        [MaxDraftTokens + 2]time.Duration // index = verify width, 1..k+1
	VerifyPasses  [MaxDraftTokens + 2]int
	Draft         time.Duration
	DraftTokens   int
	Accept        time.Duration
	Fallback      time.Duration
	FallbackSteps int
}

// VerifyTotal is the time of all verify passes and their number.
func (b *Breakdown) VerifyTotal() (time.Duration, int) {
	var d time.Duration
	n := 0
	for w := range b.Verify {
		d += b.Verify[w]
		n += b.VerifyPasses[w]
	}
	return d, n
}

// Total is Verify + Draft + Accept + Fallback: the decode phase.
func (b *Breakdown) Total() time.Duration {
	v, _ := b.VerifyTotal()
	return v + b.Draft + b.Accept + b.Fallback
}

// Breakdown returns the decode-phase split of the last Generate.
func (dc *Decoder) Breakdown() Breakdown { return dc.bd }

// now reads the decoder's clock (Options.Now, else time.Now: a monotonic
// reading).
func (dc *Decoder) now() time.Time {
	if dc.o.Now != nil {
		return dc.o.Now()
	}
	return time.Now()
}

// lap returns the time since the previous lap and starts the next one.
func (dc *Decoder) lap() time.Duration {
	t := dc.now()
	d := t.Sub(dc.last)
	dc.last = t
	return d
}
