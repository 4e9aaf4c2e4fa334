package goldentest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/golden"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Derived bounds. Every tolerance of this package except fp32Tol (the
// issue's fixed bar against transformers) is computed per case from the
// case's own numbers, so that a new model (an extra case, ExtraEnv) gets
// bounds that scale with its sensitivity. The tool is a "twin": the same
// model run by the engine with seeded random noise of a known size added to
// its weights (noisyWeights), in the same evaluation order as the run it is
// compared with. The twin's deviation from the noiseless run measures how
// far this model's logits move under a perturbation of the size a number
// format introduces; the bound is that deviation times a small factor.
//
//   - Evaluation order (orderBound): two fp32 evaluation orders of the same
//     products (chunked prefill vs decode, quantized vs fp32 kernels, CPU vs
//     CUDA) give results that differ by rounding: a length-K fp32 dot
//     product summed in two orders differs by a relative rms of about
//     u·√K/√3 (u = 2⁻²⁴, a random walk of K roundings of the partial sums).
//     The twin multiplies every weight element by 1 + η·r (r uniform, rms 1)
//     with η = u·√Kmax, Kmax the largest inner dimension of the model's
//     matrices, which perturbs every matrix product by about that relative
//     amount; run with the same KV dtype as the checked pair, the twin also
//     carries the effect of a rounded KV cache: K/V values that move by
//     fp32-rounding amounts and cross a bf16 (int8, fp8) rounding boundary
//     change by one code step, exactly what happens between two evaluation
//     orders. Bound: orderFactor × the largest deviation of orderDraws
//     twins (max |Δ| and rel-L2 separately). A coarse KV format (int8, fp8)
//     has code steps so large that a twin may see no element cross a
//     boundary although two orders can; one such flip moves the logits in
//     proportion to the code step, so those bounds are at least the bf16
//     bound (whose twins see tens of flips) times ε_f/ε_bf16 (kvEpsilon:
//     the rms error, ∝ the step, 3.7 for int8 and 16 for fp8).
//   - Weight representation (twinBound): a preset replaces each tensor W by
//     Ŵ; the twin adds to every tensor independent noise with the same rms
//     ‖Ŵ−W‖/√n (measured per tensor from the two artifacts), i.e. a random
//     error of the format's size (ε of TestRepresentationErrorModel) but not
//     the format's own rounding. Bounds: reprMaxFactor (reprMeanFactor) ×
//     the twins' max (mean) |Δ| against transformers over the cell's rows,
//     plus the exact cell's (fp32 weights and KV) own max (mean) |Δ|
//     (|cell − HF| ≤ |cell − exact| + |exact − HF|).
//   - KV representation (twinBound): the cache stores K/V in a format of
//     relative rms error ε_f (kvEpsilon); the twin adds noise of rms ε_f·rms(W)
//     to k_proj and v_proj of every full-attention layer (and of the MTP
//     layer), which moves every cached K/V element by ≈ ε_f relative. Same
//     factors as for weights. (The twin's errors are correlated across
//     positions, the cache's are not, so it overestimates: measured
//     1.5–10× the real deviation; a conservative bound.)
//   - Both approximated: first-order perturbations add, so the bounds of a
//     quantized preset with a quantized KV cache are the sums (as before).
//   - Top-1 rate and greedy prefix: a row's argmax can flip when the
//     deviation exceeds its top-1/top-2 margin, a rare event whose count the
//     twin samples; allowed flips are 2× the twin's + 2 (the spread of a
//     small count). The greedy prefix must reach the first continuation step
//     whose reference margin is ≤ twice the max bound (a larger margin
//     cannot flip while |Δ| stays within the bound).
const (
	// unitRoundoff is u of IEEE binary32 (round to nearest).
	unitRoundoff = 0x1p-24
	// orderDraws twins per order bound; their largest deviation counts (the
	// KV rounding flips are rare events: one draw may see fewer than usual).
	orderDraws = 3
	// orderFactor multiplies the order twins' deviation. η already sits
	// above the random-walk estimate (√3×), and the engine's two orders
	// share much of their summation structure: on the 3 committed and 5
	// extra random models (AVX2 and NINFER_CPU_ISA=scalar) the measured
	// two-order differences are ≤ 0.1 of the bound with an fp32 KV cache
	// and ≤ 0.36 with bf16 (b_tied_4l, whose worst flip is at position 9,
	// where few cached elements carry the attention). The factor covers the
	// count of rare flips (Poisson) a twin may undersample.
	orderFactor = 2
	// reprDraws twins per representation bound (max |Δ| and mean |Δ|: the
	// largest over draws).
	reprDraws = 2
	// reprMaxFactor and reprMeanFactor multiply the representation twins'
	// max and mean |Δ| against transformers. The mean over 10⁴–10⁵ logits
	// is stable (measured real/twin 0.8–1.1 for weights), the max is a tail
	// statistic of one draw (real/twin up to 1.9): factors 2 and 3, so the
	// worst measured cell of the 8 models uses 0.57 (mean) and 0.62 (max)
	// of its bound.
	reprMaxFactor  = 3
	reprMeanFactor = 2
)

