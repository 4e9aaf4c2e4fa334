//go:build !cuda && !cudasim

package cuda

// Built reports whether the CUDA kernels are compiled into this binary.
const Built = false

// Simulated reports whether the kernels run under the host SIMT harness.
const Simulated = false
