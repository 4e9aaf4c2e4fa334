package goldentest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// MTP draft-head bounds, measured like weightBounds/kvBounds (~2× measured
// max and mean, top-1 allowing about twice the measured disagreements; the
// measured max / mean / top-1 are in the comments). The MTP row inherits the
// target model's final hidden state, so its errors are of the same size as
// the main logits' (same S·ε model), plus its own layer's weights (q8 in
// groupwise-int) and its own KV cache. Cases b and c store 16 MTP rows, so
// one top-1 flip is 6%.
var mtpWeightBounds = map[string]map[string]bound{
	"a_untied_6l": {
		"bf16":          {0.50, 0.055, 0.97, 0}, // 0.252 / 0.0276 / 134/135
		"q8":            {1.8, 0.165, 0.90, 0},  // 0.879 / 0.0822 / 129/135
		"groupwise-int": {14, 1.4, 0.40, 0},     // 6.86 / 0.705 / 82/135
		"fp8":           {7.5, 0.69, 0.60, 0},   // 3.72 / 0.343 / 107/135
	},
	"b_tied_4l": {
		"bf16":          {1.3, 0.071, 0.85, 0},  // 0.657 / 0.0354 / 16/16
		"q8":            {1.15, 0.165, 0.80, 0}, // 0.567 / 0.0821 / 15/16
		"groupwise-int": {8.8, 1.35, 0.25, 0},   // 4.37 / 0.672 / 8/16
		"fp8":           {5.6, 0.79, 0.50, 0},   // 2.80 / 0.393 / 12/16
	},
	"c_untied_fullfirst": {
		"bf16":          {0.13, 0.023, 0.85, 0}, // 0.0627 / 0.0114 / 15/16
		"q8":            {0.40, 0.068, 0.85, 0}, // 0.200 / 0.0338 / 16/16
		"groupwise-int": {3.7, 0.52, 0.60, 0},   // 1.84 / 0.259 / 13/16
		"fp8":           {2.3, 0.35, 0.75, 0},   // 1.16 / 0.176 / 14/16
	},
}

var mtpKVBounds = map[string]map[string]bound{
	"a_untied_6l": {
		"bf16": {0.036, 2.2e-3, 0.97, 0}, // 0.0177 / 1.07e-3 / 134/135
		"int8": {0.12, 8.2e-3, 0.97, 0},  // 0.0577 / 4.08e-3 / 135/135
		"fp8":  {0.40, 0.033, 0.95, 0},   // 0.201 / 0.0164 / 133/135
	},
	"b_tied_4l": {
		"bf16": {4.4e-3, 8.0e-4, 0.85, 0}, // 0.00218 / 4.01e-4 / 16/16
		"int8": {0.015, 2.5e-3, 0.85, 0},  // 0.00735 / 1.24e-3 / 16/16
		"fp8":  {0.062, 0.011, 0.85, 0},   // 0.0311 / 5.43e-3 / 16/16
	},
	"c_untied_fullfirst": {
		"bf16": {8.5e-3, 1.5e-3, 0.85, 0}, // 0.00423 / 7.34e-4 / 16/16
		"int8": {0.043, 5.4e-3, 0.85, 0},  // 0.0213 / 2.68e-3 / 16/16
		"fp8":  {0.15, 0.022, 0.85, 0},    // 0.0769 / 0.0112 / 16/16
	},
}

// mtpBoundFor is boundFor over the MTP tables.
func mtpBoundFor(cs, preset, kv string) (bound, error) {
	if b, ok := combineBounds(mtpWeightBounds, mtpKVBounds, bound{fp32Tol, fp32Tol, 1, 0}, cs, preset, kv); ok {
		return b, nil
	}
	return bound{}, fmt.Errorf("no measured MTP bounds for case %s preset %s kv %s: run go test ./internal/goldentest -run TestMTPAccuracyTable -v and add them to mtpWeightBounds/mtpKVBounds", cs, preset, kv)
}

