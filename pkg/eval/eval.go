// Package eval measures a model's quality over token ids: perplexity in
// windows scored as llama.cpp's llama-perplexity scores them, and, against a
// reference model, the per-token KL divergence of the model's next-token
// distribution from the reference's, top-1 agreement and Δ perplexity.
// docs/EVAL.md gives the definitions and formulas.
package eval

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// Scorer gives the next-token logits of a window of token ids, evaluated on
// a fresh sequence.
type Scorer interface {
	// VocabSize is the length of one logits row.
	VocabSize() int
	// Logits evaluates window from its start and returns the logits rows
	// of positions first .. len(window)-2 (row-major, (len(window)-1-first)
	// rows of VocabSize): row r predicts window[first+r+1]. The slice may
	// be reused by the next call.
	Logits(window []int32, first int) ([]float32, error)
}

// exactRows is a Scorer whose rows are rounded (a LogitsFile): it also
// gives the exact NLL and argmax of the rows of its last Logits call, which
// Evaluate uses for the reference's perplexity and top-1 agreement.
type exactRows interface {
	ExactRows() (nll []float64, argmax []int)
}

// Window is one evaluation window: ids[Start:Start+Ctx]. The logits of its
// positions First .. Ctx-2 (relative to Start) are scored against the next
// token, ids[Start+First+1 .. Start+Ctx-1].
type Window struct {
	Start, Ctx, First int
}

// Scored is the number of tokens the window scores.
func (w Window) Scored() int { return w.Ctx - 1 - w.First }

// Windows returns the windows over n ids: starts 0, stride, 2·stride, ...
// while a whole window of ctx ids fits, each scoring its second half
// (First = ctx/2), as llama-perplexity does with stride = ctx. max > 0
// keeps the first max windows.
func Windows(n, ctx, stride, max int) ([]Window, error) {
	switch {
	case ctx < 3:
		return nil, fmt.Errorf("eval: window of %d tokens: want ≥ 3 (it scores ctx-1-ctx/2 tokens)", ctx)
	case stride < 1:
		return nil, fmt.Errorf("eval: stride %d: want ≥ 1", stride)
	case n < ctx:
		return nil, fmt.Errorf("eval: %d tokens do not fill one window of %d", n, ctx)
	}
	var ws []Window
	for s := 0; s+ctx <= n; s += stride {
		if max > 0 && len(ws) == max {
			break
		}
		ws = append(ws, Window{Start: s, Ctx: ctx, First: ctx / 2})
	}
	return ws, nil
}

// LogSumExp returns log Σ exp(row) and the argmax (the first on ties), in
// float64; ok is false when the row holds a NaN or no finite value.
func LogSumExp(row []float32) (lse float64, argmax int, ok bool) {
	mx := math.Inf(-1)
	for i, v := range row {
		x := float64(v)
		if math.IsNaN(x) || math.IsInf(x, 1) {
			return 0, 0, false
		}
		if x > mx {
			mx, argmax = x, i
		}
	}
	if math.IsInf(mx, -1) {
		return 0, 0, false
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s), argmax, true
}

// KL is Σ_i p_i (log p_i − log q_i) with p = softmax(ref) and q =
// softmax(row), given their LogSumExp values: the divergence of row's
// distribution from ref's. Equal rows give exactly 0.
func KL(ref []float32, lseRef float64, row []float32, lse float64) float64 {
	var kl float64
	for i, r := range ref {
		lp := float64(r) - lseRef
		p := math.Exp(lp)
		if p == 0 {
			continue
		}
		kl += p * (lp - (float64(row[i]) - lse))
	}
	return kl
}

// Stats summarizes per-token values.
type Stats struct {
	Mean   float64 `json:"mean"`
	StdErr float64 `json:"stderr"` // sample standard deviation / √n (0 for n < 2)
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// Summarize computes Stats of v; percentiles interpolate linearly between
// the sorted values at rank q·(n−1).
func Summarize(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	mean, se := MeanStdErr(s)
	return Stats{Mean: mean, StdErr: se, Median: Quantile(s, 0.5), P99: Quantile(s, 0.99), Max: s[len(s)-1]}
}

// Quantile is the q-quantile of sorted values, interpolating linearly at
// rank q·(n−1).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	r := q * float64(len(sorted)-1)
	i := int(math.Floor(r))
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := r - float64(i)
	return sorted[i] + f*(sorted[i+1]-sorted[i])
}

