//go:build cudasim && !cuda

package cuda

// Under the cudasim tag the sim_*.cpp files of this directory compile every
// .cu source with the host C++ compiler and -DNI_SIMT (see kernels/cuda/simt).

/*
#cgo CXXFLAGS: -std=c++17 -O2 -DNI_SIMT -I${SRCDIR} -I${SRCDIR}/.. -Wno-unused-function -Wno-unknown-pragmas
#cgo LDFLAGS: -lpthread -lm
*/
import "C"

// Simulated reports whether the kernels run under the host SIMT harness.
const Simulated = true
