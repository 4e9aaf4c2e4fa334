package report

import (
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// badTimings describes the timings of a rep of the given kind that the
// series cannot use, or "" when they are fine: a rate series skips a rep
// whose prefill (pp, pp+tg) or decode (tg, pp+tg) seconds are zero or
// negative, and no time is ever negative. The caller warns, naming the
// line, so that a rep is never dropped from a mean without a word.
func badTimings(kind string, tm benchfmt.Timings) string {
	var bad []string
	add := func(name string, v float64, needPositive bool) {
		if v < 0 || needPositive && v == 0 {
			bad = append(bad, fmt.Sprintf("%s %s", name, benchfmt.FormatDouble(v)))
		}
	}
	add("prepare_seconds", tm.PrepareSeconds, false)
	add("prefill_seconds", tm.PrefillSeconds, benchfmt.HasPrefill(kind))
	add("decode_seconds", tm.DecodeSeconds, benchfmt.HasDecode(kind))
	add("total_seconds", tm.TotalSeconds, false)
	if len(bad) == 0 {
		return ""
	}
	return strings.Join(bad, ", ") + " (left out of the tok/s means)"
}

// documentTimingWarnings warns about the reps of a document (file name)
// whose timings badTimings rejects, naming the test and rep.
func documentTimingWarnings(file string, d *benchfmt.Document) []string {
	var out []string
	for ti := range d.Tests {
		t := &d.Tests[ti]
		for ri := range t.Reps {
			if w := badTimings(t.Kind, t.Reps[ri].Timings); w != "" {
				out = append(out, fmt.Sprintf("%s: test %d (%s) rep %d has %s", shown(file), ti, shown(t.Label), ri, w))
			}
		}
	}
	return out
}

// repFingerprint identifies a run by its command and every rep's timings
// (printed at %.10g, so a document and the lines it was made from agree
// to the bit): two distinct measurements never share it.
func repFingerprint(d *benchfmt.Document) string {
	var b strings.Builder
	b.WriteString(d.Command)
	n := 0
	for ti := range d.Tests {
		t := &d.Tests[ti]
		fmt.Fprintf(&b, "\x00%s", t.Label)
		for _, r := range t.Reps {
			tm := r.Timings
			fmt.Fprintf(&b, "|%g,%g,%g,%g,%g", tm.PrepareSeconds, tm.VisionSeconds, tm.PrefillSeconds, tm.DecodeSeconds, tm.TotalSeconds)
			n++
		}
	}
	if n == 0 {
		return "" // nothing measured: nothing to count twice
	}
	return b.String()
}

// duplicateRunWarnings warns about every run whose reps repeat those of an
// earlier run (a document given together with the lines it was made from,
// or one stream copied under another run id): tables would show the same
// measurement twice, as if it were two runs.
func duplicateRunWarnings(runs []Run) []string {
	var out []string
	first := map[string]int{}
	for i := range runs {
		fp := repFingerprint(&runs[i].Document)
		if fp == "" {
			continue
		}
		j, dup := first[fp]
		if !dup {
			first[fp] = i
			continue
		}
		out = append(out, fmt.Sprintf("run %s (%s) has the same command and rep timings as run %s (%s): the same run given twice "+
			"(a document and the lines it was made from?); it is counted twice",
			shown(runs[i].RunID), shown(runs[i].Source), shown(runs[j].RunID), shown(runs[j].Source)))
	}
	return out
}
