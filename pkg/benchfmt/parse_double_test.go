package benchfmt

import (
	"math"
	"testing"
)

// TestParseDoubleMaxRoundTrip: FormatDouble(±MaxFloat64) is
// "±1.797693135e+308", above the range after rounding to 10 digits; the
// reader takes it back as ±MaxFloat64 and still refuses larger numbers.
func TestParseDoubleMaxRoundTrip(t *testing.T) {
	for _, v := range []float64{math.MaxFloat64, -math.MaxFloat64} {
		s := FormatDouble(v)
		got, err := parseDouble(s)
		if err != nil || got != v {
			t.Errorf("parseDouble(%s) = %v, %v; want %v", s, got, err, v)
		}
	}
	for _, s := range []string{"1.797693136e+308", "2e308", "-1e309"} {
		if _, err := parseDouble(s); err == nil {
			t.Errorf("parseDouble(%s) accepted", s)
		}
	}
	if got, err := parseDouble("1.5"); err != nil || got != 1.5 {
		t.Errorf("parseDouble(1.5) = %v, %v", got, err)
	}
}