// MeanStdErr returns the mean of v and its standard error
// sqrt((mean(v²) − mean(v)²)/(n−1)), llama-perplexity's estimate (0 when
// n < 2).
func MeanStdErr(v []float64) (mean, stderr float64) {
	if len(v) == 0 {
		return 0, 0
	}
	var s, s2 float64
	for _, x := range v {
		s += x
		s2 += x * x
	}
	n := float64(len(v))
	mean = s / n
	if len(v) < 2 {
		return mean, 0
	}
	vr := s2/n - mean*mean
	if vr <= 0 {
		return mean, 0
	}
	return mean, math.Sqrt(vr / (n - 1))
}

// Perplexity is exp(mean NLL) and its standard error by the delta method,
// PPL · SE(NLL).
func Perplexity(nll []float64) (ppl, stderr float64) {
	m, se := MeanStdErr(nll)
	ppl = math.Exp(m)
	return ppl, ppl * se
}

// Result is the evaluation of one model (one JSON line of ninfer-eval).
type Result struct {
	Weights   string  `json:"weights"`
	Reference string  `json:"reference,omitempty"`
	Corpus    string  `json:"corpus,omitempty"`
	Backend   string  `json:"backend,omitempty"`
	KVDtype   string  `json:"kv_dtype,omitempty"`
	Ctx       int     `json:"ctx"`
	Stride    int     `json:"stride"`
	Windows   int     `json:"windows"`
	Tokens    int     `json:"tokens"` // scored tokens
	NLL       float64 `json:"nll"`    // mean negative log-likelihood (nats)
	PPL       float64 `json:"ppl"`
	PPLStdErr float64 `json:"ppl_stderr"`
	// With a reference:
	RefPPL       *float64 `json:"ref_ppl,omitempty"`
	RefPPLStdErr *float64 `json:"ref_ppl_stderr,omitempty"`
	DeltaPPL     *float64 `json:"delta_ppl,omitempty"`      // PPL − ref PPL
	DeltaNLL     *Stats   `json:"delta_nll,omitempty"`      // per-token NLL − ref NLL (mean ± stderr = ln(PPL/ref PPL))
	KL           *Stats   `json:"kl,omitempty"`             // per-token KL(ref ‖ model), nats
	Top1         *float64 `json:"top1_agreement,omitempty"` // fraction of tokens with the same argmax
	Top1StdErr   *float64 `json:"top1_stderr,omitempty"`
	Interrupted  bool     `json:"interrupted,omitempty"`
	Seconds      float64  `json:"seconds"`
}

// Progress is called after each window with the windows done, the total
// and the running perplexity of each model.
type Progress func(done, total int, ppl []float64)

// acc accumulates one model's per-token values.
type acc struct {
	nll, dnll, kl []float64
	same          int
}

