// Package cuda is the cgo binding of the CUDA kernels declared in
// kernels/cuda/ni_cuda.h (the op contract is kernels/ninfer_ops.h). It is
// used only by pkg/backend.
//
// The package builds three ways, chosen by build tags:
//
//   - -tags cuda: links libninfer_cuda.a, the kernels compiled by nvcc
//     (make cuda; CGO_LDFLAGS gives its directory), and the static CUDA
//     runtime; runs on a GPU.
//   - -tags cudasim: compiles the same kernel and launcher sources with the
//     host C++ compiler under the SIMT harness (kernels/cuda/simt): every
//     kernel runs on the CPU, device memory is guard-paged host memory
//     (make test-cuda-sim).
//   - neither: the package is empty and Built reports false.
package cuda
