package spec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/sample"
)

// seeded returns a per-run random source and its seed (NINFER_TEST_SEED
// replays one).
func seeded(t *testing.T) (*rand.Rand, uint64) {
	t.Helper()
	seed := numtest.Seed(t)
	return rand.New(rand.NewPCG(seed, ^seed)), seed
}

// markov is a fake target: the next-token logits are a fixed random
// function of (previous token, position), so the exact output distribution
// is known. It follows the Target contract (Verify/Accept, context limit).
type markov struct {
	V, maxCtx, limit int
	salt             uint64
	toks             []int32
	verifying        int // tokens of the pending verify, 0 if none
	verifies         int
}

func (m *markov) logits(prev int32, pos int) []float32 {
	out := make([]float32, m.V)
	for v := range out {
		h := sample.Hash64(m.salt, int64(pos)*int64(m.V)*int64(m.V)+int64(prev)*int64(m.V)+int64(v), 7)
		out[v] = float32(h>>40)/float32(1<<24)*6 - 3
	}
	return out
}

func (m *markov) rowAfter(toks []int32) []float32 {
	return m.logits(toks[len(toks)-1], len(toks))
}

func (m *markov) check(n int) error {
	if m.verifying > 0 {
		return fmt.Errorf("verify not followed by accept")
	}
	if len(m.toks)+n > m.maxCtx {
		return fmt.Errorf("context limit: %d tokens at %d exceed %d", n, len(m.toks), m.maxCtx)
	}
	return nil
}

func (m *markov) Prefill(ids []int32) ([]float32, error) {
	if err := m.check(len(ids)); err != nil {
		return nil, err
	}
	m.toks = append(m.toks, ids...)
	return m.rowAfter(m.toks), nil
}

func (m *markov) Decode(id int32) ([]float32, error) { return m.Prefill([]int32{id}) }

func (m *markov) Verify(ids []int32) ([]float32, error) {
	if err := m.check(len(ids)); err != nil {
		return nil, err
	}
	if len(ids) > m.limit {
		return nil, fmt.Errorf("verify of %d > limit %d", len(ids), m.limit)
	}
	var out []float32
	for i := range ids {
		out = append(out, m.rowAfter(append(append([]int32{}, m.toks...), ids[:i+1]...))...)
	}
	m.toks = append(m.toks, ids...)
	m.verifying = len(ids)
	m.verifies++
	return out, nil
}

func (m *markov) Accept(n int) error {
	if m.verifying == 0 || n < 1 || n > m.verifying {
		return fmt.Errorf("accept %d of %d", n, m.verifying)
	}
	m.toks = m.toks[:len(m.toks)-m.verifying+n]
	m.verifying = 0
	return nil
}

func (m *markov) Pos() int         { return len(m.toks) }
func (m *markov) MaxContext() int  { return m.maxCtx }
func (m *markov) VerifyLimit() int { return m.limit }
func (m *markov) VocabSize() int   { return m.V }

// greedyFrom returns the target's greedy continuation of toks+next.
func (m *markov) greedyFrom(next int32, n int) []int32 {
	toks := append(append([]int32{}, m.toks...), next)
	var out []int32
	for len(out) < n {
		id := sample.Argmax(m.rowAfter(toks))
		out = append(out, id)
		toks = append(toks, id)
	}
	return out
}

// oracle drafts the target's greedy continuation, corrupted at the draft
// index given by plan (one entry per Draft call; ≥ n means no corruption),
// or at random with probability pWrong when plan is nil.
type oracle struct {
	m      *markov
	plan   []int
	calls  int
	r      *rand.Rand
	pWrong float64
	asked  []int
}

func (o *oracle) Draft(next int32, n int) ([]int32, error) {
	o.asked = append(o.asked, n)
	if n == 0 {
		return nil, nil
	}
	d := o.m.greedyFrom(next, n)
	bad := n
	if o.plan != nil {
		bad = o.plan[o.calls]
	} else if o.pWrong > 0 {
		for i := range d {
			if o.r.Float64() < o.pWrong {
				bad = i
				break
			}
		}
	}
	o.calls++
	for i := bad; i < n; i++ {
		d[i] = (d[i] + 1 + int32(i)) % int32(o.m.V)
	}
	return d, nil
}

