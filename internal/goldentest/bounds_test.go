package goldentest

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/golden"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// kvDtypes are the engine's KV cache element formats (engine.Options.KVDtype).
var kvDtypes = []string{"fp32", "bf16", "int8", "fp8"}

// allPresets are the recipe presets of the accuracy table.
var allPresets = append([]string{"fp32"}, quantPresets...)

// bound is the accepted accuracy of one case × preset × KV dtype against
// transformers: upper bounds on max and mean |Δlogit|, lower bounds on the
// top-1 agreement rate and the greedy prefix (0 = not asserted).
type bound struct {
	maxAbs, meanAbs float64
	top1            float64
	greedy          int
}

// The bound of every cell is derived from the case's own numbers by
// derivedBound (derived_test.go): a twin of the model with random weight
// (or K/V) noise of the format's measured rms error, run by the engine, sets
// the expected deviation; the former per-case tables (~2× the values
// measured on the committed cases) are gone, so a new case needs no entry.

// checkMetrics fails t where m exceeds b (max and mean |Δlogit|, top-1
// agreement, greedy prefix); what prefixes the messages ("MTP ").
func checkMetrics(t *testing.T, what string, m *metrics, b bound) {
	t.Helper()
	if !(m.MaxAbs <= b.maxAbs) {
		t.Errorf("%smax |Δlogit| %.4g at %s exceeds %.3g", what, m.MaxAbs, m.WorstAt, b.maxAbs)
	}
	if !(m.MeanAbs <= b.meanAbs) {
		t.Errorf("%smean |Δlogit| %.4g exceeds %.3g", what, m.MeanAbs, b.meanAbs)
	}
	if m.Top1Rate() < b.top1 {
		t.Errorf("%stop-1 agreement %d/%d = %.3f below %.2f", what, m.Top1, m.Rows, m.Top1Rate(), b.top1)
	}
	if m.GreedyPrefix < b.greedy {
		t.Errorf("%sgreedy prefix %d/%d below %d", what, m.GreedyPrefix, m.GreedyLen, b.greedy)
	}
}

