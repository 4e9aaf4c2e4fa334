package backend

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/ninfer/ninfer/kernels/cpu"
	"github.com/ninfer/ninfer/pkg/format"
)

// CPUOptions configures the CPU backend.
type CPUOptions struct {
	Threads int    // worker threads including the caller; 0 = all cores; capped at MaxCPUThreads
	ISA     string // "auto" (default), "scalar", "avx2" or "avx512"; env NINFER_CPU_ISA overrides "auto"
	// AlwaysParallel runs every op on the pool, even tiny ones that would
	// otherwise run on the caller (tests use it to exercise the threaded paths).
	AlwaysParallel bool
	// Activations is "fp32" (default ""), "auto" or "int8": int8
	// activations for the T ≤ 16 matmuls of q4–q8 weights (actq8.go).
	Activations string
}

// MaxCPUThreads is the largest thread pool of the CPU backend.
const MaxCPUThreads = cpu.MaxThreads

// CPU is the native CPU backend (C kernels via cgo, AVX-512 and AVX2+FMA
// levels with a scalar fallback, persistent pthread pool).
type CPU struct {
	ops
	ctx     *cpu.Ctx
	threads int
	isa     string
	bufs    map[*Buffer]struct{}
}

var _ Backend = (*CPU)(nil)

// NewCPU starts a CPU backend.
func NewCPU(o CPUOptions) (*CPU, error) {
	th := o.Threads
	if th <= 0 {
		th = runtime.NumCPU()
	}
	th = min(th, cpu.MaxThreads) // the pool's limit: Threads reports what runs
	isaName := o.ISA
	if isaName == "" || isaName == "auto" {
		if env := os.Getenv("NINFER_CPU_ISA"); env != "" {
			isaName = env
		} else {
			isaName = "auto"
		}
	}
	var isa int
	switch isaName {
	case "auto":
		isa = cpu.BestISA()
	case "scalar":
		isa = cpu.ISAScalar
	case "avx2":
		isa = cpu.ISAAVX2
		if cpu.BestISA() < cpu.ISAAVX2 {
			return nil, fmt.Errorf("backend: isa avx2 requested but this CPU lacks AVX2/FMA/F16C")
		}
	case "avx512":
		isa = cpu.ISAAVX512
		if cpu.BestISA() < cpu.ISAAVX512 {
			return nil, fmt.Errorf("backend: isa avx512 requested but this CPU (or its OS) lacks AVX-512 F/BW/DQ/VL with ZMM state enabled")
		}
	default:
		return nil, fmt.Errorf("backend: unknown isa %q (want auto, scalar, avx2 or avx512)", isaName)
	}
	act, err := ParseActivations(o.Activations)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	ctx, err := cpu.NewCtx(th, isa)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	if o.AlwaysParallel {
		ctx.SetSerialWork(0)
	}
	name := "scalar"
	switch isa {
	case cpu.ISAAVX2:
		name = "avx2"
	case cpu.ISAAVX512:
		name = "avx512"
	}
	c := &CPU{ctx: ctx, threads: th, isa: name, bufs: map[*Buffer]struct{}{}}
	c.ops.k = cpuKernels{ctx, &act, autoQ8Int8(name), pieceBytes, &schedClock{}}
	return c, nil
}

// Name reports the backend and instruction set, e.g. "cpu-avx2" or "cpu-avx512".
func (c *CPU) Name() string { return "cpu-" + c.isa }

// ISA is the instruction set in use ("scalar", "avx2" or "avx512").
func (c *CPU) ISA() string { return c.isa }

// ISADetail is the instruction set with the integer-dot extensions its
// int8 GEMVs use, as the switches read now (cpu.Ctx.Int8Dots):
// "avx512+vnni+vbmi", "avx2+avxvnni" (an AVX2-level CPU with AVX-VNNI,
// unless NINFER_CPU_AVXVNNI=0), "avx2", "scalar" (ninfer-run's load line).
func (c *CPU) ISADetail() string {
	return strings.Join(append([]string{c.isa}, c.ctx.Int8Dots()...), "+")
}

// Int8PrefillGEMM reports whether int8 activations at T > 16 (prefill)
// run the int8 GEMM for w (AVX-512 VNNI; AVX-VNNI, or q4–q6 on AVX2; never
// with NINFER_CPU_PREFILL=fp32); where they do not, they stay on fp32
// activations.
func (c *CPU) Int8PrefillGEMM(w *Weight) bool { return c.ctx.Q8GEMM(w.prep.(*cpu.Weight)) }

