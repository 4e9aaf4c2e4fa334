package backend

import (
	"fmt"
	"unsafe"

	"github.com/ninfer/ninfer/kernels/cpu"
	"github.com/ninfer/ninfer/pkg/format"
)

// Activation modes of MatMul (CPUOptions.Activations, SetActivations).
// With int8 activations the CPU backend quantizes each token row of a
// T ≤ 16 matmul by q4–q8 grouped-integer weights to int8 with one fp32
// scale per weight group (64 values for q4–q6, 32 for q8) and runs integer
// dot products per group
// (kernels/ninfer_ops.h NI_ACT_Q8); every other format, larger T and weights
// pinned by KeepFP32Activations (the MTP proposal head) stay on fp32
// activations.
const (
	// ActAuto is int8 where it is faster: q4/q5/q6 weights, and q8 weights
	// where autoQ8Int8 says so (avx2; avx512 with VNNI on Intel). Elsewhere
	// q8 decodes on fp32 activations and prefills (T > 16) on int8 ones
	// where the int8 prefill GEMM runs (cpuKernels.q8).
	ActAuto = "auto"
	ActInt8 = "int8" // int8 for q4–q8 weights, fp32 otherwise
	ActFP32 = "fp32" // fp32 activations everywhere (the library default)
	// ActInt8All is int8 at every T: where the CPU has no int8 prefill
	// GEMM (cpu.Ctx.Q8GEMM) a larger matmul runs as 16-token pieces of
	// the int8 GEMV, so a prefill sees exactly the per-token activation
	// quantization of decode (up to fp32 summation order). For accuracy
	// studies by prefill scoring (ninfer-eval --activations int8); without
	// the GEMM slow, not for serving.
	ActInt8All = "int8-all"
)

// ParseActivations validates an activation mode ("" is fp32).
func ParseActivations(s string) (string, error) {
	switch s {
	case "":
		return ActFP32, nil
	case ActAuto, ActInt8, ActFP32, ActInt8All:
		return s, nil
	}
	return "", fmt.Errorf("unknown activations %q (want auto, int8, fp32 or int8-all)", s)
}

// KeepFP32Activations pins w's matmuls to fp32 activations whatever the
// backend's mode (the engine pins the MTP proposal head: its argmax only
// proposes, and an int8 draft head measured no faster, docs/PERF.md).
func (w *Weight) KeepFP32Activations() { w.fp32Act = true }

// autoQ8Int8 reports whether auto runs q8 weights on int8 activations at
// every T on the CPU level isa, where that was measured faster end to end
// (docs/PERF.md): at avx2 (1.13–1.16× decode on Zen 4), and at avx512 with
// VNNI on Intel (an AVX-512 Xeon: 1.10–1.20× decode, 2 threads). Not at
// avx512 elsewhere: on Zen 4 the int8 one decoded 0.93–0.95× the fp32 one.
func autoQ8Int8(isa string) bool {
	return isa == "avx2" || (isa == "avx512" && cpu.HasVNNI() && cpu.Intel())
}

// int8Act reports whether format f runs int8 activations in mode m; autoQ8
// is autoQ8Int8 of the CPU level (auto leaves q8 on fp32 unless it holds).
func int8Act(m string, autoQ8 bool, f format.Format) bool {
	switch m {
	case ActAuto:
		return f == format.Q4G64 || f == format.Q5G64 || f == format.Q6G64 || (f == format.Q8G32 && autoQ8)
	case ActInt8, ActInt8All:
		return f == format.Q4G64 || f == format.Q5G64 || f == format.Q6G64 || f == format.Q8G32
	}
	return false
}

// q8Kernels is implemented by kernels with an int8-activation matmul.
type q8Kernels interface {
	// q8 reports whether a matmul of T tokens by w uses it.
	q8(w *Weight, T int) bool
	matmulQ8(w any, x, y rows, acc bool)
}

