package backend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ninfer/ninfer/pkg/sample"
)

// sampleRig is one backend's Sample operands: a logits row, the penalty
// state, the RNG position and the output id.
type sampleRig struct {
	b                  Backend
	vocab              int
	logits, out, pos   View
	st                 SamplerState
	logitBuf, stateBuf *Buffer
	outBuf, posBuf     *Buffer
}

func newSampleRig(t *testing.T, b Backend, vocab int, prompt []int32, pos0 int64) *sampleRig {
	t.Helper()
	r := &sampleRig{b: b, vocab: vocab}
	var err error
	alloc := func(name string, n int64) *Buffer {
		buf, e := b.Alloc(name, n)
		if e != nil && err == nil {
			err = e
		}
		return buf
	}
	r.logitBuf = alloc("logits", 4*int64(vocab))
	r.stateBuf = alloc("sampler-state", SamplerStateBytes(vocab))
	r.outBuf = alloc("token", 4)
	r.posBuf = alloc("rng-pos", SamplerPosBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, x := range []*Buffer{r.logitBuf, r.stateBuf, r.outBuf, r.posBuf} {
			b.Free(x)
		}
	})
	r.logits, r.out, r.pos = View{r.logitBuf, 0}, View{r.outBuf, 0}, View{r.posBuf, 0}
	r.st = SamplerState{View: View{r.stateBuf, 0}, Vocab: vocab}
	if err := b.Upload(r.st.View, EncodeSamplerState(vocab, prompt, nil)); err != nil {
		t.Fatal(err)
	}
	var pb [8]byte
	*(*int64)(unsafe.Pointer(&pb[0])) = pos0
	if err := b.Upload(r.pos, pb[:]); err != nil {
		t.Fatal(err)
	}
	return r
}

// step uploads the logits, samples on the backend and returns the id.
func (r *sampleRig) step(t *testing.T, logits []float32, cfg sample.Config) int32 {
	t.Helper()
	if err := r.b.UploadF32(r.logits, logits); err != nil {
		t.Fatal(err)
	}
	r.b.Sample(r.out, Dense(r.logits, 1, r.vocab), r.st, cfg, r.pos)
	if err := r.b.Sync(); err != nil {
		t.Fatal(err)
	}
	var id [1]int32
	if err := r.b.DownloadI32(id[:], r.out); err != nil {
		t.Fatal(err)
	}
	return id[0]
}

// state downloads the counts, the seen mask and the RNG position.
func (r *sampleRig) state(t *testing.T) ([]byte, int64) {
	t.Helper()
	st := make([]byte, SamplerStateBytes(r.vocab))
	var pb [8]byte
	if err := r.b.Download(st, r.st.View); err != nil {
		t.Fatal(err)
	}
	if err := r.b.Download(pb[:], r.pos); err != nil {
		t.Fatal(err)
	}
	return st, *(*int64)(unsafe.Pointer(&pb[0]))
}

// sampleLogits draws a logits row: a fixed base (so that tokens recur and
// the penalties matter) plus fresh noise; kind "special" sprinkles NaN,
// -Inf and (on some steps) +Inf; "ties" quantizes to a few values.
func sampleLogits(rng *rand.Rand, base []float32, kind string) []float32 {
	x := make([]float32, len(base))
	for i := range x {
		x[i] = base[i] + float32(rng.NormFloat64())
	}
	switch kind {
	case "special":
		for i := range x {
			switch u := rng.Float64(); {
			case u < 0.05:
				x[i] = float32(math.NaN())
			case u < 0.08:
				x[i] = float32(math.Inf(-1))
			}
		}
		if rng.IntN(3) == 0 {
			for range 1 + rng.IntN(3) {
				x[rng.IntN(len(x))] = float32(math.Inf(1))
			}
		}
	case "ties":
		for i := range x {
			x[i] = float32(math.Round(float64(x[i])))
		}
	}
	return x
}