// Evaluate scores ids with every model (and the reference, when not nil)
// over windows, window by window, and returns one Result per model with
// the statistics (Weights and the other labels left for the caller). A
// cancelled ctx stops between windows: the results then cover the windows
// done and are marked Interrupted.
func Evaluate(ctx context.Context, ids []int32, windows []Window, models []Scorer, ref Scorer, progress Progress) ([]Result, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("eval: no model")
	}
	V := models[0].VocabSize()
	for i, m := range models {
		if m.VocabSize() != V {
			return nil, fmt.Errorf("eval: model %d has a vocabulary of %d rows, model 1 of %d", i+1, m.VocabSize(), V)
		}
	}
	if ref != nil && ref.VocabSize() != V {
		return nil, fmt.Errorf("eval: the reference has a vocabulary of %d rows, the model %d", ref.VocabSize(), V)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= V {
			return nil, fmt.Errorf("eval: token id %d is outside the vocabulary [0,%d)", id, V)
		}
	}
	accs := make([]acc, len(models))
	var refNLL []float64
	var refRows []float32
	var refLSE []float64
	var refArg []int
	interrupted := false
	done := 0
	for _, w := range windows {
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		win := ids[w.Start : w.Start+w.Ctx]
		n := w.Scored()
		if ref != nil {
			lg, err := ref.Logits(win, w.First)
			if err != nil {
				return nil, fmt.Errorf("reference: window at token %d: %w", w.Start, err)
			}
			if len(lg) != n*V {
				return nil, fmt.Errorf("reference: window at token %d: %d logits, want %d", w.Start, len(lg), n*V)
			}
			refRows = append(refRows[:0], lg...)
			refLSE, refArg = refLSE[:0], refArg[:0]
			for r := 0; r < n; r++ {
				row := refRows[r*V : (r+1)*V]
				lse, am, ok := LogSumExp(row)
				if !ok {
					return nil, fmt.Errorf("reference: window at token %d: position %d: logits not finite", w.Start, w.Start+w.First+r)
				}
				refLSE, refArg = append(refLSE, lse), append(refArg, am)
				refNLL = append(refNLL, lse-float64(row[win[w.First+r+1]]))
			}
			if ex, ok := ref.(exactRows); ok {
				// A logits file: its rows are rounded, its NLL and argmax not.
				nll, arg := ex.ExactRows()
				if len(nll) != n || len(arg) != n {
					return nil, fmt.Errorf("reference: window at token %d: %d exact rows, want %d", w.Start, len(nll), n)
				}
				copy(refNLL[len(refNLL)-n:], nll)
				copy(refArg, arg)
			}
		}
		for mi, m := range models {
			lg, err := m.Logits(win, w.First)
			if err != nil {
				return nil, fmt.Errorf("window at token %d: %w", w.Start, err)
			}
			if len(lg) != n*V {
				return nil, fmt.Errorf("window at token %d: %d logits, want %d", w.Start, len(lg), n*V)
			}
			a := &accs[mi]
			base := len(refNLL) - n
			for r := 0; r < n; r++ {
				row := lg[r*V : (r+1)*V]
				lse, am, ok := LogSumExp(row)
				if !ok {
					return nil, fmt.Errorf("window at token %d: position %d: logits not finite", w.Start, w.Start+w.First+r)
				}
				nll := lse - float64(row[win[w.First+r+1]])
				a.nll = append(a.nll, nll)
				if ref != nil {
					a.dnll = append(a.dnll, nll-refNLL[base+r])
					a.kl = append(a.kl, KL(refRows[r*V:(r+1)*V], refLSE[r], row, lse))
					if am == refArg[r] {
						a.same++
					}
				}
			}
		}
		done++
		if progress != nil {
			ppl := make([]float64, len(models))
			for i := range accs {
				ppl[i], _ = Perplexity(accs[i].nll)
			}
			progress(done, len(windows), ppl)
		}
	}
	out := make([]Result, len(models))
	for i := range accs {
		a := &accs[i]
		r := Result{Windows: done, Tokens: len(a.nll), Interrupted: interrupted}
		if len(windows) > 0 {
			r.Ctx = windows[0].Ctx
			if len(windows) > 1 {
				r.Stride = windows[1].Start - windows[0].Start
			} else {
				r.Stride = r.Ctx
			}
		}
		r.NLL, _ = MeanStdErr(a.nll)
		r.PPL, r.PPLStdErr = Perplexity(a.nll)
		if ref != nil {
			rp, rse := Perplexity(refNLL)
			d := r.PPL - rp
			dn, kl := Summarize(a.dnll), Summarize(a.kl)
			t1 := 0.0
			if len(a.nll) > 0 {
				t1 = float64(a.same) / float64(len(a.nll))
			}
			t1se := 0.0
			if len(a.nll) > 1 {
				t1se = math.Sqrt(t1 * (1 - t1) / float64(len(a.nll)-1))
			}
			r.RefPPL, r.RefPPLStdErr, r.DeltaPPL, r.DeltaNLL, r.KL, r.Top1, r.Top1StdErr = &rp, &rse, &d, &dn, &kl, &t1, &t1se
		}
		out[i] = r
	}
	return out, nil
}
