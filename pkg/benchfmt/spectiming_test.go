package benchfmt

import (
	"bytes"
	"strings"
	"testing"
)

// TestSpecTimingRoundTrip: a rep line with spec_timing decodes and encodes
// back to the same bytes; without it the line has no such key.
func TestSpecTimingRoundTrip(t *testing.T) {
	st := SpecTiming{PlainSteps: 64, PlainSeconds: 0.0093, VerifyPassesByWidth: []int64{0, 0, 22},
		VerifySecondsByWidth: []float64{0, 0, 0.0067}, DraftTokens: 42, DraftSeconds: 0.0028, AcceptSeconds: 0.00018}
	sp := Spec{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 22, DraftedTokens: 44, AcceptedTokens: 42, AcceptedPerPosition: []int64{22, 20}}
	rep := NewRep(KindTG, 64, Timings{DecodeSeconds: st.VerifySeconds() + st.DraftSeconds + st.AcceptSeconds}, sp)
	st = st.WithDerived(rep.Speculative, 64, rep.Timings.DecodeSeconds)
	rep.SpecTiming = &st
	line := &RepLine{RunID: "r", Label: "tg64", Kind: KindTG, NGen: 64, RequestedOutputTokens: 65, Rep: rep}
	a := AppendRepLine(nil, line)
	if !strings.Contains(string(a), `"spec_timing":{"plain_steps":64,`) || st.Gain == nil || st.BreakEvenAcceptanceLength == nil {
		t.Fatalf("line %s", a)
	}
	l, err := ParseLine(a)
	if err != nil {
		t.Fatal(err)
	}
	if b := AppendRepLine(nil, l.Rep); !bytes.Equal(a, b) {
		t.Fatalf("round trip:\n%s%s", a, b)
	}
	line.Rep.SpecTiming = nil
	if s := string(AppendRepLine(nil, line)); strings.Contains(s, "spec_timing") {
		t.Fatalf("line without breakdown: %s", s)
	}
	// break-even = (verify/round + k·draft/token + accept/round) / plain step.
	want := (0.0067/22 + 2*0.0028/42 + 0.00018/22) / (0.0093 / 64)
	if d := *st.BreakEvenAcceptanceLength - want; d > 1e-12 || d < -1e-12 {
		t.Fatalf("break-even %v, want %v", *st.BreakEvenAcceptanceLength, want)
	}
}
