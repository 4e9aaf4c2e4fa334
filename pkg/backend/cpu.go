package backend

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"unsafe"

	"github.com/ninfer/ninfer/kernels/cpu"
	"github.com/ninfer/ninfer/pkg/format"
)

// CPUOptions configures the CPU backend.
type CPUOptions struct {
	Threads int    // worker threads including the caller; 0 = all cores
	ISA     string // "auto" (default), "scalar" or "avx2"; env NINFER_CPU_ISA overrides "auto"
	// AlwaysParallel runs every op on the pool, even tiny ones that would
	// otherwise run on the caller (tests use it to exercise the threaded paths).
	AlwaysParallel bool
}

// CPU is the native CPU backend (C kernels via cgo, AVX2+FMA with a scalar
// fallback, persistent pthread pool).
type CPU struct {
	ctx     *cpu.Ctx
	threads int
	isa     string
	err     error
	bufs    map[*Buffer]struct{}
}

var _ Backend = (*CPU)(nil)

// NewCPU starts a CPU backend.
func NewCPU(o CPUOptions) (*CPU, error) {
	th := o.Threads
	if th <= 0 {
		th = runtime.NumCPU()
	}
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
	default:
		return nil, fmt.Errorf("backend: unknown isa %q (want auto, scalar or avx2)", isaName)
	}
	ctx, err := cpu.NewCtx(th, isa)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	if o.AlwaysParallel {
		ctx.SetSerialWork(0)
	}
	name := "scalar"
	if isa == cpu.ISAAVX2 {
		name = "avx2"
	}
	return &CPU{ctx: ctx, threads: th, isa: name, bufs: map[*Buffer]struct{}{}}, nil
}

// Name reports the backend and instruction set, e.g. "cpu-avx2".
func (c *CPU) Name() string { return "cpu-" + c.isa }

// ISA is the instruction set in use ("scalar" or "avx2").
func (c *CPU) ISA() string { return c.isa }

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

// Sync returns and clears the first error recorded since the last Sync.
func (c *CPU) Sync() error {
	err := c.err
	c.err = nil
	return err
}

func (c *CPU) fail(op, f string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("backend %s: %s", op, fmt.Sprintf(f, args...))
	}
}

func (c *CPU) span(v View, n int64) error {
	if v.Buf == nil || v.Buf.p == nil {
		return errors.New("nil or freed buffer")
	}
	if v.Off < 0 || n < 0 || v.Off+n > v.Buf.bytes {
		return fmt.Errorf("range [%d,%d) outside buffer %s of %d bytes", v.Off, v.Off+n, v.Buf.name, v.Buf.bytes)
	}
	return nil
}

func (c *CPU) hostCopy(op string, v View, n int64) (unsafe.Pointer, error) {
	if err := c.span(v, n); err != nil {
		return nil, fmt.Errorf("backend %s: %w", op, err)
	}
	return v.ptr(), nil
}

// Upload copies host bytes to dst.
func (c *CPU) Upload(dst View, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	p, err := c.hostCopy("upload", dst, int64(len(src)))
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
	p, err := c.hostCopy("upload", dst, 4*int64(len(src)))
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
	p, err := c.hostCopy("upload", dst, 4*int64(len(src)))
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
	p, err := c.hostCopy("download", src, int64(len(dst)))
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
	p, err := c.hostCopy("download", src, 4*int64(len(dst)))
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
	p, err := c.hostCopy("download", src, 4*int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, unsafe.Slice((*int32)(p), len(dst)))
	return nil
}

// Zero clears bytes at dst.
func (c *CPU) Zero(dst View, bytes int64) {
	if err := c.span(dst, bytes); err != nil {
		c.fail("zero", "%v", err)
		return
	}
	clear(unsafe.Slice((*byte)(dst.ptr()), bytes))
}

