package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
)

// TestSpecCountsCUDA: on the CUDA backend (the host SIMT harness with
// -tags cudasim, a GPU with -tags cuda) every decoding rep of a --spec mtp
// run carries spec_counts: ops queued in every phase, verify + draft +
// accept + fallback equal to the decode phase read at its two ends, and a
// verify pass of any width reading exactly the weight bytes of a plain
// step (the target's matrices once per pass, the logits head included:
// the MTP head is read by the drafts only). Graph replays count the ops
// they were captured from, so the eager run counts the same.
func TestSpecCountsCUDA(t *testing.T) {
	if !backend.CUDABuilt {
		t.Skip("this test binary has no CUDA backend (go test -tags cudasim, or -tags cuda on a GPU machine)")
	}
	corpus := writeCorpus(t, 64, 512)
	var byPath [2][]benchfmt.SpecCounts
	for i, noGraph := range []bool{false, true} {
		p := testParams(tinyModel(t), corpus)
		p.Backend, p.Threads = "cuda", 0
		p.Prompts, p.Gens, p.Pairs, p.Repetitions, p.Warmup = nil, []int{8}, nil, 1, 0
		p.Spec, p.DraftTokens, p.NoCUDAGraph = SpecMTP, 2, noGraph
		var col Collect
		if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
			t.Fatal(err)
		}
		for _, l := range col.Lines {
			if l.Rep == nil {
				continue
			}
			r := l.Rep.Rep
			c := r.SpecCounts
			if c == nil {
				t.Fatalf("no_cuda_graph %v: %s: no spec_counts", noGraph, l.Rep.Label)
			}
			byPath[i] = append(byPath[i], *c)
			sp := r.Speculative
			if c.PlainSteps != int64(min(l.Rep.NGen, PlainProbeSteps)) || c.Plain.Launches <= 0 || c.Plain.WeightBytes <= 0 {
				t.Errorf("no_cuda_graph %v: plain probe %d steps, %+v", noGraph, c.PlainSteps, c.Plain)
			}
			if ph := c.Phases(); ph != c.Decode || c.Decode.Launches <= 0 {
				t.Errorf("no_cuda_graph %v: verify %+v + draft %+v + accept %+v + fallback %+v = %+v, decode %+v",
					noGraph, c.Verify(), c.Draft, c.Accept, c.Fallback, ph, c.Decode)
			}
			if c.Draft.Launches <= 0 || c.DraftTokens != r.SpecTiming.DraftTokens || (sp.FallbackSteps == 0) != (c.Fallback == benchfmt.OpWork{}) {
				t.Errorf("no_cuda_graph %v: draft %+v (%d tokens), fallback %+v; spec %+v", noGraph, c.Draft, c.DraftTokens, c.Fallback, sp)
			}
			passes := int64(0)
			for w, n := range c.VerifyPassesByWidth {
				passes += n
				v := c.VerifyByWidth[w]
				if n == 0 {
					if v != (benchfmt.OpWork{}) {
						t.Errorf("no_cuda_graph %v: width %d: no passes, %+v", noGraph, w+1, v)
					}
					continue
				}
				// weight bytes per pass = a plain step's, exactly.
				if v.Launches <= 0 || v.WeightBytes*c.PlainSteps != c.Plain.WeightBytes*n {
					t.Errorf("no_cuda_graph %v: width %d: %d passes %+v; plain %d steps %+v", noGraph, w+1, n, v, c.PlainSteps, c.Plain)
				}
			}
			if passes != sp.Rounds || passes == 0 {
				t.Errorf("no_cuda_graph %v: %d verify passes, %d rounds", noGraph, passes, sp.Rounds)
			}
			if o := c.VerifyOverPlainStep; o == nil || o.WeightBytes != 1 || o.Launches <= 0 {
				t.Errorf("no_cuda_graph %v: verify_over_plain_step %+v", noGraph, o)
			}
			line := string(benchfmt.AppendRepLine(nil, l.Rep))
			if !strings.Contains(line, `"spec_counts":{"plain_steps":`) {
				t.Errorf("rep line: %s", line)
			}
			t.Logf("no_cuda_graph %v: %s", noGraph, line[strings.Index(line, `"spec_counts"`):])
		}
		if noGraph {
			continue
		}
		// The document's reps keep their spec_counts; report.Check
		// recomputes the derived members and the phase sum.
		doc := checkedDocument(t, &col)
		c := doc.Tests[0].Reps[0].SpecCounts
		if c == nil {
			t.Fatalf("document rep without spec_counts")
		}
		c.VerifyOverPlainStep.WeightBytes *= 2
		c.Decode.Launches++
		if chk := report.Check(&doc); len(chk.Mismatches) != 2 || !strings.Contains(chk.Mismatches[0].Path, "reps[0].spec_counts.decode.launches") ||
			!strings.Contains(chk.Mismatches[1].Path, "reps[0].spec_counts.verify_over_plain_step.weight_bytes") {
			t.Errorf("tampered counts: %v", chk.Mismatches)
		}
	}
	if len(byPath[0]) != len(byPath[1]) {
		t.Fatalf("%d graph reps, %d eager reps", len(byPath[0]), len(byPath[1]))
	}
	for i := range byPath[0] {
		g, e := byPath[0][i], byPath[1][i]
		if g.Plain != e.Plain || g.Decode != e.Decode || g.Draft != e.Draft || g.Accept != e.Accept {
			t.Errorf("rep %d: graph counts %+v, eager %+v", i, g, e)
		}
	}
}

// TestSpecCountsCPU: the CPU backend counts nothing, so its --spec mtp reps
// have spec_timing and no spec_counts.
func TestSpecCountsCPU(t *testing.T) {
	p := testParams(tinyModel(t), writeCorpus(t, 64, 512))
	p.Prompts, p.Gens, p.Pairs, p.Repetitions, p.Warmup = nil, []int{8}, nil, 1, 0
	p.Spec, p.DraftTokens = SpecMTP, 2
	var col Collect
	if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
		t.Fatal(err)
	}
	for _, l := range col.Lines {
		if l.Rep == nil {
			continue
		}
		if l.Rep.Rep.SpecTiming == nil || l.Rep.Rep.SpecCounts != nil || strings.Contains(string(benchfmt.AppendRepLine(nil, l.Rep)), "spec_counts") {
			t.Errorf("%s: spec_timing %v, spec_counts %+v", l.Rep.Label, l.Rep.Rep.SpecTiming != nil, l.Rep.Rep.SpecCounts)
		}
	}
}
