//go:build cuda || cudasim

package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/ninfer/ninfer/kernels/cpu"
	"github.com/ninfer/ninfer/kernels/cuda"
	"github.com/ninfer/ninfer/pkg/format"
)

// CUDABuilt reports whether this binary has the CUDA backend (build tag
// cuda, or cudasim for the host SIMT harness).
const CUDABuilt = true

// CUDASimulated reports whether the CUDA kernels run under the host SIMT
// harness instead of a GPU.
const CUDASimulated = cuda.Simulated

// CUDAOptions configures the CUDA backend.
type CUDAOptions struct {
	Device int
	// StagingBytes bounds the pinned host buffer that uploads go through
	// (default 64 MiB, split in two halves that alternate).
	StagingBytes int64
}

// CUDA is the CUDA backend: the kernels of kernels/cuda on one device and
// one stream. Ops are asynchronous; Sync waits and reports the first
// launch error and the counts of bad inputs the kernels met.
type CUDA struct {
	ops
	ctx     *cuda.Ctx
	info    cuda.Info
	bufs    map[*Buffer]struct{}
	staging unsafe.Pointer
	stBytes int64
	stats   UploadStats
	scratch *Buffer // the buffer holding the bound op scratch (nil: none bound)
	// counts are the op counters (OpCounter); capBase is their reading at
	// BeginCapture: the ops recorded during a capture do not run, so
	// EndCapture moves them from counts to the graph.
	counts  OpCounts
	capBase OpCounts
}

var (
	_ Backend       = (*CUDA)(nil)
	_ Device        = (*CUDA)(nil)
	_ OpScratchUser = (*CUDA)(nil)
	_ OpCounter     = (*CUDA)(nil)
)

// DefaultStagingBytes is the pinned upload buffer of the CUDA backend.
const DefaultStagingBytes = 64 << 20

// NewCUDA opens device o.Device.
func NewCUDA(o CUDAOptions) (*CUDA, error) {
	ctx, err := cuda.NewCtx(o.Device)
	if err != nil {
		code, msg := 0, err.Error()
		if ce, ok := err.(*cuda.Error); ok {
			code = ce.Code
		}
		_, driver, runtime, _ := cuda.Probe()
		return nil, fmt.Errorf("%s", ExplainCUDAError(code, driver, runtime, msg))
	}
	c := &CUDA{ctx: ctx, info: ctx.Info(), bufs: map[*Buffer]struct{}{}, stBytes: o.StagingBytes}
	if c.stBytes <= 0 {
		c.stBytes = DefaultStagingBytes
	}
	c.ops.k = cudaKernels{ctx, &c.counts}
	return c, nil
}

// OpCounts returns the op counters (OpCounter): the ops queued since the
// backend was opened and the weight bytes their matmuls read.
func (c *CUDA) OpCounts() OpCounts { return c.counts }

// Name reports "cuda" (or "cuda-simt" under the host harness).
func (c *CUDA) Name() string {
	if cuda.Simulated {
		return "cuda-simt"
	}
	return "cuda"
}

// Threads is 1: one stream.
func (c *CUDA) Threads() int { return 1 }

// DeviceFacts returns the device's name, versions and size.
func (c *CUDA) DeviceFacts() DeviceFacts {
	return DeviceFacts{Name: c.info.Name, ID: c.info.Device, RuntimeVersion: c.info.RuntimeVersion,
		DriverVersion: c.info.DriverVersion, TotalMem: c.info.TotalMem, SMs: c.info.SMCount, Simulated: cuda.Simulated}
}

// ScratchBytes is the op scratch available to the ops on the device: the
// bound region (BindOpScratch), else the context's own buffer.
func (c *CUDA) ScratchBytes() int64 { return c.ctx.ScratchBytes() }

// BindOpScratch makes bytes at v the ops' scratch (OpScratchUser). The
// region must lie in a live buffer of this backend, 256-byte aligned.
func (c *CUDA) BindOpScratch(v View, bytes int64) error {
	if v.Buf == nil {
		if err := c.ctx.BindScratch(nil, 0); err != nil {
			return fmt.Errorf("backend: op scratch: %w", err)
		}
		c.scratch = nil
		return nil
	}
	if _, ok := c.bufs[v.Buf]; !ok {
		return fmt.Errorf("backend: op scratch: buffer %s is not a live buffer of this backend", v.Buf.name)
	}
	if bytes <= 0 || v.Off < 0 || v.Off%ArenaAlign != 0 || v.Off+bytes > v.Buf.bytes {
		return fmt.Errorf("backend: op scratch: %d bytes at offset %d of %s (%d bytes) is not a 256-aligned region inside it",
			bytes, v.Off, v.Buf.name, v.Buf.bytes)
	}
	if err := c.ctx.BindScratch(v.ptr(), bytes); err != nil {
		return fmt.Errorf("backend: op scratch: %w", err)
	}
	c.scratch = v.Buf
	return nil
}