// Copy copies bytes between views (ranges must not overlap).
func (c *CPU) Copy(dst, src View, bytes int64) {
	if err := c.span(dst, bytes); err != nil {
		c.fail("copy", "dst: %v", err)
		return
	}
	if err := c.span(src, bytes); err != nil {
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
	if err := c.span(v, bytes); err != nil {
		return nil, fmt.Errorf("backend: weight %s: %w", name, err)
	}
	d, err := cpu.NewWeight(cf, int64(n), int64(k), v.ptr(), bytes)
	if err != nil {
		return nil, fmt.Errorf("backend: weight %s (%s [%d,%d]): %w", name, f, n, k, err)
	}
	return &Weight{Name: name, Format: f, N: n, K: k, View: v, Bytes: bytes, prep: d}, nil
}

func (c *CPU) rows(op, arg string, x Tensor) (cpu.Rows, bool) {
	if x.T < 0 || x.H <= 0 || x.D <= 0 || x.LD < 0 || x.HS < 0 {
		c.fail(op, "%s: bad shape T=%d H=%d D=%d LD=%d HS=%d", arg, x.T, x.H, x.D, x.LD, x.HS)
		return cpu.Rows{}, false
	}
	if err := c.span(x.View, x.extent()); err != nil {
		c.fail(op, "%s: %v", arg, err)
		return cpu.Rows{}, false
	}
	return cpu.Rows{P: x.ptr(), T: x.T, H: x.H, D: x.D, LD: int64(x.LD), HS: int64(x.HS)}, true
}

func (c *CPU) vec(op, arg string, v View, bytes int64) (unsafe.Pointer, bool) {
	if err := c.span(v, bytes); err != nil {
		c.fail(op, "%s: %v", arg, err)
		return nil, false
	}
	return v.ptr(), true
}

func same(a, b Tensor) bool { return a.T == b.T && a.H == b.H && a.D == b.D }

func (c *CPU) weight(op string, w *Weight) (*cpu.Weight, bool) {
	if w == nil {
		c.fail(op, "nil weight")
		return nil, false
	}
	d, ok := w.prep.(*cpu.Weight)
	if !ok {
		c.fail(op, "weight %s was not prepared by this backend", w.Name)
		return nil, false
	}
	return d, true
}

// Embed gathers embedding rows.
func (c *CPU) Embed(out Tensor, w *Weight, ids View) {
	d, ok := c.weight("embed", w)
	if !ok {
		return
	}
	o, ok := c.rows("embed", "out", out)
	if !ok {
		return
	}
	if out.H != 1 || out.D != w.K {
		c.fail("embed", "out width %d×%d, weight %s has K=%d", out.H, out.D, w.Name, w.K)
		return
	}
	p, ok := c.vec("embed", "ids", ids, 4*int64(out.T))
	if !ok {
		return
	}
	if bad := c.ctx.Embed(d, p, o); bad > 0 {
		c.fail("embed", "%d token ids outside [0,%d) of %s", bad, w.N, w.Name)
	}
}

// MatMul computes y (+)= x·wᵀ.
func (c *CPU) MatMul(y, x Tensor, w *Weight, accumulate bool) {
	d, ok := c.weight("matmul", w)
	if !ok {
		return
	}
	xr, ok1 := c.rows("matmul", "x", x)
	yr, ok2 := c.rows("matmul", "y", y)
	if !ok1 || !ok2 {
		return
	}
	if x.H != 1 || y.H != 1 || x.D != w.K || y.D != w.N || x.T != y.T {
		c.fail("matmul", "%s [%d,%d]: x is [%d,%d×%d], y is [%d,%d×%d]", w.Name, w.N, w.K, x.T, x.H, x.D, y.T, y.H, y.D)
		return
	}
	if x.T == 0 {
		return
	}
	c.ctx.Matmul(d, xr, yr, accumulate)
}

// RMSNorm normalises each (t,h) row over D.
func (c *CPU) RMSNorm(y, x Tensor, w View, eps float32, zeroCentred bool) {
	xr, ok1 := c.rows("rmsnorm", "x", x)
	yr, ok2 := c.rows("rmsnorm", "y", y)
	wp, ok3 := c.vec("rmsnorm", "w", w, 4*int64(x.D))
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if !same(x, y) {
		c.fail("rmsnorm", "x and y shapes differ")
		return
	}
	c.ctx.RMSNorm(xr, yr, wp, eps, zeroCentred)
}

// GatedRMSNorm computes y = w·norm(o)·silu(z).
func (c *CPU) GatedRMSNorm(y, o, z Tensor, w View, eps float32) {
	or, ok1 := c.rows("gated_rmsnorm", "o", o)
	zr, ok2 := c.rows("gated_rmsnorm", "z", z)
	yr, ok3 := c.rows("gated_rmsnorm", "y", y)
	wp, ok4 := c.vec("gated_rmsnorm", "w", w, 4*int64(o.D))
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if !same(o, z) || !same(o, y) {
		c.fail("gated_rmsnorm", "o, z, y shapes differ")
		return
	}
	c.ctx.GatedRMSNorm(or, zr, yr, wp, eps)
}

// L2Norm computes y = x·rsqrt(Σx²+1e-6)·scale per (t,h).
func (c *CPU) L2Norm(y, x Tensor, scale float32) {
	xr, ok1 := c.rows("l2norm", "x", x)
	yr, ok2 := c.rows("l2norm", "y", y)
	if !ok1 || !ok2 {
		return
	}
	if !same(x, y) {
		c.fail("l2norm", "x and y shapes differ")
		return
	}
	c.ctx.L2Norm(xr, yr, scale)
}

// RoPE rotates the first rotaryDim dims of each head in place.
func (c *CPU) RoPE(x Tensor, pos View, rotaryDim int, theta float64) {
	xr, ok1 := c.rows("rope", "x", x)
	pp, ok2 := c.vec("rope", "pos", pos, 4*int64(x.T))
	if !ok1 || !ok2 {
		return
	}
	if rotaryDim <= 0 || rotaryDim%2 != 0 || rotaryDim > x.D || rotaryDim > 1024 || !(theta > 0) {
		c.fail("rope", "rotary dim %d / theta %g invalid for head dim %d", rotaryDim, theta, x.D)
		return
	}
	c.ctx.RoPE(xr, pp, rotaryDim, theta)
}

func (c *CPU) ew3(op string, y, a, b Tensor) (cpu.Rows, cpu.Rows, cpu.Rows, bool) {
	ar, ok1 := c.rows(op, "a", a)
	br, ok2 := c.rows(op, "b", b)
	yr, ok3 := c.rows(op, "y", y)
	if !ok1 || !ok2 || !ok3 {
		return ar, br, yr, false
	}
	if !same(a, b) || !same(a, y) {
		c.fail(op, "shapes differ: [%d,%d,%d] [%d,%d,%d] → [%d,%d,%d]", a.T, a.H, a.D, b.T, b.H, b.D, y.T, y.H, y.D)
		return ar, br, yr, false
	}
	return ar, br, yr, true
}

// SigmoidMul computes y = x·sigmoid(g).
func (c *CPU) SigmoidMul(y, x, g Tensor) {
	if xr, gr, yr, ok := c.ew3("sigmoid_mul", y, x, g); ok {
		c.ctx.SigmoidMul(xr, gr, yr)
	}
}

// SwiGLU computes y = silu(g)·u.
func (c *CPU) SwiGLU(y, g, u Tensor) {
	if gr, ur, yr, ok := c.ew3("swiglu", y, g, u); ok {
		c.ctx.SwiGLU(gr, ur, yr)
	}
}

// Add computes y = a + b.
func (c *CPU) Add(y, a, b Tensor) {
	if ar, br, yr, ok := c.ew3("add", y, a, b); ok {
		c.ctx.Add(ar, br, yr)
	}
}

// Argmax writes the per-row argmax (int32) of a one-head tensor.
func (c *CPU) Argmax(out View, x Tensor) {
	xr, ok1 := c.rows("argmax", "x", x)
	op, ok2 := c.vec("argmax", "out", out, 4*int64(x.T))
	if !ok1 || !ok2 {
		return
	}
	if x.H != 1 {
		c.fail("argmax", "x must have one head")
		return
	}
	c.ctx.Argmax(xr, op)
}

// GDNGate computes beta = sigmoid(b), g = −exp(A_log)·softplus(a+dt_bias).
func (c *CPU) GDNGate(g, beta, a, b Tensor, aLog, dtBias View) {
	ar, ok1 := c.rows("gdn_gate", "a", a)
	br, ok2 := c.rows("gdn_gate", "b", b)
	gr, ok3 := c.rows("gdn_gate", "g", g)
	betar, ok4 := c.rows("gdn_gate", "beta", beta)
	al, ok5 := c.vec("gdn_gate", "a_log", aLog, 4*int64(a.H))
	dt, ok6 := c.vec("gdn_gate", "dt_bias", dtBias, 4*int64(a.H))
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return
	}
	if a.D != 1 || !same(a, b) || !same(a, g) || !same(a, beta) {
		c.fail("gdn_gate", "a, b, g, beta must be [T, nv, 1] alike")
		return
	}
	c.ctx.GDNGate(ar, br, al, dt, gr, betar)
}

