// Package loader opens a .ninfer artifact for the engine: it maps the file,
// exposes its tensors through engine.Weights, picks a backend, and records
// the load statistics of the schema-15 `load` object.
package loader

import (
	"fmt"
	"runtime"
	"time"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Weights adapts a mapped artifact to engine.Weights.
type Weights struct {
	f   *artifact.File
	cfg qwen35.Config
}

// OpenWeights maps the artifact at path and checks that it carries a v3
// text config the engine can run.
func OpenWeights(path string) (*Weights, error) {
	f, err := artifact.OpenMapped(path)
	if err != nil {
		return nil, err
	}
	if f.Version < 3 {
		f.Close()
		return nil, fmt.Errorf("%s: container v%d holds no model config; only v3 artifacts can be run (convert the model again with ninfer-convert)", path, f.Version)
	}
	if f.Architecture != qwen35.Architecture {
		f.Close()
		return nil, fmt.Errorf("%s: architecture %s is not supported (want %s)", path, termsafe.Quote(f.Architecture), qwen35.Architecture)
	}
	cfg, err := f.Config()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Weights{f: f, cfg: cfg}, nil
}

// File returns the underlying artifact.
func (w *Weights) File() *artifact.File { return w.f }

// Config returns the model's text config.
func (w *Weights) Config() qwen35.Config { return w.cfg }

// Tensor returns a tensor's format, shape and mapped payload.
func (w *Weights) Tensor(id string) (format.Format, []int64, []byte, error) {
	o, ok := w.f.Object(id)
	if !ok {
		return "", nil, nil, fmt.Errorf("%s: no object %q", w.f.Path, id)
	}
	if !o.IsTensor() {
		return "", nil, nil, fmt.Errorf("%s: object %q is a resource, not a tensor", w.f.Path, id)
	}
	return o.Format, o.Shape, w.f.Bytes(o), nil
}

// Resource returns a frontend resource's bytes (nil, false when absent).
func (w *Weights) Resource(name string) ([]byte, bool) {
	o, ok := w.f.Object("frontend/" + name)
	if !ok {
		return nil, false
	}
	return w.f.Bytes(o), true
}

// Close unmaps the artifact.
func (w *Weights) Close() error { return w.f.Close() }

// Backend names accepted by NewBackend.
const (
	BackendAuto = "auto"
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
)

// MaxThreads bounds --threads: each thread is a pthread with its own kernel
// scratch, so a typo like 100000 must not start that many.
const MaxThreads = 1024

// NewBackend returns the named backend: auto = CUDA when this binary has it
// (make cuda) and a device is usable, else the CPU; then note says in one
// line why the CPU was chosen (no driver, driver too old, no device), for
// the caller to print on stderr. The simulated CUDA backend (-tags cudasim,
// for tests) is used only when asked for by name.
func NewBackend(name string, threads int) (be backend.Backend, chosen, note string, err error) {
	if threads < 0 || threads > MaxThreads {
		return nil, "", "", fmt.Errorf("--threads %d is outside [0, %d] (0 = all cores)", threads, MaxThreads)
	}
	switch name {
	case "", BackendAuto:
		if backend.CUDABuilt && !backend.CUDASimulated {
			g, err := backend.NewCUDA(backend.CUDAOptions{})
			if err == nil {
				return g, BackendCUDA, "", nil
			}
			note = fmt.Sprintf("--backend auto: using the CPU backend: %v", err)
		}
		fallthrough
	case BackendCPU:
		cpu, err := backend.NewCPU(backend.CPUOptions{Threads: threads})
		if err != nil {
			return nil, "", "", err
		}
		note = joinNotes(note, threadsNote(threads, cpu.Threads(), runtime.NumCPU()))
		return cpu, BackendCPU, note, nil
	case BackendCUDA:
		if !backend.CUDABuilt {
			return nil, "", "", fmt.Errorf("--backend cuda: this binary has no CUDA backend (build it with `make cuda`)")
		}
		g, err := backend.NewCUDA(backend.CUDAOptions{})
		if err != nil {
			return nil, "", "", fmt.Errorf("--backend cuda: %w", err)
		}
		return g, BackendCUDA, "", nil
	}
	return nil, "", "", fmt.Errorf("unknown backend %s (want auto, cpu or cuda)", termsafe.Quote(name))
}

// threadsNote warns when --threads asks for more threads than the machine
// has cores (they oversubscribe the cores) and says what runs when the
// pool's limit capped the request.
func threadsNote(asked, got, cores int) string {
	switch {
	case asked > got:
		return fmt.Sprintf("--threads %d: the CPU backend's pool holds at most %d threads; using %d (this machine has %d cores)", asked, got, got, cores)
	case asked > cores:
		return fmt.Sprintf("--threads %d is more than this machine's %d cores: the threads share them (0 = one per core)", asked, cores)
	}
	return ""
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// LoadStats are the storage statistics of the schema-15 `load` object.
type LoadStats struct {
	LoadSeconds       float64
	UploadSeconds     float64
	ArtifactBytesRead int64
	HostToDeviceBytes int64
	PeakStagingBytes  int64
	DeviceObjects     int
	HostObjects       int
}

// Timer measures load phases.
type Timer struct{ start time.Time }

// StartTimer starts a load timer.
func StartTimer() Timer { return Timer{time.Now()} }

// Seconds returns the time since the timer started.
func (t Timer) Seconds() float64 { return time.Since(t.start).Seconds() }
