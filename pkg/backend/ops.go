package backend

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/ninfer/ninfer/pkg/sample"
)

// rows is a validated activation view in backend address space.
type rows struct {
	p       unsafe.Pointer
	t, h, d int
	ld, hs  int64
}

// kvPlanes is a validated KV layer in backend address space.
type kvPlanes struct {
	fmt, kvh, hd, pages int
	k, v, ks, vs        unsafe.Pointer
	table               unsafe.Pointer
	tableLen            int
}

// kernels is what a backend supplies below the shared validation of ops:
// one call per op of kernels/ninfer_ops.h, on validated arguments. Ops that
// count bad inputs return the count when the backend knows it at once
// (CPU); a device backend returns 0 and reports counts at Sync.
type kernels interface {
	embed(w any, ids unsafe.Pointer, out rows) int
	matmul(w any, x, y rows, acc bool)
	rmsnorm(x, y rows, w unsafe.Pointer, eps float32, zeroCentred bool)
	gatedRMSNorm(o, z, y rows, w unsafe.Pointer, eps float32)
	l2norm(x, y rows, scale float32)
	rope(x rows, pos unsafe.Pointer, rot int, theta float64)
	sigmoidMul(x, g, y rows)
	swiglu(g, u, y rows)
	add(a, b, y rows)
	argmax(x rows, out unsafe.Pointer)
	gdnGate(a, b rows, aLog, dtBias unsafe.Pointer, g, beta rows)
	conv1d(x, y rows, w unsafe.Pointer, kw int, state unsafe.Pointer, bf16 bool, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int)
	deltaRecurrent(q, k, v, g, beta rows, state unsafe.Pointer, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int, o rows)
	deltaChunked(q, k, v, g, beta rows, state unsafe.Pointer, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int, o rows)
	kvAppend(kv kvPlanes, k, v rows, pos unsafe.Pointer) int
	attention(q rows, kv kvPlanes, pos unsafe.Pointer, scale float32, out rows) int
	sample(x rows, out, counts, seen unsafe.Pointer, cfg sample.Config, rngPos unsafe.Pointer)
	// hostInt32 reads an int32 control value when it is host-addressable
	// (CPU); ok=false means the kernel checks it on the device.
	hostInt32(p unsafe.Pointer) (v int32, ok bool)
}

// ops implements every op method of Backend once: argument validation
// (shapes, spans, slots) and the first-error record, then the backend's
// kernels. CPU and CUDA embed it.
type ops struct {
	k   kernels
	err error
}

// Sync-side error record: the first invalid call since the last take.
func (o *ops) fail(op, f string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("backend %s: %s", op, fmt.Sprintf(f, args...))
	}
}

func (o *ops) takeErr() error {
	err := o.err
	o.err = nil
	return err
}

func span(v View, n int64) error {
	if v.Buf == nil || v.Buf.p == nil {
		return errors.New("nil or freed buffer")
	}
	if v.Off < 0 || n < 0 || v.Off+n > v.Buf.bytes {
		return fmt.Errorf("range [%d,%d) outside buffer %s of %d bytes", v.Off, v.Off+n, v.Buf.name, v.Buf.bytes)
	}
	return nil
}

// spanPtr is the address of n bytes at v, or an error naming op.
func spanPtr(op string, v View, n int64) (unsafe.Pointer, error) {
	if err := span(v, n); err != nil {
		return nil, fmt.Errorf("backend %s: %w", op, err)
	}
	return v.ptr(), nil
}

func (o *ops) rows(op, arg string, x Tensor) (rows, bool) {
	if x.T < 0 || x.H <= 0 || x.D <= 0 || x.LD < 0 || x.HS < 0 {
		o.fail(op, "%s: bad shape T=%d H=%d D=%d LD=%d HS=%d", arg, x.T, x.H, x.D, x.LD, x.HS)
		return rows{}, false
	}
	if err := span(x.View, x.extent()); err != nil {
		o.fail(op, "%s: %v", arg, err)
		return rows{}, false
	}
	return rows{p: x.ptr(), t: x.T, h: x.H, d: x.D, ld: int64(x.LD), hs: int64(x.HS)}, true
}