func (c *CPU) slots(op string, st StateSlots, inSlot View, outSlot, t int, slotBytes int64) (unsafe.Pointer, unsafe.Pointer, bool) {
	if st.Slots <= 0 || st.SlotBytes < slotBytes {
		c.fail(op, "state: %d slots of %d bytes, need ≥ 1 slot of %d bytes", st.Slots, st.SlotBytes, slotBytes)
		return nil, nil, false
	}
	sp, ok := c.vec(op, "state", st.View, int64(st.Slots)*st.SlotBytes)
	if !ok {
		return nil, nil, false
	}
	ip, ok := c.vec(op, "in_slot", inSlot, 4)
	if !ok {
		return nil, nil, false
	}
	if in := *(*int32)(ip); in < 0 || int(in) >= st.Slots {
		c.fail(op, "input slot %d outside [0,%d)", in, st.Slots)
		return nil, nil, false
	}
	if (outSlot == PerToken && t > st.Slots) || (outSlot != PerToken && (outSlot < 0 || outSlot >= st.Slots)) {
		c.fail(op, "output slot %d for %d tokens with %d slots", outSlot, t, st.Slots)
		return nil, nil, false
	}
	return sp, ip, true
}

// Conv1DSiLU runs the causal depthwise conv (width kw) + SiLU over the
// channels of x, reading/writing the conv window slots ([C, kw−1], bf16
// when st.BF16, else fp32; see ni_conv1d_silu).
func (c *CPU) Conv1DSiLU(y, x Tensor, w View, kw int, st StateSlots, inSlot View, outSlot int) {
	xr, ok1 := c.rows("conv1d", "x", x)
	yr, ok2 := c.rows("conv1d", "y", y)
	wp, ok3 := c.vec("conv1d", "w", w, 4*int64(x.D)*int64(kw))
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if x.H != 1 || !same(x, y) || kw < 1 || kw > 16 {
		c.fail("conv1d", "x/y must be alike one-head tensors, kernel width %d in [1,16]", kw)
		return
	}
	elem := int64(4)
	if st.BF16 {
		elem = 2
	}
	sp, ip, ok := c.slots("conv1d", st, inSlot, outSlot, x.T, elem*int64(x.D)*int64(kw-1))
	if !ok {
		return
	}
	if st.SlotBytes%elem != 0 {
		c.fail("conv1d", "state slot of %d bytes is not a whole number of %d-byte elements", st.SlotBytes, elem)
		return
	}
	c.ctx.Conv1DSiLU(xr, yr, wp, kw, sp, st.BF16, st.SlotBytes/elem, ip, outSlot)
}