// TestMTPAgainstTransformers compares the MTP draft head's logits over the
// prompt (Engine.LoadMTP, MTPSequence.Prefill with chunk 128 so the rows
// cross a chunk boundary; RowLogits) with transformers' MTP rows for every
// case × preset × KV dtype: fp32 weights and KV within fp32Tol with every
// argmax equal, the others within their measured bounds.
func TestMTPAgainstTransformers(t *testing.T) {
	for _, c := range cases(t) {
		nvfp4 := usesFormat(storedFormats(t, c, "nvfp4-mlp"), format.NVFP4)
		for _, p := range allPresets {
			for _, kv := range kvDtypes {
				t.Run(c.Manifest.Name+"/"+p+"/kv="+kv, func(t *testing.T) {
					if p == "nvfp4-mlp" && !nvfp4 {
						d, at := rowsDiff(t, "nvfp4-mlp vs groupwise-int", mtpTrace(t, c, p, kv, 128), mtpTrace(t, c, "groupwise-int", kv, 128))
						if d != 0 {
							t.Errorf("every MLP tensor fell back to the groupwise-int formats, yet the MTP logits differ by %.3g at row %d", d, at)
						}
						return
					}
					b, err := mtpBoundFor(c.Manifest.Name, p, kv)
					if err != nil {
						t.Fatal(err)
					}
					m := measureMTP(t, c, p, kv)
					t.Logf("max |Δ| %.3g (≤ %.3g) at %s, mean |Δ| %.3g (≤ %.3g), top-1 %d/%d (≥ %.2f)",
						m.MaxAbs, b.maxAbs, m.WorstAt, m.MeanAbs, b.meanAbs, m.Top1, m.Rows, b.top1)
					checkMetrics(t, "MTP ", m, b) // MTP bounds have greedy 0: no greedy check
				})
			}
		}
	}
}

// TestMTPChunkInvariance: the MTP rows of a prefill in chunks of 128 (rows
// held across the chunk boundary until their successor is known) equal
// those of one 1024-token chunk within pathTol (fp32 weights and KV).
func TestMTPChunkInvariance(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			a, b := mtpTrace(t, c, "fp32", "fp32", 128), mtpTrace(t, c, "fp32", "fp32", 1024)
			d, at := rowsDiff(t, "MTP chunk 128 vs 1024", a, b)
			t.Logf("max |chunk 128 − chunk 1024| %.3g at MTP row %d", d, at)
			if !(d <= pathTol) {
				t.Errorf("MTP rows: max |chunk 128 − chunk 1024| %.4g at row %d exceeds %.g", d, at, pathTol)
			}
		})
	}
}

// TestMTPAccuracyTable prints the MTP table of docs/ACCURACY.md (run with
// -v) and checks that every cell is finite.
func TestMTPAccuracyTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| case | weights | KV | max \\|Δ\\| | mean \\|Δ\\| | top-1 |\n")
	b.WriteString("|---|---|---|---:|---:|---:|\n")
	for _, c := range cases(t) {
		for _, p := range allPresets {
			for _, kv := range kvDtypes {
				m := measureMTP(t, c, p, kv)
				if math.IsInf(m.MaxAbs, 0) || math.IsNaN(m.MaxAbs) || math.IsNaN(m.MeanAbs) {
					t.Errorf("%s/%s/%s: non-finite MTP logits (max |Δ| %v)", c.Manifest.Name, p, kv, m.MaxAbs)
				}
				name := p
				if len(m.Fallbacks) > 0 {
					name += "¹"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %.3g | %.3g | %d/%d (%.1f%%) |\n", c.Manifest.Name, name, kv,
					m.MaxAbs, m.MeanAbs, m.Top1, m.Rows, 100*m.Top1Rate())
			}
		}
	}
	t.Logf("MTP draft head vs transformers float32 (CPU backend, prefill chunk 128):\n%s", b.String())
}
