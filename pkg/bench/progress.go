package bench

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// progress draws one status line (test, rep, tok/s so far) on a terminal;
// it is silent when the writer is not a terminal, unless forced.
type progress struct {
	w       io.Writer
	enabled bool
	drawn   bool
}

func newProgress(w io.Writer, force bool) *progress {
	if w == nil {
		return &progress{}
	}
	enabled := force
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		enabled = true
	}
	return &progress{w: w, enabled: enabled}
}

// ProgressLine formats the status of a test: its position in the matrix,
// label, the rep being run, and the mean rate of the measured reps so far
// (prefill tok/s for pp tests, decode tok/s otherwise; "-" before the first).
func ProgressLine(testIndex, tests int, label string, rep, reps int, warmup bool, rates []float64) string {
	phase := fmt.Sprintf("rep %d/%d", rep+1, reps)
	if warmup {
		phase = fmt.Sprintf("warmup %d/%d", rep+1, reps)
	}
	rate := "-"
	if len(rates) > 0 {
		var s float64
		for _, r := range rates {
			s += r
		}
		rate = fmt.Sprintf("%.1f", s/float64(len(rates)))
	}
	return fmt.Sprintf("[%d/%d] %s %s  %s tok/s", testIndex+1, tests, label, phase, rate)
}

func (p *progress) show(line string) {
	if !p.enabled {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	p.drawn = true
}

func (p *progress) done() {
	if p.enabled && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