// Threads is the pool size.
func (c *CPU) Threads() int { return c.threads }

// ScratchBytes is the kernels' per-thread scratch (tile buffers, state copies).
func (c *CPU) ScratchBytes() int64 { return c.ctx.ScratchBytes() }

// Alloc allocates a zeroed buffer.
func (c *CPU) Alloc(name string, bytes int64) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("backend: alloc %s: size %d must be positive", name, bytes)
	}
	p := cpu.Alloc(bytes)
	if p == nil {
		return nil, fmt.Errorf("backend: alloc %s: out of memory (%d bytes)", name, bytes)
	}
	b := &Buffer{name: name, bytes: bytes, p: p}
	c.bufs[b] = struct{}{}
	return b, nil
}

// Free releases a buffer.
func (c *CPU) Free(b *Buffer) {
	if _, ok := c.bufs[b]; !ok {
		return
	}
	delete(c.bufs, b)
	cpu.Free(b.p)
	b.p = nil
}

// Close frees every buffer and stops the pool.
func (c *CPU) Close() error {
	for b := range c.bufs {
		c.Free(b)
	}
	c.ctx.Close()
	return nil
}

// Sync returns and clears the first error recorded since the last Sync
// (the CPU runs every op synchronously).
func (c *CPU) Sync() error { return c.takeErr() }

// Upload copies host bytes to dst.
func (c *CPU) Upload(dst View, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	p, err := spanPtr("upload", dst, int64(len(src)))
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(p), len(src)), src)
	return nil
}

// UploadI32 copies int32 values to dst.
func (c *CPU) UploadI32(dst View, src []int32) error {
	if len(src) == 0 {
		return nil
	}
	p, err := spanPtr("upload", dst, 4*int64(len(src)))
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*int32)(p), len(src)), src)
	return nil
}

// UploadF32 copies float32 values to dst.
func (c *CPU) UploadF32(dst View, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	p, err := spanPtr("upload", dst, 4*int64(len(src)))
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*float32)(p), len(src)), src)
	return nil
}

// Download copies len(dst) bytes from src.
func (c *CPU) Download(dst []byte, src View) error {
	if len(dst) == 0 {
		return nil
	}
	p, err := spanPtr("download", src, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, unsafe.Slice((*byte)(p), len(dst)))
	return nil
}

// DownloadF32 copies float32 values from src.
func (c *CPU) DownloadF32(dst []float32, src View) error {
	if len(dst) == 0 {
		return nil
	}
	p, err := spanPtr("download", src, 4*int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, unsafe.Slice((*float32)(p), len(dst)))
	return nil
}

// DownloadI32 copies int32 values from src.
func (c *CPU) DownloadI32(dst []int32, src View) error {
	if len(dst) == 0 {
		return nil
	}
	p, err := spanPtr("download", src, 4*int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, unsafe.Slice((*int32)(p), len(dst)))
	return nil
}

// Zero clears bytes at dst.
func (c *CPU) Zero(dst View, bytes int64) {
	if err := span(dst, bytes); err != nil {
		c.fail("zero", "%v", err)
		return
	}
	clear(unsafe.Slice((*byte)(dst.ptr()), bytes))
}

// Copy copies bytes between views (ranges must not overlap).
func (c *CPU) Copy(dst, src View, bytes int64) {
	if err := span(dst, bytes); err != nil {
		c.fail("copy", "dst: %v", err)
		return
	}
	if err := span(src, bytes); err != nil {
		c.fail("copy", "src: %v", err)
		return
	}
	copy(unsafe.Slice((*byte)(dst.ptr()), bytes), unsafe.Slice((*byte)(src.ptr()), bytes))
}

var cpuFormats = map[format.Format]int{
	format.FP32: cpu.WF32, format.BF16: cpu.WBF16, format.Q4G64: cpu.WQ4, format.Q5G64: cpu.WQ5,
	format.Q6G64: cpu.WQ6, format.Q8G32: cpu.WQ8, format.NVFP4: cpu.WNVFP4, format.FP8Row: cpu.WFP8Row,
}

