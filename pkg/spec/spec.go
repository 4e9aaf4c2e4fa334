// Package spec runs MTP speculative decoding over a target model: each round
// verifies [t, d1..dk] in one target pass, accepts the longest agreeing
// prefix (greedy) or accepts each draft with probability p_target and
// resamples the first rejection from the residual (sampling), rolls the
// linear-attention state back by selecting the accepted state slot, and
// clamps the last round so that exactly the requested number of tokens is
// produced. Statistics follow the schema-15 SPEC object
// (shared/reference/ninfer-bench.md §3, §7).
package spec

import (
	"errors"
	"fmt"
	"time"

	"github.com/ninfer/ninfer/pkg/sample"
)

// Backend names (schema-15 speculative.backend / config.speculative_backend).
const (
	BackendNone = "none"
	BackendMTP  = "mtp"
)

// MaxDraftTokens is the largest --draft-tokens value.
const MaxDraftTokens = 5

// ValidateFlags checks --spec and --draft-tokens: spec is "none" (or empty)
// or "mtp"; with mtp, k must be in 1..5.
func ValidateFlags(backend string, k int) error {
	switch backend {
	case "", BackendNone:
		return nil
	case BackendMTP:
		if k < 1 || k > MaxDraftTokens {
			return fmt.Errorf("--draft-tokens %d: want 1..%d with --spec mtp", k, MaxDraftTokens)
		}
		return nil
	}
	return fmt.Errorf("--spec %q: want none or mtp", backend)
}

// Target is the verifying model (engine.MTPSequence implements it).
type Target interface {
	// Prefill appends ids and returns the next-token logits of the last.
	Prefill(ids []int32) ([]float32, error)
	// Decode appends one token and returns the next-token logits.
	Decode(id int32) ([]float32, error)
	// Verify scores ids in one pass and returns every position's logits
	// ([len(ids)·vocab]); Accept(n) keeps the first n of them.
	Verify(ids []int32) ([]float32, error)
	Accept(n int) error
	// Pos is the number of tokens in the cache, MaxContext its limit and
	// VerifyLimit the most tokens one Verify can take.
	Pos() int
	MaxContext() int
	VerifyLimit() int
	VocabSize() int
}

// Drafter proposes tokens (engine.MTPSequence implements it with the MTP
// head). Draft returns n tokens that follow next, the token after the
// target's last committed position; the target's hidden rows of the last
// step are its input.
type Drafter interface {
	Draft(next int32, n int) ([]int32, error)
}

// Options configure a Decoder.
type Options struct {
	K         int             // draft tokens per round, 1..5; 0 = plain decoding (no speculation)
	Sampler   *sample.Sampler // nil = greedy argmax
	EOS       []int32         // generation stops after one of these (unless IgnoreEOS)
	IgnoreEOS bool
	// Proposal records whether drafts come from the optimized proposal head
	// (config.proposal_head); the drafter does the work.
	Proposal bool
	// Now is the clock of Timing and Breakdown (nil = time.Now; tests give
	// a fake one).
	Now func() time.Time
}

// Stats are the per-request speculative counters of schema 15.
type Stats struct {
	Backend             string
	Enabled             bool
	DraftWindow         int
	Rounds              int
	DraftedTokens       int
	AcceptedTokens      int
	FallbackSteps       int
	AcceptedPerPosition []int // length DraftWindow; sums to AcceptedTokens
}

// AcceptanceRate is accepted/drafted (ok false when nothing was drafted:
// null in the report).
func (s Stats) AcceptanceRate() (float64, bool) {
	if s.DraftedTokens == 0 {
		return 0, false
	}
	return float64(s.AcceptedTokens) / float64(s.DraftedTokens), true
}

// AcceptanceLength is 1 + accepted/rounds (ok false without rounds).
func (s Stats) AcceptanceLength() (float64, bool) {
	if s.Rounds == 0 {
		return 0, false
	}
	return 1 + float64(s.AcceptedTokens)/float64(s.Rounds), true
}

// EngineTokens are the decode tokens the engine committed after the first
// (prefill) token: rounds + accepted + fallback steps with speculation, else
// the plain decode steps (FallbackSteps is 0 then and Rounds counts nothing).
func (s Stats) EngineTokens() int { return s.Rounds + s.AcceptedTokens + s.FallbackSteps }

// Add sums counters (test-level aggregation: OR of enabled, max window,
// elementwise per-position sums padded to the longest, last backend).
func (s *Stats) Add(o Stats) {
	s.Backend = o.Backend
	s.Enabled = s.Enabled || o.Enabled
	s.DraftWindow = max(s.DraftWindow, o.DraftWindow)
	s.Rounds += o.Rounds
	s.DraftedTokens += o.DraftedTokens
	s.AcceptedTokens += o.AcceptedTokens
	s.FallbackSteps += o.FallbackSteps
	for len(s.AcceptedPerPosition) < len(o.AcceptedPerPosition) {
		s.AcceptedPerPosition = append(s.AcceptedPerPosition, 0)
	}
	for i, v := range o.AcceptedPerPosition {
		s.AcceptedPerPosition[i] += v
	}
}

