package spec

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/sample"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// -spec.long runs the engine identity test with 512 new tokens per case
// (default: 40, to keep CI on two cores fast).
var long = flag.Bool("spec.long", false, "engine identity tests with 512 new tokens per case")

func TestMain(m *testing.M) { testfixture.Main(m) }

// testArtifacts returns the tiny random test model (testmodel default
// options: 3 GDN + 1 full-attention layer, MTP head) converted with the
// bf16 and q8 recipes, each with a 160-row proposal head.
func testArtifacts(t *testing.T) map[string]string {
	t.Helper()
	o := testmodel.DefaultOptions()
	draft := make([]int32, 160)
	for i := range draft {
		draft[i] = int32((i * 7) % o.Vocab) // a spread of ids, not a prefix
	}
	paths := map[string]string{}
	for _, rec := range []string{"bf16", "q8"} {
		paths[rec] = testfixture.Build(t, testfixture.Spec{Recipe: rec, Draft: draft})
	}
	return paths
}

type rig struct {
	e  *engine.Engine
	m  *engine.MTP
	ms *engine.MTPSequence
	s  *engine.Sequence // plain reference sequence on the same engine
}

func newRig(t *testing.T, path string, o engine.Options, proposal bool) *rig {
	t.Helper()
	return newRigThreads(t, path, o, proposal, 1)
}

func newRigThreads(t *testing.T, path string, o engine.Options, proposal bool, threads int) *rig {
	t.Helper()
	e, w := openEngine(t, path, o, threads)
	m, err := e.LoadMTP(w, engine.MTPOptions{ProposalHead: proposal})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := m.NewMTPSequence()
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); ms.Close(); m.Close() })
	return &rig{e, m, ms, s}
}