func (o *ops) vec(op, arg string, v View, bytes int64) (unsafe.Pointer, bool) {
	if err := span(v, bytes); err != nil {
		o.fail(op, "%s: %v", arg, err)
		return nil, false
	}
	return v.ptr(), true
}

func same(a, b Tensor) bool { return a.T == b.T && a.H == b.H && a.D == b.D }

func (o *ops) weight(op string, w *Weight) (any, bool) {
	if w == nil {
		o.fail(op, "nil weight")
		return nil, false
	}
	if w.prep == nil || w.owner != o {
		o.fail(op, "weight %s was not prepared by this backend", w.Name)
		return nil, false
	}
	return w.prep, true
}

// Embed gathers embedding rows.
func (o *ops) Embed(out Tensor, w *Weight, ids View) {
	d, ok := o.weight("embed", w)
	if !ok {
		return
	}
	r, ok := o.rows("embed", "out", out)
	if !ok {
		return
	}
	if out.H != 1 || out.D != w.K {
		o.fail("embed", "out width %d×%d, weight %s has K=%d", out.H, out.D, w.Name, w.K)
		return
	}
	p, ok := o.vec("embed", "ids", ids, 4*int64(out.T))
	if !ok {
		return
	}
	if bad := o.k.embed(d, p, r); bad > 0 {
		o.fail("embed", "%d token ids outside [0,%d) of %s", bad, w.N, w.Name)
	}
}

// MatMul computes y (+)= x·wᵀ.
func (o *ops) MatMul(y, x Tensor, w *Weight, accumulate bool) {
	d, ok := o.weight("matmul", w)
	if !ok {
		return
	}
	xr, ok1 := o.rows("matmul", "x", x)
	yr, ok2 := o.rows("matmul", "y", y)
	if !ok1 || !ok2 {
		return
	}
	if x.H != 1 || y.H != 1 || x.D != w.K || y.D != w.N || x.T != y.T {
		o.fail("matmul", "%s [%d,%d]: x is [%d,%d×%d], y is [%d,%d×%d]", w.Name, w.N, w.K, x.T, x.H, x.D, y.T, y.H, y.D)
		return
	}
	if x.T == 0 {
		return
	}
	if q, ok := o.k.(q8Kernels); ok && !w.fp32Act && q.q8(w, x.T) {
		q.matmulQ8(d, xr, yr, accumulate)
		return
	}
	o.k.matmul(d, xr, yr, accumulate)
}

// RMSNorm normalises each (t,h) row over D.
func (o *ops) RMSNorm(y, x Tensor, w View, eps float32, zeroCentred bool) {
	xr, ok1 := o.rows("rmsnorm", "x", x)
	yr, ok2 := o.rows("rmsnorm", "y", y)
	wp, ok3 := o.vec("rmsnorm", "w", w, 4*int64(x.D))
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if !same(x, y) {
		o.fail("rmsnorm", "x and y shapes differ")
		return
	}
	o.k.rmsnorm(xr, yr, wp, eps, zeroCentred)
}

// GatedRMSNorm computes y = w·norm(o)·silu(z).
func (o *ops) GatedRMSNorm(y, on, z Tensor, w View, eps float32) {
	or, ok1 := o.rows("gated_rmsnorm", "o", on)
	zr, ok2 := o.rows("gated_rmsnorm", "z", z)
	yr, ok3 := o.rows("gated_rmsnorm", "y", y)
	wp, ok4 := o.vec("gated_rmsnorm", "w", w, 4*int64(on.D))
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if !same(on, z) || !same(on, y) {
		o.fail("gated_rmsnorm", "o, z, y shapes differ")
		return
	}
	o.k.gatedRMSNorm(or, zr, yr, wp, eps)
}

