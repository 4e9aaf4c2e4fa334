package benchfmt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// HasPrefill reports whether tests of kind measure a prompt prefill.
func HasPrefill(kind string) bool { return kind == KindPP || kind == KindPPTG }

// HasDecode reports whether tests of kind decode G tokens.
func HasDecode(kind string) bool { return kind == KindTG || kind == KindPPTG }

// ValidKind reports whether kind is one of pp, tg, pp+tg.
func ValidKind(kind string) bool { return kind == KindPP || kind == KindTG || kind == KindPPTG }

// Label returns the reference test label: pp{P}, tg{G} or pp{P}+tg{G}.
func Label(kind string, nPrompt, nGen int64) string {
	switch kind {
	case KindPP:
		return fmt.Sprintf("pp%d", nPrompt)
	case KindTG:
		return fmt.Sprintf("tg%d", nGen)
	default:
		return fmt.Sprintf("pp%d+tg%d", nPrompt, nGen)
	}
}

// ParseLabel is the inverse of Label. tg tests have n_prompt 0, pp tests
// n_gen 0.
func ParseLabel(label string) (kind string, nPrompt, nGen int64, err error) {
	num := func(s, prefix string) (int64, error) {
		if !strings.HasPrefix(s, prefix) {
			return 0, fmt.Errorf("test label %s: want pp<P>, tg<G> or pp<P>+tg<G>", termsafe.Quote(label))
		}
		v, err := strconv.ParseInt(s[len(prefix):], 10, 64)
		if err != nil || v <= 0 {
			return 0, fmt.Errorf("test label %s: want pp<P>, tg<G> or pp<P>+tg<G> with positive counts", termsafe.Quote(label))
		}
		return v, nil
	}
	if p, g, ok := strings.Cut(label, "+"); ok {
		if nPrompt, err = num(p, "pp"); err != nil {
			return "", 0, 0, err
		}
		if nGen, err = num(g, "tg"); err != nil {
			return "", 0, 0, err
		}
		return KindPPTG, nPrompt, nGen, nil
	}
	if strings.HasPrefix(label, "tg") {
		nGen, err = num(label, "tg")
		return KindTG, 0, nGen, err
	}
	nPrompt, err = num(label, "pp")
	return KindPP, nPrompt, 0, err
}

// RequestedOutputTokens is G+1 for decoding tests and 1 for pp tests (the
// extra token is the begin round's token, timed inside prefill).
func RequestedOutputTokens(kind string, nGen int64) int64 {
	if HasDecode(kind) {
		return nGen + 1
	}
	return 1
}

// SpecNone is the speculative block of a run without a backend.
func SpecNone() Spec {
	return Spec{Backend: "none", AcceptedPerPosition: []int64{}}
}

// AcceptanceRate is accepted/drafted, nil when drafted is 0.
func AcceptanceRate(accepted, drafted int64) *float64 {
	if drafted == 0 {
		return nil
	}
	v := float64(accepted) / float64(drafted)
	return &v
}

// AcceptanceLength is 1 + accepted/rounds, nil when rounds is 0.
func AcceptanceLength(accepted, rounds int64) *float64 {
	if rounds == 0 {
		return nil
	}
	v := 1 + float64(accepted)/float64(rounds)
	return &v
}

// WithDerived returns s with AcceptanceRate and AcceptanceLength computed
// from its counters, and a non-nil AcceptedPerPosition.
func (s Spec) WithDerived() Spec {
	s.AcceptanceRate = AcceptanceRate(s.AcceptedTokens, s.DraftedTokens)
	s.AcceptanceLength = AcceptanceLength(s.AcceptedTokens, s.Rounds)
	if s.AcceptedPerPosition == nil {
		s.AcceptedPerPosition = []int64{}
	}
	return s
}

// EngineTokens is the decode tokens the engine committed: G without
// speculation, else rounds + accepted + fallback steps.
func (s Spec) EngineTokens(nGen int64) int64 {
	if !s.Enabled {
		return nGen
	}
	return s.Rounds + s.AcceptedTokens + s.FallbackSteps
}

// NewRep builds a rep the way the reference does: generated = requested,
// decode_output_tokens = G and decode_engine_tokens = spec.EngineTokens(G)
// for decoding tests (null for pp), and the spec's derived ratios filled in.
func NewRep(kind string, nGen int64, t Timings, spec Spec) Rep {
	r := Rep{
		GeneratedOutputTokens: RequestedOutputTokens(kind, nGen),
		Timings:               t,
		Speculative:           spec.WithDerived(),
	}
	if HasDecode(kind) {
		out, eng := nGen, spec.EngineTokens(nGen)
		r.DecodeOutputTokens, r.DecodeEngineTokens = &out, &eng
	}
	return r
}

// Ptr returns a pointer to v (for the nullable fields).
func Ptr[T any](v T) *T { return &v }