// Stats returns the measured upload statistics.
func (c *CUDA) Stats() UploadStats { return c.stats }

// Alloc allocates a zeroed device buffer.
func (c *CUDA) Alloc(name string, bytes int64) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("backend: alloc %s: size %d must be positive", name, bytes)
	}
	p, err := c.ctx.Malloc(bytes, name)
	if err != nil {
		return nil, fmt.Errorf("backend: alloc %s: %w", name, err)
	}
	b := &Buffer{name: name, bytes: bytes, p: p}
	c.bufs[b] = struct{}{}
	return b, nil
}

// Free releases a buffer.
func (c *CUDA) Free(b *Buffer) {
	if _, ok := c.bufs[b]; !ok {
		return
	}
	delete(c.bufs, b)
	if b == c.scratch { // the ops must not use freed memory: back to the context's own scratch
		_ = c.ctx.BindScratch(nil, 0) // fails only during a capture, which the free below fails too
		c.scratch = nil
	}
	c.ctx.Free(b.p)
	b.p = nil
}

// Close frees every buffer and the context.
func (c *CUDA) Close() error {
	for b := range c.bufs {
		c.Free(b)
	}
	if c.staging != nil {
		cuda.HostFree(c.staging)
		c.staging = nil
	}
	c.ctx.Close()
	return nil
}

// Sync waits for the device and returns the first error since the last
// Sync: an invalid call, a launch error, or bad inputs counted by kernels.
func (c *CUDA) Sync() error {
	cnt, err := c.ctx.Sync()
	if first := c.takeErr(); first != nil {
		return first
	}
	if err != nil {
		return fmt.Errorf("backend cuda: %w", err)
	}
	switch {
	case cnt[cuda.ErrEmbedIDs] > 0:
		return fmt.Errorf("backend embed: %d token ids outside the embedding's rows", cnt[cuda.ErrEmbedIDs])
	case cnt[cuda.ErrKVPos] > 0:
		return fmt.Errorf("backend kv_append: %d positions outside the cache's pages", cnt[cuda.ErrKVPos])
	case cnt[cuda.ErrAttnPos] > 0:
		return fmt.Errorf("backend attention: %d queries read positions outside the cache", cnt[cuda.ErrAttnPos])
	case cnt[cuda.ErrSlot] > 0:
		return fmt.Errorf("backend state: %d ops met an input slot outside the state's slots", cnt[cuda.ErrSlot])
	}
	return nil
}

// Upload copies host bytes to dst through the pinned staging buffer: the
// two halves alternate, so copying into one overlaps the transfer of the
// other. Finished when it returns.
func (c *CUDA) Upload(dst View, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	p, err := spanPtr("upload", dst, int64(len(src)))
	if err != nil {
		return err
	}
	start := time.Now()
	defer func() {
		c.stats.Seconds += time.Since(start).Seconds()
		c.stats.Uploads++
	}()
	if c.staging == nil {
		if c.staging = cuda.HostAlloc(c.stBytes); c.staging == nil {
			return fmt.Errorf("backend upload: cannot allocate %d bytes of pinned staging memory", c.stBytes)
		}
	}
	half := c.stBytes / 2
	for off, i := int64(0), 0; off < int64(len(src)); i++ {
		n := min(half, int64(len(src))-off)
		if i >= 2 {
			// The half we are about to refill was queued two chunks ago.
			if _, err := c.ctx.Sync(); err != nil {
				return fmt.Errorf("backend upload: %w", err)
			}
		}
		stage := unsafe.Add(c.staging, int64(i%2)*half)
		copy(unsafe.Slice((*byte)(stage), n), src[off:off+n])
		if err := c.ctx.H2DAsync(unsafe.Add(p, off), stage, n); err != nil {
			return fmt.Errorf("backend upload: %w", err)
		}
		c.stats.HostToDeviceBytes += n
		c.stats.PeakStagingBytes = max(c.stats.PeakStagingBytes, min(int64(i+1), 2)*half)
		off += n
	}
	if _, err := c.ctx.Sync(); err != nil {
		return fmt.Errorf("backend upload: %w", err)
	}
	return nil
}

