package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"},
	}
	for _, c := range cases {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestLine(t *testing.T) {
	got := Line("convert", 50<<20, 100<<20, 2*time.Second)
	for _, want := range []string{"convert", "50.0%", "50.0 MiB/100.0 MiB", "25.0 MiB/s", "ETA 2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("Line() = %q, missing %q", got, want)
		}
	}
}

func TestSilentWhenNotTerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "x", 10, false)
	b.Add(5)
	b.Add(5)
	b.Finish()
	if buf.Len() != 0 {
		t.Fatalf("bar wrote %q to a non-terminal", buf.String())
	}
	if b.Done() != 10 {
		t.Fatalf("Done() = %d, want 10", b.Done())
	}
	forced := New(&buf, "x", 10, true)
	forced.Add(10)
	forced.Finish()
	if !strings.Contains(buf.String(), "100.0%") {
		t.Fatalf("forced bar output %q lacks 100%%", buf.String())
	}
}
