package report

import (
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// runKey is what a markdown row shows of its run: model, recipe, backend,
// KV cache and speculative setting.
func runKey(d *Run) string {
	doc := &d.Document
	return doc.Load.Name + "\x00" + Recipe(doc) + "\x00" + backendName(doc) + "\x00" + doc.Config.KVCache + "\x00" + specName(&doc.Config)
}

// runLabels returns one label per run (its run id) when two runs would
// otherwise read alike in the markdown table, else nil (no run column).
func runLabels(runs []Run) []string {
	seen := make(map[string]bool, len(runs))
	alike := false
	for i := range runs {
		k := runKey(&runs[i])
		if seen[k] {
			alike = true
			break
		}
		seen[k] = true
	}
	if !alike {
		return nil
	}
	out := make([]string, len(runs))
	for i := range runs {
		out[i] = runs[i].RunID
	}
	return out
}

// escapeCells returns rows with every control character of a cell shown
// as a visible escape (termsafe.Escape): a model name or label with ESC or
// CR must not drive the terminal the table is printed on.
func escapeCells(rows [][]string) [][]string {
	out := rows
	copied := false
	for i, r := range rows {
		for j, c := range r {
			e := termsafe.Escape(c)
			if e == c {
				continue
			}
			if !copied {
				out = make([][]string, len(rows))
				for k := range rows {
					out[k] = append([]string(nil), rows[k]...)
				}
				copied = true
			}
			out[i][j] = e
		}
	}
	return out
}
