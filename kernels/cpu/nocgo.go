//go:build !cgo

package cpu

// The CPU core is C (kernels/cpu/*.c) compiled through cgo: building with
// CGO_ENABLED=0, or without a C compiler on the PATH, cannot work. The
// undefined name below turns that into a compile error that says so.
var _ = ninfer_CPU_core_needs_cgo__build_with_CGO_ENABLED_1_and_a_C_compiler_such_as_gcc