// L2Norm computes y = x·rsqrt(Σx²+1e-6)·scale per (t,h).
func (o *ops) L2Norm(y, x Tensor, scale float32) {
	xr, ok1 := o.rows("l2norm", "x", x)
	yr, ok2 := o.rows("l2norm", "y", y)
	if !ok1 || !ok2 {
		return
	}
	if !same(x, y) {
		o.fail("l2norm", "x and y shapes differ")
		return
	}
	o.k.l2norm(xr, yr, scale)
}

// RoPE rotates the first rotaryDim dims of each head in place.
func (o *ops) RoPE(x Tensor, pos View, rotaryDim int, theta float64) {
	xr, ok1 := o.rows("rope", "x", x)
	pp, ok2 := o.vec("rope", "pos", pos, 4*int64(x.T))
	if !ok1 || !ok2 {
		return
	}
	if rotaryDim <= 0 || rotaryDim%2 != 0 || rotaryDim > x.D || rotaryDim > 1024 || !(theta > 0) {
		o.fail("rope", "rotary dim %d / theta %g invalid for head dim %d", rotaryDim, theta, x.D)
		return
	}
	o.k.rope(xr, pp, rotaryDim, theta)
}

func (o *ops) ew3(op string, y, a, b Tensor) (rows, rows, rows, bool) {
	ar, ok1 := o.rows(op, "a", a)
	br, ok2 := o.rows(op, "b", b)
	yr, ok3 := o.rows(op, "y", y)
	if !ok1 || !ok2 || !ok3 {
		return ar, br, yr, false
	}
	if !same(a, b) || !same(a, y) {
		o.fail(op, "shapes differ: [%d,%d,%d] [%d,%d,%d] → [%d,%d,%d]", a.T, a.H, a.D, b.T, b.H, b.D, y.T, y.H, y.D)
		return ar, br, yr, false
	}
	return ar, br, yr, true
}

// SigmoidMul computes y = x·sigmoid(g).
func (o *ops) SigmoidMul(y, x, g Tensor) {
	if xr, gr, yr, ok := o.ew3("sigmoid_mul", y, x, g); ok {
		o.k.sigmoidMul(xr, gr, yr)
	}
}

// SwiGLU computes y = silu(g)·u.
func (o *ops) SwiGLU(y, g, u Tensor) {
	if gr, ur, yr, ok := o.ew3("swiglu", y, g, u); ok {
		o.k.swiglu(gr, ur, yr)
	}
}

// Add computes y = a + b.
func (o *ops) Add(y, a, b Tensor) {
	if ar, br, yr, ok := o.ew3("add", y, a, b); ok {
		o.k.add(ar, br, yr)
	}
}

// Argmax writes the per-row argmax (int32) of a one-head tensor.
func (o *ops) Argmax(out View, x Tensor) {
	xr, ok1 := o.rows("argmax", "x", x)
	op, ok2 := o.vec("argmax", "out", out, 4*int64(x.T))
	if !ok1 || !ok2 {
		return
	}
	if x.H != 1 {
		o.fail("argmax", "x must have one head")
		return
	}
	o.k.argmax(xr, op)
}

// GDNGate computes beta = sigmoid(b), g = −exp(A_log)·softplus(a+dt_bias).
func (o *ops) GDNGate(g, beta, a, b Tensor, aLog, dtBias View) {
	ar, ok1 := o.rows("gdn_gate", "a", a)
	br, ok2 := o.rows("gdn_gate", "b", b)
	gr, ok3 := o.rows("gdn_gate", "g", g)
	betar, ok4 := o.rows("gdn_gate", "beta", beta)
	al, ok5 := o.vec("gdn_gate", "a_log", aLog, 4*int64(a.H))
	dt, ok6 := o.vec("gdn_gate", "dt_bias", dtBias, 4*int64(a.H))
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return
	}
	if a.D != 1 || !same(a, b) || !same(a, g) || !same(a, beta) {
		o.fail("gdn_gate", "a, b, g, beta must be [T, nv, 1] alike")
		return
	}
	o.k.gdnGate(ar, br, al, dt, gr, betar)
}