// noisyWeights presents the tensors of base as fp32 with seeded noise:
// element v of tensor id becomes v·(1 + rel·r) + abs[id]·r with r uniform in
// [−√3, √3] (rms 1), independent per element; tensors without noise, and
// those that are not real-valued (pkg/format cannot decode them to floats,
// e.g. an id map), are passed through unchanged.
type noisyWeights struct {
	base engine.Weights
	rel  float64
	abs  map[string]float64
	seed uint64
}

func (n noisyWeights) Config() qwen35.Config { return n.base.Config() }

func (n noisyWeights) Tensor(id string) (format.Format, []int64, []byte, error) {
	f, shape, data, err := n.base.Tensor(id)
	if err != nil || (n.rel == 0 && n.abs[id] == 0) {
		return f, shape, data, err
	}
	vals, err := decodeF32(f, shape, data)
	if err != nil {
		return f, shape, data, nil
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	rng := rand.New(rand.NewPCG(n.seed, h.Sum64()))
	a := n.abs[id]
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		r := math.Sqrt(3) * (2*rng.Float64() - 1)
		x := float64(v)*(1+n.rel*r) + a*r
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(x)))
	}
	return format.FP32, shape, out, nil
}

// decodeF32 decodes a stored tensor to float32 values.
func decodeF32(f format.Format, shape []int64, data []byte) ([]float32, error) {
	if f != format.FP32 {
		return format.Decode(f, shape, data)
	}
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out, nil
}

var (
	configCache onceCache[qwen35.Config]
	errCache    onceCache[map[string]float64]
	orderCache  onceCache[noiseBound]
)

