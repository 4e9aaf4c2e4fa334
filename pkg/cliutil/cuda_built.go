//go:build cuda || cudasim

package cliutil

// CUDABuilt reports whether this build has the CUDA backend (the cuda or
// cudasim build tag), as backend.CUDABuilt does.
const CUDABuilt = true
