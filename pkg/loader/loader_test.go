package loader

import (
	"fmt"
	"runtime"
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

// TestThreadsBeyondCoresAndPool: --threads above the core count runs with a
// note saying the threads share the cores; above the pool's limit it runs
// the limit and the backend (so the bench JSON and the load line) reports
// the count that runs, not the one asked for.
func TestThreadsBeyondCoresAndPool(t *testing.T) {
	cores := runtime.NumCPU()
	cases := []struct {
		threads, want int
		note          string
	}{
		{1, 1, ""},
		{1000, backend.MaxCPUThreads, fmt.Sprintf("pool holds at most %d threads; using %d", backend.MaxCPUThreads, backend.MaxCPUThreads)},
	}
	if cores+1 < backend.MaxCPUThreads {
		cases = append(cases, struct {
			threads, want int
			note          string
		}{cores + 1, cores + 1, fmt.Sprintf("more than this machine's %d cores", cores)})
	}
	for _, c := range cases {
		be, _, note, err := NewBackend(BackendCPU, c.threads)
		if err != nil {
			t.Fatalf("--threads %d: %v", c.threads, err)
		}
		if got := be.Threads(); got != c.want {
			t.Errorf("--threads %d: backend reports %d threads, want %d", c.threads, got, c.want)
		}
		if (c.note == "") != (note == "") || !strings.Contains(note, c.note) {
			t.Errorf("--threads %d: note %q, want one containing %q", c.threads, note, c.note)
		}
		be.Close()
	}
}
