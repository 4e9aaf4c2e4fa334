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

// weightBounds[case][preset] hold with an fp32 KV cache (the weights are the
// only approximation). Each is ~2× the measured value of docs/ACCURACY.md
// (measured: max / mean / top-1 / greedy in the comments); the means follow
// mean|Δ| ≈ S_case·ε_format with ε the format's relative rms weight error
// (TestRepresentationErrorModel) and S_case ≈ 20 (a, b) or 6.5 (c) logit
// units per unit ε. Top-1 lower bounds allow roughly twice the measured
// disagreements; greedy bounds are half the measured prefix. Every
// continuation step of a case has a top-1/top-2 margin of only ≥ 0.036
// (golden.json checks), so any preset whose max |Δ| exceeds that may lose
// the greedy path at step 0: those bounds are 0.
var weightBounds = map[string]map[string]bound{
	"a_untied_6l": {
		"bf16":          {0.63, 0.068, 0.95, 16}, // 0.316 / 0.0341 / 164/167 / 32
		"q8":            {2.0, 0.20, 0.85, 0},    // 1.01 / 0.101 / 157/167 / 0
		"groupwise-int": {15, 1.8, 0.30, 0},      // 7.61 / 0.915 / 79/167 / 0
		"fp8":           {8.5, 0.81, 0.50, 0},    // 4.28 / 0.405 / 119/167 / 0
	},
	"b_tied_4l": {
		"bf16":          {1.4, 0.066, 0.85, 8}, // 0.694 / 0.0332 / 45/47 / 17
		"q8":            {2.7, 0.18, 0.75, 4},  // 1.34 / 0.0919 / 42/47 / 9
		"groupwise-int": {12.5, 1.5, 0.35, 3},  // 6.28 / 0.738 / 26/47 / 7
		"fp8":           {7.2, 0.84, 0.50, 0},  // 3.62 / 0.422 / 33/47 / 0
	},
	"c_untied_fullfirst": {
		"bf16":          {0.14, 0.022, 0.95, 16}, // 0.0692 / 0.0108 / 47/47 / 32
		"q8":            {0.53, 0.067, 0.90, 16}, // 0.265 / 0.0333 / 47/47 / 32
		"groupwise-int": {5.0, 0.68, 0.60, 0},    // 2.49 / 0.339 / 37/47 / 0
		"fp8":           {2.8, 0.33, 0.70, 4},    // 1.38 / 0.162 / 42/47 / 9
	},
}

// kvBounds[case][kv] hold with the fp32 recipe (the KV cache is the only
// approximation), ~2× measured. The means scale with the element format's
// relative rms error as for weights: bf16 ≈ 1.6e-3, int8 group-64
// ≈ 2.63/127/√12 ≈ 6.0e-3, fp8 e4m3 ≈ 2.6e-2 (ratios 1 : 3.7 : 16;
// measured mean ratios 1 : 2.6–3.7 : 12–17).
var kvBounds = map[string]map[string]bound{
	"a_untied_6l": {
		"bf16": {0.038, 1.9e-3, 0.97, 16}, // 0.0188 / 9.27e-4 / 167/167 / 32
		"int8": {0.15, 6.7e-3, 0.95, 16},  // 0.0725 / 3.34e-3 / 167/167 / 32
		"fp8":  {0.45, 0.027, 0.90, 16},   // 0.224 / 0.0134 / 167/167 / 32
	},
	"b_tied_4l": {
		"bf16": {4.0e-3, 5.0e-4, 0.97, 16}, // 0.00200 / 2.44e-4 / 47/47 / 32
		"int8": {0.017, 1.3e-3, 0.95, 16},  // 0.00807 / 6.31e-4 / 47/47 / 32
		"fp8":  {0.042, 5.7e-3, 0.90, 16},  // 0.0208 / 2.85e-3 / 47/47 / 32
	},
	"c_untied_fullfirst": {
		"bf16": {9.0e-3, 1.3e-3, 0.97, 16}, // 0.00448 / 6.50e-4 / 47/47 / 32
		"int8": {0.042, 4.9e-3, 0.95, 16},  // 0.0210 / 2.43e-3 / 47/47 / 32
		"fp8":  {0.13, 0.022, 0.90, 16},    // 0.0663 / 0.0109 / 46/47 / 32
	},
}

// boundFor returns the bound of a cell.
func boundFor(cs, preset, kv string) (bound, error) {
	if b, ok := combineBounds(weightBounds, kvBounds, bound{fp32Tol, fp32Tol, 1, 32}, cs, preset, kv); ok {
		return b, nil
	}
	return bound{}, fmt.Errorf("no measured bounds for case %s preset %s kv %s: run go test ./internal/goldentest -run TestAccuracyTable -v and add them to weightBounds/kvBounds", cs, preset, kv)
}

