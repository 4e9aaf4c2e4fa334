//go:build cuda || cudasim

package cuda

/*
#cgo CFLAGS: -O2 -std=gnu11 -I${SRCDIR} -I${SRCDIR}/..
#include <stdlib.h>
#include "ni_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	_ "github.com/ninfer/ninfer/kernels/cpu" // ni_weight_init, ni_kv_vec_bytes (host geometry, one copy)
)

// Built reports whether the CUDA kernels are compiled into this binary.
const Built = true

// Error counters raised by kernels (ni_cuda.h NI_CUDA_ERR_*).
const (
	ErrEmbedIDs = C.NI_CUDA_ERR_EMBED_IDS
	ErrKVPos    = C.NI_CUDA_ERR_KV_POS
	ErrAttnPos  = C.NI_CUDA_ERR_ATTN_POS
	ErrSlot     = C.NI_CUDA_ERR_SLOT
	NumCounters = C.NI_CUDA_ERR_N
)

// Error is a CUDA runtime error: the code and its message.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errFrom(code C.int, buf []byte) error {
	if code == 0 {
		return nil
	}
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	msg := string(buf[:n])
	if msg == "" {
		msg = fmt.Sprintf("CUDA error %d", int(code))
	}
	return &Error{Code: int(code), Msg: msg}
}

// Probe reports the device count and driver/runtime versions (CUDA's
// 1000·major + 10·minor encoding) without creating a context.
func Probe() (devices, driver, runtime int, err error) {
	var d, dv, rv C.int
	buf := make([]byte, 512)
	code := C.ni_cuda_probe(&d, &dv, &rv, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	return int(d), int(dv), int(rv), errFrom(code, buf)
}

// Info are the facts of the context's device.
type Info struct {
	Name                          string
	Device, SMMajor, SMMinor      int
	SMCount                       int
	RuntimeVersion, DriverVersion int
	TotalMem, MaxSmemOptin, L2    int64
}

// Ctx is a CUDA context: one device, one stream, the kernels' error counters.
// msg receives the C side's error message of the calls made once per step
// (Sync, graph launches), so those allocate nothing.
type Ctx struct {
	c   *C.ni_cuda_ctx
	msg [768]byte
}

// NewCtx opens device dev.
func NewCtx(dev int) (*Ctx, error) {
	var code C.int
	buf := make([]byte, 512)
	c := C.ni_cuda_ctx_new(C.int(dev), &code, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	if c == nil {
		return nil, errFrom(code, buf)
	}
	return &Ctx{c: c}, nil
}

// Close releases the context.
func (x *Ctx) Close() {
	if x.c != nil {
		C.ni_cuda_ctx_free(x.c)
		x.c = nil
	}
}

// Info returns the device facts.
func (x *Ctx) Info() Info {
	var i C.ni_cuda_info
	C.ni_cuda_ctx_info(x.c, &i)
	return Info{Name: C.GoString(&i.name[0]), Device: int(i.device), SMMajor: int(i.sm_major), SMMinor: int(i.sm_minor),
		SMCount: int(i.sm_count), RuntimeVersion: int(i.runtime_version), DriverVersion: int(i.driver_version),
		TotalMem: int64(i.total_mem), MaxSmemOptin: int64(i.max_smem_optin), L2: int64(i.l2_bytes)}
}

// ScratchBytes is the op scratch available to the ops: the bound region's
// size or the context's own buffer (in a dry run: the largest request).
func (x *Ctx) ScratchBytes() int64 { return int64(C.ni_cuda_scratch_bytes(x.c)) }

// BindScratch makes [p, p+bytes) the ops' scratch (ni_cuda_bind_scratch):
// they never allocate, and a larger request is a recorded error. p = nil
// unbinds.
func (x *Ctx) BindScratch(p unsafe.Pointer, bytes int64) error {
	if code := C.ni_cuda_bind_scratch(x.c, p, C.int64_t(bytes)); code != 0 {
		return &Error{Code: int(code), Msg: "op scratch cannot be bound during a graph capture"}
	}
	return nil
}

// Sync waits for the stream and returns the first error and the counters.
func (x *Ctx) Sync() ([NumCounters]int32, error) {
	var cnt [NumCounters]C.int32_t
	buf := x.msg[:]
	code := C.ni_cuda_sync(x.c, &cnt[0], (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	var out [NumCounters]int32
	for i := range cnt {
		out[i] = int32(cnt[i])
	}
	return out, errFrom(code, buf)
}

// Malloc allocates zeroed device memory.
func (x *Ctx) Malloc(bytes int64, name string) (unsafe.Pointer, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var code C.int
	p := C.ni_cuda_malloc(x.c, C.int64_t(bytes), cn, &code)
	if p == nil {
		return nil, &Error{Code: int(code), Msg: fmt.Sprintf("cannot allocate %d bytes of device memory for %s (CUDA error %d)", bytes, name, int(code))}
	}
	return p, nil
}

// Free releases device memory.
func (x *Ctx) Free(p unsafe.Pointer) { C.ni_cuda_free(x.c, p) }

func rtErr(what string, code C.int) error {
	if code == 0 {
		return nil
	}
	return &Error{Code: int(code), Msg: fmt.Sprintf("%s: CUDA error %d", what, int(code))}
}

// H2D copies host memory to the device (synchronously).
func (x *Ctx) H2D(dst, src unsafe.Pointer, n int64) error {
	return rtErr("host→device copy", C.ni_cuda_h2d(x.c, dst, src, C.int64_t(n)))
}

// H2DAsync queues a copy from pinned host memory on the stream.
func (x *Ctx) H2DAsync(dst, pinned unsafe.Pointer, n int64) error {
	return rtErr("host→device copy", C.ni_cuda_h2d_async(x.c, dst, pinned, C.int64_t(n)))
}

// D2H copies device memory to the host (synchronously).
func (x *Ctx) D2H(dst, src unsafe.Pointer, n int64) error {
	return rtErr("device→host copy", C.ni_cuda_d2h(x.c, dst, src, C.int64_t(n)))
}

// D2D queues a device copy.
func (x *Ctx) D2D(dst, src unsafe.Pointer, n int64) error {
	return rtErr("device copy", C.ni_cuda_d2d(x.c, dst, src, C.int64_t(n)))
}

// Memset queues a byte fill.
func (x *Ctx) Memset(dst unsafe.Pointer, v byte, n int64) error {
	return rtErr("memset", C.ni_cuda_memset(x.c, dst, C.int(v), C.int64_t(n)))
}

// HostAlloc returns pinned host memory (nil on failure).
func HostAlloc(n int64) unsafe.Pointer { return C.ni_cuda_host_alloc(C.int64_t(n)) }

// HostFree releases HostAlloc memory.
func HostFree(p unsafe.Pointer) { C.ni_cuda_host_free(p) }

// Rows describes fp32 activations in device memory: (t,h,d) at P[t*LD + h*HS + d].
type Rows struct {
	P       unsafe.Pointer
	T, H, D int
	LD, HS  int64
}

func (r Rows) c() C.ni_rows {
	return C.ni_rows{p: (*C.float)(r.P), t: C.int32_t(r.T), h: C.int32_t(r.H), d: C.int32_t(r.D),
		ld: C.int64_t(r.LD), hs: C.int64_t(r.HS)}
}

// Weight is a weight descriptor whose data lives in device memory.
type Weight struct{ w C.ni_weight }

// NewWeight describes an [n,k] weight of format fmt at device address data.
// invDiv is the nvfp4 per-tensor 1/divisor (read from the payload by the
// caller; 0 for other formats). The geometry comes from the host
// ni_weight_init of kernels/cpu, so both backends agree on every offset.
func NewWeight(fmt int, n, k int64, data unsafe.Pointer, bytes int64, invDiv float32) (*Weight, error) {
	w := &Weight{}
	switch C.ni_weight_init(&w.w, C.int(fmt), C.int64_t(n), C.int64_t(k), nil, C.int64_t(bytes)) {
	case 0:
	case -2:
		return nil, fmt2Err("payload size differs from the encoded size")
	default:
		return nil, fmt2Err("invalid shape or format")
	}
	if int64(w.w.bytes) != bytes {
		return nil, fmt2Err("payload size differs from the encoded size")
	}
	w.w.data = (*C.uint8_t)(data)
	w.w.inv_div = C.float(invDiv)
	return w, nil
}

type constErr string

func (e constErr) Error() string { return string(e) }
func fmt2Err(s string) error     { return constErr(s) }

// DivOffset is the byte offset of the nvfp4 divisor inside the payload.
func (w *Weight) DivOffset() int64 { return int64(w.w.div_off) }

// KV describes one layer's paged K/V planes in device memory.
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

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Embed gathers rows ids[0..out.T).
func (x *Ctx) Embed(w *Weight, ids unsafe.Pointer, out Rows) {
	C.ni_cuda_embed(x.c, &w.w, (*C.int32_t)(ids), out.c())
}

// Matmul computes y (+)= x·wᵀ.
func (x *Ctx) Matmul(w *Weight, in, out Rows, acc bool) {
	C.ni_cuda_matmul(x.c, &w.w, in.c(), out.c(), cbool(acc))
}

// RMSNorm: y = x·rsqrt(mean(x²)+eps)·(1+w or w).
func (x *Ctx) RMSNorm(in, out Rows, w unsafe.Pointer, eps float32, zeroCentred bool) {
	C.ni_cuda_rmsnorm(x.c, in.c(), out.c(), (*C.float)(w), C.float(eps), cbool(zeroCentred))
}

// GatedRMSNorm: y = w·norm(o)·silu(z).
func (x *Ctx) GatedRMSNorm(o, z, y Rows, w unsafe.Pointer, eps float32) {
	C.ni_cuda_gated_rmsnorm(x.c, o.c(), z.c(), y.c(), (*C.float)(w), C.float(eps))
}

// L2Norm: y = x·rsqrt(Σx²+1e-6)·scale.
func (x *Ctx) L2Norm(in, out Rows, scale float32) {
	C.ni_cuda_l2norm(x.c, in.c(), out.c(), C.float(scale))
}

// RoPE applies partial NeoX RoPE in place.
func (x *Ctx) RoPE(r Rows, pos unsafe.Pointer, rot int, theta float64) {
	C.ni_cuda_rope(x.c, r.c(), (*C.int32_t)(pos), C.int(rot), C.double(theta))
}

// SigmoidMul: y = x·sigmoid(g).
func (x *Ctx) SigmoidMul(in, g, y Rows) { C.ni_cuda_sigmoid_mul(x.c, in.c(), g.c(), y.c()) }

// SwiGLU: y = silu(g)·u.
func (x *Ctx) SwiGLU(g, u, y Rows) { C.ni_cuda_swiglu(x.c, g.c(), u.c(), y.c()) }

// Add: y = a + b.
func (x *Ctx) Add(a, b, y Rows) { C.ni_cuda_add(x.c, a.c(), b.c(), y.c()) }

// Argmax writes the row argmax (int32 per token) to out.
func (x *Ctx) Argmax(in Rows, out unsafe.Pointer) { C.ni_cuda_argmax(x.c, in.c(), (*C.int32_t)(out)) }

// GDNGate computes g and beta.
func (x *Ctx) GDNGate(a, b Rows, aLog, dtBias unsafe.Pointer, g, beta Rows) {
	C.ni_cuda_gdn_gate(x.c, a.c(), b.c(), (*C.float)(aLog), (*C.float)(dtBias), g.c(), beta.c())
}

// Conv1DSiLU runs the causal depthwise conv + SiLU with state slots.
func (x *Ctx) Conv1DSiLU(in, out Rows, w unsafe.Pointer, kw int, state unsafe.Pointer, stateBF16 bool, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int) {
	C.ni_cuda_conv1d_silu(x.c, in.c(), out.c(), (*C.float)(w), C.int(kw), state, cbool(stateBF16), C.int64_t(slotStride),
		C.int32_t(slots), (*C.int32_t)(inSlot), C.int(outSlot))
}

// DeltaRecurrent runs the recurrent gated delta rule.
func (x *Ctx) DeltaRecurrent(q, k, v, g, beta Rows, state unsafe.Pointer, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int, o Rows) {
	C.ni_cuda_gdn_recurrent(x.c, q.c(), k.c(), v.c(), g.c(), beta.c(), (*C.float)(state), C.int64_t(slotStride),
		C.int32_t(slots), (*C.int32_t)(inSlot), C.int(outSlot), o.c())
}

// DeltaChunked runs the chunked (WY) gated delta rule.
func (x *Ctx) DeltaChunked(q, k, v, g, beta Rows, state unsafe.Pointer, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int, o Rows) {
	C.ni_cuda_gdn_chunked(x.c, q.c(), k.c(), v.c(), g.c(), beta.c(), (*C.float)(state), C.int64_t(slotStride),
		C.int32_t(slots), (*C.int32_t)(inSlot), C.int(outSlot), o.c())
}

// KVAppend writes k, v at positions pos.
func (x *Ctx) KVAppend(kv KV, k, v Rows, pos unsafe.Pointer) {
	C.ni_cuda_kv_append(x.c, kv.c(), k.c(), v.c(), (*C.int32_t)(pos))
}

// Attention runs causal GQA attention over the cache.
func (x *Ctx) Attention(q Rows, kv KV, pos unsafe.Pointer, scale float32, out Rows) {
	C.ni_cuda_attention(x.c, q.c(), kv.c(), (*C.int32_t)(pos), C.float(scale), out.c())
}

// Launch is one kernel launch recorded by a dry run (ni_cuda_launch).
type Launch struct {
	Kernel  string
	Grid    [3]uint32
	Block   [3]uint32
	Smem    int64 // dynamic shared memory bytes
	Skipped bool  // empty grid: nothing is launched
	Invalid bool  // the configuration exceeds the device's launch limits
}

// Threads is the block's thread count.
func (l Launch) Threads() int64 { return int64(l.Block[0]) * int64(l.Block[1]) * int64(l.Block[2]) }

// Blocks is the grid's block count.
func (l Launch) Blocks() int64 { return int64(l.Grid[0]) * int64(l.Grid[1]) * int64(l.Grid[2]) }

// DryRun starts (on) or ends a dry run: while it lasts, the ops check and
// log every launch configuration instead of running kernels (device
// pointers may be fake), and ScratchBytes reports the scratch they would
// need. smCount and maxSmemOptin, when positive, replace those device facts
// for the launchers during the run. Starting it again empties the log. Only
// the host SIMT harness (-tags cudasim) has dry runs.
func (x *Ctx) DryRun(on bool, smCount int, maxSmemOptin int64) error {
	if C.ni_cuda_dry_run(x.c, cbool(on), C.int(smCount), C.int64_t(maxSmemOptin)) != 0 {
		return fmt2Err("dry runs need the host SIMT harness (-tags cudasim)")
	}
	return nil
}

// Launches returns the dry run's launch log.
func (x *Ctx) Launches() []Launch {
	n := int64(C.ni_cuda_dry_run_count(x.c))
	out := make([]Launch, 0, n)
	for i := int64(0); i < n; i++ {
		var l C.ni_cuda_launch
		if C.ni_cuda_dry_run_get(x.c, C.int64_t(i), &l) != 0 {
			break
		}
		out = append(out, Launch{Kernel: C.GoString(l.kernel),
			Grid:  [3]uint32{uint32(l.grid[0]), uint32(l.grid[1]), uint32(l.grid[2])},
			Block: [3]uint32{uint32(l.block[0]), uint32(l.block[1]), uint32(l.block[2])},
			Smem:  int64(l.smem), Skipped: l.skipped != 0, Invalid: l.invalid != 0})
	}
	return out
}

// SampleConfig holds the sampling parameters of Sample (pkg/sample.Config).
type SampleConfig struct {
	Temperature, TopP, MinP, Presence, Frequency, Repetition float64
	TopK                                                     int
	Seed                                                     uint64
}

// Sample draws one token from the logits row x (T = 1) on the device: the
// id goes to out (int32), counts[id] (int32[vocab]) and the int64 RNG
// position at rngPos are incremented; seen is uint8[vocab] (prompt tokens).
func (x *Ctx) Sample(in Rows, out, counts, seen unsafe.Pointer, cfg SampleConfig, rngPos unsafe.Pointer) {
	c := C.ni_sample_cfg{temperature: C.double(cfg.Temperature), top_p: C.double(cfg.TopP), min_p: C.double(cfg.MinP),
		presence: C.double(cfg.Presence), frequency: C.double(cfg.Frequency), repetition: C.double(cfg.Repetition),
		top_k: C.int32_t(cfg.TopK), seed: C.uint64_t(cfg.Seed)}
	C.ni_cuda_sample(x.c, in.c(), (*C.int32_t)(out), (*C.int32_t)(counts), (*C.uint8_t)(seen), c, (*C.int64_t)(rngPos))
}