func bytesOf[T int32 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// UploadI32 copies int32 values to dst.
func (c *CUDA) UploadI32(dst View, src []int32) error { return c.copyIn("upload", dst, bytesOf(src)) }

// UploadF32 copies float32 values to dst.
func (c *CUDA) UploadF32(dst View, src []float32) error { return c.copyIn("upload", dst, bytesOf(src)) }

// copyIn is a direct (unstaged) small copy, used for control values.
func (c *CUDA) copyIn(op string, dst View, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	p, err := spanPtr(op, dst, int64(len(b)))
	if err != nil {
		return err
	}
	if err := c.ctx.H2D(p, unsafe.Pointer(&b[0]), int64(len(b))); err != nil {
		return fmt.Errorf("backend %s: %w", op, err)
	}
	return nil
}

func (c *CUDA) copyOut(dst []byte, src View) error {
	if len(dst) == 0 {
		return nil
	}
	p, err := spanPtr("download", src, int64(len(dst)))
	if err != nil {
		return err
	}
	if err := c.ctx.D2H(unsafe.Pointer(&dst[0]), p, int64(len(dst))); err != nil {
		return fmt.Errorf("backend download: %w", err)
	}
	return nil
}

// Download copies len(dst) bytes from src (waits for queued work).
func (c *CUDA) Download(dst []byte, src View) error { return c.copyOut(dst, src) }

// DownloadF32 copies float32 values from src.
func (c *CUDA) DownloadF32(dst []float32, src View) error { return c.copyOut(bytesOf(dst), src) }

// DownloadI32 copies int32 values from src.
func (c *CUDA) DownloadI32(dst []int32, src View) error { return c.copyOut(bytesOf(dst), src) }

// Zero clears bytes at dst.
func (c *CUDA) Zero(dst View, bytes int64) {
	p, err := spanPtr("zero", dst, bytes)
	if err != nil {
		c.fail("zero", "%v", err)
		return
	}
	if err := c.ctx.Memset(p, 0, bytes); err != nil {
		c.fail("zero", "%v", err)
		return
	}
	c.counts.Launches++
}

// Copy copies bytes between views (ranges must not overlap).
func (c *CUDA) Copy(dst, src View, bytes int64) {
	d, err := spanPtr("copy", dst, bytes)
	if err != nil {
		c.fail("copy", "dst: %v", err)
		return
	}
	s, err := spanPtr("copy", src, bytes)
	if err != nil {
		c.fail("copy", "src: %v", err)
		return
	}
	if err := c.ctx.D2D(d, s, bytes); err != nil {
		c.fail("copy", "%v", err)
		return
	}
	c.counts.Launches++
}

// PrepareWeight binds an [n,k] matrix stored in format f at v (device).
func (c *CUDA) PrepareWeight(name string, f format.Format, n, k int, v View, bytes int64) (*Weight, error) {
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
	p, err := spanPtr("prepare", v, bytes)
	if err != nil {
		return nil, fmt.Errorf("backend: weight %s: %w", name, err)
	}
	d, err := cuda.NewWeight(cf, int64(n), int64(k), p, bytes, 0)
	if err != nil {
		return nil, fmt.Errorf("backend: weight %s (%s [%d,%d]): %w", name, f, n, k, err)
	}
	if cf == cpu.WNVFP4 {
		// The per-tensor divisor sits at the end of the payload on the device.
		b := make([]byte, 4)
		if err := c.copyOut(b, v.At(d.DivOffset())); err != nil {
			return nil, fmt.Errorf("backend: weight %s: %w", name, err)
		}
		div := math.Float32frombits(binary.LittleEndian.Uint32(b))
		if !(div > 0) || math.IsInf(float64(div), 0) {
			return nil, fmt.Errorf("backend: weight %s (%s [%d,%d]): divisor %g is not a positive finite number", name, f, n, k, div)
		}
		if d, err = cuda.NewWeight(cf, int64(n), int64(k), p, bytes, 1/div); err != nil {
			return nil, fmt.Errorf("backend: weight %s: %w", name, err)
		}
	}
	return &Weight{Name: name, Format: f, N: n, K: k, View: v, Bytes: bytes, prep: &cudaWeight{d, bytes}, owner: &c.ops}, nil
}

// cudaWeight is a weight's device descriptor with its payload size (the
// bytes a matmul reads: OpCounts.WeightBytes).
type cudaWeight struct {
	w     *cuda.Weight
	bytes int64
}

// cudaKernels queues validated ops on the device and counts them in the
// backend's counters (one launch per op).
type cudaKernels struct {
	ctx *cuda.Ctx
	n   *OpCounts
}

func gr(r rows) cuda.Rows { return cuda.Rows{P: r.p, T: r.t, H: r.h, D: r.d, LD: r.ld, HS: r.hs} }

func gkv(kv kvPlanes) cuda.KV {
	return cuda.KV{Fmt: kv.fmt, KVHeads: kv.kvh, HeadDim: kv.hd, Pages: kv.pages, K: kv.k, V: kv.v, KS: kv.ks, VS: kv.vs,
		BlockTable: kv.table, TableLen: kv.tableLen}
}

// Control values live on the device: slots are checked by the kernels.
func (k cudaKernels) hostInt32(unsafe.Pointer) (int32, bool) { return 0, false }

func (k cudaKernels) embed(w any, ids unsafe.Pointer, out rows) int {
	k.n.Launches++
	k.ctx.Embed(w.(*cudaWeight).w, ids, gr(out))
	return 0
}
func (k cudaKernels) matmul(w any, x, y rows, acc bool) {
	cw := w.(*cudaWeight)
	k.n.Launches++
	k.n.WeightBytes += cw.bytes
	k.ctx.Matmul(cw.w, gr(x), gr(y), acc)
}
func (k cudaKernels) rmsnorm(x, y rows, w unsafe.Pointer, eps float32, zc bool) {
	k.n.Launches++
	k.ctx.RMSNorm(gr(x), gr(y), w, eps, zc)
}
func (k cudaKernels) gatedRMSNorm(o, z, y rows, w unsafe.Pointer, eps float32) {
	k.n.Launches++
	k.ctx.GatedRMSNorm(gr(o), gr(z), gr(y), w, eps)
}
func (k cudaKernels) l2norm(x, y rows, scale float32) {
	k.n.Launches++
	k.ctx.L2Norm(gr(x), gr(y), scale)
}
func (k cudaKernels) rope(x rows, pos unsafe.Pointer, rot int, theta float64) {
	k.n.Launches++
	k.ctx.RoPE(gr(x), pos, rot, theta)
}
func (k cudaKernels) sigmoidMul(x, g, y rows) {
	k.n.Launches++
	k.ctx.SigmoidMul(gr(x), gr(g), gr(y))
}
func (k cudaKernels) swiglu(g, u, y rows) {
	k.n.Launches++
	k.ctx.SwiGLU(gr(g), gr(u), gr(y))
}
func (k cudaKernels) add(a, b, y rows) {
	k.n.Launches++
	k.ctx.Add(gr(a), gr(b), gr(y))
}
func (k cudaKernels) argmax(x rows, out unsafe.Pointer) {
	k.n.Launches++
	k.ctx.Argmax(gr(x), out)
}
func (k cudaKernels) gdnGate(a, b rows, aLog, dtBias unsafe.Pointer, g, beta rows) {
	k.n.Launches++
	k.ctx.GDNGate(gr(a), gr(b), aLog, dtBias, gr(g), gr(beta))
}
func (k cudaKernels) conv1d(x, y rows, w unsafe.Pointer, kw int, state unsafe.Pointer, bf16 bool, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int) {
	k.n.Launches++
	k.ctx.Conv1DSiLU(gr(x), gr(y), w, kw, state, bf16, slotStride, slots, inSlot, outSlot)
}
func (k cudaKernels) deltaRecurrent(q, kk, v, g, beta rows, state unsafe.Pointer, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int, o rows) {
	k.n.Launches++
	k.ctx.DeltaRecurrent(gr(q), gr(kk), gr(v), gr(g), gr(beta), state, slotStride, slots, inSlot, outSlot, gr(o))
}
func (k cudaKernels) deltaChunked(q, kk, v, g, beta rows, state unsafe.Pointer, slotStride int64, slots int, inSlot unsafe.Pointer, outSlot int, o rows) {
	k.n.Launches++
	k.ctx.DeltaChunked(gr(q), gr(kk), gr(v), gr(g), gr(beta), state, slotStride, slots, inSlot, outSlot, gr(o))
}
func (k cudaKernels) kvAppend(kv kvPlanes, kk, v rows, pos unsafe.Pointer) int {
	k.n.Launches++
	k.ctx.KVAppend(gkv(kv), gr(kk), gr(v), pos)
	return 0
}
func (k cudaKernels) attention(q rows, kv kvPlanes, pos unsafe.Pointer, scale float32, out rows) int {
	k.n.Launches++
	k.ctx.Attention(gr(q), gkv(kv), pos, scale, gr(out))
	return 0
}

func (k cudaKernels) sample(x rows, out, counts, seen unsafe.Pointer, cfg sampleCfg, rngPos unsafe.Pointer) {
	// top_k ≥ vocab is "off" on both sides; clamping keeps it in int32.
	k.n.Launches++
	k.ctx.Sample(gr(x), out, counts, seen, cuda.SampleConfig{Temperature: cfg.Temperature, TopP: cfg.TopP, MinP: cfg.MinP,
		Presence: cfg.PresencePenalty, Frequency: cfg.FrequencyPenalty, Repetition: cfg.RepetitionPenalty,
		TopK: min(cfg.TopK, x.d), Seed: cfg.Seed}, rngPos)
}