func (c *CPU) delta(op string, o, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int) (rs [6]cpu.Rows, sp, ip unsafe.Pointer, ok bool) {
	names := [6]string{"o", "q", "k", "v", "g", "beta"}
	ts := [6]Tensor{o, q, k, v, g, beta}
	for i := range ts {
		if rs[i], ok = c.rows(op, names[i], ts[i]); !ok {
			return
		}
	}
	ok = false
	if !same(o, v) || !same(q, k) || q.T != v.T || g.T != v.T || g.H != v.H || g.D != 1 || !same(g, beta) ||
		v.H%q.H != 0 || q.D > 1024 {
		c.fail(op, "shapes: q %dx%dx%d k %dx%dx%d v %dx%dx%d o %dx%dx%d g %dx%dx%d", q.T, q.H, q.D, k.T, k.H, k.D,
			v.T, v.H, v.D, o.T, o.H, o.D, g.T, g.H, g.D)
		return
	}
	sp, ip, ok = c.slots(op, st, inSlot, outSlot, v.T, 4*int64(v.H)*int64(q.D)*int64(v.D))
	return
}

// DeltaRecurrent runs the recurrent gated delta rule (q, k normalised).
func (c *CPU) DeltaRecurrent(o, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int) {
	rs, sp, ip, ok := c.delta("delta_recurrent", o, q, k, v, g, beta, st, inSlot, outSlot)
	if ok {
		c.ctx.DeltaRecurrent(rs[1], rs[2], rs[3], rs[4], rs[5], sp, st.SlotBytes/4, ip, outSlot, rs[0])
	}
}

