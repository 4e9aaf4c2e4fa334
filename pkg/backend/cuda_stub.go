//go:build !cuda && !cudasim

package backend

import "errors"

// CUDABuilt reports whether this binary has the CUDA backend.
const CUDABuilt = false

// CUDASimulated reports whether the CUDA kernels run under the host SIMT harness.
const CUDASimulated = false

// CUDAOptions configures the CUDA backend.
type CUDAOptions struct {
	Device       int
	StagingBytes int64
}

// ErrNoCUDABuild is returned by NewCUDA in a binary built without CUDA.
var ErrNoCUDABuild = errors.New("this binary was built without the CUDA backend (build it with `make cuda`)")

// CUDA is absent from this build.
type CUDA struct{ Backend }

// NewCUDA fails: the binary has no CUDA backend.
func NewCUDA(CUDAOptions) (*CUDA, error) { return nil, ErrNoCUDABuild }

// Stats is empty without CUDA.
func (c *CUDA) Stats() UploadStats { return UploadStats{} }