// storedFormats returns the format of every text tensor of (c, preset).
func storedFormats(t *testing.T, c *golden.Case, preset string) map[string]format.Format {
	t.Helper()
	w, err := loader.OpenWeights(artifact(t, c, preset).path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out := map[string]format.Format{}
	for _, tn := range w.Config().Tensors() {
		if tn.Component != qwen35.ComponentText {
			continue
		}
		f, _, _, err := w.Tensor(tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		out[tn.Name] = f
	}
	return out
}

func usesFormat(fs map[string]format.Format, f format.Format) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// TestPresetsAgainstTransformers checks every case × preset × KV dtype
// (except fp32 × fp32, TestFP32PathMatchesTransformers) against its derived
// bound (derivedBound).
// nvfp4-mlp on a case whose MLP shapes all fall back (N%128, K%64: the
// random committed cases, H = I = 64) stores the same formats as
// groupwise-int, so its trace must be bit-identical to groupwise-int's.
func TestPresetsAgainstTransformers(t *testing.T) {
	for _, c := range cases(t) {
		nvfp4 := usesFormat(storedFormats(t, c, "nvfp4-mlp"), format.NVFP4)
		for _, p := range allPresets {
			for _, kv := range kvDtypes {
				if p == "fp32" && kv == "fp32" {
					continue
				}
				t.Run(c.Manifest.Name+"/"+p+"/kv="+kv, func(t *testing.T) {
					if p == "nvfp4-mlp" && !nvfp4 {
						d, at := rowsDiff(t, "nvfp4-mlp vs groupwise-int", trace(t, c, p, kv, asStored), trace(t, c, "groupwise-int", kv, asStored))
						if d != 0 {
							t.Errorf("every MLP tensor fell back to the groupwise-int formats, yet the logits differ by %.3g at row %d", d, at)
						}
						t.Logf("no nvfp4 tensor (all %d MLP matrices fell back): identical to groupwise-int", len(artifact(t, c, p).fallbacks))
						return
					}
					b := derivedBound(t, c, p, kv, false)
					m := measure(t, c, p, kv)
					t.Logf("max |Δ| %.3g (≤ %.3g) at %s, mean |Δ| %.3g (≤ %.3g), top-1 %d/%d (≥ %.2f), greedy %d/%d (≥ %d)",
						m.MaxAbs, b.maxAbs, m.WorstAt, m.MeanAbs, b.meanAbs, m.Top1, m.Rows, b.top1, m.GreedyPrefix, m.GreedyLen, b.greedy)
					checkMetrics(t, "", m, b)
				})
			}
		}
	}
}

// formatTheory is the expected relative rms error ||Ŵ−W||/||W|| of a
// format, and the accepted range:
//   - bf16 / fp8 e4m3 (8 / 4 significant bits, round to nearest): the error
//     is uniform in ±ulp/2 with ulp = 2^-7 (bf16) or 2^-3 (e4m3) relative to
//     the bottom of each binade, so the relative rms lies in
//     [2^-8, 2^-7]/√12 (bf16) and [2^-4, 2^-3]/√12 (fp8) whatever the
//     distribution of the values; the row scale of fp8 only moves values
//     between binades. want is the value for Gaussian data.
//   - q<b>_g<G> (absmax scale s = amax/qmax per group of G along a row,
//     qmax 7/15/31/127 for q4/q5/q6/q8): the error is uniform in ±s/2, so
//     ‖Ŵ−W‖² ≈ Σ_groups G·s²/12 — computed from the tensor's own group
//     maxima (model, groupModel), not from a distribution: want = the model,
//     accepted [0.75, 1.1]× (values below s/2 round to 0 with an error
//     smaller than uniform, so heavy-tailed trained groups come out below
//     the model; Gaussian groups within 2%). For Gaussian groups this is rms(amax/σ)/qmax/√12 with
//     rms(amax/σ) = 2.39 (G = 32) and 2.63 (G = 64): q4 0.109, q5 0.0506,
//     q6 0.0245, q8 0.00543.
//
// model is the data-derived relative rms error of a group format (ignored
// for the others).
func formatTheory(f format.Format, model float64) (want, lo, hi float64, ok bool) {
	r12 := math.Sqrt(12)
	switch f {
	case format.BF16:
		return 1.6e-3, math.Ldexp(1, -8) / r12, math.Ldexp(1, -7) / r12, true
	case format.FP8Row:
		return 0.026, math.Ldexp(1, -4) / r12, math.Ldexp(1, -3) / r12, true
	}
	if _, gok := f.Group(); !gok || !(model > 0) {
		return 0, 0, 0, false
	}
	return model, 0.75 * model, 1.1 * model, true
}

// groupModel returns Σ_groups n_g·s_g²/12 with s_g = amax_g/qmax, the
// expected ‖Ŵ−W‖² of the grouped-integer format p on the rows of length K
// of vals.
func groupModel(p format.GroupParams, vals []float32, K int) float64 {
	var sum float64
	for r := 0; r+K <= len(vals); r += K {
		for lo := 0; lo < K; lo += p.Group {
			hi := min(lo+p.Group, K)
			var am float64
			for _, v := range vals[r+lo : r+hi] {
				am = math.Max(am, math.Abs(float64(v)))
			}
			s := am / float64(p.QMax)
			sum += float64(hi-lo) * s * s / 12
		}
	}
	return sum
}

// errStat accumulates ||Ŵ−W||², ||W||² and the group-format model of
// ||Ŵ−W||² (groupModel).
type errStat struct{ num, den, model float64 }

func (e errStat) rel() float64 { return math.Sqrt(e.num / e.den) }

// modelRel is the data-derived relative rms error of a group format.
func (e errStat) modelRel() float64 { return math.Sqrt(e.model / e.den) }

// weightErrors decodes every text matrix of (c, preset) and of the fp32
// artifact and returns the relative rms error per stored format and over
// the whole preset.
func weightErrors(t *testing.T, c *golden.Case, preset string) (map[format.Format]errStat, errStat) {
	t.Helper()
	ref, err := loader.OpenWeights(artifact(t, c, "fp32").path)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	q, err := loader.OpenWeights(artifact(t, c, preset).path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	per := map[format.Format]errStat{}
	var all errStat
	for _, tn := range ref.Config().Tensors() {
		if tn.Component != qwen35.ComponentText || len(tn.Shape) != 2 ||
			tn.Class == qwen35.ClassNorm || tn.Class == qwen35.ClassConv || tn.Class == qwen35.ClassControl {
			continue
		}
		var vals [2][]float32
		var f format.Format
		var K int
		for i, w := range []*loader.Weights{ref, q} {
			ff, shape, data, err := w.Tensor(tn.Name)
			if err != nil {
				t.Fatal(err)
			}
			if vals[i], err = format.Decode(ff, shape, data); err != nil {
				t.Fatalf("%s: decode %s: %v", preset, tn.Name, err)
			}
			f, K = ff, int(shape[len(shape)-1])
		}
		var e errStat
		for i, w := range vals[0] {
			d := float64(vals[1][i]) - float64(w)
			e.num += d * d
			e.den += float64(w) * float64(w)
		}
		if p, ok := f.Group(); ok {
			e.model = groupModel(p, vals[0], K)
		}
		s := per[f]
		s.num, s.den, s.model = s.num+e.num, s.den+e.den, s.model+e.model
		per[f] = s
		all.num, all.den = all.num+e.num, all.den+e.den
	}
	return per, all
}

// TestRepresentationErrorModel checks the error model behind the bounds:
// (1) every stored format's relative rms weight error matches its model
// (formatTheory: analytic for bf16/fp8, from the tensors' group maxima for
// the grouped-integer formats); (2) the model's logit response is linear in it: the
// sensitivity S = mean|Δlogit| / ε is the same for the single-format
// presets bf16, q8 and fp8 within a factor 2 (fp32 KV cache).
func TestRepresentationErrorModel(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			sens := map[string]float64{}
			for _, p := range []string{"bf16", "q8", "groupwise-int", "fp8"} {
				per, all := weightErrors(t, c, p)
				fs := make([]format.Format, 0, len(per))
				for f := range per {
					fs = append(fs, f)
				}
				sort.Slice(fs, func(i, j int) bool { return fs[i] < fs[j] })
				for _, f := range fs {
					e := per[f]
					want, lo, hi, ok := formatTheory(f, e.modelRel())
					if !ok {
						t.Errorf("%s: no error model for stored format %s", p, f)
						continue
					}
					got := e.rel()
					t.Logf("%-13s %-22s ε %.4g (model %.4g, accepted [%.3g, %.3g])", p, f, got, want, lo, hi)
					if !(got >= lo && got <= hi) {
						t.Errorf("%s: format %s relative rms weight error %.4g outside [%.3g, %.3g]", p, f, got, lo, hi)
					}
				}
				m := measure(t, c, p, "fp32")
				sens[p] = m.MeanAbs / all.rel()
				t.Logf("%-13s overall ε %.4g, mean |Δlogit| %.4g, S = %.3g", p, all.rel(), m.MeanAbs, sens[p])
			}
			for _, p := range []string{"q8", "fp8"} {
				r := sens[p] / sens["bf16"]
				if !(r >= 0.5 && r <= 2) {
					t.Errorf("sensitivity of %s is %.3g× that of bf16 (want within [0.5, 2]: the logit error should scale with ε)", p, r)
				}
			}
		})
	}
}

