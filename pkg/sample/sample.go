// Package sample is host-side token sampling over one row of logits:
// greedy argmax, presence/frequency/repetition penalties, temperature,
// top-k, min-p and top-p, with a counter-based RNG keyed by
// (seed, position, purpose).
//
// The pipeline, in order:
//  1. penalties on the logits: repetition (tokens seen in the prompt or the
//     output: positive logits divided by r, negative multiplied by r), then
//     logit -= presence·[count>0] + frequency·count over generated tokens;
//  2. temperature: logits / T (T == 0 means greedy: a one-hot at the argmax);
//  3. top-k: keep the k largest logits (ties broken by lower id);
//  4. softmax (float64);
//  5. min-p: drop tokens whose probability is below min_p × the largest;
//  6. top-p: keep the smallest set of most probable tokens (ties by lower
//     id) whose total is ≥ top_p; renormalize.
//
// NaN logits are treated as -Inf (never chosen); if any logit is +Inf, the
// +Inf ones share the mass equally (after penalties, before the filters).
package sample

import (
	"fmt"
	"math"
	"sort"
)

// Config holds the sampling parameters. The zero value is greedy decoding.
type Config struct {
	Temperature       float64 // 0 = greedy
	TopK              int     // 0 = off
	TopP              float64 // 0 or 1 = off
	MinP              float64 // 0 = off
	PresencePenalty   float64 // subtracted once from tokens generated so far
	FrequencyPenalty  float64 // subtracted per occurrence in generated tokens
	RepetitionPenalty float64 // 0 or 1 = off; >1 discourages repeats
	Seed              uint64
}

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case bad(c.Temperature) || c.Temperature < 0:
		return fmt.Errorf("sample: temperature %v must be finite and >= 0", c.Temperature)
	case c.TopK < 0:
		return fmt.Errorf("sample: top_k %d must be >= 0", c.TopK)
	case bad(c.TopP) || c.TopP < 0 || c.TopP > 1:
		return fmt.Errorf("sample: top_p %v must be in [0, 1]", c.TopP)
	case bad(c.MinP) || c.MinP < 0 || c.MinP >= 1:
		return fmt.Errorf("sample: min_p %v must be in [0, 1)", c.MinP)
	case bad(c.PresencePenalty):
		return fmt.Errorf("sample: presence_penalty %v must be finite", c.PresencePenalty)
	case bad(c.FrequencyPenalty):
		return fmt.Errorf("sample: frequency_penalty %v must be finite", c.FrequencyPenalty)
	case bad(c.RepetitionPenalty) || c.RepetitionPenalty < 0:
		return fmt.Errorf("sample: repetition_penalty %v must be finite and > 0 (0 = off)", c.RepetitionPenalty)
	}
	return nil
}

// Greedy reports whether the configuration always picks the argmax.
func (c Config) Greedy() bool { return c.Temperature == 0 }

// Sampler applies a Config to logits rows and keeps the token counts the
// penalties need. It is not safe for concurrent use.
type Sampler struct {
	cfg    Config
	counts map[int32]int32 // generated tokens
	prompt map[int32]bool  // prompt tokens (repetition penalty only)
}

// New returns a Sampler for cfg.
func New(cfg Config) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{cfg: cfg, counts: map[int32]int32{}, prompt: map[int32]bool{}}, nil
}

// Config returns the sampler's configuration.
func (s *Sampler) Config() Config { return s.cfg }

// AddPrompt records prompt tokens; only the repetition penalty uses them.
func (s *Sampler) AddPrompt(ids []int32) {
	for _, id := range ids {
		s.prompt[id] = true
	}
}

// Accept records a generated token for the penalties.
func (s *Sampler) Accept(id int32) { s.counts[id]++ }

// Reset forgets prompt and generated tokens.
func (s *Sampler) Reset() {
	s.counts = map[int32]int32{}
	s.prompt = map[int32]bool{}
}

// Argmax returns the index of the largest value, the lowest index on ties;
// NaN values are skipped. It returns -1 if there is no non-NaN value.
func Argmax(logits []float32) int32 {
	best := int32(-1)
	var bv float32
	for i, v := range logits {
		if v != v {
			continue
		}
		if best < 0 || v > bv {
			best, bv = int32(i), v
		}
	}
	return best
}

// Sample picks the next token for position pos. Greedy configurations return
// the argmax of the penalized logits; otherwise one uniform number
// Uniform(seed, pos, PurposeSample) is drawn and inverted through the
// cumulative distribution of Probs in id order. It returns -1 only if every
// logit is NaN or -Inf. The logits are not modified.
func (s *Sampler) Sample(logits []float32, pos int64) int32 {
	p := s.dist(logits)
	return drawFloat64(p, Uniform(s.cfg.Seed, pos, PurposeSample))
}

// Probs returns the final distribution after all penalties and filters (a
// one-hot vector for greedy configurations); the target probabilities for
// speculative sampling. Every entry is 0 if every logit is NaN or -Inf.
func (s *Sampler) Probs(logits []float32) []float32 {
	p := s.dist(logits)
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = float32(v)
	}
	return out
}