func (o *ops) slots(op string, st StateSlots, inSlot View, outSlot, t int, slotBytes int64) (unsafe.Pointer, unsafe.Pointer, bool) {
	if st.Slots <= 0 || st.SlotBytes < slotBytes {
		o.fail(op, "state: %d slots of %d bytes, need ≥ 1 slot of %d bytes", st.Slots, st.SlotBytes, slotBytes)
		return nil, nil, false
	}
	sp, ok := o.vec(op, "state", st.View, int64(st.Slots)*st.SlotBytes)
	if !ok {
		return nil, nil, false
	}
	ip, ok := o.vec(op, "in_slot", inSlot, 4)
	if !ok {
		return nil, nil, false
	}
	if in, host := o.k.hostInt32(ip); host && (in < 0 || int(in) >= st.Slots) {
		o.fail(op, "input slot %d outside [0,%d)", in, st.Slots)
		return nil, nil, false
	}
	if (outSlot == PerToken && t > st.Slots) || (outSlot != PerToken && (outSlot < 0 || outSlot >= st.Slots)) {
		o.fail(op, "output slot %d for %d tokens with %d slots", outSlot, t, st.Slots)
		return nil, nil, false
	}
	return sp, ip, true
}

// Conv1DSiLU runs the causal depthwise conv (width kw) + SiLU over the
// channels of x, reading/writing the conv window slots ([C, kw−1], bf16
// when st.BF16, else fp32; see ni_conv1d_silu).
func (o *ops) Conv1DSiLU(y, x Tensor, w View, kw int, st StateSlots, inSlot View, outSlot int) {
	xr, ok1 := o.rows("conv1d", "x", x)
	yr, ok2 := o.rows("conv1d", "y", y)
	wp, ok3 := o.vec("conv1d", "w", w, 4*int64(x.D)*int64(kw))
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if x.H != 1 || !same(x, y) || kw < 1 || kw > 16 {
		o.fail("conv1d", "x/y must be alike one-head tensors, kernel width %d in [1,16]", kw)
		return
	}
	elem := int64(4)
	if st.BF16 {
		elem = 2
	}
	sp, ip, ok := o.slots("conv1d", st, inSlot, outSlot, x.T, elem*int64(x.D)*int64(kw-1))
	if !ok {
		return
	}
	if st.SlotBytes%elem != 0 {
		o.fail("conv1d", "state slot of %d bytes is not a whole number of %d-byte elements", st.SlotBytes, elem)
		return
	}
	o.k.conv1d(xr, yr, wp, kw, sp, st.BF16, st.SlotBytes/elem, st.Slots, ip, outSlot)
}

func (o *ops) delta(op string, on, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int) (rs [6]rows, sp, ip unsafe.Pointer, ok bool) {
	names := [6]string{"o", "q", "k", "v", "g", "beta"}
	ts := [6]Tensor{on, q, k, v, g, beta}
	for i := range ts {
		if rs[i], ok = o.rows(op, names[i], ts[i]); !ok {
			return
		}
	}
	ok = false
	if !same(on, v) || !same(q, k) || q.T != v.T || g.T != v.T || g.H != v.H || g.D != 1 || !same(g, beta) ||
		v.H%q.H != 0 || q.D > 1024 {
		o.fail(op, "shapes: q %dx%dx%d k %dx%dx%d v %dx%dx%d o %dx%dx%d g %dx%dx%d", q.T, q.H, q.D, k.T, k.H, k.D,
			v.T, v.H, v.D, on.T, on.H, on.D, g.T, g.H, g.D)
		return
	}
	sp, ip, ok = o.slots(op, st, inSlot, outSlot, v.T, 4*int64(v.H)*int64(q.D)*int64(v.D))
	return
}

// DeltaRecurrent runs the recurrent gated delta rule (q, k normalised).
func (o *ops) DeltaRecurrent(on, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int) {
	rs, sp, ip, ok := o.delta("delta_recurrent", on, q, k, v, g, beta, st, inSlot, outSlot)
	if ok {
		o.k.deltaRecurrent(rs[1], rs[2], rs[3], rs[4], rs[5], sp, st.SlotBytes/4, st.Slots, ip, outSlot, rs[0])
	}
}

