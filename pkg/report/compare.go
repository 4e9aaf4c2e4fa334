package report

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// Alpha is the significance level of Compare (two-sided).
const Alpha = 0.05

// CompareRow compares one metric of one test between runs A and B.
type CompareRow struct {
	Test         string // label, with "#n" appended for the n-th repeat of a duplicated label
	Metric       Metric
	A, B         []float64 // per-rep samples
	MeanA, SDA   float64
	MeanB, SDB   float64
	DeltaPercent float64 // 100·(meanB − meanA)/meanA; NaN when meanA is 0
	Welch        WelchResult
	Significant  bool // Welch.OK and p < Alpha
}

// Comparison is the result of Compare.
type Comparison struct {
	Rows     []CompareRow
	Warnings []string // config differences, unmatched tests
}

// compareMetrics are the series compared: the throughputs.
var compareMetrics = []Metric{PrefillTokS, DecodeOutputTokS}

func testKeys(d *benchfmt.Document) []string {
	seen := map[string]int{}
	keys := make([]string, len(d.Tests))
	for i, t := range d.Tests {
		label := benchfmt.DisplayLabel(t.Label, t.NDepth) // tests at different depths are different tests
		seen[label]++
		keys[i] = label
		if n := seen[label]; n > 1 {
			keys[i] = fmt.Sprintf("%s#%d", label, n)
		}
	}
	return keys
}

// ConfigDifferences lists the run settings that differ between a and b
// (model identity and benchmark config; the environment may differ freely).
func ConfigDifferences(a, b *benchfmt.Document) []string {
	var out []string
	diff := func(name string, x, y any) {
		if x != y {
			out = append(out, fmt.Sprintf("%s differs: %v vs %v", name, x, y))
		}
	}
	diff("load.name", a.Load.Name, b.Load.Name)
	diff("load.prefill_signature", a.Load.PrefillSignature, b.Load.PrefillSignature)
	ca, cb := a.Config, b.Config
	diff("config.max_context", ca.MaxContext, cb.MaxContext)
	diff("config.prefill_chunk", ca.PrefillChunk, cb.PrefillChunk)
	diff("config.kv_cache", ca.KVCache, cb.KVCache)
	diff("config.speculative_backend", ca.SpeculativeBackend, cb.SpeculativeBackend)
	diff("config.draft_tokens", ca.DraftTokens, cb.DraftTokens)
	diff("config.proposal_head", ca.ProposalHead, cb.ProposalHead)
	diff("config.use_cuda_graph", ca.UseCUDAGraph, cb.UseCUDAGraph)
	diff("config.decode_path", ca.DecodePath, cb.DecodePath)
	diff("config.corpus_tokens", ca.CorpusTokens, cb.CorpusTokens)
	return out
}

// Compare matches tests of a and b by label (the n-th test with a label in
// A against the n-th in B) and compares the throughput series with Welch's
// t-test.
func Compare(a, b *benchfmt.Document) Comparison {
	var c Comparison
	for _, d := range ConfigDifferences(a, b) {
		c.Warnings = append(c.Warnings, "run config: "+d)
	}
	ka, kb := testKeys(a), testKeys(b)
	idxB := map[string]int{}
	for i, k := range kb {
		idxB[k] = i
	}
	matched := map[string]bool{}
	for i, k := range ka {
		j, ok := idxB[k]
		if !ok {
			c.Warnings = append(c.Warnings, fmt.Sprintf("test %s only in A", k))
			continue
		}
		matched[k] = true
		ta, tb := &a.Tests[i], &b.Tests[j]
		if ta.Kind != tb.Kind || ta.NPrompt != tb.NPrompt || ta.NGen != tb.NGen {
			c.Warnings = append(c.Warnings, fmt.Sprintf("test %s: shapes differ", k))
			continue
		}
		for _, m := range compareMetrics {
			xa, xb := Series(ta, m), Series(tb, m)
			if len(xa) == 0 && len(xb) == 0 {
				continue
			}
			row := CompareRow{Test: k, Metric: m, A: xa, B: xb}
			row.MeanA, row.SDA, _ = MeanStddev(xa)
			row.MeanB, row.SDB, _ = MeanStddev(xb)
			row.DeltaPercent = math.NaN()
			if row.MeanA != 0 && len(xa) > 0 && len(xb) > 0 {
				row.DeltaPercent = 100 * (row.MeanB - row.MeanA) / row.MeanA
			}
			row.Welch = Welch(xa, xb)
			row.Significant = row.Welch.OK && row.Welch.P < Alpha
			c.Rows = append(c.Rows, row)
		}
		if row, ok := gainRow(k, ta, tb); ok {
			c.Rows = append(c.Rows, row)
		}
	}
	for _, k := range kb {
		if !matched[k] {
			c.Warnings = append(c.Warnings, fmt.Sprintf("test %s only in B", k))
		}
	}
	return c
}

