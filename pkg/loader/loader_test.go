package loader

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
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

// OpenWeights (ninfer-run, ninfer-bench) refuses an artifact whose config no
// longer describes its tensors, before any payload is touched.
func TestOpenWeightsChecksConfig(t *testing.T) {
	cfg := qwen35.Config{
		VocabSize: 512, HiddenSize: 64, NumHiddenLayers: 1, IntermediateSize: 128,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 32, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 16, LinearValueHeadDim: 16, LinearNumKeyHeads: 2, LinearNumValueHeads: 2,
		LayerTypes: []string{qwen35.FullAttention}, RMSNormEps: 1e-6, RopeTheta: 1e7,
		PartialRotaryFactor: 0.25, AttnOutputGate: true, MaxPositionEmbeddings: 4096, TieWordEmbeddings: true,
	}
	p := artifact.NewPlan(artifact.Meta{Name: "tiny", Config: cfg})
	for _, tn := range cfg.Tensors() {
		if err := p.AddTensor(tn.Name, tn.Component, format.BF16, tn.Shape); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "m.ninfer")
	if err := artifact.WriteSparse(path, p); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWeights(path)
	if err != nil {
		t.Fatalf("intact artifact: %v", err)
	}
	w.Close()
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`"vocab_size":512`), []byte(`"vocab_size":612`), 1)
	os.WriteFile(path, b, 0o644)
	if _, err := OpenWeights(path); err == nil || !strings.Contains(err.Error(), "directory sha256 mismatch") {
		t.Errorf("vocab_size edited: %v", err)
	}
}