// combineBounds looks a cell up in per-case weight and KV bound tables;
// exact is the bound of the fp32-weights, fp32-KV cell. With both weights
// and KV approximated, first-order perturbation theory adds the two
// deviations, so max and mean are bounded by the sums; top-1 and greedy are
// not asserted. ok is false when the tables have no entry for the cell.
func combineBounds(weights, kvs map[string]map[string]bound, exact bound, cs, preset, kv string) (bound, bool) {
	wb, wok := weights[cs][preset]
	kb, kok := kvs[cs][kv]
	switch {
	case preset == "fp32" && kv == "fp32":
		return exact, true
	case preset == "fp32" && kok:
		return kb, true
	case kv == "fp32" && wok:
		return wb, true
	case wok && kok:
		return bound{maxAbs: wb.maxAbs + kb.maxAbs, meanAbs: wb.meanAbs + kb.meanAbs}, true
	}
	return bound{}, false
}

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
// (except fp32 × fp32, TestFP32PathMatchesTransformers) against its bound.
// nvfp4-mlp on a case whose MLP shapes all fall back (N%128, K%64: every
// committed case, H = I = 64) stores the same formats as groupwise-int, so
// its trace must be bit-identical to groupwise-int's.
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
					b, err := boundFor(c.Manifest.Name, p, kv)
					if err != nil {
						t.Fatal(err)
					}
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
// format on Gaussian weights (every golden matrix is Gaussian), and the
// accepted range:
//   - bf16 / fp8 e4m3 (8 / 4 significant bits, round to nearest): the error
//     is uniform in ±ulp/2 with ulp = 2^-7 (bf16) or 2^-3 (e4m3) relative to
//     the bottom of each binade, so the relative rms lies in
//     [2^-8, 2^-7]/√12 (bf16) and [2^-4, 2^-3]/√12 (fp8); the row scale of
//     fp8 only moves values between binades.
//   - q<b>_g<G> (absmax scale s = amax/qmax, qmax 7/15/31/127 for q4/q5/q6/
//     q8): error uniform in ±s/2, rms s/√12; for Gaussian groups the rms of
//     amax/σ is 2.39 (G = 32) and 2.63 (G = 64) (Monte Carlo), so
//     ε = rms(amax)/qmax/√12: q4 0.109, q5 0.0506, q6 0.0245, q8 0.00543.
//     Accepted ±25%.
func formatTheory(f format.Format) (want, lo, hi float64, ok bool) {
	r12 := math.Sqrt(12)
	switch f {
	case format.BF16:
		return 1.6e-3, math.Ldexp(1, -8) / r12, math.Ldexp(1, -7) / r12, true
	case format.FP8Row:
		return 0.026, math.Ldexp(1, -4) / r12, math.Ldexp(1, -3) / r12, true
	}
	p, gok := f.Group()
	if !gok {
		return 0, 0, 0, false
	}
	amax := map[int]float64{32: 2.39, 64: 2.63}[p.Group]
	if amax == 0 {
		return 0, 0, 0, false
	}
	want = amax / float64(p.QMax) / r12
	return want, 0.75 * want, 1.25 * want, true
}

// errStat accumulates ||Ŵ−W||² and ||W||².
type errStat struct{ num, den float64 }

func (e errStat) rel() float64 { return math.Sqrt(e.num / e.den) }

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
		for i, w := range []*loader.Weights{ref, q} {
			ff, shape, data, err := w.Tensor(tn.Name)
			if err != nil {
				t.Fatal(err)
			}
			if vals[i], err = format.Decode(ff, shape, data); err != nil {
				t.Fatalf("%s: decode %s: %v", preset, tn.Name, err)
			}
			f = ff
		}
		var e errStat
		for i, w := range vals[0] {
			d := float64(vals[1][i]) - float64(w)
			e.num += d * d
			e.den += float64(w) * float64(w)
		}
		s := per[f]
		s.num, s.den = s.num+e.num, s.den+e.den
		per[f] = s
		all.num, all.den = all.num+e.num, all.den+e.den
	}
	return per, all
}

// TestRepresentationErrorModel checks the error model behind the bounds:
// (1) every stored format's relative rms weight error matches its analytic
// value (formatTheory); (2) the model's logit response is linear in it: the
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
					want, lo, hi, ok := formatTheory(f)
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
