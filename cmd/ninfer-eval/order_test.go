package main

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// The KL divergence from the fp32 model grows as the recipe keeps fewer
// bits: fp32 (0) < bf16 < q8 < groupwise-int (4–6-bit groups), on the same
// tiny model and corpus.
func TestKLOrderedByPrecision(t *testing.T) {
	recipes := []string{"fp32", "bf16", "q8", "groupwise-int"}
	args := []string{}
	for _, r := range recipes {
		args = append(args, "--weights", testfixture.Artifact(t, r, nil))
	}
	fp32 := testfixture.Artifact(t, "fp32", nil)
	o := runCmd(t, context.Background(), base(append(args, "--reference", fp32, "--corpus", ids(t, 200), "--format", "json")...)...)
	if o.code != 0 {
		t.Fatalf("%+v", o)
	}
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	if len(lines) != len(recipes) {
		t.Fatalf("want %d JSON lines: %q", len(recipes), o.stdout)
	}
	prev := -1.0
	for i, l := range lines {
		kl := gjson.Get(l, "kl.mean").Float()
		if i == 0 && kl != 0 {
			t.Errorf("fp32 against itself: KL %g, want 0", kl)
		}
		if !(kl > prev) {
			t.Errorf("%s: mean KL %g, not above %s's %g", recipes[i], kl, recipes[max(i-1, 0)], prev)
		}
		prev = kl
		t.Logf("%s: mean KL %g", recipes[i], kl)
	}
}
