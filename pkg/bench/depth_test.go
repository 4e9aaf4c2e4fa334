package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

func TestParseDepthList(t *testing.T) {
	if got, err := ParseDepthList("0,256,1024"); err != nil || len(got) != 3 || got[2] != 1024 {
		t.Errorf("ParseDepthList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "1,-2", "+3", "1,,2"} {
		if _, err := ParseDepthList(bad); err == nil {
			t.Errorf("ParseDepthList(%q): no error", bad)
		}
	}
}

func TestWithDepthsAndContext(t *testing.T) {
	tests := WithDepths(ExpandTests([]int{16}, []int{32}, nil), []int{0, 256})
	var labels []string
	for _, x := range tests {
		labels = append(labels, x.DisplayLabel())
	}
	if got := strings.Join(labels, ","); got != "pp16,pp16 @ d256,tg32,tg32 @ d256" {
		t.Errorf("matrix = %s", got)
	}
	if n := len(WithDepths(ExpandTests([]int{64}, nil, nil), []int{0})); n != 1 {
		t.Errorf("-d 0 changed the matrix: %d tests", n)
	}
	if need := RequiredContext(tests, SpecNone, 0, false); need != (ContextNeed{"tg32 @ d256", 256 + 1 + 32}) {
		t.Errorf("RequiredContext = %+v", need)
	}
	if err := CheckDepthContext(tests, SpecNone, 0, 289); err != nil {
		t.Errorf("fits: %v", err)
	}
	err := CheckDepthContext(tests, SpecNone, 0, 288)
	if err == nil || !strings.Contains(err.Error(), "tg32 @ d256 needs 289 tokens") || !strings.Contains(err.Error(), "--max-ctx 288") {
		t.Errorf("CheckDepthContext = %v", err)
	}
	err = CheckDepthModelContext(tests, SpecNone, 0, 0, 200)
	if de := (DepthContextError{}); err == nil || !errorsAs(err, &de) || !strings.Contains(err.Error(), "max_position_embeddings 200") {
		t.Errorf("CheckDepthModelContext = %v", err)
	}
	if err := CheckCorpus(tests, 270); err == nil || !strings.Contains(err.Error(), "pp16 @ d256 exceeds the token-id corpus") {
		t.Errorf("CheckCorpus = %v", err)
	}
}

func errorsAs(err error, target *DepthContextError) bool {
	de, ok := err.(DepthContextError)
	if ok {
		*target = de
	}
	return ok
}

// A depth run records n_depth, runs the timed test after the untimed
// prefill of the depth, and times only the test.
func TestRunAtDepth(t *testing.T) {
	model := tinyModel(t)
	corpusPath := writeCorpus(t, 64, 512)
	p := testParams(model, corpusPath)
	p.Prompts, p.Gens, p.Pairs = []int{8}, []int{4}, nil
	p.Depths = []int{0, 40}
	var col Collect
	if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if mc := col.Lines[0].Run.Memory.MaxContext; mc != 40+8 {
		t.Errorf("max_context = %d, want 48 (depth 40 + pp8)", mc)
	}
	byDepth := map[int64][]*benchfmt.RepLine{}
	for _, l := range col.Lines {
		if l.Rep != nil {
			byDepth[l.Rep.NDepth] = append(byDepth[l.Rep.NDepth], l.Rep)
		}
	}
	if len(byDepth[0]) != 4 || len(byDepth[40]) != 4 {
		t.Fatalf("reps by depth: %d at 0, %d at 40", len(byDepth[0]), len(byDepth[40]))
	}
	for i, r := range byDepth[40] {
		base := byDepth[0][i]
		if r.Label != base.Label || r.NPrompt != base.NPrompt || r.NGen != base.NGen {
			t.Errorf("depth rep %d is %s, depth-0 rep is %s", i, r.Label, base.Label)
		}
		// Timed tokens exclude the prefill to depth: the same counts as at
		// depth 0, and (fake clock: one tick per reading) the same timings,
		// so no clock reading falls around the untimed prefill.
		if r.Rep.GeneratedOutputTokens != base.Rep.GeneratedOutputTokens || r.Rep.Timings != base.Rep.Timings {
			t.Errorf("%s @ d40: tokens %d timings %+v, at d0 %d %+v", r.Label, r.Rep.GeneratedOutputTokens, r.Rep.Timings,
				base.Rep.GeneratedOutputTokens, base.Rep.Timings)
		}
		line := string(benchfmt.AppendRepLine(nil, r))
		if !strings.Contains(line, `"requested_output_tokens":`) || !strings.Contains(line, `,"n_depth":40,"rep_index":`) {
			t.Errorf("rep line without n_depth: %s", line)
		}
		if strings.Contains(string(benchfmt.AppendRepLine(nil, base)), "n_depth") {
			t.Errorf("depth-0 rep line carries n_depth")
		}
	}
	// The document keeps the depth, and the table shows it.
	runs, err := col.Runs()
	if err != nil {
		t.Fatal(err)
	}
	doc := string(benchfmt.EncodeDocument(&runs[0].Document))
	if strings.Count(doc, `"n_depth": 40`) != 2 {
		t.Errorf("document: want n_depth 40 on two tests:\n%s", doc)
	}
	table, _, err := col.Render(OutputTable)
	if err != nil || !strings.Contains(string(table), "pp8 @ d40") || !strings.Contains(string(table), "tg4 @ d40") {
		t.Errorf("table (%v):\n%s", err, table)
	}
}

// The sequence really holds the depth: after a tg rep at depth D the
// position is D + the seed token + G.
func TestRepFillsDepth(t *testing.T) {
	model := tinyModel(t)
	p := testParams(model, writeCorpus(t, 64, 512))
	tests := WithDepths(ExpandTests(nil, []int{4}, nil), []int{0, 30})
	s, err := open(p, testEnv().withDefaults(), tests)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, x := range tests {
		if _, _, err := s.reps.rep(x); err != nil {
			t.Fatalf("%s: %v", x.DisplayLabel(), err)
		}
		if got, want := s.reps.seq.Pos(), x.NDepth+1+4; got != want {
			t.Errorf("%s: position %d after the rep, want %d", x.DisplayLabel(), got, want)
		}
	}
}