// Check verifies the invariants: per-position counts sum to accepted,
// accepted ≤ drafted ≤ K·rounds.
func (s Stats) Check() error {
	sum := 0
	for _, v := range s.AcceptedPerPosition {
		sum += v
	}
	switch {
	case sum != s.AcceptedTokens:
		return fmt.Errorf("spec stats: accepted_per_position sums to %d, accepted_tokens is %d", sum, s.AcceptedTokens)
	case s.AcceptedTokens > s.DraftedTokens:
		return fmt.Errorf("spec stats: %d accepted of %d drafted", s.AcceptedTokens, s.DraftedTokens)
	case s.DraftedTokens > s.DraftWindow*s.Rounds:
		return fmt.Errorf("spec stats: %d drafted in %d rounds of at most %d", s.DraftedTokens, s.Rounds, s.DraftWindow)
	}
	return nil
}

// Timing splits a Generate call's wall time as the schema-15 timers do:
// Prefill covers the target prefill, the MTP prefill, the first token and
// the first drafts; Decode covers every round and ordinary step after that.
type Timing struct {
	Prefill, Decode time.Duration
}

// Decoder generates tokens for one request at a time.
type Decoder struct {
	t      Target
	d      Drafter
	o      Options
	stats  Stats
	timing Timing
	bd     Breakdown
	last   time.Time // the Breakdown lap timer's last reading
}

// NewDecoder returns a decoder over target t and drafter d (d may be nil
// when o.K is 0).
func NewDecoder(t Target, d Drafter, o Options) (*Decoder, error) {
	if o.K < 0 || o.K > MaxDraftTokens {
		return nil, fmt.Errorf("spec: draft tokens %d: want 0..%d", o.K, MaxDraftTokens)
	}
	if o.K > 0 && d == nil {
		return nil, errors.New("spec: speculation needs a drafter (MTP head)")
	}
	if o.K > 0 && t.VerifyLimit() < o.K+1 {
		return nil, fmt.Errorf("spec: %d draft tokens need verify passes of %d tokens; the target takes %d (engine state slots)", o.K, o.K+1, t.VerifyLimit())
	}
	return &Decoder{t: t, d: d, o: o}, nil
}

// Stats returns the counters of the last Generate.
func (dc *Decoder) Stats() Stats { return dc.stats }

// Timing returns the prefill/decode split of the last Generate.
func (dc *Decoder) Timing() Timing { return dc.timing }

func (dc *Decoder) greedy() bool { return dc.o.Sampler == nil || dc.o.Sampler.Config().Greedy() }

// pick chooses the token at sequence position pos from logits (plain
// decoding, the correction of a greedy round and the bonus token).
func (dc *Decoder) pick(logits []float32, pos int) (int32, error) {
	var id int32
	if dc.o.Sampler == nil {
		id = sample.Argmax(logits)
	} else {
		id = dc.o.Sampler.Sample(logits, int64(pos))
	}
	if id < 0 {
		return -1, fmt.Errorf("spec: no valid token at position %d (all logits NaN or -Inf)", pos)
	}
	return id, nil
}

func (dc *Decoder) stop(id int32) bool {
	if dc.o.IgnoreEOS {
		return false
	}
	for _, e := range dc.o.EOS {
		if e == id {
			return true
		}
	}
	return false
}

