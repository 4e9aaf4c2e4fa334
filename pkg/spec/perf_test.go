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
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// -spec.perf runs TestPerfTable: acceptance and decode speed for k = 0..3
// on the CPU backend (the numbers in docs/PERF.md).
var perf = flag.Bool("spec.perf", false, "measure MTP speculative decoding speed on the CPU backend (docs/PERF.md)")

// TestPerfTable measures a mid-size random model (H 512, 8 layers, vocab
// 8192, q8 recipe, 1024-row proposal head): 3 repetitions of 64 prompt
// tokens + 256 generated tokens per configuration.
func TestPerfTable(t *testing.T) {
	if !*perf {
		t.Skip("run with -spec.perf")
	}
	o := testmodel.DefaultOptions()
	o.Vocab, o.Hidden, o.Layers, o.Intermediate = 8192, 512, 8, 1536
	o.Heads, o.KVHeads, o.HeadDim = 8, 2, 64
	o.LinearKeyHeads, o.LinearValueHeads, o.LinearKeyHeadDim, o.LinearValueHeadDim = 4, 8, 64, 64
	r := rand.New(rand.NewPCG(1, 2))
	draft := r.Perm(o.Vocab)[:1024]
	ids := make([]int32, len(draft))
	for i, v := range draft {
		ids[i] = int32(v)
	}
	path := testfixture.Build(t, testfixture.Spec{Recipe: "q8", Model: o, Draft: ids})
	prompt := numtest.RandIDs(r, 64, o.Vocab)
	const G, reps = 256, 3
	type cfg struct {
		k        int
		proposal bool
		oracle   bool
	}
	cfgs := []cfg{{0, false, false}, {1, false, false}, {2, false, false}, {3, false, false}, {2, true, false},
		{1, false, true}, {2, false, true}, {3, false, true}}
	type result struct {
		tm     *timed
		dc     *Decoder
		decode time.Duration
		st     Stats
	}
	res := make([]*result, len(cfgs))
	var ref []int32
	// Repetitions are interleaved across configurations so that load from
	// other processes on the machine spreads over all of them.
	for rep := 0; rep < reps; rep++ {
		for i, c := range cfgs {
			if res[i] == nil {
				rg := newRigThreads(t, path, engine.Options{MaxContext: 1024, PrefillChunk: 128, StateSlots: 4}, c.proposal, 1)
				tm := &timed{ms: rg.ms}
				var d Drafter
				if c.k > 0 {
					d = tm
					if c.oracle {
						d = &steered{ms: rg.ms, ref: append(append([]int32{}, prompt...), ref...), r: r, pWrong: 0}
					}
				}
				res[i] = &result{tm: tm, dc: mustDecoder(t, tm, d, Options{K: c.k, IgnoreEOS: true, Proposal: c.proposal})}
			}
			rs := res[i]
			if err := rs.tm.ms.Reset(); err != nil {
				t.Fatal(err)
			}
			out, st, err := rs.dc.Generate(prompt, G, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ref == nil {
				ref = out
			}
			if j := equalIDs(out, ref); j >= 0 {
				t.Fatalf("k=%d: output differs from k=0 at %d", c.k, j)
			}
			rs.decode += rs.dc.Timing().Decode
			rs.st = st
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| k | proposal head | drafts | acceptance rate | acceptance length | rounds / drafted / accepted / fallback (per request) | ms per verify | ms per Draft call | decode tok/s | vs k=0 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var base float64
	for i, c := range cfgs {
		rs := res[i]
		rate := float64(reps*(G-1)) / rs.decode.Seconds()
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
