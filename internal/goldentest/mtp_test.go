package goldentest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// TestMTPAgainstTransformers compares the MTP draft head's logits over the
// prompt (Engine.LoadMTP, MTPSequence.Prefill with chunk 128 so the rows
// cross a chunk boundary; RowLogits) with transformers' MTP rows for every
// case × preset × KV dtype: fp32 weights and KV within fp32Tol with every
// argmax equal, the others within their derived bounds (derivedBound over
// the MTP rows: the twins run the MTP head too; no greedy check).
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
					b := derivedBound(t, c, p, kv, true)
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
// those of one 1024-token chunk within the derived order bound of the MTP
// rows (mtpOrderBound; fp32 weights and KV).
func TestMTPChunkInvariance(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Manifest.Name, func(t *testing.T) {
			a, b := mtpTrace(t, c, "fp32", "fp32", 128), mtpTrace(t, c, "fp32", "fp32", 1024)
			d, at := rowsDiff(t, "MTP chunk 128 vs 1024", a, b)
			ob := mtpOrderBound(t, c, "fp32", "fp32")
			t.Logf("max |chunk 128 − chunk 1024| %.3g at MTP row %d (derived bound %.3g)", d, at, ob.max)
			if !(d <= ob.max) {
				t.Errorf("MTP rows: max |chunk 128 − chunk 1024| %.4g at row %d exceeds %.3g", d, at, ob.max)
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