func metricTitle(m Metric) string {
	switch m {
	case PrefillTokS:
		return "prefill t/s"
	case DecodeOutputTokS:
		return "decode t/s"
	case Gain:
		return "MTP gain"
	}
	return m.String()
}

func sample(mean, sd float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ± %.2f (n=%d)", mean, sd, n)
}

// deltaText is the Δ column: the change when significant, "~" otherwise
// (like benchstat), "?" when a side has fewer than two samples.
func (r CompareRow) deltaText() string {
	switch {
	case !r.Welch.OK:
		return "?"
	case !r.Significant:
		return "~"
	case math.IsNaN(r.DeltaPercent):
		return "n/a"
	}
	return fmt.Sprintf("%+.2f%%", r.DeltaPercent)
}

func (r CompareRow) pText() string {
	if !r.Welch.OK {
		return "need n≥2"
	}
	return fmt.Sprintf("p=%.3f n=%d+%d", r.Welch.P, len(r.A), len(r.B))
}

// RenderCompare renders a comparison as a markdown table (md) or CSV (csv),
// headed by the two inputs' names in markdown.
func RenderCompare(format string, c Comparison, nameA, nameB string) ([]byte, error) {
	switch format {
	case FormatMD:
		var b bytes.Buffer
		fmt.Fprintf(&b, "A: %s\nB: %s\n\n", nameA, nameB)
		rows := make([][]string, len(c.Rows))
		for i, r := range c.Rows {
			rows[i] = []string{r.Test, metricTitle(r.Metric), sample(r.MeanA, r.SDA, len(r.A)), sample(r.MeanB, r.SDB, len(r.B)), r.deltaText(), r.pText()}
		}
		b.Write(mdTable([]string{"test", "metric", "A", "B", "Δ", "p"}, []bool{false, false, true, true, true, false}, rows))
		fmt.Fprintf(&b, "\nΔ = (B−A)/A, shown when Welch's two-sided t-test gives p < %g; ~ = not significant.\n", Alpha)
		return b.Bytes(), nil
	case FormatCSV:
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		_ = w.Write([]string{"test", "metric", "a_mean", "a_stddev", "a_n", "b_mean", "b_stddev", "b_n", "delta_percent", "p_value", "significant"})
		f := func(v float64) string {
			if math.IsNaN(v) {
				return ""
			}
			return benchfmt.FormatDouble(v)
		}
		for _, r := range c.Rows {
			_ = w.Write([]string{r.Test, r.Metric.String(), f(r.MeanA), f(r.SDA), strconv.Itoa(len(r.A)), f(r.MeanB), f(r.SDB),
				strconv.Itoa(len(r.B)), f(r.DeltaPercent), f(r.Welch.P), strconv.FormatBool(r.Significant)})
		}
		w.Flush()
		return b.Bytes(), w.Error()
	}
	return nil, fmt.Errorf("unknown compare format %q (want md or csv)", format)
}
