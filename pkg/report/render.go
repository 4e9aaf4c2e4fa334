package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// Output formats of ninfer-report.
const (
	FormatJSON = "json"
	FormatMD   = "md"
	FormatCSV  = "csv"
)

// RenderJSON returns the schema-15 document of the single run. Several runs
// are an error (the document format holds one run; select one by id).
func RenderJSON(runs []Run) ([]byte, error) {
	switch len(runs) {
	case 0:
		return nil, fmt.Errorf("the input holds no run")
	case 1:
		return benchfmt.EncodeDocument(&runs[0].Document), nil
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	return nil, fmt.Errorf("the input holds %d runs (%s); pick one with --run ID, or use --format md or csv to show all",
		len(runs), strings.Join(ids, ", "))
}

func backendName(d *benchfmt.Document) string {
	if b := d.Environment.Backend; b != nil && *b != "" {
		return *b
	}
	if d.Environment.GPUName != nil {
		return "cuda"
	}
	return "?"
}

// backendCell is the markdown table's backend column: the backend with the
// CPU instruction set level the run recorded (environment.isa), e.g.
// "cpu/avx2"; the backend alone where none was recorded.
func backendCell(d *benchfmt.Document) string {
	name := backendName(d)
	for _, f := range d.Environment.Extra {
		var isa string
		if f.Key == "isa" && json.Unmarshal([]byte(f.JSON), &isa) == nil && isa != "" {
			return name + "/" + isa
		}
	}
	return name
}

func specName(c *benchfmt.Config) string {
	if c.SpeculativeBackend == "" || c.SpeculativeBackend == "none" {
		return "none"
	}
	s := fmt.Sprintf("%s k=%d", c.SpeculativeBackend, c.DraftTokens)
	if c.ProposalHead != "" && c.ProposalHead != "full" {
		s += " " + c.ProposalHead + "-head"
	}
	return s
}

// meanSD is "mean ± stddev" over reps repetitions, or the mean alone when
// fewer than two were measured (no spread was measured: "± 0.00" would
// claim one).
func meanSD(s benchfmt.Stat, reps int) string {
	if s.Mean == nil {
		return "-"
	}
	if reps < 2 || s.Stddev == nil {
		return fmt.Sprintf("%.2f", *s.Mean)
	}
	return fmt.Sprintf("%.2f ± %.2f", *s.Mean, *s.Stddev)
}

func acceptText(s benchfmt.Spec) string {
	if s.AcceptanceRate == nil {
		return "-"
	}
	out := fmt.Sprintf("%.1f%%", 100**s.AcceptanceRate)
	if s.AcceptanceLength != nil {
		out += fmt.Sprintf(" len %.2f", *s.AcceptanceLength)
	}
	return out
}

// mdTable renders a markdown table with padded columns; right[i] aligns
// column i to the right.
func mdTable(header []string, right []bool, rows [][]string) []byte {
	rows = escapeCells(rows) // names and labels from the input reach a terminal
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b bytes.Buffer
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			c = strings.ReplaceAll(c, "|", `\|`)
			if right[i] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		b.WriteString("\n")
	}
	line(header)
	b.WriteString("|")
	for i := range header {
		if right[i] {
			b.WriteString(" " + strings.Repeat("-", width[i]-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	return b.Bytes()
}

// RenderMarkdown renders all runs as one llama-bench style table: one row
// per test (pp+tg tests get a prefill row and a decode row), t/s as mean ±
// sample stddev of the per-rep rates, accept as the test-level acceptance
// rate and length.
func RenderMarkdown(runs []Run) []byte {
	header := []string{"model", "recipe", "backend", "kv", "spec", "test", "t/s", "accept"}
	right := []bool{false, false, false, false, false, true, true, true}
	runLabel := runLabels(runs) // a run column only where runs would read alike
	if runLabel != nil {
		header = append(header[:1], append([]string{"run"}, header[1:]...)...)
		right = append([]bool{false}, right...)
	}
	gain := hasSpecTiming(runs) // a gain column (and notes) only with an MTP breakdown
	if gain {
		header, right = append(header, "gain"), append(right, true)
	}
	var rows [][]string
	for i := range runs {
		d := &runs[i].Document
		base := []string{d.Load.Name, Recipe(d), backendCell(d), d.Config.KVCache, specName(&d.Config)}
		if runLabel != nil {
			base = append(base[:1], append([]string{runLabel[i]}, base[1:]...)...)
		}
		var g string
		row := func(test, ts, acc string) {
			rows = append(rows, append(append([]string{}, base...), test, ts, acc))
			if gain {
				rows[len(rows)-1] = append(rows[len(rows)-1], g)
			}
		}
		for _, t := range d.Tests {
			g = gainText(t.SpecTiming)
			label := benchfmt.DisplayLabel(t.Label, t.NDepth) // "tg128 @ d4096" at a depth
			switch t.Kind {
			case benchfmt.KindPP:
				row(label, meanSD(t.PrefillTokS, len(t.Reps)), "-")
			case benchfmt.KindTG:
				row(label, meanSD(t.DecodeOutputTokS, len(t.Reps)), acceptText(t.Speculative))
			default:
				pg := g
				g = "-"
				row(t.Label+" (pp)"+strings.TrimPrefix(label, t.Label), meanSD(t.PrefillTokS, len(t.Reps)), "-")
				g = pg
				row(t.Label+" (tg)"+strings.TrimPrefix(label, t.Label), meanSD(t.DecodeOutputTokS, len(t.Reps)), acceptText(t.Speculative))
			}
		}
	}
	out := mdTable(header, right, rows)
	if gain {
		out = append(out, "\ngain = plain step time × decode tokens / MTP decode time (plain steps measured in the same run, same context).\n\n"...)
		for _, n := range specTimingNotes(runs) {
			out = append(out, "- "+n+"\n"...)
		}
	}
	return out
}

func optCell(v *float64) string {
	if v == nil {
		return ""
	}
	return benchfmt.FormatDouble(*v)
}

func strCell(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}

// RenderCSV renders one row per test of every run with all aggregates
// (null → empty cell, doubles at %.10g).
func RenderCSV(runs []Run) ([]byte, error) {
	header := []string{"run_id", "model", "backend", "gpu_name", "kv_cache", "speculative_backend", "draft_tokens",
		"proposal_head", "use_cuda_graph", "label", "kind", "n_prompt", "n_gen", "reps"}
	for _, m := range Metrics() {
		header = append(header, m.String()+"_mean", m.String()+"_stddev")
	}
	header = append(header, "workspace_peak_bytes", "workspace_allocator_peak_bytes", "rounds", "drafted_tokens",
		"accepted_tokens", "fallback_steps", "acceptance_rate", "acceptance_length", "n_depth")
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(header); err != nil {
		return nil, err
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	for ri := range runs {
		d := &runs[ri].Document
		for ti := range d.Tests {
			t := &d.Tests[ti]
			rec := []string{runs[ri].RunID, d.Load.Name, backendName(d), strCell(d.Environment.GPUName), d.Config.KVCache,
				d.Config.SpeculativeBackend, i64(d.Config.DraftTokens), d.Config.ProposalHead, strconv.FormatBool(d.Config.UseCUDAGraph),
				t.Label, t.Kind, i64(t.NPrompt), i64(t.NGen), strconv.Itoa(len(t.Reps))}
			for _, m := range Metrics() {
				s := statField(t, m)
				rec = append(rec, optCell(s.Mean), optCell(s.Stddev))
			}
			s := t.Speculative
			rec = append(rec, i64(t.WorkspacePeakBytes), i64(t.WorkspaceAllocatorPeakBytes), i64(s.Rounds), i64(s.DraftedTokens),
				i64(s.AcceptedTokens), i64(s.FallbackSteps), optCell(s.AcceptanceRate), optCell(s.AcceptanceLength), i64(t.NDepth))
			if err := w.Write(rec); err != nil {
				return nil, err
			}
		}
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// Render renders runs in the given format (json, md or csv).
func Render(format string, runs []Run) ([]byte, error) {
	switch format {
	case FormatJSON:
		return RenderJSON(runs)
	case FormatMD:
		return RenderMarkdown(runs), nil
	case FormatCSV:
		return RenderCSV(runs)
	}
	return nil, fmt.Errorf("unknown format %q (want json, md or csv)", format)
}