// DeltaChunked runs the chunked (WY) gated delta rule; outSlot must be a slot.
func (c *CPU) DeltaChunked(o, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int) {
	if outSlot < 0 {
		c.fail("delta_chunked", "per-token output slots need the recurrent form")
		return
	}
	rs, sp, ip, ok := c.delta("delta_chunked", o, q, k, v, g, beta, st, inSlot, outSlot)
	if ok {
		c.ctx.DeltaChunked(rs[1], rs[2], rs[3], rs[4], rs[5], sp, st.SlotBytes/4, ip, outSlot, rs[0])
	}
}

func (c *CPU) kv(op string, kv KVLayer) (cpu.KV, bool) {
	code, scale := KVPlaneBytes(kv.Format, kv.HeadDim)
	n := int64(kv.Pages) * int64(kv.KVHeads) * KVPage
	if kv.Pages <= 0 || kv.KVHeads <= 0 || kv.HeadDim <= 0 || kv.TableLen <= 0 {
		c.fail(op, "kv cache: bad geometry pages=%d heads=%d hd=%d table=%d", kv.Pages, kv.KVHeads, kv.HeadDim, kv.TableLen)
		return cpu.KV{}, false
	}
	r := cpu.KV{Fmt: int(kv.Format), KVHeads: kv.KVHeads, HeadDim: kv.HeadDim, Pages: kv.Pages, TableLen: kv.TableLen}
	var ok bool
	if r.K, ok = c.vec(op, "kv.K", kv.K, n*code); !ok {
		return r, false
	}
	if r.V, ok = c.vec(op, "kv.V", kv.V, n*code); !ok {
		return r, false
	}
	if scale > 0 {
		if r.KS, ok = c.vec(op, "kv.KS", kv.KS, n*scale); !ok {
			return r, false
		}
		if r.VS, ok = c.vec(op, "kv.VS", kv.VS, n*scale); !ok {
			return r, false
		}
	}
	r.BlockTable, ok = c.vec(op, "kv.block_table", kv.BlockTable, 4*int64(kv.TableLen))
	return r, ok
}

// KVAppend writes k, v ([T, kvh, hd]) at positions pos.
func (c *CPU) KVAppend(kv KVLayer, k, v Tensor, pos View) {
	kr, ok1 := c.rows("kv_append", "k", k)
	vr, ok2 := c.rows("kv_append", "v", v)
	pp, ok3 := c.vec("kv_append", "pos", pos, 4*int64(k.T))
	ckv, ok4 := c.kv("kv_append", kv)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if !same(k, v) || k.H != kv.KVHeads || k.D != kv.HeadDim {
		c.fail("kv_append", "k/v [%d,%d,%d] do not match the cache (%d heads × %d)", k.T, k.H, k.D, kv.KVHeads, kv.HeadDim)
		return
	}
	if bad := c.ctx.KVAppend(ckv, kr, vr, pp); bad > 0 {
		c.fail("kv_append", "%d positions outside the cache's %d pages", bad, kv.TableLen)
	}
}

// Attention runs causal GQA attention of q ([T, nh, hd]) over the cache.
func (c *CPU) Attention(out, q Tensor, kv KVLayer, pos View, scale float32) {
	qr, ok1 := c.rows("attention", "q", q)
	or, ok2 := c.rows("attention", "out", out)
	pp, ok3 := c.vec("attention", "pos", pos, 4*int64(q.T))
	ckv, ok4 := c.kv("attention", kv)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if !same(q, out) || q.D != kv.HeadDim || q.H%kv.KVHeads != 0 || math.IsNaN(float64(scale)) {
		c.fail("attention", "q [%d,%d,%d] does not match the cache (%d heads × %d)", q.T, q.H, q.D, kv.KVHeads, kv.HeadDim)
		return
	}
	if bad := c.ctx.Attention(qr, ckv, pp, scale, or); bad > 0 {
		c.fail("attention", "%d queries read positions outside the cache", bad)
	}
}