// Generate prefills prompt and produces up to maxNew tokens (the first one
// from the prefill logits), calling emit for each; emit returning false, or
// an EOS token, stops early. The returned stats count the decode after the
// first token: rounds + accepted + fallback steps = len(ids) − 1 unless
// generation stopped early inside a round.
func (dc *Decoder) Generate(prompt []int32, maxNew int, emit func(int32) bool) ([]int32, Stats, error) {
	k := dc.o.K
	dc.stats = Stats{Backend: BackendNone, AcceptedPerPosition: []int{}}
	if k > 0 {
		dc.stats = Stats{Backend: BackendMTP, Enabled: true, DraftWindow: k, AcceptedPerPosition: make([]int, k)}
	}
	dc.timing, dc.bd = Timing{}, Breakdown{}
	if maxNew <= 0 {
		return nil, dc.stats, nil
	}
	start := dc.now()
	if dc.o.Sampler != nil {
		dc.o.Sampler.Reset()
		dc.o.Sampler.AddPrompt(prompt)
	}
	logits, err := dc.t.Prefill(prompt)
	if err != nil {
		return nil, dc.stats, err
	}
	tok, err := dc.pick(logits, dc.t.Pos())
	if err != nil {
		return nil, dc.stats, err
	}
	var out []int32
	done := false
	push := func(id int32) {
		out = append(out, id)
		if dc.o.Sampler != nil {
			dc.o.Sampler.Accept(id)
		}
		if (emit != nil && !emit(id)) || dc.stop(id) || len(out) == maxNew {
			done = true
		}
	}
	push(tok)
	var drafts []int32
	if !done && k > 0 {
		if drafts, err = dc.d.Draft(tok, dc.extent(maxNew-len(out))); err != nil {
			return out, dc.stats, err
		}
	}
	dc.last = dc.now()
	dc.timing.Prefill = dc.last.Sub(start)
	// Decode = the sum of the Breakdown laps: the same readings.
	defer func() { dc.timing.Decode = dc.bd.Total() }()
	for !done {
		if len(drafts) == 0 {
			// Ordinary single-token step.
			lg, err := dc.t.Decode(tok)
			if err != nil {
				return out, dc.stats, err
			}
			if tok, err = dc.pick(lg, dc.t.Pos()); err != nil {
				return out, dc.stats, err
			}
			if k > 0 {
				dc.stats.FallbackSteps++
			}
			push(tok)
			dc.bd.Fallback += dc.lap()
			dc.bd.FallbackSteps++
		} else {
			if tok, err = dc.round(tok, drafts, push, &done); err != nil {
				return out, dc.stats, err
			}
		}
		if !done && k > 0 {
			if drafts, err = dc.d.Draft(tok, dc.extent(maxNew-len(out))); err != nil {
				return out, dc.stats, err
			}
			dc.bd.Draft += dc.lap()
			dc.bd.DraftTokens += len(drafts)
		}
	}
	return out, dc.stats, nil
}

// extent is the number of drafts for the next round:
// min(k, remaining−1, capacity−frontier−1), never negative; 0 means an
// ordinary step.
func (dc *Decoder) extent(remaining int) int {
	return max(0, min(dc.o.K, remaining-1, dc.t.MaxContext()-dc.t.Pos()-1))
}

// round verifies [t, drafts...] and commits the accepted prefix plus the
// correction/bonus token, which it returns.
func (dc *Decoder) round(t int32, drafts []int32, push func(int32), done *bool) (int32, error) {
	e := len(drafts)
	ids := make([]int32, 0, e+1)
	ids = append(append(ids, t), drafts...)
	base := dc.t.Pos() // position of t
	lg, err := dc.t.Verify(ids)
	if err != nil {
		return -1, err
	}
	dc.bd.Verify[e+1] += dc.lap()
	dc.bd.VerifyPasses[e+1]++
	V := dc.t.VocabSize()
	row := func(i int) []float32 { return lg[i*V : (i+1)*V] }
	// Tokens committed this round: accepted drafts, then next.
	var next int32
	a := 0
	for a < e {
		pos := base + a + 1 // sequence position of the token chosen from row a
		d := drafts[a]
		if dc.greedy() {
			want, err := dc.pick(row(a), pos)
			if err != nil {
				return -1, err
			}
			if want != d {
				next = want
				break
			}
		} else {
			p := dc.o.Sampler.Probs(row(a))
			if d < 0 || int(d) >= len(p) {
				return -1, fmt.Errorf("spec: draft token %d outside the vocabulary", d)
			}
			if sample.Uniform(dc.o.Sampler.Config().Seed, int64(pos), sample.PurposeAccept) >= float64(p[d]) {
				next, err = Residual(p, d, sample.Uniform(dc.o.Sampler.Config().Seed, int64(pos), sample.PurposeResample))
				if err != nil {
					return -1, fmt.Errorf("spec: position %d: %w", pos, err)
				}
				break
			}
		}
		// Draft a accepted: commit it (the sampler's penalties see it
		// before the next row is judged).
		a++
		dc.stats.AcceptedPerPosition[a-1]++
		if !*done {
			push(d)
		}
	}
	if a == e { // every draft accepted: the bonus token from the last row
		if next, err = dc.pick(row(e), base+e+1); err != nil {
			return -1, err
		}
	}
	if err := dc.t.Accept(a + 1); err != nil {
		return -1, err
	}
	dc.stats.Rounds++
	dc.stats.DraftedTokens += e
	dc.stats.AcceptedTokens += a
	if !*done {
		push(next)
	}
	dc.bd.Accept += dc.lap()
	return next, nil
}

// Residual draws from p with the rejected draft d removed (renormalised),
// using the uniform number u: the recovery distribution of speculative
// sampling when the draft is deterministic (p_draft = δ_d).
func Residual(p []float32, d int32, u float64) (int32, error) {
	q := make([]float32, len(p))
	copy(q, p)
	q[d] = 0
	id := sample.Categorical(q, u)
	if id < 0 {
		return -1, errors.New("empty residual distribution")
	}
	return id, nil
}