var sampleConfigs = []struct {
	name string
	cfg  sample.Config
}{
	{"greedy", sample.Config{}},
	{"greedy_penalties", sample.Config{RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.3}},
	{"temperature", sample.Config{Temperature: 0.8}},
	{"temperature_low", sample.Config{Temperature: 0.05}},
	{"temperature_high", sample.Config{Temperature: 3}},
	{"top_k", sample.Config{Temperature: 1, TopK: 5}},
	{"top_k1", sample.Config{Temperature: 1, TopK: 1}},
	{"top_p", sample.Config{Temperature: 1, TopP: 0.9}},
	{"top_p_small", sample.Config{Temperature: 1.5, TopP: 0.3}},
	{"min_p", sample.Config{Temperature: 1, MinP: 0.1}},
	{"penalties", sample.Config{Temperature: 1, RepetitionPenalty: 1.2, PresencePenalty: 0.4, FrequencyPenalty: 0.2}},
	{"negative_penalties", sample.Config{Temperature: 1, RepetitionPenalty: 0.7, PresencePenalty: -0.3, FrequencyPenalty: -0.1}},
	{"combined", sample.Config{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 0.2, FrequencyPenalty: 0.1}},
	{"combined_full_top_p", sample.Config{Temperature: 1.2, TopP: 0.8, MinP: 0.001, RepetitionPenalty: 1.5, FrequencyPenalty: 0.5}},
}

// TestSampleMatchesPkgSample: on every backend, Sample with the
// device-updated counts and RNG position gives, step after step, the
// tokens of pkg/sample.Sampler (the reference) on the same logits.
func TestSampleMatchesPkgSample(t *testing.T) {
	rng := seeded(t)
	bes := backends(t)
	const steps = 32
	for _, vocab := range []int{1, 7, 1000, 50000} {
		for _, kind := range []string{"normal", "special", "ties"} {
			for _, c := range sampleConfigs {
				seeds := 3
				if vocab >= 50000 {
					seeds = 1
				}
				for range seeds {
					cfg := c.cfg
					cfg.Seed = rng.Uint64()
					name := fmt.Sprintf("v%d/%s/%s/seed%d", vocab, kind, c.name, cfg.Seed)
					scale := 2.0
					if vocab <= 7 {
						scale = 0.5
					}
					base := randn(rng, vocab, scale)
					prompt := make([]int32, 1+rng.IntN(8))
					for i := range prompt {
						prompt[i] = int32(rng.IntN(vocab))
					}
					prompt = append(prompt, -1, int32(vocab)) // out of range: ignored by both
					pos0 := int64(rng.IntN(1000))
					rows := make([][]float32, steps)
					for i := range rows {
						rows[i] = sampleLogits(rng, base, kind)
					}
					ref, err := sample.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					ref.AddPrompt(prompt)
					want := make([]int32, steps)
					for i, row := range rows {
						want[i] = ref.Sample(row, pos0+int64(i))
						if want[i] >= 0 {
							ref.Accept(want[i])
						}
					}
					for _, b := range bes {
						r := newSampleRig(t, b, vocab, prompt, pos0)
						for i, row := range rows {
							if got := r.step(t, row, cfg); got != want[i] {
								t.Fatalf("%s on %s: step %d: token %d, pkg/sample %d (tokens so far %v)", name, b.Name(), i, got, want[i], want[:i])
							}
						}
						st, pos := r.state(t)
						if wantSt := EncodeSamplerState(vocab, prompt, want); string(st) != string(wantSt) {
							t.Fatalf("%s on %s: the device state after %d steps differs from the counts of the tokens drawn", name, b.Name(), steps)
						}
						if pos != pos0+steps {
							t.Fatalf("%s on %s: rng position %d, want %d", name, b.Name(), pos, pos0+steps)
						}
					}
				}
			}
		}
	}
}

