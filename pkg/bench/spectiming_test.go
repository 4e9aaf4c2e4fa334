package bench

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
)

// TestSpecTiming: on the tiny model, every decoding rep of a --spec mtp
// run carries spec_timing whose verify + draft + accept + fallback add up
// to its decode_seconds (the decoder's lap timer: equal up to float
// rounding of the seconds), with the plain probe's steps and the counts of
// the SPEC block; pp reps and runs without speculation carry none, and the
// document, its check and the md table follow.
func TestSpecTiming(t *testing.T) {
	model := tinyModel(t)
	p := testParams(model, writeCorpus(t, 64, 512))
	p.Gens = []int{20}
	p.Spec, p.DraftTokens = SpecMTP, 2
	var col Collect
	if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
		t.Fatalf("Run --spec mtp: %v", err)
	}
	reps := 0
	for _, l := range col.Lines {
		r := l.Rep
		if r == nil {
			continue
		}
		st := r.Rep.SpecTiming
		if r.Kind == benchfmt.KindPP {
			if st != nil {
				t.Errorf("%s: pp rep has spec_timing %+v", r.Label, st)
			}
			continue
		}
		reps++
		if st == nil {
			t.Fatalf("%s: no spec_timing", r.Label)
		}
		sp := r.Rep.Speculative
		sum := st.VerifySeconds() + st.DraftSeconds + st.AcceptSeconds + st.FallbackSeconds
		if dec := r.Rep.Timings.DecodeSeconds; math.Abs(sum-dec) > 1e-9 || dec <= 0 {
			t.Errorf("%s: verify %g + draft %g + accept %g + fallback %g = %g, decode_seconds %g",
				r.Label, st.VerifySeconds(), st.DraftSeconds, st.AcceptSeconds, st.FallbackSeconds, sum, dec)
		}
		passes := int64(0)
		for _, n := range st.VerifyPassesByWidth {
			passes += n
		}
		if len(st.VerifyPassesByWidth) != 3 || st.VerifyPassesByWidth[0] != 0 || passes != sp.Rounds {
			t.Errorf("%s: verify passes %v, rounds %d", r.Label, st.VerifyPassesByWidth, sp.Rounds)
		}
		if st.PlainSteps != int64(min(r.NGen, PlainProbeSteps)) || st.PlainSeconds <= 0 || st.DraftTokens > sp.DraftedTokens ||
			st.DraftTokens < sp.DraftedTokens-2 || (sp.FallbackSteps == 0) != (st.FallbackSeconds == 0) {
			t.Errorf("%s: spec_timing %+v, spec %+v", r.Label, st, sp)
		}
		if st.Gain == nil || st.BreakEvenAcceptanceLength == nil || *st.Gain <= 0 || *st.BreakEvenAcceptanceLength <= 0 {
			t.Errorf("%s: gain %v, break-even %v", r.Label, st.Gain, st.BreakEvenAcceptanceLength)
		}
		line := string(benchfmt.AppendRepLine(nil, r))
		if !strings.Contains(line, `"accepted_per_position":[`) || !strings.Contains(line, `]},"spec_timing":{"plain_steps":`) {
			t.Errorf("rep line: %s", line)
		}
	}
	if reps != 2*p.Repetitions {
		t.Fatalf("%d decoding reps", reps)
	}
	doc := checkedDocument(t, &col)
	for _, tt := range doc.Tests {
		if (tt.SpecTiming != nil) != benchfmt.HasDecode(tt.Kind) {
			t.Errorf("test %s: spec_timing %+v", tt.Label, tt.SpecTiming)
		}
	}
	// A tampered breakdown is a check mismatch.
	*doc.Tests[1].Reps[0].SpecTiming.Gain *= 2
	if chk := report.Check(&doc); len(chk.Mismatches) != 1 || !strings.Contains(chk.Mismatches[0].Path, "reps[0].spec_timing.gain") {
		t.Errorf("tampered gain: %v", chk.Mismatches)
	}
	md, _, err := col.Render(OutputTable)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(md); !strings.Contains(s, " gain |") || !strings.Contains(s, "MTP loses below acceptance length") {
		t.Errorf("md:\n%s", s)
	}

	// Without speculation: no spec_timing anywhere, no gain column.
	p.Spec, p.DraftTokens = SpecNone, 0
	var plain Collect
	if _, err := Run(context.Background(), p, testEnv(), &plain); err != nil {
		t.Fatal(err)
	}
	for _, l := range plain.Lines {
		if l.Rep != nil && (l.Rep.Rep.SpecTiming != nil || strings.Contains(string(benchfmt.AppendRepLine(nil, l.Rep)), "spec_timing")) {
			t.Errorf("plain rep has spec_timing: %+v", l.Rep.Rep.SpecTiming)
		}
	}
	md, _, err = plain.Render(OutputTable)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(md), "gain") {
		t.Errorf("plain md has a gain column:\n%s", md)
	}
}

// checkedDocument renders col's lines as the schema-15 document, decodes
// it and fails t unless report.Check finds it consistent.
func checkedDocument(t *testing.T, col *Collect) benchfmt.Document {
	t.Helper()
	out, _, err := col.Render(OutputJSON)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := benchfmt.DecodeDocument(out)
	if err != nil {
		t.Fatal(err)
	}
	if chk := report.Check(&doc); len(chk.Mismatches) != 0 {
		t.Errorf("report.Check: %v", chk.Mismatches)
	}
	return doc
}
