// Package progress draws a one-line byte progress bar with rate and ETA on a
// terminal. It is silent when the output is not a terminal, so pipelines and
// CI logs stay clean.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Bar is a byte-count progress bar. It is safe for concurrent Add calls.
type Bar struct {
	mu      sync.Mutex
	w       io.Writer
	label   string
	total   int64
	done    int64
	start   time.Time
	last    time.Time
	enabled bool
	now     func() time.Time
}

// New returns a bar writing to w. It draws only when w is a terminal (or
// force is true).
func New(w io.Writer, label string, total int64, force bool) *Bar {
	enabled := force
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		enabled = true
	}
	now := time.Now
	return &Bar{w: w, label: label, total: total, start: now(), enabled: enabled, now: now}
}

// Add records n more bytes done and redraws at most ten times a second.
func (b *Bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if !b.enabled {
		return
	}
	t := b.now()
	if t.Sub(b.last) < 100*time.Millisecond && b.done < b.total {
		return
	}
	b.last = t
	b.draw(t)
}

// Done returns the bytes recorded so far.
func (b *Bar) Done() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// Finish draws the final state and ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	b.draw(b.now())
	fmt.Fprintln(b.w)
}

func (b *Bar) draw(t time.Time) {
	fmt.Fprintf(b.w, "\r%s", Line(b.label, b.done, b.total, t.Sub(b.start)))
}

// Line formats one progress line: label, bar, bytes, rate and ETA.
func Line(label string, done, total int64, elapsed time.Duration) string {
	const width = 28
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if frac > 1 {
		frac = 1
	}
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	eta := "--"
	if rate > 0 && total >= done {
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
		if total == done {
			eta = elapsed.Round(100 * time.Millisecond).String()
		}
	}
	return fmt.Sprintf("%s [%s] %5.1f%% %s/%s %s/s ETA %s ", label, bar, 100*frac, Bytes(done), Bytes(total), Bytes(int64(rate)), eta)
}

// Bytes formats a byte count with binary units.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
