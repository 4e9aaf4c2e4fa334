package report

import (
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// TestMeanSDShowsSpreadOnlyWhenMeasured: a table cell over one repetition
// is the mean alone (a single rep measures no spread; "± 0.00" would claim
// one), over two or more it is mean ± sample stddev.
func TestMeanSDShowsSpreadOnlyWhenMeasured(t *testing.T) {
	m, sd, zero := 12.345, 0.5, 0.0
	cases := []struct {
		s    benchfmt.Stat
		reps int
		want string
	}{
		{benchfmt.Stat{Mean: &m, Stddev: &zero}, 1, "12.35"},
		{benchfmt.Stat{Mean: &m}, 1, "12.35"},
		{benchfmt.Stat{Mean: &m, Stddev: &sd}, 3, "12.35 ± 0.50"},
		{benchfmt.Stat{Mean: &m, Stddev: &zero}, 2, "12.35 ± 0.00"},
		{benchfmt.Stat{}, 3, "-"},
	}
	for _, c := range cases {
		if got := meanSD(c.s, c.reps); got != c.want {
			t.Errorf("meanSD(%v reps) = %q, want %q", c.reps, got, c.want)
		}
	}
}
