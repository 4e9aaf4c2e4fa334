package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// --lm-head-draft on an artifact without a proposal head: ninfer-run and
// ninfer-bench refuse it (exit 1) when they load the MTP head; ninfer-plan
// used to plan it as if the head were there. Now it refuses it too.
func TestLMHeadDraftNeedsAProposalHead(t *testing.T) {
	c := tinyConfig()
	r, _ := recipe.Lookup("groupwise-int")
	as, err := r.Assign(c.Tensors()) // no recipe.ProposalTensors
	if err != nil {
		t.Fatal(err)
	}
	p := artifact.NewPlan(artifact.Meta{Name: "tiny", Config: c})
	for _, a := range as {
		if err := p.AddTensor(a.Tensor.Name, a.Tensor.Component, a.Format, a.Tensor.Shape); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "nodraft.ninfer")
	if err := artifact.WriteSparse(path, p); err != nil {
		t.Fatal(err)
	}
	args := []string{"--weights", path, "--available", "2GiB", "--max-ctx", "4096", "--spec", "mtp", "--draft-tokens", "2", "--json"}
	if code, _, errs := runCmd(args...); code != 0 {
		t.Fatalf("--spec mtp without --lm-head-draft: exit %d: %s", code, errs)
	}
	code, out, errs := runCmd(append(args, "--lm-head-draft")...)
	want := "ninfer-plan: " + path + ": proposal head (--lm-head-draft) needs " + qwen35.NameDraftHead + " (convert with --draft-head N), but the weights have none\n"
	if code != 1 || out != "" || errs != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, want)
	}
	if !strings.Contains(errs, "--lm-head-draft") {
		t.Fatal("the message does not name the flag")
	}
}
