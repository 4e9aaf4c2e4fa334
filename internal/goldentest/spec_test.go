package goldentest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/spec"
)

// oracleDrafter runs the MTP drafter (keeping the MTP sequence aligned) but
// replaces its tokens by the reference sequence's, each corrupted with
// probability pWrong, so verify rounds accept some drafts and reject others.
// (The random MTP heads of the golden cases never predict the greedy
// continuation, so their own drafts are always rejected.)
type oracleDrafter struct {
	ms     *engine.MTPSequence
	ref    []int32 // IDs ++ Continuation
	rng    *rand.Rand
	pWrong float64
	vocab  int
}

func (o *oracleDrafter) Draft(next int32, n int) ([]int32, error) {
	d, err := o.ms.Draft(next, n)
	if err != nil {
		return nil, err
	}
	at := o.ms.Pos() // position of next (not yet in the cache)
	if at >= len(o.ref) || o.ref[at] != next {
		return nil, fmt.Errorf("oracle drafter: token %d at position %d is not the reference token", next, at)
	}
	for i := range d {
		if j := at + 1 + i; j < len(o.ref) {
			d[i] = o.ref[j]
		}
		if o.rng.Float64() < o.pWrong {
			d[i] = (d[i] + 1 + int32(o.rng.IntN(o.vocab-1))) % int32(o.vocab)
		}
	}
	return d, nil
}

// TestSpeculativeGreedyMatchesTransformers: MTP speculative greedy decoding
// (pkg/spec over engine.MTPSequence: drafts, multi-token Verify with
// per-token GDN state slots, Accept) on the fp32 recipe reproduces
// transformers' 32-token greedy continuation exactly for k = 1, 3, 5 draft
// tokens, with the MTP's own drafts (every round rejects) and with oracle
// drafts corrupted at random (rounds accept 0..k tokens), and its counters
// are consistent.
func TestSpeculativeGreedyMatchesTransformers(t *testing.T) {
	rng := seeded(t)
	for _, c := range cases(t) {
		for _, k := range []int{1, 3, 5} {
			for _, oracle := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/k=%d/oracle=%v", c.Manifest.Name, k, oracle), func(t *testing.T) {
					md := open(t, c, "fp32", engine.Options{PrefillChunk: 128, KVDtype: "fp32", StateSlots: spec.MaxDraftTokens + 1}, asStored)
					m, err := md.eng.LoadMTP(md.w, engine.MTPOptions{})
					if err != nil {
						t.Fatal(err)
					}
					ms, err := m.NewMTPSequence()
					if err != nil {
						m.Close()
						t.Fatal(err)
					}
					t.Cleanup(func() { ms.Close(); m.Close() }) // runs before the engine's cleanup
					want := i32(c.Manifest.Continuation)
					var d spec.Drafter = ms
					if oracle {
						d = &oracleDrafter{ms: ms, ref: append(i32(c.Manifest.IDs), want...), rng: rng, pWrong: 0.25,
							vocab: c.Manifest.VocabSize}
					}
					dc, err := spec.NewDecoder(ms, d, spec.Options{K: k, IgnoreEOS: true})
					if err != nil {
						t.Fatal(err)
					}
					got, st, err := dc.Generate(i32(c.Manifest.IDs), len(want), nil)
					if err != nil {
						t.Fatalf("generate: %v", err)
					}
					rate, _ := st.AcceptanceRate()
					t.Logf("rounds %d, drafted %d, accepted %d (rate %.2f, per position %v), fallback steps %d",
						st.Rounds, st.DraftedTokens, st.AcceptedTokens, rate, st.AcceptedPerPosition, st.FallbackSteps)
					if !slices.Equal(got, want) {
						t.Errorf("speculative greedy continuation\n got %v\nwant %v", got, want)
					}
					if err := st.Check(); err != nil {
						t.Error(err)
					}
					if n := st.EngineTokens(); n != len(got)-1 {
						t.Errorf("rounds + accepted + fallback = %d, want %d (tokens after the first)", n, len(got)-1)
					}
					if oracle && st.AcceptedTokens == 0 {
						t.Errorf("oracle drafts (wrong with p = 0.25) were never accepted")
					}
				})
			}
		}
	}
}
