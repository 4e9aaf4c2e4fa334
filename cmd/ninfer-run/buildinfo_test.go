package main

import (
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/cliutil"
)

// cliutil (which every tool links, also those without the kernels) keeps
// its own copies of the thread pool limit and of the CUDA build flag for
// --threads and --version: they must agree with the backend's.
func TestCliutilMatchesBackend(t *testing.T) {
	if cliutil.MaxThreads != backend.MaxCPUThreads {
		t.Errorf("cliutil.MaxThreads %d, backend.MaxCPUThreads %d", cliutil.MaxThreads, backend.MaxCPUThreads)
	}
	if cliutil.CUDABuilt != backend.CUDABuilt {
		t.Errorf("cliutil.CUDABuilt %v, backend.CUDABuilt %v", cliutil.CUDABuilt, backend.CUDABuilt)
	}
}
