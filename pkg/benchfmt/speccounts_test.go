package benchfmt

import (
	"bytes"
	"strings"
	"testing"
)

// TestSpecCountsRoundTrip: a rep line with spec_counts (after spec_timing)
// decodes to the same counts and encodes back to the same bytes, with the
// derived members WithDerived computes (null where a divisor is 0); without
// it the line has no such key, and a malformed member is an error.
func TestSpecCountsRoundTrip(t *testing.T) {
	st := SpecTiming{PlainSteps: 8, PlainSeconds: 0.008, VerifyPassesByWidth: []int64{0, 1, 6},
		VerifySecondsByWidth: []float64{0, 0.001, 0.006}, DraftTokens: 11, DraftSeconds: 0.002, AcceptSeconds: 0.0001}
	sp := Spec{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 7, DraftedTokens: 13, AcceptedTokens: 0, AcceptedPerPosition: []int64{0, 0}}
	rep := NewRep(KindTG, 8, Timings{DecodeSeconds: st.VerifySeconds() + st.DraftSeconds + st.AcceptSeconds}, sp)
	st = st.WithDerived(rep.Speculative, 8, rep.Timings.DecodeSeconds)
	sc := SpecCounts{PlainSteps: 8, Plain: OpWork{568, 6733824}, VerifyPassesByWidth: []int64{0, 1, 6},
		VerifyByWidth: []OpWork{{}, {72, 841728}, {432, 5050368}}, DraftTokens: 11, Draft: OpWork{275, 3829760},
		Fallback: OpWork{72, 841728}}
	sc.Decode = sc.Phases()
	sc = sc.WithDerived(rep.Speculative)
	rep.SpecTiming, rep.SpecCounts = &st, &sc
	line := &RepLine{RunID: "r", Label: "tg8", Kind: KindTG, NGen: 8, RequestedOutputTokens: 9, Rep: rep}
	a := AppendRepLine(nil, line)
	s := string(a)
	for _, want := range []string{
		`},"spec_counts":{"plain_steps":8,"plain":{"launches":568,"weight_bytes":6733824},"verify_passes_by_width":[0,1,6],`,
		`"verify_by_width":[{"launches":0,"weight_bytes":0},{"launches":72,"weight_bytes":841728},{"launches":432,"weight_bytes":5050368}]`,
		`"decode":{"launches":851,"weight_bytes":10563584}`,
		`"plain_step":{"launches":71,"weight_bytes":841728}`,
		`"verify_per_pass_by_width":[null,{"launches":72,"weight_bytes":841728},{"launches":72,"weight_bytes":841728}]`,
		`"accept_per_round":{"launches":0,"weight_bytes":0}`,
		`"verify_over_plain_step":{"launches":1.014084507,"weight_bytes":1}}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("line lacks %s:\n%s", want, s)
		}
	}
	l, err := ParseLine(a)
	if err != nil {
		t.Fatal(err)
	}
	got := l.Rep.Rep.SpecCounts
	if got == nil || got.Decode != sc.Decode || got.Draft != sc.Draft || len(got.VerifyByWidth) != 3 || got.VerifyByWidth[2] != sc.VerifyByWidth[2] ||
		got.VerifyPerPassByWidth[0] != nil || *got.PlainStep != *sc.PlainStep {
		t.Fatalf("decoded %+v", got)
	}
	if b := AppendRepLine(nil, l.Rep); !bytes.Equal(a, b) {
		t.Fatalf("round trip:\n%s%s", a, b)
	}

	// No plain steps, no rounds: the derived members are null.
	z := SpecCounts{VerifyPassesByWidth: []int64{0}, VerifyByWidth: []OpWork{{}}}.WithDerived(Spec{})
	line.Rep.SpecCounts = &z
	if s := string(AppendRepLine(nil, line)); !strings.Contains(s, `"plain_step":null,"verify_per_pass_by_width":[null],"verify_per_round":null,"draft_per_token":null,"accept_per_round":null,"verify_over_plain_step":null}`) {
		t.Errorf("zero counts: %s", s)
	} else if l, err := ParseLine([]byte(s)); err != nil || !bytes.Equal(AppendRepLine(nil, l.Rep), []byte(s)) {
		t.Errorf("zero counts round trip: %v", err)
	}

	line.Rep.SpecCounts = nil
	if s := string(AppendRepLine(nil, line)); strings.Contains(s, "spec_counts") {
		t.Fatalf("line without counts: %s", s)
	}

	for _, bad := range []struct{ from, to, msg string }{
		{`"launches":568`, `"launches":5.5`, "spec_counts.plain.launches"},
		{`"verify_by_width":[{"launches":0,"weight_bytes":0},`, `"verify_by_width":[`, "spec_counts.verify_by_width"},
		{`"decode":{"launches":851,"weight_bytes":10563584}`, `"decode":null`, "spec_counts.decode"},
	} {
		broken := strings.Replace(string(a), bad.from, bad.to, 1)
		if _, err := ParseLine([]byte(broken)); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s → %s: error %v, want one naming %s", bad.from, bad.to, err, bad.msg)
		}
	}
}
