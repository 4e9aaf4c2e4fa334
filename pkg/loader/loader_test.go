package loader

import (
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
)

func TestNewBackend(t *testing.T) {
	cases := []struct {
		name    string
		threads int
		want    string
		wantErr string
	}{
		{"auto", 1, BackendCPU, ""},
		{"cpu", 0, BackendCPU, ""},
		{"tpu", 0, "", `unknown backend "tpu"`},
		{"cpu", -1, "", "--threads -1 is outside"},
		{"cpu", 100000, "", "--threads 100000 is outside [0, 1024]"},
	}
	switch {
	case !backend.CUDABuilt:
		cases = append(cases, struct {
			name    string
			threads int
			want    string
			wantErr string
		}{"cuda", 0, "", "no CUDA backend"})
	case backend.CUDASimulated: // explicit cuda gives the harness; auto stays on the CPU
		cases = append(cases, struct {
			name    string
			threads int
			want    string
			wantErr string
		}{"cuda", 0, BackendCUDA, ""})
	}
	for _, c := range cases {
		be, got, _, err := NewBackend(c.name, c.threads)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("NewBackend(%q, %d) error = %v, want %q", c.name, c.threads, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || be == nil {
			t.Errorf("NewBackend(%q, %d) = %v, %q, %v", c.name, c.threads, be, got, err)
		}
	}
}

func TestOpenWeightsErrors(t *testing.T) {
	if _, err := OpenWeights(t.TempDir() + "/missing.ninfer"); err == nil || !strings.Contains(err.Error(), "missing.ninfer") {
		t.Errorf("missing file: %v", err)
	}
}
