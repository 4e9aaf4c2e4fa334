package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/spec"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// Decode graphs (Options.CUDAGraph) on the CUDA backend: on a GPU with
// -tags cuda, under the host SIMT harness with -tags cudasim; the tests skip
// in a binary without CUDA. Graph replay runs the eager step's kernels with
// the eager step's arguments, so logits must agree bit for bit.

func newCUDABackend(t *testing.T) backend.Backend {
	t.Helper()
	if !backend.CUDABuilt {
		t.Skip("this test binary has no CUDA backend (go test -tags cudasim, or -tags cuda on a GPU machine)")
	}
	b, err := backend.NewCUDA(backend.CUDAOptions{})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// graphArtifact is the tiny test model in q8 with a proposal head over a
// random quarter of the vocabulary.
func graphArtifact(t *testing.T, r *rand.Rand) *loader.Weights {
	t.Helper()
	vocab := testmodel.DefaultOptions().Vocab
	draft := make([]int32, 0, vocab/4)
	for _, id := range r.Perm(vocab)[:vocab/4] {
		draft = append(draft, int32(id))
	}
	slices.Sort(draft)
	w, err := loader.OpenWeights(testfixture.Build(t, testfixture.Spec{Recipe: "q8", Draft: draft}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func sameBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) || math.IsNaN(float64(a[i])) {
			return i, false
		}
	}
	return 0, true
}

func hostArgmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// TestCUDAGraphDecodeMatchesEager: greedy decoding with decode graphs gives
// the eager run's logits bit for bit (so the same tokens) for 20 steps, on
// two generations of one sequence (graphs survive Reset); the graph engine
// really replays (one capture, the rest launches) and the eager one never
// captures.
func TestCUDAGraphDecodeMatchesEager(t *testing.T) {
	be := newCUDABackend(t)
	r := seeded(t)
	w := graphArtifact(t, r)
	const steps = 20
	o := Options{MaxContext: 256, PrefillChunk: 128, KVDtype: "bf16"}
	var seqs [2]*Sequence
	for i, graph := range []bool{false, true} {
		o.CUDAGraph = graph
		e, err := New(w, be, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); e.Close() })
		seqs[i] = s
	}
	eager, graphed := seqs[0], seqs[1]
	V := w.Config().VocabSize
	for gen := 0; gen < 2; gen++ {
		prompt := randIDs(r, 5+r.IntN(20), V)
		var toks []int32
		for _, s := range seqs {
			if err := s.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		a, err := eager.Prefill(prompt, false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := graphed.Prefill(prompt, false)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step <= steps; step++ {
			if i, ok := sameBits(a, b); !ok {
				t.Fatalf("generation %d step %d: graph logits differ from eager at %d (%g vs %g); tokens so far %v", gen, step, i, b[i], a[i], toks)
			}
			tok := hostArgmax(a)
			toks = append(toks, tok)
			if step == steps {
				break
			}
			if a, err = eager.Decode(tok); err != nil {
				t.Fatalf("eager decode %d: %v", step, err)
			}
			a = slices.Clone(a)
			if b, err = graphed.Decode(tok); err != nil {
				t.Fatalf("graph decode %d: %v", step, err)
			}
		}
		t.Logf("generation %d: prompt of %d tokens, %d greedy tokens identical: %v", gen, len(prompt), len(toks), toks)
	}
	if c, l := eager.GraphStats(); c != 0 || l != 0 {
		t.Errorf("eager sequence: %d captures, %d launches", c, l)
	}
	// One decode shape: primed by the first step, captured on the second
	// (and launched), replayed by every later one.
	if c, l := graphed.GraphStats(); c != 1 || l != 2*steps-1 {
		t.Errorf("graph sequence: %d captures and %d launches, want 1 and %d", c, l, 2*steps-1)
	}
}

// oracleDrafter runs the MTP head's drafts (so every MTP step runs) but
// proposes the reference continuation instead, each token corrupted with
// probability pWrong, so rounds accept 0..k drafts (the tiny model's random
// MTP head would almost never be accepted).
type oracleDrafter struct {
	ms     *MTPSequence
	ref    []int32 // prompt ++ greedy continuation
	rng    *rand.Rand
	pWrong float64
	vocab  int
}

func (o *oracleDrafter) Draft(next int32, n int) ([]int32, error) {
	d, err := o.ms.Draft(next, n)
	if err != nil {
		return nil, err
	}
	at := o.ms.Pos()
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

// TestCUDAGraphMTPMatchesEager: MTP speculative greedy decoding (verify
// rounds, accepts, MTP draft steps; the full and the proposal head) with
// graphs gives the eager run's tokens, drafts and counters exactly, and
// both equal plain greedy decoding (speculation is lossless).
func TestCUDAGraphMTPMatchesEager(t *testing.T) {
	be := newCUDABackend(t)
	r := seeded(t)
	w := graphArtifact(t, r)
	V := w.Config().VocabSize
	const gen = 24
	prompt := randIDs(r, 12, V)
	// The reference: plain greedy decoding, eager.
	ref := func() []int32 {
		e, err := New(w, be, Options{MaxContext: 256, PrefillChunk: 128, KVDtype: "bf16"})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		s, err := e.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		lg, err := s.Prefill(prompt, false)
		if err != nil {
			t.Fatal(err)
		}
		out := []int32{hostArgmax(lg)}
		for len(out) < gen {
			if lg, err = s.Decode(out[len(out)-1]); err != nil {
				t.Fatal(err)
			}
			out = append(out, hostArgmax(lg))
		}
		return out
	}()
	for _, c := range []struct {
		k    int
		prop bool
	}{{1, false}, {3, false}, {5, false}, {2, true}} {
		t.Run(fmt.Sprintf("k=%d/proposal=%v", c.k, c.prop), func(t *testing.T) {
			seed := r.Uint64()
			var outs [2][]int32
			var stats [2]spec.Stats
			var graphStats [2][2]int
			for i, graph := range []bool{false, true} {
				o := Options{MaxContext: 256, PrefillChunk: 128, KVDtype: "bf16", StateSlots: c.k + 1, LogitsRows: c.k + 1, CUDAGraph: graph}
				e, err := New(w, be, o)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				m, err := e.LoadMTP(w, MTPOptions{ProposalHead: c.prop})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				ms, err := m.NewMTPSequence()
				if err != nil {
					t.Fatal(err)
				}
				defer ms.Close()
				d := &oracleDrafter{ms: ms, ref: append(slices.Clone(prompt), ref...), rng: rand.New(rand.NewPCG(seed, 1)), pWrong: 0.3, vocab: V}
				dc, err := spec.NewDecoder(ms, d, spec.Options{K: c.k, IgnoreEOS: true, Proposal: c.prop})
				if err != nil {
					t.Fatal(err)
				}
				// Two requests on the same sequence: the second replays the
				// graphs the first captured.
				for req := 0; req < 2; req++ {
					if err := ms.Reset(); err != nil {
						t.Fatal(err)
					}
					d.rng = rand.New(rand.NewPCG(seed, uint64(req)))
					out, st, err := dc.Generate(prompt, gen, nil)
					if err != nil {
						t.Fatalf("graph=%v request %d: %v", graph, req, err)
					}
					if err := st.Check(); err != nil {
						t.Fatal(err)
					}
					outs[i] = append(outs[i], out...)
					stats[i].Add(st)
				}
				graphStats[i][0], graphStats[i][1] = ms.Sequence().GraphStats()
			}
			if !slices.Equal(outs[0], outs[1]) {
				t.Fatalf("graph tokens differ from eager\n eager %v\n graph %v", outs[0], outs[1])
			}
			want := append(slices.Clone(ref), ref...)
			if !slices.Equal(outs[0], want) {
				t.Errorf("speculative greedy differs from plain greedy\n  spec %v\n plain %v", outs[0], want)
			}
			a, b := stats[0], stats[1]
			if a.Rounds != b.Rounds || a.DraftedTokens != b.DraftedTokens || a.AcceptedTokens != b.AcceptedTokens ||
				a.FallbackSteps != b.FallbackSteps || !slices.Equal(a.AcceptedPerPosition, b.AcceptedPerPosition) {
				t.Errorf("counters differ: eager %+v, graph %+v", a, b)
			}
			if a.AcceptedTokens == 0 || a.AcceptedTokens == a.DraftedTokens {
				t.Errorf("rounds accepted %d of %d drafts: want some accepted and some rejected", a.AcceptedTokens, a.DraftedTokens)
			}
			if graphStats[0] != [2]int{} {
				t.Errorf("eager run captured %d and launched %d graphs", graphStats[0][0], graphStats[0][1])
			}
			if cp, l := graphStats[1][0], graphStats[1][1]; cp == 0 || l <= cp {
				t.Errorf("graph run: %d captures, %d launches: want graphs captured and replayed", cp, l)
			}
			t.Logf("%d tokens identical; rounds %d, accepted %d/%d; graph run %d captures, %d launches",
				len(outs[0]), a.Rounds, a.AcceptedTokens, a.DraftedTokens, graphStats[1][0], graphStats[1][1])
		})
	}
}