// Categorical draws from probs (non-negative, not necessarily normalized)
// with the uniform number u in [0, 1): the first id whose cumulative mass
// exceeds u × total. It returns -1 if the total is not positive.
func Categorical(probs []float32, u float64) int32 {
	p := make([]float64, len(probs))
	for i, v := range probs {
		if v > 0 {
			p[i] = float64(v)
		}
	}
	return drawFloat64(p, u)
}

func drawFloat64(p []float64, u float64) int32 {
	total := 0.0
	for _, v := range p {
		total += v
	}
	if !(total > 0) {
		return -1
	}
	target := u * total
	acc := 0.0
	last := int32(-1)
	for i, v := range p {
		if v <= 0 {
			continue
		}
		acc += v
		last = int32(i)
		if acc > target {
			return last
		}
	}
	return last // rounding: u×total at the very top
}

// penalized returns the logits after the penalties, in float64, with NaN
// mapped to -Inf.
func (s *Sampler) penalized(logits []float32) []float64 {
	x := make([]float64, len(logits))
	for i, v := range logits {
		if v != v {
			x[i] = math.Inf(-1)
		} else {
			x[i] = float64(v)
		}
	}
	r := s.cfg.RepetitionPenalty
	if r != 0 && r != 1 {
		rep := func(id int32) {
			if id < 0 || int(id) >= len(x) {
				return
			}
			if x[id] > 0 {
				x[id] /= r
			} else {
				x[id] *= r
			}
		}
		for id := range s.prompt {
			rep(id)
		}
		for id := range s.counts {
			if !s.prompt[id] {
				rep(id)
			}
		}
	}
	if s.cfg.PresencePenalty != 0 || s.cfg.FrequencyPenalty != 0 {
		for id, n := range s.counts {
			if id < 0 || int(id) >= len(x) || n <= 0 {
				continue
			}
			x[id] -= s.cfg.PresencePenalty + s.cfg.FrequencyPenalty*float64(n)
		}
	}
	return x
}

// dist computes the final distribution in float64.
func (s *Sampler) dist(logits []float32) []float64 {
	x := s.penalized(logits)
	p := make([]float64, len(x))
	best := -1
	for i, v := range x {
		if math.IsInf(v, -1) {
			continue
		}
		if best < 0 || v > x[best] {
			best = i
		}
	}
	if best < 0 {
		return p
	}
	if s.cfg.Greedy() {
		p[best] = 1
		return p
	}
	if math.IsInf(x[best], 1) {
		// +Inf logits share all the mass equally.
		var ids []int
		for i, v := range x {
			if math.IsInf(v, 1) {
				p[i] = 1
				ids = append(ids, i)
			}
		}
		renorm(p, ids)
		return p
	}
	t := s.cfg.Temperature
	top := x[best]

	// Candidate ids: the top k finite ones, or all finite ones.
	var cand []int
	if k := s.cfg.TopK; k > 0 && k < len(x) {
		cand = topK(x, k)
	} else {
		cand = make([]int, 0, len(x))
		for i, v := range x {
			if !math.IsInf(v, -1) {
				cand = append(cand, i)
			}
		}
	}

	// Softmax over the candidates (max-subtracted, float64).
	sum := 0.0
	for _, i := range cand {
		e := math.Exp((x[i] - top) / t) // exponent <= 0: no overflow even for tiny t
		p[i] = e
		sum += e
	}
	pmax := 0.0
	for _, i := range cand {
		p[i] /= sum
		if p[i] > pmax {
			pmax = p[i]
		}
	}

	if mp := s.cfg.MinP; mp > 0 {
		thr := mp * pmax
		kept := cand[:0]
		for _, i := range cand {
			if p[i] < thr {
				p[i] = 0
			} else {
				kept = append(kept, i)
			}
		}
		cand = kept
		renorm(p, cand)
	}

	if tp := s.cfg.TopP; tp > 0 && tp < 1 {
		sort.Slice(cand, func(a, b int) bool {
			pa, pb := p[cand[a]], p[cand[b]]
			if pa != pb {
				return pa > pb
			}
			return cand[a] < cand[b]
		})
		acc := 0.0
		n := 0
		for n < len(cand) {
			acc += p[cand[n]]
			n++
			if acc >= tp {
				break
			}
		}
		for _, i := range cand[n:] {
			p[i] = 0
		}
		cand = cand[:n]
		renorm(p, cand)
	}
	return p
}

// topK returns the (at most) k ids with the largest finite x (ties: lower
// id), in no particular order. It keeps a sorted window of size k, so it is
// O(n) for the usual small k.
func topK(x []float64, k int) []int {
	less := func(a, b int) bool { // a ranks below b
		if x[a] != x[b] {
			return x[a] < x[b]
		}
		return a > b
	}
	win := make([]int, 0, k) // ascending rank: win[0] is the weakest
	for i, v := range x {
		if math.IsInf(v, -1) {
			continue
		}
		if len(win) == k {
			if !less(win[0], i) {
				continue
			}
			copy(win, win[1:])
			win = win[:k-1]
		}
		j := sort.Search(len(win), func(j int) bool { return less(i, win[j]) })
		win = append(win, 0)
		copy(win[j+1:], win[j:])
		win[j] = i
	}
	return win
}

func renorm(p []float64, ids []int) {
	sum := 0.0
	for _, i := range ids {
		sum += p[i]
	}
	if sum > 0 {
		for _, i := range ids {
			p[i] /= sum
		}
	}
}