// caseConfig returns the model config of case c (from its fp32 artifact).
func caseConfig(t *testing.T, c *golden.Case) qwen35.Config {
	t.Helper()
	cfg, err := configCache.get(c.Manifest.Name, func() (qwen35.Config, error) {
		w, err := loader.OpenWeights(artifact(t, c, "fp32").path)
		if err != nil {
			return qwen35.Config{}, err
		}
		defer w.Close()
		return w.Config(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// maxInnerDim is Kmax: the largest inner (summed) dimension of the model's
// matrix products.
func maxInnerDim(cfg qwen35.Config) int {
	k := max(cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads*cfg.HeadDim,
		cfg.LinearNumValueHeads*cfg.LinearValueHeadDim)
	if cfg.MTPNumHiddenLayers > 0 {
		k = max(k, 2*cfg.HiddenSize)
	}
	return k
}

// orderEta is η of the evaluation-order twin: u·√Kmax.
func orderEta(cfg qwen35.Config) float64 {
	return unitRoundoff * math.Sqrt(float64(maxInnerDim(cfg)))
}

// orderView returns the order twin of draw d over an artifact.
func orderView(eta float64, d int) view {
	return func(w *loader.Weights) engine.Weights {
		return noisyWeights{base: w, rel: eta, seed: 0x6f72646572 + uint64(d)}
	}
}

// noiseBound bounds the difference of two evaluation orders: max |Δ| over
// every compared logit and the rel-L2 difference over all rows.
type noiseBound struct{ max, relL2 float64 }

func (b noiseBound) String() string { return fmt.Sprintf("max %.3g, rel-L2 %.3g", b.max, b.relL2) }

// diffStats returns max |a−b| (NaN → +Inf), mean |a−b| and ||a−b||/||b||
// over two row lists of equal shape.
func diffStats(t *testing.T, a, b [][]float32) (maxAbs, meanAbs, rel float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("diff: %d rows vs %d", len(a), len(b))
	}
	var sum float64
	n := 0
	for r := range b {
		d, _ := golden.Compare(a[r], b[r])
		maxAbs = math.Max(maxAbs, d)
		for i := range b[r] {
			sum += math.Abs(float64(a[r][i]) - float64(b[r][i]))
		}
		n += len(b[r])
	}
	return maxAbs, sum / float64(n), relL2(a, b)
}

// baseVariant is the noiseless run a twin of preset is compared with: the
// decoded weights (fp32 kernels) of a quantized preset, the artifact itself
// for fp32.
func baseVariant(preset string) variant {
	if preset == "fp32" {
		return asStored
	}
	return asDecoded
}

// orderBound is the derived bound on two evaluation orders of case c with
// the named preset and KV dtype (golden trace rows).
func orderBound(t *testing.T, c *golden.Case, preset, kv string) noiseBound {
	t.Helper()
	var floor noiseBound
	if kv == "int8" || kv == "fp8" {
		f := kvEpsilon(kv) / kvEpsilon("bf16")
		b := orderBound(t, c, preset, "bf16")
		floor = noiseBound{f * b.max, f * b.relL2}
	}
	b := twinOrderBound(t, c, preset, kv)
	return noiseBound{math.Max(b.max, floor.max), math.Max(b.relL2, floor.relL2)}
}

// twinOrderBound is orderBound from the order twins alone.
func twinOrderBound(t *testing.T, c *golden.Case, preset, kv string) noiseBound {
	t.Helper()
	eta := orderEta(caseConfig(t, c))
	b, err := orderCache.get(c.Manifest.Name+"/"+preset+"/"+kv, func() (noiseBound, error) {
		base, err := traceOf(c, preset, kv, baseVariant(preset))
		if err != nil {
			return noiseBound{}, err
		}
		var b noiseBound
		for d := range orderDraws {
			tw, err := viewTraceOf(c, preset, kv, fmt.Sprintf("order-twin-%d", d), orderView(eta, d))
			if err != nil {
				return noiseBound{}, err
			}
			mx, _, rel := diffStats(t, tw, base)
			b.max, b.relL2 = math.Max(b.max, mx), math.Max(b.relL2, rel)
		}
		return noiseBound{orderFactor * b.max, orderFactor * b.relL2}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mtpOrderBound is orderBound over the MTP rows (prefill chunk 128).
func mtpOrderBound(t *testing.T, c *golden.Case, preset, kv string) noiseBound {
	t.Helper()
	eta := orderEta(caseConfig(t, c))
	b, err := orderCache.get("mtp/"+c.Manifest.Name+"/"+preset+"/"+kv, func() (noiseBound, error) {
		v := baseVariant(preset)
		base, err := mtpViewTraceOf(c, preset, kv, 128, v.String(), v.view())
		if err != nil {
			return noiseBound{}, err
		}
		var b noiseBound
		for d := range orderDraws {
			tw, err := mtpViewTraceOf(c, preset, kv, 128, fmt.Sprintf("order-twin-%d", d), orderView(eta, d))
			if err != nil {
				return noiseBound{}, err
			}
			mx, _, rel := diffStats(t, tw, base)
			b.max, b.relL2 = math.Max(b.max, mx), math.Max(b.relL2, rel)
		}
		return noiseBound{orderFactor * b.max, orderFactor * b.relL2}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderBoundIDs is orderBound for an all-logits prefill of ids (chunk 128,
// fp32 weights and KV) instead of the golden trace: the twins run the same
// ids (not cached).
func orderBoundIDs(t *testing.T, c *golden.Case, ids []int32) noiseBound {
	t.Helper()
	eta := orderEta(caseConfig(t, c))
	be, err := cpuE()
	if err != nil {
		t.Fatal(err)
	}
	o := engine.Options{PrefillChunk: 128, KVDtype: "fp32", LogitsRows: 64}
	run := func(name string, vw view) [][]float32 {
		md, err := openViewOnE(be, c, "fp32", o, name, vw)
		if err != nil {
			t.Fatal(err)
		}
		defer md.close()
		return prefillAll(t, md.seq, ids, c.Manifest.VocabSize)
	}
	base := run("stored", nil)
	var b noiseBound
	for d := range orderDraws {
		mx, _, rel := diffStats(t, run(fmt.Sprintf("order-twin-%d", d), orderView(eta, d)), base)
		b.max, b.relL2 = math.Max(b.max, mx), math.Max(b.relL2, rel)
	}
	return noiseBound{orderFactor * b.max, orderFactor * b.relL2}
}

// tensorErrors returns, per tensor of case c, the rms of Ŵ−W between the
// preset's artifact (decoded) and the fp32 artifact (tensors stored exactly
// are absent).
func tensorErrors(t *testing.T, c *golden.Case, preset string) map[string]float64 {
	t.Helper()
	m, err := errCache.get(c.Manifest.Name+"/"+preset, func() (map[string]float64, error) {
		ref, err := loader.OpenWeights(artifact(t, c, "fp32").path)
		if err != nil {
			return nil, err
		}
		defer ref.Close()
		q, err := loader.OpenWeights(artifact(t, c, preset).path)
		if err != nil {
			return nil, err
		}
		defer q.Close()
		out := map[string]float64{}
		for _, tn := range ref.Config().Tensors() {
			var vals [2][]float32
			for i, w := range []*loader.Weights{ref, q} {
				f, shape, data, err := w.Tensor(tn.Name)
				if err != nil {
					return nil, err
				}
				if vals[i], err = decodeF32(f, shape, data); err != nil {
					return nil, fmt.Errorf("%s: decode %s: %w", preset, tn.Name, err)
				}
			}
			var ss float64
			for i, w := range vals[0] {
				d := float64(vals[1][i]) - float64(w)
				ss += d * d
			}
			if ss > 0 {
				out[tn.Name] = math.Sqrt(ss / float64(len(vals[0])))
			}
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tensorRMS returns, per tensor of case c, the rms of its fp32 values.
func tensorRMS(t *testing.T, c *golden.Case) map[string]float64 {
	t.Helper()
	m, err := errCache.get(c.Manifest.Name+"/rms", func() (map[string]float64, error) {
		w, err := loader.OpenWeights(artifact(t, c, "fp32").path)
		if err != nil {
			return nil, err
		}
		defer w.Close()
		out := map[string]float64{}
		for _, tn := range w.Config().Tensors() {
			f, shape, data, err := w.Tensor(tn.Name)
			if err != nil {
				return nil, err
			}
			vals, err := decodeF32(f, shape, data)
			if err != nil {
				return nil, err
			}
			var ss float64
			for _, v := range vals {
				ss += float64(v) * float64(v)
			}
			out[tn.Name] = math.Sqrt(ss / float64(len(vals)))
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// kvEpsilon is the relative rms error of a KV cache element format
// (formatTheory's models): bf16 RNE 1.6e-3; int8 with an absmax/127 scale
// per 64 elements rms(amax/σ)/127/√12 = 2.63/127/√12 ≈ 6.0e-3; fp8 e4m3
// with an absmax/448 scale per head vector (4 significant bits) 0.026.
func kvEpsilon(kv string) float64 {
	switch kv {
	case "bf16":
		want, _, _, _ := formatTheory(format.BF16, 0)
		return want
	case "int8":
		return 2.63 / 127 / math.Sqrt(12)
	case "fp8":
		want, _, _, _ := formatTheory(format.FP8Row, 0)
		return want
	}
	return 0
}

// reprNoise is the absolute noise of the representation twin of preset
// (weights) and kv (cache) on case c.
func reprNoise(t *testing.T, c *golden.Case, preset, kv string) map[string]float64 {
	t.Helper()
	abs := map[string]float64{}
	if preset != "fp32" {
		for id, e := range tensorErrors(t, c, preset) {
			abs[id] = e
		}
	}
	if eps := kvEpsilon(kv); eps > 0 {
		for id, r := range tensorRMS(t, c) {
			if strings.HasSuffix(id, "/attention/k_proj") || strings.HasSuffix(id, "/attention/v_proj") {
				abs[id] = math.Hypot(abs[id], eps*r)
			}
		}
	}
	return abs
}

// reprTwins returns the representation twins' traces (fp32 artifact plus
// noise, fp32 KV) of one approximation: a weight preset with kv "fp32", or
// the fp32 preset with a KV format. mtp selects the MTP traces (chunk 128).
func reprTwins(t *testing.T, c *golden.Case, preset, kv string, mtp bool) [][][]float32 {
	t.Helper()
	abs := reprNoise(t, c, preset, kv)
	var out [][][]float32
	for d := range reprDraws {
		name := fmt.Sprintf("repr-twin-%s-%s-%d", preset, kv, d)
		vw := func(w *loader.Weights) engine.Weights {
			return noisyWeights{base: w, abs: abs, seed: 0x72657072 + uint64(d)}
		}
		var tr [][]float32
		var err error
		if mtp {
			tr, err = mtpViewTraceOf(c, "fp32", "fp32", 128, name, vw)
		} else {
			tr, err = viewTraceOf(c, "fp32", "fp32", name, vw)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

// twinBound derives the bound of one approximation (weights or KV) from its
// twins: max and mean |Δ| against transformers reprMaxFactor and
// reprMeanFactor times the twins' largest (over the same rows), plus the
// exact cell's own max and mean |Δ| against transformers (itself
// asserted ≤ fp32Tol by TestFP32PathMatchesTransformers); top-1 flips at most
// 2× the twins' most + 2; greedy prefix up to the first continuation step
// whose reference margin is ≤ twice the max bound.
func twinBound(t *testing.T, c *golden.Case, preset, kv string, mtp bool) bound {
	t.Helper()
	var mx, mean float64
	flips := 0
	rows := 0
	for _, tr := range reprTwins(t, c, preset, kv, mtp) {
		var m *metrics
		if mtp {
			m = measureMTPTrace(t, c, tr, preset, kv)
		} else {
			m = measureTrace(t, c, tr, preset, kv)
		}
		mx, mean = math.Max(mx, m.MaxAbs), math.Max(mean, m.MeanAbs)
		flips, rows = max(flips, m.Rows-m.Top1), m.Rows
	}
	var ex *metrics // the exact cell: |cell − HF| ≤ |cell − exact| + |exact − HF|
	if mtp {
		ex = measureMTP(t, c, "fp32", "fp32")
	} else {
		ex = measure(t, c, "fp32", "fp32")
	}
	b := bound{maxAbs: reprMaxFactor*mx + ex.MaxAbs, meanAbs: reprMeanFactor*mean + ex.MeanAbs}
	b.top1 = math.Max(0, 1-float64(2*flips+2)/float64(rows))
	if !mtp {
		b.greedy = marginPrefix(c, 2*b.maxAbs)
	}
	return b
}

// marginPrefix is the number of leading continuation steps whose reference
// top-1/top-2 margin exceeds m.
func marginPrefix(c *golden.Case, m float64) int {
	for i, row := range c.ContinuationLogits {
		if top2Margin(row) <= m {
			return i
		}
	}
	return len(c.ContinuationLogits)
}

// derivedBound returns the bound of a cell against transformers: fp32Tol
// (and the full greedy continuation) for the exact cell, the twin bound of
// the one approximation for single-factor cells, and for quantized weights
// with a quantized KV cache the sums of the two max and mean bounds (top-1
// and greedy not asserted).
func derivedBound(t *testing.T, c *golden.Case, preset, kv string, mtp bool) bound {
	t.Helper()
	switch {
	case preset == "fp32" && kv == "fp32":
		g := len(c.Manifest.Continuation)
		if mtp {
			g = 0
		}
		return bound{fp32Tol, fp32Tol, 1, g}
	case preset == "fp32" || kv == "fp32":
		return twinBound(t, c, preset, kv, mtp)
	}
	w, k := twinBound(t, c, preset, "fp32", mtp), twinBound(t, c, "fp32", kv, mtp)
	return bound{maxAbs: w.maxAbs + k.maxAbs, meanAbs: w.meanAbs + k.meanAbs}
}

// TestDerivedBoundsReport prints every derived bound of every case (-v):
// the order bounds of the path tests and the representation bounds, with
// the measured value beside each.
func TestDerivedBoundsReport(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			cfg := caseConfig(t, c)
			var b strings.Builder
			fmt.Fprintf(&b, "Kmax %d, η = u·√Kmax = %.3g\n", maxInnerDim(cfg), orderEta(cfg))
			for _, r := range []struct{ preset, kv string }{{"fp32", "fp32"}, {"fp32", "bf16"}, {"bf16", "fp32"}, {"q8", "fp32"},
				{"groupwise-int", "fp32"}, {"nvfp4-mlp", "fp32"}, {"fp8", "fp32"}, {"fp32", "int8"}, {"fp32", "fp8"}} {
				ob := orderBound(t, c, r.preset, r.kv)
				fmt.Fprintf(&b, "order %-13s kv %-4s: %s\n", r.preset, r.kv, ob)
			}
			for _, p := range allPresets {
				for _, kv := range kvDtypes {
					if (p == "fp32") == (kv == "fp32") {
						continue
					}
					db := derivedBound(t, c, p, kv, false)
					m := measure(t, c, p, kv)
					fmt.Fprintf(&b, "repr  %-13s kv %-4s: max %.3g ≤ %.3g (%.2f), mean %.3g ≤ %.3g (%.2f), top-1 %d/%d ≥ %.2f, greedy %d ≥ %d\n",
						p, kv, m.MaxAbs, db.maxAbs, m.MaxAbs/db.maxAbs, m.MeanAbs, db.meanAbs, m.MeanAbs/db.meanAbs,
						m.Top1, m.Rows, db.top1, m.GreedyPrefix, db.greedy)
				}
			}
			t.Logf("derived bounds of %s:\n%s", c.Manifest.Name, b.String())
		})
	}
}
