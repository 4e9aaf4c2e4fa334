package backend

import "fmt"

// CUDA runtime error codes the backend classifies (cudaError_t values).
const (
	cudaErrInsufficientDriver = 35
	cudaErrNoDevice           = 100
	cudaErrInvalidDevice      = 101
)

// MinDriverCUDA is the CUDA version (1000·major + 10·minor) the kernels are
// built for: CUDA 13.0, which needs an NVIDIA driver of the r580 branch or
// newer.
const (
	MinDriverCUDA  = 13000
	MinDriverMajor = 580
)

// ExplainCUDAError turns a failed device probe into the one line a user
// reads: why no CUDA device is usable and what to do, with the CUDA error
// code. driver is cudaDriverGetVersion's value (0 when no driver library was
// found), runtime the linked runtime's version.
func ExplainCUDAError(code, driver, runtime int, msg string) string {
	switch {
	case code == cudaErrInsufficientDriver && driver == 0:
		return fmt.Sprintf("no NVIDIA driver found (libcuda.so.1 is not installed or not on the library path; CUDA error %d)", code)
	case code == cudaErrInsufficientDriver:
		return fmt.Sprintf("the NVIDIA driver supports CUDA %s but this binary needs CUDA %s: install driver %d or newer (CUDA error %d)",
			cudaVersion(driver), cudaVersion(max(runtime, MinDriverCUDA)), MinDriverMajor, code)
	case code == cudaErrNoDevice:
		return fmt.Sprintf("the NVIDIA driver is installed but reports no CUDA device (CUDA error %d)", code)
	case code == cudaErrInvalidDevice:
		return fmt.Sprintf("%s (CUDA error %d)", msg, code)
	}
	if msg == "" {
		msg = "CUDA initialisation failed"
	}
	return fmt.Sprintf("%s (CUDA error %d)", msg, code)
}

func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