// TestAccuracyTable prints the accuracy table of docs/ACCURACY.md (run with
// -v) and checks that every cell was measured: finite deviations over every
// stored prompt row plus the 31 continuation rows.
func TestAccuracyTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| case | weights | KV | max \\|Δ\\| | mean \\|Δ\\| | top-1 | greedy prefix |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|\n")
	notes := map[string]bool{}
	for _, c := range cases(t) {
		for _, p := range allPresets {
			for _, kv := range kvDtypes {
				m := measure(t, c, p, kv)
				if want := len(c.Logits) + len(c.Manifest.Continuation) - 1; m.Rows != want {
					t.Errorf("%s/%s/%s: %d rows compared, want %d", c.Manifest.Name, p, kv, m.Rows, want)
				}
				if math.IsInf(m.MaxAbs, 0) || math.IsNaN(m.MaxAbs) || math.IsNaN(m.MeanAbs) {
					t.Errorf("%s/%s/%s: non-finite logits (max |Δ| %v)", c.Manifest.Name, p, kv, m.MaxAbs)
				}
				name := p
				if len(m.Fallbacks) > 0 {
					name += "¹"
					notes[fmt.Sprintf("¹ %s: %d of its tensors fell back (e.g. %s)", c.Manifest.Name, len(m.Fallbacks), m.Fallbacks[0])] = true
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %.3g | %.3g | %d/%d (%.1f%%) | %d/%d |\n", c.Manifest.Name, name, kv,
					m.MaxAbs, m.MeanAbs, m.Top1, m.Rows, 100*m.Top1Rate(), m.GreedyPrefix, m.GreedyLen)
			}
		}
	}
	var ns []string
	for n := range notes {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	t.Logf("accuracy vs transformers float32 (CPU backend):\n%s\n%s", b.String(), strings.Join(ns, "\n"))
}
