package recipe

import (
	"os"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// presetTable renders the preset table of docs/PLAN.md.
func presetTable() string {
	var b strings.Builder
	b.WriteString("| class |")
	for _, n := range Names() {
		b.WriteString(" " + n + " |")
	}
	b.WriteString("\n|:--|")
	for range Names() {
		b.WriteString(":--|")
	}
	b.WriteString("\n")
	classes := append(append([]qwen35.Class{}, MatrixClasses...), qwen35.ClassNorm, qwen35.ClassConv, qwen35.ClassControl, qwen35.ClassDraftIDs)
	for _, c := range classes {
		b.WriteString("| " + string(c) + " |")
		for _, n := range Names() {
			r, _ := Lookup(n)
			x := r.Rules[c]
			cell := string(x.Format)
			if x.Fallback != x.Format {
				cell += " → " + string(x.Fallback)
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestDocsPresetTable keeps the preset table in docs/PLAN.md in sync.
func TestDocsPresetTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/PLAN.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := presetTable(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/PLAN.md lacks the current preset table:\n%s", want)
	}
}