// PrepareWeight binds an [n,k] matrix.
func (c *CPU) PrepareWeight(name string, f format.Format, n, k int, v View, bytes int64) (*Weight, error) {
	cf, ok := cpuFormats[f]
	if !ok {
		return nil, fmt.Errorf("backend: weight %s: format %q is not a matrix format", name, f)
	}
	want, err := format.EncodedSize(f, []int64{int64(n), int64(k)})
	if err != nil {
		return nil, fmt.Errorf("backend: weight %s: %w", name, err)
	}
	if want != bytes {
		return nil, fmt.Errorf("backend: weight %s: %d bytes, want %d for %s [%d,%d]", name, bytes, want, f, n, k)
	}
	if err := span(v, bytes); err != nil {
		return nil, fmt.Errorf("backend: weight %s: %w", name, err)
	}
	d, err := cpu.NewWeight(cf, int64(n), int64(k), v.ptr(), bytes)
	if err != nil {
		return nil, fmt.Errorf("backend: weight %s (%s [%d,%d]): %w", name, f, n, k, err)
	}
	return &Weight{Name: name, Format: f, N: n, K: k, View: v, Bytes: bytes, prep: d, owner: &c.ops}, nil
}

// cpuKernels runs validated ops on the C kernels (kernels/cpu).
type cpuKernels struct {
	ctx *cpu.Ctx
	act *string // activation mode (actq8.go)
	// autoQ8 is autoQ8Int8 of the level, fixed at construction (the CPU's
	// traits do not change; int8Act runs for every matmul)
	autoQ8 bool
	// pieceBytes: a decode-sized matmul (T ≤ cpu.SmallT) by a larger
	// weight runs as row pieces of about this many bytes (pieces); 0 = never
	pieceBytes int64
	sched      *schedClock // the backend's yields to the Go scheduler
}

// yieldEvery is how often the CPU backend yields to the Go scheduler
// (schedClock.yield, checked before every matmul and matmul piece).
const yieldEvery = 3 * time.Millisecond

// schedClock times the CPU backend's yields to the Go scheduler. A
// goroutine that runs back-to-back cgo calls (this backend's ops) is not
// rescheduled; after 10 ms the Go runtime's sysmon force-preempts it, takes
// its P at the next call and then polls every 20 µs for a while, each
// wake-up taking a CPU from the kernel pool's threads. runtime.Gosched
// bumps the goroutine's scheduling tick but also wakes an idle Go thread
// (wakep), so it runs when the last one is yieldEvery old: with a matmul
// (piece) at most ~5 ms after it, within the 10 ms (docs/PERF.md
// "Eleventh session").
type schedClock struct{ last time.Time }

func (c *schedClock) yield() {
	if now := time.Now(); now.Sub(c.last) >= yieldEvery {
		runtime.Gosched()
		c.last = now
	}
}

// pieceBytes is the most weight bytes one decode-sized matmul call streams:
// 128 MiB, ~5 ms at 25 GB/s. A Go goroutine inside one cgo call for 10 ms
// is force-preempted by the runtime's sysmon, which then takes its P and
// polls every 20 µs for a while, each wake-up taking a CPU from the kernel
// pool (an output head: 270 MB at the 0.8B shape in q8, ~12 ms on 2 cores).
// The backend may yield between pieces (schedClock; 32 MiB pieces measured
// no faster: docs/PERF.md "Eleventh session").
const pieceBytes = 128 << 20

// pieces runs matmul(w, y) on rows [r0, r1) pieces of w (and the matching
// columns of y) when x is decode-sized and w larger than k.pieceBytes, else
// once on all of w, offering the Go scheduler a yield before each call.
// Each row is computed exactly as in one call (cpu.Weight.Rows).
func (k cpuKernels) pieces(w *cpu.Weight, x, y rows, matmul func(w *cpu.Weight, y rows)) {
	k.sched.yield()
	n := w.N()
	if k.pieceBytes <= 0 || x.t > cpu.SmallT || w.Bytes() <= k.pieceBytes {
		matmul(w, y)
		return
	}
	per := max((k.pieceBytes*n/w.Bytes())/128*128, 128) // rows a piece: whole 128-row blocks
	for r0 := int64(0); r0 < n; r0 += per {
		r1 := min(r0+per, n)
		v, ok := w.Rows(r0, r1)
		if !ok { // a format without row views (known at the first piece)
			matmul(w, y)
			return
		}
		if r0 > 0 {
			k.sched.yield()
		}
		ys := y
		ys.p, ys.d = unsafe.Add(y.p, 4*r0), int(r1-r0)
		matmul(v, ys)
	}
}