func plainGreedy(t *testing.T, m *markov, prompt []int32, n int) []int32 {
	t.Helper()
	dc, err := NewDecoder(m, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, st, err := dc.Generate(prompt, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Enabled || st.Rounds+st.DraftedTokens+st.FallbackSteps != 0 || st.Backend != BackendNone {
		t.Fatalf("plain decoding stats %+v", st)
	}
	return out
}

func equalIDs(a, b []int32) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return len(a)
	}
	return -1
}

// TestSeedReportArithmetic reproduces the seed report's tg1024 rep at k=2:
// 416 rounds, 831 drafted (= 415·2 + 1: the last round is clamped to one
// draft), 608 accepted, per position [335, 273], no fallback steps.
func TestSeedReportArithmetic(t *testing.T) {
	r, seed := seeded(t)
	m := &markov{V: 50, maxCtx: 4096, limit: 3, salt: seed}
	// 415 full rounds: 273 accept both, 61 accept one, 81 accept none.
	var plan []int
	for i := 0; i < 273; i++ {
		plan = append(plan, 2)
	}
	for i := 0; i < 61; i++ {
		plan = append(plan, 1)
	}
	for i := 0; i < 81; i++ {
		plan = append(plan, 0)
	}
	r.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	plan = append(plan, 1) // the clamped last round accepts its only draft
	prompt := []int32{1, 2, 3}
	want := plainGreedy(t, &markov{V: 50, maxCtx: 4096, limit: 3, salt: seed}, prompt, 1025)
	dc, err := NewDecoder(m, &oracle{m: m, plan: plan}, Options{K: 2, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	got, st, err := dc.Generate(prompt, 1025, nil)
	if err != nil {
		t.Fatal(err)
	}
	if i := equalIDs(got, want); i >= 0 {
		t.Fatalf("speculative output differs from plain greedy at token %d", i)
	}
	if st.Rounds != 416 || st.DraftedTokens != 831 || st.AcceptedTokens != 608 || st.FallbackSteps != 0 ||
		len(st.AcceptedPerPosition) != 2 || st.AcceptedPerPosition[0] != 335 || st.AcceptedPerPosition[1] != 273 {
		t.Fatalf("stats %+v, want 416 rounds, 831 drafted, 608 accepted, [335 273]", st)
	}
	if st.EngineTokens() != 1024 {
		t.Fatalf("engine tokens %d, want 1024", st.EngineTokens())
	}
	rate, _ := st.AcceptanceRate()
	length, _ := st.AcceptanceLength()
	if math.Abs(rate-0.7316486161) > 1e-9 || math.Abs(length-2.461538462) > 1e-9 {
		t.Fatalf("acceptance rate %.10g length %.10g, want 0.7316486161 2.461538462", rate, length)
	}
	if err := st.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestGreedyIdentityAndInvariants: for k = 1..5, drafts of varying quality,
// budgets and context limits, speculative greedy output equals plain greedy
// output and the counters satisfy the schema-15 invariants.
func TestGreedyIdentityAndInvariants(t *testing.T) {
	r, seed := seeded(t)
	for k := 1; k <= MaxDraftTokens; k++ {
		for _, pWrong := range []float64{0, 0.2, 0.6, 1} {
			for _, c := range []struct{ prompt, maxNew, maxCtx int }{{1, 1, 64}, {3, 2, 64}, {5, 40, 512}, {7, 100, 60}, {2, 300, 1024}} {
				name := fmt.Sprintf("k=%d/wrong=%g/prompt=%d/new=%d/ctx=%d", k, pWrong, c.prompt, c.maxNew, c.maxCtx)
				salt := seed + uint64(k)
				prompt := numtest.RandIDs(r, c.prompt, 40)
				ref := &markov{V: 40, maxCtx: c.maxCtx, limit: k + 1, salt: salt}
				want, _, refErr := mustDecoder(t, ref, nil, Options{IgnoreEOS: true}).Generate(prompt, c.maxNew, nil)
				m := &markov{V: 40, maxCtx: c.maxCtx, limit: k + 1, salt: salt}
				o := &oracle{m: m, r: r, pWrong: pWrong}
				var emitted []int32
				got, st, err := mustDecoder(t, m, o, Options{K: k, IgnoreEOS: true}).Generate(prompt, c.maxNew, func(id int32) bool {
					emitted = append(emitted, id)
					return true
				})
				if (err == nil) != (refErr == nil) {
					t.Fatalf("%s: error %v, plain decoding error %v", name, err, refErr)
				}
				if i := equalIDs(got, want); i >= 0 {
					t.Fatalf("%s: output differs from plain greedy at token %d:\n got %v\nwant %v", name, i, got, want)
				}
				if equalIDs(emitted, got) >= 0 {
					t.Fatalf("%s: emitted %v, returned %v", name, emitted, got)
				}
				if err := st.Check(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if err == nil && st.EngineTokens() != len(got)-1 {
					t.Fatalf("%s: rounds %d + accepted %d + fallback %d ≠ %d decoded tokens", name, st.Rounds, st.AcceptedTokens, st.FallbackSteps, len(got)-1)
				}
				if err == nil && m.Pos() != len(prompt)+len(got)-1 {
					t.Fatalf("%s: target holds %d tokens, want %d", name, m.Pos(), len(prompt)+len(got)-1)
				}
				if pWrong == 0 && err == nil && st.DraftedTokens != st.AcceptedTokens {
					t.Fatalf("%s: perfect drafts, %d of %d accepted", name, st.AcceptedTokens, st.DraftedTokens)
				}
				if pWrong == 1 && st.AcceptedTokens != 0 {
					t.Fatalf("%s: wrong drafts, %d accepted", name, st.AcceptedTokens)
				}
				// Every draft request respects the clamp.
				for _, n := range o.asked {
					if n < 0 || n > k {
						t.Fatalf("%s: asked for %d drafts", name, n)
					}
				}
			}
		}
	}
}

// TestClampAndFallback: with a budget of exactly 2 more tokens the round is
// clamped to one draft; with one token left an ordinary step is taken
// (fallback_steps), and the context limit clamps drafts too.
func TestClampAndFallback(t *testing.T) {
	_, seed := seeded(t)
	for _, c := range []struct {
		name                      string
		maxNew, maxCtx            int
		plan                      []int
		rounds, drafted, fallback int
	}{
		// 1 + 3 (round: 2 accepted + bonus) + 2 (clamped: 1 + bonus) = 6 tokens.
		{"clamped-last-round", 6, 100, []int{2, 1}, 2, 3, 0},
		// 1 + 3 + then remaining 1 → fallback.
		{"fallback-last-token", 5, 100, []int{2}, 1, 2, 1},
		// Rejected clamped round leaves one token: fallback.
		{"rejected-clamp-then-fallback", 4, 100, []int{0, 0}, 2, 3, 1},
		// maxNew 1: the prefill token only.
		{"prefill-only", 1, 100, nil, 0, 0, 0},
		// Context 6 with a 3-token prompt: frontier 3 → extent min(2, cap−3−1 = 2);
		// after 3 tokens frontier 5 → extent 0 → fallback reaches the limit.
		{"context-clamp", 10, 7, []int{2}, 1, 2, 1},
	} {
		m := &markov{V: 30, maxCtx: c.maxCtx, limit: 3, salt: seed}
		dc := mustDecoder(t, m, &oracle{m: m, plan: c.plan}, Options{K: 2, IgnoreEOS: true})
		got, st, err := dc.Generate([]int32{1, 2, 3}, c.maxNew, nil)
		if c.name == "context-clamp" {
			if err == nil {
				t.Fatalf("%s: no context error", c.name)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.Rounds != c.rounds || st.DraftedTokens != c.drafted || st.FallbackSteps != c.fallback {
			t.Fatalf("%s: stats %+v, want %d rounds, %d drafted, %d fallback", c.name, st, c.rounds, c.drafted, c.fallback)
		}
		if err == nil && len(got) != c.maxNew {
			t.Fatalf("%s: %d tokens, want %d", c.name, len(got), c.maxNew)
		}
	}
}

// TestEOSAndEmitStop: generation stops at an EOS token or when emit says
// so, also in the middle of a round.
func TestEOSAndEmitStop(t *testing.T) {
	_, seed := seeded(t)
	m0 := &markov{V: 30, maxCtx: 400, limit: 4, salt: seed}
	full := plainGreedy(t, m0, []int32{4, 5}, 60)
	eos := full[10]
	stopAt := -1
	for i, id := range full {
		if id == eos {
			stopAt = i
			break
		}
	}
	m := &markov{V: 30, maxCtx: 400, limit: 4, salt: seed}
	got, _, err := mustDecoder(t, m, &oracle{m: m, pWrong: 0}, Options{K: 3, EOS: []int32{eos}}).Generate([]int32{4, 5}, 60, nil)
	if err != nil {
		t.Fatal(err)
	}
	if i := equalIDs(got, full[:stopAt+1]); i >= 0 {
		t.Fatalf("EOS stop: got %v, want %v", got, full[:stopAt+1])
	}
	m = &markov{V: 30, maxCtx: 400, limit: 4, salt: seed}
	n := 0
	got, _, err = mustDecoder(t, m, &oracle{m: m, pWrong: 0}, Options{K: 3, IgnoreEOS: true}).Generate([]int32{4, 5}, 60, func(int32) bool { n++; return n < 7 })
	if err != nil {
		t.Fatal(err)
	}
	if i := equalIDs(got, full[:7]); i >= 0 {
		t.Fatalf("emit stop: got %v, want %v", got, full[:7])
	}
}

func TestValidation(t *testing.T) {
	for _, c := range []struct {
		spec string
		k    int
		ok   bool
	}{{"mtp", 1, true}, {"mtp", 5, true}, {"mtp", 0, false}, {"mtp", 6, false}, {"none", 0, true}, {"", 3, true}, {"ngram", 2, false}} {
		if err := ValidateFlags(c.spec, c.k); (err == nil) != c.ok {
			t.Errorf("ValidateFlags(%q, %d) = %v", c.spec, c.k, err)
		}
	}
	m := &markov{V: 10, maxCtx: 10, limit: 2, salt: 1}
	if _, err := NewDecoder(m, &oracle{m: m}, Options{K: 2}); err == nil {
		t.Error("k=2 accepted with verify limit 2")
	}
	if _, err := NewDecoder(m, nil, Options{K: 1}); err == nil {
		t.Error("k=1 accepted without a drafter")
	}
	var s Stats
	s.Add(Stats{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 127, DraftedTokens: 254, AcceptedTokens: 129, AcceptedPerPosition: []int{80, 49}})
	s.Add(Stats{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 127, DraftedTokens: 254, AcceptedTokens: 129, AcceptedPerPosition: []int{80, 49}})
	if s.Rounds != 254 || s.AcceptedPerPosition[0] != 160 || s.AcceptedPerPosition[1] != 98 || s.Check() != nil {
		t.Errorf("Add: %+v", s)
	}
	if _, ok := (Stats{}).AcceptanceRate(); ok {
		t.Error("acceptance rate without drafts")
	}
}

func mustDecoder(t *testing.T, tg Target, d Drafter, o Options) *Decoder {
	t.Helper()
	dc, err := NewDecoder(tg, d, o)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// chiSquare compares observed counts with expected probabilities (cells
// expected below 5 are pooled) and fails above the 1−1e-4 quantile
// (Wilson–Hilferty approximation).
func chiSquare(t *testing.T, what string, counts []int, probs []float64, n int) {
	t.Helper()
	var stat, poolO, poolE float64
	df := -1
	for i, p := range probs {
		if math.IsNaN(p) || p < 0 {
			t.Fatalf("%s: bad probability %v at %d", what, p, i)
		}
		e := p * float64(n)
		if e < 5 {
			poolO += float64(counts[i])
			poolE += e
			continue
		}
		d := float64(counts[i]) - e
		stat += d * d / e
		df++
	}
	if poolE > 0 {
		d := poolO - poolE
		stat += d * d / math.Max(poolE, 1e-9)
		df++
	}
	if df < 1 {
		t.Fatalf("%s: too few cells", what)
	}
	const z = 3.719 // one-sided 1e-4
	k := float64(df)
	crit := k * math.Pow(1-2/(9*k)+z*math.Sqrt(2/(9*k)), 3)
	t.Logf("%s: χ² %.1f, df %d, critical %.1f", what, stat, df, crit)
	if !(stat <= crit) {
		t.Fatalf("%s: χ² %.1f exceeds %.1f (df %d): distributions differ", what, stat, crit, df)
	}
}

// TestResidualPreservesDistribution tests the accept/resample step directly:
// for a random target distribution p and a draft d drawn from an unrelated
// distribution, "accept d with probability p[d], else draw from p with d
// removed" yields p.
func TestResidualPreservesDistribution(t *testing.T) {
	r, _ := seeded(t)
	const V, N = 8, 200000
	for trial := 0; trial < 3; trial++ {
		p := make([]float32, V)
		q := make([]float32, V)
		var sp, sq float64
		for i := range p {
			p[i] = float32(math.Exp(3 * r.NormFloat64()))
			q[i] = float32(r.Float64())
			sp += float64(p[i])
			sq += float64(q[i])
		}
		probs := make([]float64, V)
		for i := range p {
			p[i] /= float32(sp)
			probs[i] = float64(p[i])
		}
		counts := make([]int, V)
		for i := 0; i < N; i++ {
			d := sample.Categorical(q, r.Float64())
			tok := d
			if r.Float64() >= float64(p[d]) {
				var err error
				if tok, err = Residual(p, d, r.Float64()); err != nil {
					t.Fatal(err)
				}
				if tok == d {
					t.Fatalf("residual drew the rejected draft %d", d)
				}
			}
			counts[tok]++
		}
		chiSquare(t, fmt.Sprintf("residual trial %d", trial), counts, probs, N)
	}
	if _, err := Residual([]float32{0, 1, 0}, 1, 0.5); err == nil {
		t.Fatal("empty residual accepted")
	}
}

// TestSpeculativeSamplingPreservesDistribution runs the whole decoder
// (k = 3, drafts of mixed quality, top-k filtering) on the fake target over
// many sampler seeds and compares the joint distribution of the first four
// generated tokens with the exact plain-sampling distribution.
func TestSpeculativeSamplingPreservesDistribution(t *testing.T) {
	r, seed := seeded(t)
	const V, N, G = 4, 30000, 4
	cfg := sample.Config{Temperature: 0.9, TopK: 3}
	prompt := []int32{1, 3}
	ref := &markov{V: V, maxCtx: 64, limit: 4, salt: seed}
	sm, err := sample.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Exact joint distribution of G tokens.
	cells := 1
	for i := 0; i < G; i++ {
		cells *= V
	}
	probs := make([]float64, cells)
	for c := 0; c < cells; c++ {
		toks := append([]int32{}, prompt...)
		pr := 1.0
		for i, x := 0, c; i < G; i, x = i+1, x/V {
			p := sm.Probs(ref.rowAfter(toks))
			pr *= float64(p[x%V])
			toks = append(toks, int32(x%V))
		}
		probs[c] = pr
	}
	for _, k := range []int{0, 3} {
		counts := make([]int, cells)
		for n := 0; n < N; n++ {
			c := cfg
			c.Seed = r.Uint64()
			s, err := sample.New(c)
			if err != nil {
				t.Fatal(err)
			}
			m := &markov{V: V, maxCtx: 64, limit: 4, salt: seed}
			var d Drafter
			if k > 0 {
				d = &oracle{m: m, r: r, pWrong: 0.3}
			}
			out, st, err := mustDecoder(t, m, d, Options{K: k, Sampler: s, IgnoreEOS: true}).Generate(prompt, G, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != G || st.EngineTokens() != G-1 && k > 0 {
				t.Fatalf("k=%d: %d tokens, stats %+v", k, len(out), st)
			}
			cell, mul := 0, 1
			for _, id := range out {
				cell += int(id) * mul
				mul *= V
			}
			counts[cell]++
		}
		chiSquare(t, fmt.Sprintf("k=%d first %d tokens", k, G), counts, probs, N)
	}
}
