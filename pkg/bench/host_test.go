package bench

import (
	"strings"
	"testing"
)

func TestParseCPUName(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: avx2\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := parseCPUName([]byte(info)); got != "AMD EPYC 7B13 64-Core Processor" {
		t.Errorf("got %q", got)
	}
	if got := parseCPUName([]byte("processor : 0\n")); got != "" {
		t.Errorf("no model name: got %q", got)
	}
}

func TestParseMemAvailable(t *testing.T) {
	cases := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"MemTotal:       16303540 kB\nMemFree:         1000 kB\nMemAvailable:   12345678 kB\n", 12345678 << 10, ""},
		{"MemTotal: 1 kB\n", 0, "no MemAvailable line"},
		{"MemAvailable: 12 MB\n", 0, "malformed MemAvailable"},
		{"MemAvailable: x kB\n", 0, "malformed MemAvailable"},
	}
	for _, c := range cases {
		got, err := parseMemAvailable(strings.NewReader(c.in))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(0)
	nan = nan / nan
	for _, c := range []struct {
		x    []float32
		want int32
	}{
		{[]float32{0.5, -1, 3, 2}, 2},
		{[]float32{-3, -2, -2.5}, 1},
		{[]float32{1, 1, 0}, 0}, // first of equal maxima
		{[]float32{nan, 0.25, nan, 0.125}, 1},
	} {
		if got := argmax(c.x); got != c.want {
			t.Errorf("argmax(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}
