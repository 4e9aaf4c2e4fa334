package report

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// Recipe names the weight formats of a run: the recipe name when the
// artifact's file name contains a known one (shakespeare-q8.ninfer → q8),
// else the quantized formats of load.formats (the document does not record
// the recipe itself), e.g. q8_g32_fp16.
func Recipe(d *benchfmt.Document) string {
	stem := strings.TrimSuffix(filepath.Base(d.Artifact.Path), filepath.Ext(d.Artifact.Path))
	// Longest first: groupwise-int before int8-like prefixes.
	known := recipe.Names() // the names ninfer-convert --recipe takes
	sort.Slice(known, func(i, j int) bool { return len(known[i]) > len(known[j]) })
	for _, r := range known {
		if stem == r || strings.HasSuffix(stem, "-"+r) || strings.HasSuffix(stem, "_"+r) {
			return r
		}
	}
	var q []string
	for _, f := range d.Load.Formats {
		switch f {
		case "bf16", "f16", "fp16", "fp32", "f32", "int32":
		default:
			q = append(q, f)
		}
	}
	if len(q) == 0 {
		if len(d.Load.Formats) > 0 {
			return d.Load.Formats[0]
		}
		return "?"
	}
	return strings.Join(q, "+")
}