func cr(r rows) cpu.Rows { return cpu.Rows{P: r.p, T: r.t, H: r.h, D: r.d, LD: r.ld, HS: r.hs} }

func ckv(kv kvPlanes) cpu.KV {
	return cpu.KV{Fmt: kv.fmt, KVHeads: kv.kvh, HeadDim: kv.hd, Pages: kv.pages, K: kv.k, V: kv.v, KS: kv.ks, VS: kv.vs,
		BlockTable: kv.table, TableLen: kv.tableLen}
}

func (k cpuKernels) hostInt32(p unsafe.Pointer) (int32, bool) { return *(*int32)(p), true }

func (k cpuKernels) embed(w any, ids unsafe.Pointer, out rows) int {
	return k.ctx.Embed(w.(*cpu.Weight), ids, cr(out))
}
func (k cpuKernels) matmul(w any, x, y rows, acc bool) {
	k.pieces(w.(*cpu.Weight), x, y, func(w *cpu.Weight, y rows) { k.ctx.Matmul(w, cr(x), cr(y), acc) })
}
func (k cpuKernels) rmsnorm(x, y rows, w unsafe.Pointer, eps float32, zc bool) {
	k.ctx.RMSNorm(cr(x), cr(y), w, eps, zc)
}
func (k cpuKernels) gatedRMSNorm(o, z, y rows, w unsafe.Pointer, eps float32) {
	k.ctx.GatedRMSNorm(cr(o), cr(z), cr(y), w, eps)
}
func (k cpuKernels) l2norm(x, y rows, scale float32) { k.ctx.L2Norm(cr(x), cr(y), scale) }
func (k cpuKernels) rope(x rows, pos unsafe.Pointer, rot int, theta float64) {
	k.ctx.RoPE(cr(x), pos, rot, theta)
}
func (k cpuKernels) sigmoidMul(x, g, y rows)           { k.ctx.SigmoidMul(cr(x), cr(g), cr(y)) }
func (k cpuKernels) swiglu(g, u, y rows)               { k.ctx.SwiGLU(cr(g), cr(u), cr(y)) }
func (k cpuKernels) add(a, b, y rows)                  { k.ctx.Add(cr(a), cr(b), cr(y)) }
func (k cpuKernels) argmax(x rows, out unsafe.Pointer) { k.ctx.Argmax(cr(x), out) }
func (k cpuKernels) gdnGate(a, b rows, aLog, dtBias unsafe.Pointer, g, beta rows) {
	k.ctx.GDNGate(cr(a), cr(b), aLog, dtBias, cr(g), cr(beta))
}
func (k cpuKernels) conv1d(x, y rows, w unsafe.Pointer, kw int, state unsafe.Pointer, bf16 bool, slotStride int64, _ int, inSlot unsafe.Pointer, outSlot int) {
	k.ctx.Conv1DSiLU(cr(x), cr(y), w, kw, state, bf16, slotStride, inSlot, outSlot)
}
func (k cpuKernels) deltaRecurrent(q, kk, v, g, beta rows, state unsafe.Pointer, slotStride int64, _ int, inSlot unsafe.Pointer, outSlot int, o rows) {
	k.ctx.DeltaRecurrent(cr(q), cr(kk), cr(v), cr(g), cr(beta), state, slotStride, inSlot, outSlot, cr(o))
}
func (k cpuKernels) deltaChunked(q, kk, v, g, beta rows, state unsafe.Pointer, slotStride int64, _ int, inSlot unsafe.Pointer, outSlot int, o rows) {
	k.ctx.DeltaChunked(cr(q), cr(kk), cr(v), cr(g), cr(beta), state, slotStride, inSlot, outSlot, cr(o))
}
func (k cpuKernels) kvAppend(kv kvPlanes, kk, v rows, pos unsafe.Pointer) int {
	return k.ctx.KVAppend(ckv(kv), cr(kk), cr(v), pos)
}
func (k cpuKernels) attention(q rows, kv kvPlanes, pos unsafe.Pointer, scale float32, out rows) int {
	return k.ctx.Attention(cr(q), ckv(kv), pos, scale, cr(out))
}

func (k cpuKernels) sample(x rows, out, counts, seen unsafe.Pointer, cfg sampleCfg, rngPos unsafe.Pointer) {
	hostSample(x, out, counts, seen, cfg, rngPos)
}
