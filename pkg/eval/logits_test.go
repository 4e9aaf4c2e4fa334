package eval

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// random is a Scorer with pseudo-random logits that depend on the window
// position and the previous id, with a spread like a trained model's
// (scale sets how peaked the rows are).
type random struct {
	vocab int
	seed  uint64
	scale float32
}

func (m random) VocabSize() int { return m.vocab }
func (m random) Logits(w []int32, first int) ([]float32, error) {
	var out []float32
	for p := first; p < len(w)-1; p++ {
		r := rand.New(rand.NewPCG(m.seed, uint64(w[p])<<20|uint64(p)))
		for i := 0; i < m.vocab; i++ {
			out = append(out, m.scale*float32(r.NormFloat64()))
		}
	}
	return out, nil
}

// perturbed adds small noise to another Scorer's logits (a quantized model).
type perturbed struct {
	Scorer
	eps float32
}

func (m perturbed) Logits(w []int32, first int) ([]float32, error) {
	lg, err := m.Scorer.Logits(w, first)
	out := append([]float32(nil), lg...)
	r := rand.New(rand.NewPCG(9, uint64(w[first])))
	for i := range out {
		out[i] += m.eps * float32(r.NormFloat64())
	}
	return out, err
}

func randomIDs(n, vocab int) []int32 {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

// saveRef runs ref through Evaluate with Recording and returns the file.
func saveRef(t *testing.T, ref Scorer, ids []int32, ws []Window) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ref.logits")
	h := RunHeader(ids, ws, ref.VocabSize(), "tok")
	h.ModelDirectorySHA256 = strings.Repeat("ab", 32)
	lw, err := CreateLogits(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Evaluate(context.Background(), ids, ws, []Scorer{Recording(ref, lw)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := lw.Commit(); err != nil {
		t.Fatal(err)
	}
	return p
}

// The KL, PPL and top-1 agreement against a saved file equal those against
// the live reference: PPL and top-1 exactly (the file keeps each row's
// NLL and argmax), the KL within the fixed-point rounding (step 1/2048
// nat): the mean's error is ~1e-8 nat plus 1e-4 of the KL.
func TestLogitsFileMatchesLive(t *testing.T) {
	const V = 300
	ids := randomIDs(400, V)
	ws, err := Windows(len(ids), 64, 48, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, scale := range []float32{1, 3} {
		ref := random{vocab: V, seed: 5, scale: scale}
		models := []Scorer{perturbed{ref, 0.01}, perturbed{ref, 0.1}, ref}
		live, err := Evaluate(context.Background(), ids, ws, models, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := saveRef(t, ref, ids, ws)
		lf, err := OpenLogits(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := lf.Header.Check(RunHeader(ids, ws, V, "tok")); err != nil {
			t.Fatal(err)
		}
		saved, err := Evaluate(context.Background(), ids, ws, models, lf, nil)
		lf.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := range live {
			l, s := live[i], saved[i]
			if *l.RefPPL != *s.RefPPL || *l.Top1 != *s.Top1 || *l.DeltaPPL != *s.DeltaPPL || l.DeltaNLL.Mean != s.DeltaNLL.Mean {
				t.Errorf("scale %v model %d: ref PPL %v/%v top-1 %v/%v Δppl %v/%v", scale, i, *l.RefPPL, *s.RefPPL, *l.Top1, *s.Top1, *l.DeltaPPL, *s.DeltaPPL)
			}
			d := math.Abs(l.KL.Mean - s.KL.Mean)
			t.Logf("scale %v model %d: KL live %.9f saved %.9f (error %.2g, max %.9f/%.9f)", scale, i, l.KL.Mean, s.KL.Mean, d, l.KL.Max, s.KL.Max)
			// Per token the error is first order in the rounding (≤ 2^-12
			// nat, times 2·Σ p |ln p − ln q| ≈ 2·sqrt(2 KL)) plus a
			// second-order bias ~1e-8; over many tokens the first-order
			// terms, of either sign, mostly cancel.
			if d > 5e-8+1e-4*l.KL.Mean || math.Abs(l.KL.Max-s.KL.Max) > 1e-7+math.Sqrt(2*l.KL.Max)/2048 {
				t.Errorf("scale %v model %d: KL mean %v saved %v, max %v saved %v", scale, i, l.KL.Mean, s.KL.Mean, l.KL.Max, s.KL.Max)
			}
		}
	}
}

func TestLogitsFileRefused(t *testing.T) {
	const V = 50
	ids := randomIDs(100, V)
	ws, _ := Windows(len(ids), 20, 20, 0)
	p := saveRef(t, random{vocab: V, seed: 3, scale: 2}, ids, ws)
	lf, err := OpenLogits(p)
	if err != nil {
		t.Fatal(err)
	}
	lf.Close()
	h := lf.Header
	if h.Rows != 5*9 || h.Windows != 5 || h.Ctx != 20 || h.Stride != 20 || h.CorpusTokens != 100 || h.TokenizerSHA256 != "tok" {
		t.Errorf("header %+v", h)
	}
	other := append([]int32(nil), ids...)
	other[99] = (other[99] + 1) % V
	ws10, _ := Windows(len(ids), 10, 10, 0)
	ws2, _ := Windows(len(ids), 20, 20, 2)
	wsS, _ := Windows(len(ids), 20, 10, 0)
	for _, tc := range []struct {
		run  LogitsHeader
		want string
	}{
		{RunHeader(other, ws, V, "tok"), "corpus differs"},
		{RunHeader(ids, ws, V, "other"), "tokenizer differs"},
		{RunHeader(ids, ws, V+1, "tok"), "vocab differs"},
		{RunHeader(ids, ws10, V, "tok"), "ctx differs: saved with --ctx 20, this run has 10"},
		{RunHeader(ids, wsS, V, "tok"), "stride differs"},
		{RunHeader(ids, ws2, V, "tok"), "windows differ"},
	} {
		if err := h.Check(tc.run); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
	}

	b, _ := os.ReadFile(p)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", b[:len(b)-100], "truncated"},
		{"header only", b[:40], "truncated"},
		{"appended", append(append([]byte(nil), b...), 0), "trailing bytes"},
		{"not logits", []byte("hello world, this is text"), "not a logits file"},
	} {
		q := filepath.Join(dir, tc.name)
		os.WriteFile(q, tc.data, 0o644)
		if _, err := OpenLogits(q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	// A flipped bit in the rows: the checksum fails when the last window is read.
	bad := append([]byte(nil), b...)
	bad[len(bad)-200] ^= 1
	q := filepath.Join(dir, "flipped")
	os.WriteFile(q, bad, 0o644)
	lf, err = OpenLogits(q)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if _, err := Evaluate(context.Background(), ids, ws, []Scorer{random{vocab: V, seed: 3, scale: 2}}, lf, nil); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("flipped bit: err %v", err)
	}
	// A writer that is not committed leaves nothing behind.
	q = filepath.Join(dir, "aborted.logits")
	lw, err := CreateLogits(q, RunHeader(ids, ws, V, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := lw.Commit(); err == nil || !strings.Contains(err.Error(), "0 rows written") {
		t.Errorf("short commit: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 5 {
		t.Errorf("files left: %v", ents)
	}
}

func TestLogProbCode(t *testing.T) {
	for _, lp := range []float64{0, 1e-9, -1e-9, -0.5, -3.25, -31.9, -31.99, -32, -100, math.Inf(-1)} {
		k := encodeLogProb(lp)
		got := float64(decodeLogProb(k))
		switch {
		case lp < -31.99975:
			if k != LogProbZero || !math.IsInf(got, -1) {
				t.Errorf("%v: code %d → %v, want zero", lp, k, got)
			}
		case math.Abs(got-math.Min(lp, 0)) > 0.5/LogProbScale:
			t.Errorf("%v: code %d → %v", lp, k, got)
		}
	}
}