// openEngine opens the artifact at path on a CPU backend with threads
// threads; the weights, backend and engine are closed when t ends.
func openEngine(t *testing.T, path string, o engine.Options, threads int) (*engine.Engine, *loader.Weights) {
	t.Helper()
	w, err := loader.OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	be, err := backend.NewCPU(backend.CPUOptions{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	e, err := engine.New(w, be, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, w
}

// seqTarget is a plain engine sequence as a Target (reference decoding).
type seqTarget struct {
	s *engine.Sequence
	V int
}

func (q seqTarget) Prefill(ids []int32) ([]float32, error) { return q.s.Prefill(ids, false) }
func (q seqTarget) Decode(id int32) ([]float32, error)     { return q.s.Decode(id) }
func (q seqTarget) Verify(ids []int32) ([]float32, error)  { return q.s.Verify(ids) }
func (q seqTarget) Accept(n int) error                     { return q.s.Accept(n) }
func (q seqTarget) Pos() int                               { return q.s.Pos() }
func (q seqTarget) MaxContext() int                        { return 1 << 30 } // the engine enforces its own limit
func (q seqTarget) VerifyLimit() int                       { return 1 }
func (q seqTarget) VocabSize() int                         { return q.V }

// reuse lets one rig serve many cases: both sequences restart empty.
func (r *rig) reset(t *testing.T) {
	t.Helper()
	if err := r.ms.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := r.s.Reset(); err != nil {
		t.Fatal(err)
	}
}

// steered drafts with the MTP head (keeping it aligned and exercised) but
// replaces the drafts with the known greedy continuation, corrupted at
// random, so that rounds accept long prefixes and roll back GDN state from
// every slot.
type steered struct {
	ms     *engine.MTPSequence
	ref    []int32 // prompt ++ plain greedy output
	r      *rand.Rand
	pWrong float64
}

func (d *steered) Draft(next int32, n int) ([]int32, error) {
	out, err := d.ms.Draft(next, n)
	if err != nil || n == 0 {
		return out, err
	}
	pos := d.ms.Pos() + 1 // sequence position of the first draft
	for i := range out {
		if pos+i < len(d.ref) {
			out[i] = d.ref[pos+i]
		}
		if d.r.Float64() < d.pWrong {
			out[i] = (out[i] + 1) % int32(d.ms.VocabSize())
			break
		}
	}
	return out, nil
}

// TestEngineGreedyIdentity: with the MTP head (k = 1..5, with and without
// the proposal head, prompts of 1, 37 and 200 tokens with 128-token prefill
// chunks) speculative greedy decoding is token-identical to the engine's
// plain greedy decoding, and the counters add up.
func TestEngineGreedyIdentity(t *testing.T) {
	r, _ := seeded(t)
	paths := testArtifacts(t)
	maxNew := 40
	if *long {
		maxNew = 512
	}
	for _, rec := range []string{"bf16", "q8"} {
		for _, proposal := range []bool{false, true} {
			rg := newRig(t, paths[rec], engine.Options{MaxContext: 1024, PrefillChunk: 128, StateSlots: 6}, proposal)
			V := rg.ms.VocabSize()
			for _, plen := range []int{1, 37, 200} {
				prompt := numtest.RandIDs(r, plen, V)
				// Reference: plain greedy decoding without EOS stops (so every
				// case runs maxNew tokens), itself checked against the engine's
				// own Generate up to its first EOS.
				rg.reset(t)
				engineOut, err := rg.s.Generate(prompt, maxNew, nil)
				if err != nil {
					t.Fatal(err)
				}
				rg.reset(t)
				want, _, err := mustDecoder(t, seqTarget{rg.s, V}, nil, Options{IgnoreEOS: true}).Generate(prompt, maxNew, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(want) != maxNew || equalIDs(engineOut, want[:len(engineOut)]) >= 0 {
					t.Fatalf("plain decoder %v disagrees with Sequence.Generate %v", want, engineOut)
				}
				for k := 1; k <= MaxDraftTokens; k++ {
					for _, steer := range []bool{false, true} {
						if steer && (rec == "q8" || proposal && k%2 == 0) {
							continue // keep the matrix small
						}
						name := fmt.Sprintf("%s/proposal=%v/prompt=%d/k=%d/steered=%v", rec, proposal, plen, k, steer)
						rg.reset(t)
						var d Drafter = rg.ms
						if steer {
							d = &steered{ms: rg.ms, ref: append(append([]int32{}, prompt...), want...), r: r, pWrong: 0.15}
						}
						dc, err := NewDecoder(rg.ms, d, Options{K: k, IgnoreEOS: true, Proposal: proposal})
						if err != nil {
							t.Fatal(err)
						}
						got, st, err := dc.Generate(prompt, maxNew, nil)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if i := equalIDs(got, want); i >= 0 {
							t.Fatalf("%s: differs from plain greedy at token %d of %d\n got %v\nwant %v", name, i, len(want), got, want)
						}
						if err := st.Check(); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if st.EngineTokens() != len(got)-1 {
							t.Fatalf("%s: rounds %d + accepted %d + fallback %d ≠ %d", name, st.Rounds, st.AcceptedTokens, st.FallbackSteps, len(got)-1)
						}
						if steer && st.AcceptedTokens == 0 {
							t.Fatalf("%s: steered drafts never accepted", name)
						}
						if k == 3 || steer {
							rate, _ := st.AcceptanceRate()
							t.Logf("%s: %d tokens, %d rounds, %d drafted, %d accepted (%.2f), %d fallback, per position %v",
								name, len(got), st.Rounds, st.DraftedTokens, st.AcceptedTokens, rate, st.FallbackSteps, st.AcceptedPerPosition)
						}
					}
				}
			}
		}
	}
}

// likely drafts, for the sampling test, the plain greedy token that follows
// the first generated token (looked up in a precomputed table), so the draft
// is often inside the top-k set and both the accept and the resample paths
// run.
type likely struct {
	ms    *engine.MTPSequence
	after map[int32]int32
}

func (d *likely) Draft(next int32, n int) ([]int32, error) {
	out, err := d.ms.Draft(next, n)
	if err != nil || n == 0 {
		return out, err
	}
	if g, ok := d.after[next]; ok {
		out[0] = g
	}
	return out, nil
}

// TestEngineSamplingDistribution: end-to-end on the tiny model, speculative
// sampling (k = 2, clamped to one draft by the budget) gives the same
// distribution of the first three generated tokens as plain sampling,
// compared by a two-sample χ² test over many seeds.
func TestEngineSamplingDistribution(t *testing.T) {
	r, _ := seeded(t)
	paths := testArtifacts(t)
	rg := newRig(t, paths["bf16"], engine.Options{MaxContext: 256, PrefillChunk: 128, StateSlots: 3}, false)
	prompt := []int32{5, 17, 300, 42, 9}
	// A high temperature with top-k 3 keeps the joint support small (27 cells).
	cfg := sample.Config{Temperature: 3, TopK: 3}
	const N, G = 1000, 3
	// The greedy successor of every token that can be sampled first.
	sm0, err := sample.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rg.reset(t)
	first, err := rg.s.Prefill(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	after := map[int32]int32{}
	for id, p := range sm0.Probs(first) {
		if p <= 0 {
			continue
		}
		rg.reset(t)
		lg, err := rg.s.Prefill(append(append([]int32{}, prompt...), int32(id)), false)
		if err != nil {
			t.Fatal(err)
		}
		after[int32(id)] = sample.Argmax(lg)
	}
	if len(after) != cfg.TopK {
		t.Fatalf("%d first-token candidates, want %d", len(after), cfg.TopK)
	}
	counts := [2]map[[3]int32]int{{}, {}}
	accepted := 0
	for n := 0; n < N; n++ {
		for i, k := range []int{0, 2} {
			c := cfg
			c.Seed = r.Uint64()
			sm, err := sample.New(c)
			if err != nil {
				t.Fatal(err)
			}
			rg.reset(t)
			var d Drafter
			if k > 0 {
				d = &likely{ms: rg.ms, after: after}
			}
			out, st, err := mustDecoder(t, rg.ms, d, Options{K: k, Sampler: sm, IgnoreEOS: true}).Generate(prompt, G, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != G || (k > 0 && (st.Rounds != 1 || st.DraftedTokens != 1 || st.EngineTokens() != G-1)) {
				t.Fatalf("k=%d: %d tokens, stats %+v", k, len(out), st)
			}
			accepted += st.AcceptedTokens
			counts[i][[3]int32{out[0], out[1], out[2]}]++
		}
	}
	if accepted == 0 || accepted == N {
		t.Fatalf("%d of %d drafts accepted: the test must exercise both accept and resample", accepted, N)
	}
	// Two-sample χ² over the union of cells seen (cells with fewer than 10
	// observations in total are pooled).
	keys := map[[3]int32]bool{}
	for i := range counts {
		for k := range counts[i] {
			keys[k] = true
		}
	}
	stat, df := 0.0, -1
	var poolA, poolB int
	for k := range keys {
		a, b := counts[0][k], counts[1][k]
		if a+b < 10 {
			poolA += a
			poolB += b
			continue
		}
		d := float64(a - b)
		stat += d * d / float64(a+b)
		df++
	}
	if poolA+poolB > 0 {
		d := float64(poolA - poolB)
		stat += d * d / float64(poolA+poolB)
		df++
	}
	if df < 1 {
		t.Fatalf("too few cells: %v", counts)
	}
	kk := float64(df)
	crit := kk * math.Pow(1-2/(9*kk)+3.719*math.Sqrt(2/(9*kk)), 3)
	t.Logf("two-sample χ² %.1f, df %d, critical %.1f; %d of %d drafts accepted", stat, df, crit, accepted, N)
	if stat > crit {
		t.Fatalf("speculative sampling changes the token distribution: χ² %.1f > %.1f", stat, crit)
	}
}

// TestMTPRealignment: after speculative rounds with rejections (the MTP
// realigned from verify hidden rows, rejected rows dropped), the MTP's
// drafts and their logits equal those of a fresh sequence that prefilled the
// committed history: the MTP KV cache holds exactly the committed rows.
func TestMTPRealignment(t *testing.T) {
	r, _ := seeded(t)
	paths := testArtifacts(t)
	rg := newRig(t, paths["bf16"], engine.Options{KVDtype: "fp32", MaxContext: 512, PrefillChunk: 128, StateSlots: 5}, false)
	V := rg.ms.VocabSize()
	prompt := numtest.RandIDs(r, 150, V)
	// The reference continuation ignores EOS (Sequence.Generate stops at it,
	// which on some random prompts left too few tokens for any round).
	want := make([]int32, 0, 30)
	logits, err := rg.s.Prefill(prompt, false)
	for err == nil && len(want) < cap(want) {
		id := sample.Argmax(logits)
		want = append(want, id)
		logits, err = rg.s.Decode(id)
	}
	if err != nil {
		t.Fatal(err)
	}
	rg.reset(t)
	n := len(want)
	d := &steered{ms: rg.ms, ref: append(append([]int32{}, prompt...), want...), r: r, pWrong: 0.3}
	got, st, err := mustDecoder(t, rg.ms, d, Options{K: 4, IgnoreEOS: true}).Generate(prompt, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rounds == 0 || st.AcceptedTokens == 0 || st.AcceptedTokens == st.DraftedTokens {
		t.Fatalf("want rounds with both accepted and rejected drafts, got %+v", st)
	}
	const k = 3
	drafts := func(ms *engine.MTPSequence) ([]int32, []float32) {
		ms.Logits, ms.RowLogits = true, nil
		defer func() { ms.Logits = false }()
		ds, err := ms.Draft(got[len(got)-1], k)
		if err != nil {
			t.Fatal(err)
		}
		return ds, ms.RowLogits[len(ms.RowLogits)-k*V:]
	}
	d1, l1 := drafts(rg.ms)
	fresh, err := rg.m.NewMTPSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	hist := append(append([]int32{}, prompt...), got[:len(got)-1]...)
	if _, err := fresh.Prefill(hist); err != nil {
		t.Fatal(err)
	}
	if fresh.Pos() != rg.ms.Pos() {
		t.Fatalf("fresh sequence at %d, speculative at %d", fresh.Pos(), rg.ms.Pos())
	}
	d2, l2 := drafts(fresh)
	worst := 0.0
	for i := range l1 {
		if l1[i] != l1[i] || l2[i] != l2[i] {
			t.Fatalf("NaN in draft logits at %d", i)
		}
		worst = math.Max(worst, math.Abs(float64(l1[i]-l2[i])))
	}
	t.Logf("drafts %v vs %v, max |Δ logit| %.3g", d1, d2, worst)
	if worst > 1e-3 || equalIDs(d1, d2) >= 0 {
		t.Fatalf("realigned MTP drafts %v (logits max |Δ| %.3g) differ from a fresh prefill's %v", d1, worst, d2)
	}
}

// TestLoadMTPErrors: the MTP head and the proposal head are checked when
// they are bound, and misuse of the MTP sequence is reported.
func TestLoadMTPErrors(t *testing.T) {
	noMTP := testfixture.Artifact(t, "bf16", func(o *testmodel.Options) { o.MTPLayers = 0 })
	open := func(path string) (*engine.Engine, *loader.Weights) {
		return openEngine(t, path, engine.Options{MaxContext: 64, PrefillChunk: 128, StateSlots: 3}, 1)
	}
	e, w := open(noMTP)
	if _, err := e.LoadMTP(w, engine.MTPOptions{}); err == nil || !strings.Contains(err.Error(), "no MTP head") {
		t.Fatalf("model without MTP: err %v", err)
	}
	// The shared test model has an MTP head; convert it without a proposal head.
	withMTP := testfixture.Artifact(t, "bf16", nil)
	e, w = open(withMTP)
	if _, err := e.LoadMTP(w, engine.MTPOptions{ProposalHead: true}); err == nil || !strings.Contains(err.Error(), "text/draft_head") {
		t.Fatalf("proposal head missing: err %v", err)
	}
	m, err := e.LoadMTP(w, engine.MTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ms, err := m.NewMTPSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	if _, err := ms.Draft(1, 2); err == nil {
		t.Fatal("draft before any target step succeeded")
	}
	if _, err := ms.Prefill(make([]int32, 60)); err != nil {
		t.Fatal(err)
	}
	// Position 59 is pending; drafts 2..4 would sit at 60..62 < 64: fine;
	// 6 drafts reach position 64.
	if _, err := ms.Draft(1, 6); err == nil {
		t.Fatal("drafts past the context limit succeeded")
	}
	if _, err := ms.Draft(1, 4); err != nil {
		t.Fatalf("4 drafts below the context limit: %v", err)
	}
	if _, err := NewDecoder(ms, ms, Options{K: 3}); err == nil {
		t.Fatal("k=3 accepted with 3 state slots")
	}
}

// TestMTPPendingOverflow: many ordinary steps without drafting overflow the
// MTP's pending-row buffer (it flushes itself); the drafts afterwards still
// equal those of a fresh sequence that prefilled the same history.
func TestMTPPendingOverflow(t *testing.T) {
	r, _ := seeded(t)
	paths := testArtifacts(t)
	rg := newRig(t, paths["bf16"], engine.Options{KVDtype: "fp32", MaxContext: 512, PrefillChunk: 128, StateSlots: 3}, false)
	V := rg.ms.VocabSize()
	hist := numtest.RandIDs(r, 300, V)
	if _, err := rg.ms.Prefill(hist[:10]); err != nil {
		t.Fatal(err)
	}
	for _, id := range hist[10:] {
		if _, err := rg.ms.Decode(id); err != nil {
			t.Fatal(err)
		}
	}
	fresh, err := rg.m.NewMTPSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Prefill(hist); err != nil {
		t.Fatal(err)
	}
	next := int32(r.IntN(V))
	get := func(ms *engine.MTPSequence) ([]int32, []float32) {
		ms.Logits, ms.RowLogits = true, nil
		d, err := ms.Draft(next, 2)
		if err != nil {
			t.Fatal(err)
		}
		return d, ms.RowLogits[len(ms.RowLogits)-2*V:]
	}
	d1, l1 := get(rg.ms)
	d2, l2 := get(fresh)
	worst := 0.0
	for i := range l1 {
		worst = math.Max(worst, math.Abs(float64(l1[i]-l2[i])))
	}
	if !(worst <= 1e-3) || equalIDs(d1, d2) >= 0 {
		t.Fatalf("after %d decode steps: drafts %v vs fresh %v, logits max |Δ| %.3g", len(hist)-10, d1, d2, worst)
	}
}
