// Package cpu is the cgo binding of the native CPU kernels declared in
// kernels/ninfer_ops.h. It is used only by pkg/backend: every function takes
// raw pointers into backend-owned (C-allocated) memory and does no
// validation beyond what the C side reports.
package cpu

/*
#cgo CFLAGS: -O3 -march=x86-64-v2 -std=gnu11 -I${SRCDIR}/.. -Wall
#cgo LDFLAGS: -lm -lpthread
#cgo noescape ni_matmul
#cgo nocallback ni_matmul
#cgo noescape ni_matmul_act
#cgo nocallback ni_matmul_act
#cgo noescape ni_embed
#cgo nocallback ni_embed
#include <stdlib.h>
#include <string.h>
#include "ninfer_ops.h"
#include "cpu/ni_cpu.h"

// The offsets NI_PREFETCH_OFFSETS gives step s of length len, at most max
// of them into out; returns their count (prefetchOffsets, for the tests).
static int ni_prefetch_offsets(int64_t s, int64_t len, int64_t *out, int max) {
    int n = 0;
#define NI_REC(o)                 \
    do {                          \
        if (n < max) out[n] = (o); \
        n++;                      \
    } while (0)
    NI_PREFETCH_OFFSETS(s, len, NI_REC);
#undef NI_REC
    return n;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Instruction sets.
const (
	ISAScalar = C.NI_ISA_SCALAR
	ISAAVX2   = C.NI_ISA_AVX2
	ISAAVX512 = C.NI_ISA_AVX512 // AVX-512 F/BW/DQ/VL (+ AVX2/FMA/F16C), ZMM state enabled by the OS
)

// Weight formats (kernels/ninfer_ops.h NI_W_*).
const (
	WF32    = C.NI_W_F32
	WBF16   = C.NI_W_BF16
	WQ4     = C.NI_W_Q4
	WQ5     = C.NI_W_Q5
	WQ6     = C.NI_W_Q6
	WQ8     = C.NI_W_Q8
	WNVFP4  = C.NI_W_NVFP4
	WFP8Row = C.NI_W_FP8ROW
)

// KV cache formats (NI_KV_*), the page size and the delta-rule chunk.
const (
	KVBF16   = C.NI_KV_BF16
	KVI8G64  = C.NI_KV_I8G64
	KVFP8Row = C.NI_KV_FP8ROW
	KVPage   = C.NI_KV_PAGE
	GDNChunk = C.NI_GDN_CHUNK
	PerToken = C.NI_PER_TOKEN
	SmallT   = C.NI_SMALL_T
)

// MaxThreads is the largest pool a context runs (NI_MAX_THREADS); larger
// requests are capped to it.
const MaxThreads = C.NI_MAX_THREADS

// BestISA returns the best instruction set of this CPU (levels are ordered:
// ISAScalar < ISAAVX2 < ISAAVX512).
func BestISA() int { return int(C.ni_cpu_best_isa()) }

// Rows describes fp32 activations: element (t,h,d) at P[t*LD + h*HS + d].
type Rows struct {
	P       unsafe.Pointer
	T, H, D int
	LD, HS  int64
}

func (r Rows) c() C.ni_rows {
	return C.ni_rows{p: (*C.float)(r.P), t: C.int32_t(r.T), h: C.int32_t(r.H), d: C.int32_t(r.D),
		ld: C.int64_t(r.LD), hs: C.int64_t(r.HS)}
}

// Ctx is a kernel execution context: a persistent thread pool plus the
// instruction set in use.
type Ctx struct{ c *C.ni_ctx }

// NewCtx starts a pool of threads workers running isa.
func NewCtx(threads, isa int) (*Ctx, error) {
	c := C.ni_ctx_new(C.int(threads), C.int(isa))
	if c == nil {
		return nil, fmt.Errorf("cpu kernels: cannot start %d threads with isa %d (best %d)", threads, isa, BestISA())
	}
	return &Ctx{c}, nil
}

// Close stops the pool.
func (x *Ctx) Close() {
	if x.c != nil {
		C.ni_ctx_free(x.c)
		x.c = nil
	}
}

// SetSerialWork sets the estimated work below which an op runs on the
// calling thread (0: always use the pool).
func (x *Ctx) SetSerialWork(n int64) { C.ni_ctx_set_serial_work(x.c, C.int64_t(n)) }

// SetSpin sets how long an idle pool helper spins for the next op before it
// sleeps (and the caller for the helpers before it yields); 0 sleeps at
// once. The default is 200 µs when the pool has no more threads than the
// CPUs the process may use, else 0.
func (x *Ctx) SetSpin(d time.Duration) { C.ni_ctx_set_spin(x.c, C.int64_t(d.Nanoseconds())) }

// RoundTrip runs one empty op of ntasks tasks on the pool — the fork/join
// cost every parallel op pays — and returns how many tasks ran.
func (x *Ctx) RoundTrip(ntasks int) int { return int(C.ni_ctx_roundtrip(x.c, C.int(ntasks))) }

// ScratchBytes is the per-thread scratch currently held.
func (x *Ctx) ScratchBytes() int64 { return int64(C.ni_ctx_scratch_bytes(x.c)) }

// Weight is a prepared weight descriptor (geometry of a packed matrix).
type Weight struct{ w C.ni_weight }

// ErrWeightSize reports a payload whose size is not the exact encoded size.
var ErrWeightSize = errors.New("payload size differs from the encoded size")

// NewWeight describes an [n,k] weight in format fmt at data (bytes long).
func NewWeight(fmt int, n, k int64, data unsafe.Pointer, bytes int64) (*Weight, error) {
	w := &Weight{}
	switch C.ni_weight_init(&w.w, C.int(fmt), C.int64_t(n), C.int64_t(k), data, C.int64_t(bytes)) {
	case 0:
		return w, nil
	case -2:
		return nil, ErrWeightSize
	}
	return nil, errors.New("invalid shape or format")
}

// Rows returns rows [r0, r1) of w as a weight of their own (the same
// memory; each row computes exactly as in w), or false for a format without
// row views (nvfp4, fp8-row) or a bad range. Its Bytes is -1.
func (w *Weight) Rows(r0, r1 int64) (*Weight, bool) {
	v := &Weight{}
	if C.ni_weight_rows(&w.w, C.int64_t(r0), C.int64_t(r1), &v.w) != 0 {
		return nil, false
	}
	return v, true
}

// N is the weight's row count.
func (w *Weight) N() int64 { return int64(w.w.n) }

// Bytes is the encoded size of the weight.
func (w *Weight) Bytes() int64 { return int64(w.w.bytes) }

// DecodeRow decodes row r into out (len ≥ k).
func (w *Weight) DecodeRow(r int64, out []float32) {
	C.ni_weight_decode_row(&w.w, C.int64_t(r), (*C.float)(unsafe.Pointer(&out[0])))
}

// Embed gathers rows ids[0..out.T) into out; returns the bad-id count.
func (x *Ctx) Embed(w *Weight, ids unsafe.Pointer, out Rows) int {
	return int(C.ni_embed(x.c, &w.w, (*C.int32_t)(ids), out.c()))
}

// Matmul computes y (+)= x·wᵀ.
func (x *Ctx) Matmul(w *Weight, in, out Rows, acc bool) {
	C.ni_matmul(x.c, &w.w, in.c(), out.c(), cbool(acc))
}

// Activation modes of MatmulAct (NI_ACT_*).
const (
	ActF32 = C.NI_ACT_F32
	ActQ8  = C.NI_ACT_Q8 // int8 activations, one scale per weight group: 64 values for q4–q6, 32 for q8 (T ≤ SmallT)
)

// MatmulAct computes y (+)= x·wᵀ with activation mode act (ActF32 = Matmul).
func (x *Ctx) MatmulAct(w *Weight, in, out Rows, acc bool, act int) {
	C.ni_matmul_act(x.c, &w.w, in.c(), out.c(), cbool(acc), C.int(act))
}

// prefetchOffsets returns the byte offsets the multi-row GEMVs prefetch at
// step s of a plane they consume length bytes of per step
// (NI_PREFETCH_OFFSETS in ni_cpu.h; for the tests).
func prefetchOffsets(s, length int64) []int64 {
	var buf [64]C.int64_t
	n := int(C.ni_prefetch_offsets(C.int64_t(s), C.int64_t(length), &buf[0], C.int(len(buf))))
	out := make([]int64, min(n, len(buf)))
	for i := range out {
		out[i] = int64(buf[i])
	}
	return out
}

// HasVNNI reports whether the ISAAVX512 level runs AVX512_VNNI bodies.
func HasVNNI() bool { return C.ni_cpu_has_vnni() != 0 }

// HasVBMI reports whether the ISAAVX512 level takes the q5/q6 high bits of
// its permuted GEMVs by AVX512_VBMI (NINFER_CPU_VBMI=0 turns it off).
func HasVBMI() bool { return C.ni_cpu_has_vbmi() != 0 }

// Intel reports whether the CPU is an Intel one (ni_cpu_intel): there the
// ISAAVX512 q8 GEMV measured faster on int8 than on fp32 activations.
func Intel() bool { return C.ni_cpu_intel() != 0 }

// HasAVXVNNI reports whether the CPU has AVX-VNNI, which the ISAAVX2
// level's int8 q4–q6 GEMVs use (NINFER_CPU_AVXVNNI=0 turns it off).
func HasAVXVNNI() bool { return C.ni_cpu_has_avxvnni() != 0 }

// Int8Dots names the integer-dot extensions the int8 GEMVs of this
// context's level use, as the switches read now: "vnni", "vbmi" (ISAAVX512),
// "avxvnni" (ISAAVX2).
// Q8GEMM reports whether int8 activations at T > SmallT run the int8
// prefill GEMM for w (ni_cpu_q8_gemm: AVX-512 VNNI; AVX-VNNI, or q4–q6 on
// AVX2; never with NINFER_CPU_PREFILL=fp32).
func (x *Ctx) Q8GEMM(w *Weight) bool { return C.ni_cpu_q8_gemm(x.c.isa, C.int(w.w.bits)) != 0 }

func (x *Ctx) Int8Dots() []string {
	f := int(C.ni_cpu_int8_dots(x.c.isa))
	var out []string
	for _, d := range []struct {
		bit  int
		name string
	}{{C.NI_DOT_VNNI, "vnni"}, {C.NI_DOT_VBMI, "vbmi"}, {C.NI_DOT_AVXVNNI, "avxvnni"}} {
		if f&d.bit != 0 {
			out = append(out, d.name)
		}
	}
	return out
}

// SetVNNI enables (where the CPU has it) or disables the VNNI bodies and
// returns the previous setting; a test hook for the non-VNNI AVX-512 path.
// Not safe while a matmul runs.
func SetVNNI(on bool) bool { return C.ni_cpu_set_vnni(cbool(on)) != 0 }

// RMSNorm: y = x·rsqrt(mean(x²)+eps)·(1+w or w).
func (x *Ctx) RMSNorm(in, out Rows, w unsafe.Pointer, eps float32, zeroCentred bool) {
	C.ni_rmsnorm(x.c, in.c(), out.c(), (*C.float)(w), C.float(eps), cbool(zeroCentred))
}

// GatedRMSNorm: y = w·norm(o)·silu(z).
func (x *Ctx) GatedRMSNorm(o, z, y Rows, w unsafe.Pointer, eps float32) {
	C.ni_gated_rmsnorm(x.c, o.c(), z.c(), y.c(), (*C.float)(w), C.float(eps))
}

// L2Norm: y = x·rsqrt(Σx²+1e-6)·scale.
func (x *Ctx) L2Norm(in, out Rows, scale float32) {
	C.ni_l2norm(x.c, in.c(), out.c(), C.float(scale))
}

// RoPE applies partial NeoX RoPE in place.
func (x *Ctx) RoPE(r Rows, pos unsafe.Pointer, rot int, theta float64) {
	C.ni_rope(x.c, r.c(), (*C.int32_t)(pos), C.int(rot), C.double(theta))
}

// SigmoidMul: y = x·sigmoid(g).
func (x *Ctx) SigmoidMul(in, g, y Rows) { C.ni_sigmoid_mul(x.c, in.c(), g.c(), y.c()) }

// SwiGLU: y = silu(g)·u.
func (x *Ctx) SwiGLU(g, u, y Rows) { C.ni_swiglu(x.c, g.c(), u.c(), y.c()) }

// Add: y = a + b.
func (x *Ctx) Add(a, b, y Rows) { C.ni_add(x.c, a.c(), b.c(), y.c()) }

// Argmax writes the row argmax to out (int32 per token).
func (x *Ctx) Argmax(in Rows, out unsafe.Pointer) { C.ni_argmax(x.c, in.c(), (*C.int32_t)(out)) }

// GDNGate computes g and beta.
func (x *Ctx) GDNGate(a, b Rows, aLog, dtBias unsafe.Pointer, g, beta Rows) {
	C.ni_gdn_gate(x.c, a.c(), b.c(), (*C.float)(aLog), (*C.float)(dtBias), g.c(), beta.c())
}

// Conv1DSiLU runs the causal depthwise conv + SiLU with state slots of
// slotStride elements, bf16 elements when stateBF16 (else fp32).
func (x *Ctx) Conv1DSiLU(in, out Rows, w unsafe.Pointer, kw int, state unsafe.Pointer, stateBF16 bool, slotStride int64, inSlot unsafe.Pointer, outSlot int) {
	bf := 0
	if stateBF16 {
		bf = 1
	}
	C.ni_conv1d_silu(x.c, in.c(), out.c(), (*C.float)(w), C.int(kw), state, C.int(bf), C.int64_t(slotStride),
		(*C.int32_t)(inSlot), C.int(outSlot))
}

// DeltaRecurrent runs the recurrent gated delta rule.
func (x *Ctx) DeltaRecurrent(q, k, v, g, beta Rows, state unsafe.Pointer, slotStride int64, inSlot unsafe.Pointer, outSlot int, o Rows) {
	C.ni_gdn_recurrent(x.c, q.c(), k.c(), v.c(), g.c(), beta.c(), (*C.float)(state), C.int64_t(slotStride),
		(*C.int32_t)(inSlot), C.int(outSlot), o.c())
}

// DeltaChunked runs the chunked (WY) gated delta rule.
func (x *Ctx) DeltaChunked(q, k, v, g, beta Rows, state unsafe.Pointer, slotStride int64, inSlot unsafe.Pointer, outSlot int, o Rows) {
	C.ni_gdn_chunked(x.c, q.c(), k.c(), v.c(), g.c(), beta.c(), (*C.float)(state), C.int64_t(slotStride),
		(*C.int32_t)(inSlot), C.int(outSlot), o.c())
}

// KV describes one layer's paged K/V planes.
type KV struct {
	Fmt, KVHeads, HeadDim, Pages int
	K, V, KS, VS                 unsafe.Pointer
	BlockTable                   unsafe.Pointer
	TableLen                     int
}

func (kv KV) c() C.ni_kv {
	return C.ni_kv{fmt: C.int32_t(kv.Fmt), kvh: C.int32_t(kv.KVHeads), hd: C.int32_t(kv.HeadDim), pages: C.int32_t(kv.Pages),
		k: (*C.uint8_t)(kv.K), v: (*C.uint8_t)(kv.V), ks: (*C.uint16_t)(kv.KS), vs: (*C.uint16_t)(kv.VS),
		block_table: (*C.int32_t)(kv.BlockTable), table_len: C.int32_t(kv.TableLen)}
}

// KVVecBytes is the code-plane bytes of one vector; KVScaleCount the fp16
// scales per vector.
func KVVecBytes(fmt, hd int) int64   { return int64(C.ni_kv_vec_bytes(C.int(fmt), C.int(hd))) }
func KVScaleCount(fmt, hd int) int64 { return int64(C.ni_kv_scale_count(C.int(fmt), C.int(hd))) }

// KVAppend writes k, v at positions pos; returns the unmapped count.
func (x *Ctx) KVAppend(kv KV, k, v Rows, pos unsafe.Pointer) int {
	return int(C.ni_kv_append(x.c, kv.c(), k.c(), v.c(), (*C.int32_t)(pos)))
}

// Attention runs causal GQA attention over the cache; returns the count of
// unmapped key positions met.
func (x *Ctx) Attention(q Rows, kv KV, pos unsafe.Pointer, scale float32, out Rows) int {
	return int(C.ni_attention(x.c, q.c(), kv.c(), (*C.int32_t)(pos), C.float(scale), out.c()))
}

// Alloc returns n bytes of zeroed C memory (nil on failure): 64-byte
// aligned, and from 2 MiB on 2 MiB-aligned on transparent huge pages where
// the system allows them (ni_alloc).
func Alloc(n int64) unsafe.Pointer { return C.ni_alloc(C.int64_t(n)) }

// Free releases memory from Alloc.
func Free(p unsafe.Pointer) { C.free(p) }

// Silu sets y[i] = silu(x[i]) with the isa level's body (ni_silu_vec); a
// test hook for its polynomial exp. len(y) must be ≥ len(x).
func Silu(isa int, x, y []float32) {
	if len(x) == 0 {
		return
	}
	C.ni_silu_vec(C.int(isa), (*C.float)(unsafe.Pointer(&x[0])), (*C.float)(unsafe.Pointer(&y[0])), C.int64_t(len(x)))
}

// GDNStepRows runs the two fused row passes of a gated delta-rule step
// (ni_gdn_decay_kv then ni_gdn_update_o) on one head's state S [dk][dv]
// with the isa level's bodies: S ← decay·S, kv = Sᵀk, S += k·deltaᵀ,
// o = Sᵀq. A test hook; fused selects the fused bodies, otherwise the
// row-by-row ni_scal / ni_axpy sequence they must equal bit for bit
// (ni_gdn_step_rows_ref).
func GDNStepRows(isa int, fused bool, S []float32, dk, dv int, decay float32, k, delta, q, kv, o []float32) {
	if len(S) < dk*dv || len(k) < dk || len(q) < dk || len(delta) < dv || len(kv) < dv || len(o) < dv || dv == 0 {
		panic("cpu: GDNStepRows: short slices")
	}
	f := func(x []float32) *C.float {
		if len(x) == 0 {
			return nil
		}
		return (*C.float)(unsafe.Pointer(&x[0]))
	}
	if fused {
		C.ni_gdn_decay_kv(C.int(isa), f(S), C.int(dk), C.int64_t(dv), C.float(decay), f(k), f(kv))
		C.ni_gdn_update_o(C.int(isa), f(S), C.int(dk), C.int64_t(dv), f(k), f(delta), f(q), f(o))
		return
	}
	C.ni_gdn_step_rows_ref(C.int(isa), f(S), C.int(dk), C.int64_t(dv), C.float(decay), f(k), f(delta), f(q), f(kv), nil)
	C.ni_gdn_step_rows_ref(C.int(isa), f(S), C.int(dk), C.int64_t(dv), 0, f(k), f(delta), f(q), nil, f(o))
}

// F16ToF32 and friends expose the kernels' scalar conversions for tests.
func F16ToF32(h uint16) float32 { return float32(C.ni_f16_to_f32(C.uint16_t(h))) }
func F32ToF16(f float32) uint16 { return uint16(C.ni_f32_to_f16(C.float(f))) }
func E4M3ToF32(b uint8) float32 { return float32(C.ni_e4m3_to_f32(C.uint8_t(b))) }
func F32ToE4M3(f float32) uint8 { return uint8(C.ni_f32_to_e4m3(C.float(f))) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
