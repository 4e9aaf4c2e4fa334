package spec

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/corpus"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// -spec.perf runs TestPerfTable: acceptance and decode speed for k = 0..3
// on the CPU backend (the numbers in docs/PERF.md).
var (
	perf         = flag.Bool("spec.perf", false, "measure MTP speculative decoding speed on the CPU backend (docs/PERF.md)")
	perfModel    = flag.String("spec.model", "", "with -spec.perf: measure this .ninfer artifact instead of the random mid-size model")
	perfCorpus   = flag.String("spec.corpus", "", "with -spec.model: take the prompts from this token-id corpus (required with -spec.model)")
	perfProposal = flag.Bool("spec.proposal", false, "with -spec.model: also measure the proposal head (the artifact must have one)")
	perfThreads  = flag.Int("spec.threads", 1, "with -spec.perf: CPU backend threads")
)

// TestPerfTable measures a mid-size random model (H 512, 8 layers, vocab
// 8192, q8 recipe, 1024-row proposal head): 3 repetitions of 64 prompt
// tokens + 256 generated tokens per configuration.
func TestPerfTable(t *testing.T) {
	if !*perf {
		t.Skip("run with -spec.perf")
	}
	type cfg struct {
		k        int
		proposal bool
		oracle   bool
	}
	r := rand.New(rand.NewPCG(1, 2))
	var path string
	var prompts [][]int32
	G, reps := 256, 3
	cfgs := []cfg{{0, false, false}, {1, false, false}, {2, false, false}, {3, false, false}, {2, true, false},
		{1, false, true}, {2, false, true}, {3, false, true}}
	if *perfModel != "" {
		// A real artifact: 4 prompts of 64 tokens from the corpus (offsets
		// 0, 1000, 2000, 3000), 128 generated tokens each.
		path, G, reps = *perfModel, 128, 3
		ids, err := corpus.ReadFile(*perfCorpus, 0)
		if err != nil {
			t.Fatalf("-spec.corpus: %v", err)
		}
		for off := 0; off+64 <= len(ids) && len(prompts) < 4; off += 1000 {
			prompts = append(prompts, ids[off:off+64])
		}
		cfgs = []cfg{{0, false, false}, {1, false, false}, {2, false, false}, {3, false, false}}
		if *perfProposal {
			cfgs = append(cfgs, cfg{1, true, false}, cfg{2, true, false}, cfg{3, true, false})
		}
	} else {
		o := testmodel.DefaultOptions()
		o.Vocab, o.Hidden, o.Layers, o.Intermediate = 8192, 512, 8, 1536
		o.Heads, o.KVHeads, o.HeadDim = 8, 2, 64
		o.LinearKeyHeads, o.LinearValueHeads, o.LinearKeyHeadDim, o.LinearValueHeadDim = 4, 8, 64, 64
		draft := r.Perm(o.Vocab)[:1024]
		ids := make([]int32, len(draft))
		for i, v := range draft {
			ids[i] = int32(v)
		}
		path = testfixture.Build(t, testfixture.Spec{Recipe: "q8", Model: o, Draft: ids})
		prompts = [][]int32{numtest.RandIDs(r, 64, o.Vocab)}
	}
	type result struct {
		tm     *timed
		dc     *Decoder
		decode time.Duration
		st     Stats
	}
	res := make([]*result, len(cfgs))
	ref := make([][]int32, len(prompts))
	// Repetitions are interleaved across configurations so that load from
	// other processes on the machine spreads over all of them.
	for rep := 0; rep < reps; rep++ {
		for i, c := range cfgs {
			if res[i] == nil {
				rg := newRigThreads(t, path, engine.Options{MaxContext: 1024, PrefillChunk: 128, StateSlots: 4}, c.proposal, *perfThreads)
				tm := &timed{ms: rg.ms}
				var d Drafter
				if c.k > 0 {
					d = tm
					if c.oracle {
						d = &steered{ms: rg.ms, ref: append(append([]int32{}, prompts[0]...), ref[0]...), r: r, pWrong: 0}
					}
				}
				res[i] = &result{tm: tm, dc: mustDecoder(t, tm, d, Options{K: c.k, IgnoreEOS: true, Proposal: c.proposal})}
			}
			rs := res[i]
			var st Stats
			for pi, prompt := range prompts {
				if err := rs.tm.ms.Reset(); err != nil {
					t.Fatal(err)
				}
				out, s1, err := rs.dc.Generate(prompt, G, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ref[pi] == nil {
					ref[pi] = out
				}
				if j := equalIDs(out, ref[pi]); j >= 0 {
					t.Fatalf("k=%d: output of prompt %d differs from k=0 at %d", c.k, pi, j)
				}
				rs.decode += rs.dc.Timing().Decode
				if pi == 0 {
					st = s1
				} else {
					st.Add(s1)
				}
			}
			rs.st = st
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| k | proposal head | drafts | acceptance rate | acceptance length | rounds / drafted / accepted / fallback (per request) | ms per verify | ms per Draft call | decode tok/s | vs k=0 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var base float64
	for i, c := range cfgs {
		rs := res[i]
		rate := float64(reps*len(prompts)*(G-1)) / rs.decode.Seconds()
		if c.k == 0 {
			base = rate
			fmt.Fprintf(&b, "| 0 | – | – | – | – | – | %.2f (decode step) | – | %.1f | 1.00 |\n", rs.tm.per(rs.tm.decode, rs.tm.nDecode), rate)
			continue
		}
		ar, _ := rs.st.AcceptanceRate()
		al, _ := rs.st.AcceptanceLength()
		drafts := "MTP"
		if c.oracle {
			drafts = "oracle (synthetic)"
		}
		draftMS := "–"
		if !c.oracle {
			draftMS = fmt.Sprintf("%.2f", rs.tm.per(rs.tm.draft, rs.tm.nDraft))
		}
		fmt.Fprintf(&b, "| %d | %v | %s | %.3f | %.3f | %d / %d / %d / %d | %.2f | %s | %.1f | %.2f |\n", c.k, c.proposal, drafts, ar, al,
			rs.st.Rounds, rs.st.DraftedTokens, rs.st.AcceptedTokens, rs.st.FallbackSteps,
			rs.tm.per(rs.tm.verify, rs.tm.nVerify), draftMS, rate, rate/base)
	}
	t.Log(b.String())
}

// timed wraps an MTPSequence and accumulates the wall time of its calls.
type timed struct {
	ms                            *engine.MTPSequence
	decode, verify, accept, draft time.Duration
	nDecode, nVerify, nDraft      int
}

func (m *timed) per(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return d.Seconds() * 1e3 / float64(n)
}

func (m *timed) Prefill(ids []int32) ([]float32, error) { return m.ms.Prefill(ids) }
func (m *timed) Decode(id int32) ([]float32, error) {
	s := time.Now()
	defer func() { m.decode += time.Since(s); m.nDecode++ }()
	return m.ms.Decode(id)
}
func (m *timed) Verify(ids []int32) ([]float32, error) {
	s := time.Now()
	defer func() { m.verify += time.Since(s); m.nVerify++ }()
	return m.ms.Verify(ids)
}
func (m *timed) Accept(n int) error { return m.ms.Accept(n) }
func (m *timed) Draft(next int32, n int) ([]int32, error) {
	s := time.Now()
	defer func() {
		if n > 0 {
			m.draft += time.Since(s)
			m.nDraft++
		}
	}()
	return m.ms.Draft(next, n)
}
func (m *timed) Pos() int         { return m.ms.Pos() }
func (m *timed) MaxContext() int  { return m.ms.MaxContext() }
func (m *timed) VerifyLimit() int { return m.ms.VerifyLimit() }
func (m *timed) VocabSize() int   { return m.ms.VocabSize() }
