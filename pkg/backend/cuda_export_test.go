//go:build cudasim && !cuda

package backend

import (
	"sort"

	"github.com/ninfer/ninfer/kernels/cuda"
)

// CUDACtxForTest is the context of a CUDA backend (dry runs of
// cuda_geometry_test.go).
func CUDACtxForTest(b Backend) *cuda.Ctx { return b.(*CUDA).ctx }

// CUDABufferForTest is one live device buffer of a CUDA backend.
type CUDABufferForTest struct {
	Name  string
	Bytes int64
}

// CUDABuffersForTest lists the live buffers of a CUDA backend by name.
func CUDABuffersForTest(b Backend) []CUDABufferForTest {
	var out []CUDABufferForTest
	for buf := range b.(*CUDA).bufs {
		out = append(out, CUDABufferForTest{buf.name, buf.bytes})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