// TestSampleNoFiniteLogit: a row of NaN and -Inf gives -1 and leaves the
// counts alone; the position still advances.
func TestSampleNoFiniteLogit(t *testing.T) {
	for _, b := range backends(t) {
		for _, cfg := range []sample.Config{{}, {Temperature: 1, TopP: 0.5}} {
			r := newSampleRig(t, b, 5, nil, 7)
			nan, ninf := float32(math.NaN()), float32(math.Inf(-1))
			if got := r.step(t, []float32{nan, ninf, nan, ninf, nan}, cfg); got != -1 {
				t.Fatalf("%s %+v: token %d, want -1", b.Name(), cfg, got)
			}
			st, pos := r.state(t)
			if string(st) != string(EncodeSamplerState(5, nil, nil)) || pos != 8 {
				t.Fatalf("%s: state changed (%v) or position %d != 8", b.Name(), st, pos)
			}
		}
	}
}

// TestSampleInfShare: with k +Inf logits every one of them is drawn, each
// about 1/k of the time, identically on every backend.
func TestSampleInfShare(t *testing.T) {
	rng := seeded(t)
	const vocab, n = 64, 200
	inf := float32(math.Inf(1))
	x := randn(rng, vocab, 1)
	ids := []int{3, 17, 40}
	for _, i := range ids {
		x[i] = inf
	}
	cfg := sample.Config{Temperature: 1, TopK: 2, Seed: rng.Uint64()}
	var first []int32
	for bi, b := range backends(t) {
		r := newSampleRig(t, b, vocab, nil, 0)
		hits := map[int32]int{}
		var seq []int32
		for range n {
			id := r.step(t, x, cfg)
			hits[id]++
			seq = append(seq, id)
		}
		for _, i := range ids {
			// Binomial(200, 1/3): mean 66.7, sd 6.7; 30 is > 5 sd below.
			if hits[int32(i)] < 30 {
				t.Fatalf("%s: +Inf id %d drawn %d of %d times (%v)", b.Name(), i, hits[int32(i)], n, hits)
			}
		}
		if len(hits) != len(ids) {
			t.Fatalf("%s: drew ids %v, want only %v", b.Name(), hits, ids)
		}
		if bi == 0 {
			first = seq
		} else if fmt.Sprint(seq) != fmt.Sprint(first) {
			t.Fatalf("%s: sequence differs from %s", b.Name(), "the first backend")
		}
	}
}

// TestSampleInvalid: bad calls are reported at Sync and write nothing.
func TestSampleInvalid(t *testing.T) {
	for _, b := range backends(t) {
		r := newSampleRig(t, b, 8, nil, 0)
		x := Dense(r.logits, 1, 8)
		cases := []struct {
			name string
			run  func()
		}{
			{"bad config", func() { b.Sample(r.out, x, r.st, sample.Config{Temperature: -1}, r.pos) }},
			{"vocab mismatch", func() { b.Sample(r.out, Dense(r.logits, 1, 7), r.st, sample.Config{}, r.pos) }},
			{"two rows", func() { b.Sample(r.out, Dense(r.logits, 2, 4), SamplerState{r.st.View, 4}, sample.Config{}, r.pos) }},
			{"short state", func() { b.Sample(r.out, x, SamplerState{r.st.View.At(4), 8}, sample.Config{}, r.pos) }},
			{"short pos", func() { b.Sample(r.out, x, r.st, sample.Config{}, r.pos.At(4)) }},
			{"out of range out", func() { b.Sample(r.out.At(4), x, r.st, sample.Config{}, r.pos) }},
		}
		for _, c := range cases {
			c.run()
			if err := b.Sync(); err == nil {
				t.Fatalf("%s %s: no error", b.Name(), c.name)
			}
		}
		st, pos := r.state(t)
		if string(st) != string(EncodeSamplerState(8, nil, nil)) || pos != 0 {
			t.Fatalf("%s: a rejected call changed the state or the position", b.Name())
		}
	}
}

func TestSamplerStateEncoding(t *testing.T) {
	b := EncodeSamplerState(5, []int32{4, 0, 9, -2}, []int32{1, 1, 3, 7})
	if len(b) != 4*5+8 {
		t.Fatalf("size %d", len(b))
	}
	counts := unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), 5)
	if fmt.Sprint(counts) != "[0 2 0 1 0]" || fmt.Sprint(b[20:25]) != "[1 0 0 0 1]" {
		t.Fatalf("counts %v seen %v", counts, b[20:25])
	}
}