// DeltaChunked runs the chunked (WY) gated delta rule; outSlot must be a slot.
func (o *ops) DeltaChunked(on, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int) {
	if outSlot < 0 {
		o.fail("delta_chunked", "per-token output slots need the recurrent form")
		return
	}
	rs, sp, ip, ok := o.delta("delta_chunked", on, q, k, v, g, beta, st, inSlot, outSlot)
	if ok {
		o.k.deltaChunked(rs[1], rs[2], rs[3], rs[4], rs[5], sp, st.SlotBytes/4, st.Slots, ip, outSlot, rs[0])
	}
}

func (o *ops) kv(op string, kv KVLayer) (kvPlanes, bool) {
	code, scale := KVPlaneBytes(kv.Format, kv.HeadDim)
	n := int64(kv.Pages) * int64(kv.KVHeads) * KVPage
	if kv.Pages <= 0 || kv.KVHeads <= 0 || kv.HeadDim <= 0 || kv.TableLen <= 0 {
		o.fail(op, "kv cache: bad geometry pages=%d heads=%d hd=%d table=%d", kv.Pages, kv.KVHeads, kv.HeadDim, kv.TableLen)
		return kvPlanes{}, false
	}
	r := kvPlanes{fmt: int(kv.Format), kvh: kv.KVHeads, hd: kv.HeadDim, pages: kv.Pages, tableLen: kv.TableLen}
	var ok bool
	if r.k, ok = o.vec(op, "kv.K", kv.K, n*code); !ok {
		return r, false
	}
	if r.v, ok = o.vec(op, "kv.V", kv.V, n*code); !ok {
		return r, false
	}
	if scale > 0 {
		if r.ks, ok = o.vec(op, "kv.KS", kv.KS, n*scale); !ok {
			return r, false
		}
		if r.vs, ok = o.vec(op, "kv.VS", kv.VS, n*scale); !ok {
			return r, false
		}
	}
	r.table, ok = o.vec(op, "kv.block_table", kv.BlockTable, 4*int64(kv.TableLen))
	return r, ok
}

// KVAppend writes k, v ([T, kvh, hd]) at positions pos.
func (o *ops) KVAppend(kv KVLayer, k, v Tensor, pos View) {
	kr, ok1 := o.rows("kv_append", "k", k)
	vr, ok2 := o.rows("kv_append", "v", v)
	pp, ok3 := o.vec("kv_append", "pos", pos, 4*int64(k.T))
	ckv, ok4 := o.kv("kv_append", kv)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if !same(k, v) || k.H != kv.KVHeads || k.D != kv.HeadDim {
		o.fail("kv_append", "k/v [%d,%d,%d] do not match the cache (%d heads × %d)", k.T, k.H, k.D, kv.KVHeads, kv.HeadDim)
		return
	}
	if bad := o.k.kvAppend(ckv, kr, vr, pp); bad > 0 {
		o.fail("kv_append", "%d positions outside the cache's %d pages", bad, kv.TableLen)
	}
}

// Attention runs causal GQA attention of q ([T, nh, hd]) over the cache.
func (o *ops) Attention(out, q Tensor, kv KVLayer, pos View, scale float32) {
	qr, ok1 := o.rows("attention", "q", q)
	or, ok2 := o.rows("attention", "out", out)
	pp, ok3 := o.vec("attention", "pos", pos, 4*int64(q.T))
	ckv, ok4 := o.kv("attention", kv)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if !same(q, out) || q.D != kv.HeadDim || q.H%kv.KVHeads != 0 || math.IsNaN(float64(scale)) {
		o.fail("attention", "q [%d,%d,%d] does not match the cache (%d heads × %d)", q.T, q.H, q.D, kv.KVHeads, kv.HeadDim)
		return
	}
	if bad := o.k.attention(qr, ckv, pp, scale, or); bad > 0 {
		o.fail("attention", "%d queries read positions outside the cache", bad)
	}
}