func (k cpuKernels) q8(w *Weight, T int) bool {
	if int8Act(*k.act, k.autoQ8, w.Format) {
		return true
	}
	// auto: q8 decodes on fp32 activations where autoQ8Int8 says no, but
	// prefills on int8 ones where the int8 GEMM runs (2.2× at pp512).
	return *k.act == ActAuto && w.Format == format.Q8G32 && T > cpu.SmallT && k.ctx.Q8GEMM(w.prep.(*cpu.Weight))
}
func (k cpuKernels) matmulQ8(w any, x, y rows, acc bool) {
	if *k.act == ActInt8All && !(x.t > cpu.SmallT && k.ctx.Q8GEMM(w.(*cpu.Weight))) { // the int8 GEMM takes all T at once
		for t0 := 0; t0 < x.t; t0 += cpu.SmallT {
			xs, ys := x, y
			xs.t, ys.t = min(cpu.SmallT, x.t-t0), min(cpu.SmallT, x.t-t0)
			xs.p, ys.p = unsafe.Add(x.p, 4*int64(t0)*x.ld), unsafe.Add(y.p, 4*int64(t0)*y.ld)
			k.ctx.MatmulAct(w.(*cpu.Weight), cr(xs), cr(ys), acc, cpu.ActQ8)
		}
		return
	}
	k.pieces(w.(*cpu.Weight), x, y, func(w *cpu.Weight, y rows) { k.ctx.MatmulAct(w, cr(x), cr(y), acc, cpu.ActQ8) })
}

// SetActivations sets the activation mode (ParseActivations).
func (c *CPU) SetActivations(mode string) error {
	m, err := ParseActivations(mode)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	*c.ops.k.(cpuKernels).act = m
	return nil
}

// Activations is the activation mode in use ("auto", "int8" or "fp32").
func (c *CPU) Activations() string { return *c.ops.k.(cpuKernels).act }

// SetActivations sets be's activation mode. Backends without int8
// activations (CUDA) accept "auto" and "fp32" (both fp32 there) and reject
// "int8".
func SetActivations(be Backend, mode string) error {
	if c, ok := be.(interface{ SetActivations(string) error }); ok {
		return c.SetActivations(mode)
	}
	m, err := ParseActivations(mode)
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	if m == ActInt8 || m == ActInt8All {
		return fmt.Errorf("backend: %s has no int8 activations (CPU only)", be.Name())
	}
	return nil
}

// ActivationsOf is be's activation mode ("fp32" for backends without int8
// activations).
func ActivationsOf(be Backend) string {
	if c, ok := be.(interface{ Activations() string }); ok {
		return c.Activations()
	}
	return ActFP32
}

// Int8Formats returns those of formats (weight format names) whose decode
// matmuls (T ≤ 16 tokens) run on int8 activations on be in its current
// mode, in the order given: what auto resolved to on this CPU (weights
// pinned by KeepFP32Activations, the MTP proposal head, stay fp32 whatever
// their format). Backends without int8 activations (CUDA) return none.
func Int8Formats(be Backend, formats []string) []string {
	c, ok := be.(*CPU)
	if !ok {
		return nil
	}
	k := c.ops.k.(cpuKernels)
	var out []string
	for _, f := range formats {
		if int8Act(*k.act, k.autoQ8, format.Format(f)) {
			out = append(out, f)
		}
	}
	return out
}

// VNNI reports whether the avx512 level's int8 kernels use AVX512_VNNI.
func VNNI() bool { return cpu.HasVNNI() }

// AVXVNNI reports whether the CPU backend's avx2 level runs its int8 q4–q6
// GEMVs on AVX-VNNI (bit-identical to its maddubs route).
func AVXVNNI() bool { return cpu.HasAVXVNNI() }

// VBMI reports whether the CPU backend's avx512 level decodes q5/q6 high
// bits with AVX512_VBMI (bit-identical to its BMI2 route).
func VBMI() bool { return cpu.HasVBMI() }
