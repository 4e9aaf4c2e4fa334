//go:build cuda

package cuda

// The kernels are compiled by nvcc into libninfer_cuda.a (make cuda:
// build/cuda/libninfer_cuda.a); the CUDA runtime is linked statically, so
// the binary needs only the NVIDIA driver (libcuda.so.1, loaded at run time)
// on the target machine. CGO_LDFLAGS carries -L for the library's directory
// and the toolkit's lib directory (the Makefile sets both, from CUDA_HOME or
// the PyPI toolchain in build/cuda).

/*
#cgo LDFLAGS: -lninfer_cuda -lcudart_static -ldl -lpthread -lrt -lstdc++ -lm
*/
import "C"

// Simulated reports whether the kernels run under the host SIMT harness.
const Simulated = false
