package report

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// Recipe names the weight formats of a run: the recipe name when the
// artifact's file name contains a known one (shakespeare-q8.ninfer → q8),
// else the quantized formats of load.formats (the document does not record
// the recipe itself), e.g. q8_g32_fp16.
func Recipe(d *benchfmt.Document) string {
	stem := strings.TrimSuffix(filepath.Base(d.Artifact.Path), filepath.Ext(d.Artifact.Path))
	// Longest first: groupwise-int before int8-like prefixes.
	known := append([]string(nil), knownRecipes...)
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

// knownRecipes are the names ninfer-convert --recipe takes (pkg/recipe;
// listed here so that the report does not link the converter's tables).
var knownRecipes = []string{"groupwise-int", "q8", "q4", "q5", "fp8", "nvfp4", "bf16", "fp32", "native", "nativeq8"}
