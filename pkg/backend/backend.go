// Package backend is the only door from the engine to compute kernels. A
// Backend owns device-resident buffers and runs ops on typed views of them.
//
// Design rules (so that a CUDA backend can implement the same interface):
//   - Memory comes in a few large named buffers (weights, sequence state,
//     workspace), carved up by Arena; ops never allocate.
//   - Ops take views (buffer + byte offset + shape/strides), never host
//     slices. Control values (token ids, positions, state slot indices) are
//     read by the kernels from int32 views, so a decode step has fixed
//     shapes and could be captured once as a graph and replayed.
//   - Ops are asynchronous in spirit: an invalid call records the first
//     error, skips the op, and Sync reports it (like a device error).
package backend

import (
	"fmt"
	"unsafe"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/sample"
)

// Buffer is one backend allocation. Its memory is owned by the backend and
// is not addressable from Go except through Upload/Download.
type Buffer struct {
	name  string
	bytes int64
	p     unsafe.Pointer // device address (host address on the CPU backend)
}

// Name is the buffer's name (for plans and error messages).
func (b *Buffer) Name() string { return b.name }

// Bytes is the buffer size.
func (b *Buffer) Bytes() int64 { return b.bytes }

// View is a byte offset into a buffer.
type View struct {
	Buf *Buffer
	Off int64
}

// At returns the view moved by off bytes.
func (v View) At(off int64) View { return View{v.Buf, v.Off + off} }

func (v View) ptr() unsafe.Pointer { return unsafe.Add(v.Buf.p, v.Off) }

// Tensor is an fp32 activation view: element (t,h,d) lives at element
// offset t·LD + h·HS + d from the view.
type Tensor struct {
	View
	T, H, D int
	LD, HS  int
}

// Dense is a [T,D] row-major tensor.
func Dense(v View, t, d int) Tensor { return Tensor{v, t, 1, d, d, d} }

// Heads is a [T,H,D] row-major tensor.
func Heads(v View, t, h, d int) Tensor { return Tensor{v, t, h, d, h * d, d} }

// Cols returns columns [off, off+n) of a one-head tensor as a one-head tensor.
func (x Tensor) Cols(off, n int) Tensor {
	return Tensor{x.View.At(int64(off) * 4), x.T, 1, n, x.LD, n}
}

// Split reinterprets the columns of a one-head tensor starting at element
// offset off as h heads of width d spaced hs apart.
func (x Tensor) Split(off, h, d, hs int) Tensor {
	return Tensor{x.View.At(int64(off) * 4), x.T, h, d, x.LD, hs}
}

// Rows returns rows [t0, t0+n).
func (x Tensor) Rows(t0, n int) Tensor {
	y := x
	y.View = x.View.At(int64(t0) * int64(x.LD) * 4)
	y.T = n
	return y
}

// Width is the per-token element count H·D for dense one-head tensors.
func (x Tensor) Width() int { return x.H * x.D }

// extent is the byte span touched by the tensor (0 for empty tensors).
func (x Tensor) extent() int64 {
	if x.T <= 0 || x.H <= 0 || x.D <= 0 {
		return 0
	}
	last := int64(x.T-1)*int64(x.LD) + int64(x.H-1)*int64(x.HS) + int64(x.D)
	return last * 4
}

// Weight is a prepared (bound) weight matrix [N,K] in a storage format.
type Weight struct {
	Name   string
	Format format.Format
	N, K   int
	View   View
	Bytes  int64
	prep   any  // backend-private descriptor
	owner  *ops // the backend that prepared it
	// fp32Act pins the weight's matmuls to fp32 activations
	// (KeepFP32Activations).
	fp32Act bool
}

// StateSlots is a slotted state array: slot s starts at View + s·SlotBytes.
// Elements are fp32, or bf16 when BF16 (Conv1DSiLU only).
type StateSlots struct {
	View      View
	Slots     int
	SlotBytes int64
	BF16      bool
}

// KVFormat is the element format of the KV cache.
type KVFormat int

// KV cache formats.
const (
	KVBF16    KVFormat = iota // bf16 vectors
	KVInt8G64                 // int8 + fp16 scale per 64 dims
	KVFP8Row                  // e4m3 + one fp16 scale per head vector
	KVF32                     // fp32 vectors: exact, for reference and test runs
)

// KVPage is the number of tokens per KV page.
const KVPage = 64

// ParseKVFormat parses "bf16", "int8" (int8-group64), "fp8" (fp8-e4m3-row)
// or "fp32".
func ParseKVFormat(s string) (KVFormat, error) {
	switch s {
	case "", "bf16":
		return KVBF16, nil
	case "int8", "int8_g64", "int8-group64":
		return KVInt8G64, nil
	case "fp8", "fp8_e4m3_row", "fp8-e4m3-row256":
		return KVFP8Row, nil
	case "fp32":
		return KVF32, nil
	}
	return 0, fmt.Errorf("unknown KV cache format %q (want bf16, int8, fp8 or fp32)", s)
}

func (f KVFormat) String() string {
	switch f {
	case KVBF16:
		return "bf16"
	case KVInt8G64:
		return "int8"
	case KVFP8Row:
		return "fp8"
	case KVF32:
		return "fp32"
	}
	return fmt.Sprintf("kv(%d)", int(f))
}

// KVPlaneBytes returns the bytes per (token, kv head) vector of a code plane
// and of a scale plane for head_dim hd.
func KVPlaneBytes(f KVFormat, hd int) (code, scale int64) {
	switch f {
	case KVInt8G64:
		return int64(hd), 2 * int64((hd+63)/64)
	case KVFP8Row:
		return int64(hd), 2
	case KVF32:
		return 4 * int64(hd), 0
	}
	return 2 * int64(hd), 0
}

// KVLayer is one full-attention layer's paged cache. Vector (page, head,
// offset) lives at slot ((page·KVHeads + head)·64 + offset) of each plane;
// BlockTable (int32[TableLen]) maps logical to physical pages.
type KVLayer struct {
	Format           KVFormat
	KVHeads, HeadDim int
	Pages            int
	K, V, KS, VS     View // KS/VS: fp16 scale planes (unused for bf16)
	BlockTable       View
	TableLen         int
}

// Backend is a compute device. Every method that runs an op records the
// first invalid call; Sync returns (and clears) it.
type Backend interface {
	Name() string
	Threads() int

	// Memory.
	Alloc(name string, bytes int64) (*Buffer, error)
	Free(b *Buffer)
	Upload(dst View, src []byte) error
	UploadI32(dst View, src []int32) error
	UploadF32(dst View, src []float32) error
	Download(dst []byte, src View) error
	DownloadF32(dst []float32, src View) error
	DownloadI32(dst []int32, src View) error
	Zero(dst View, bytes int64)
	Copy(dst, src View, bytes int64)
	Sync() error
	Close() error

	// PrepareWeight binds an [n,k] matrix stored in format f at v.
	PrepareWeight(name string, f format.Format, n, k int, v View, bytes int64) (*Weight, error)

	// Ops (formulas: kernels/ninfer_ops.h).
	Embed(out Tensor, w *Weight, ids View)
	MatMul(y, x Tensor, w *Weight, accumulate bool)
	RMSNorm(y, x Tensor, w View, eps float32, zeroCentred bool)
	GatedRMSNorm(y, o, z Tensor, w View, eps float32)
	L2Norm(y, x Tensor, scale float32)
	RoPE(x Tensor, pos View, rotaryDim int, theta float64)
	SigmoidMul(y, x, g Tensor)
	SwiGLU(y, g, u Tensor)
	Add(y, a, b Tensor)
	Argmax(out View, x Tensor)
	GDNGate(g, beta, a, b Tensor, aLog, dtBias View)
	Conv1DSiLU(y, x Tensor, w View, kw int, st StateSlots, inSlot View, outSlot int)
	DeltaRecurrent(o, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int)
	DeltaChunked(o, q, k, v, g, beta Tensor, st StateSlots, inSlot View, outSlot int)
	KVAppend(kv KVLayer, k, v Tensor, pos View)
	Attention(out, q Tensor, kv KVLayer, pos View, scale float32)
	// Sample draws the next token on the backend (sampleop.go).
	Sample(out View, logits Tensor, st SamplerState, cfg sample.Config, rngPos View)
}

// PerToken as an outSlot writes the state after token t into slot t.
const PerToken = -1

// DeltaChunk is the chunk length of DeltaChunked.
const DeltaChunk = 64

// CUDAGraphs reports whether the CUDA backend captures decode steps as CUDA
// graphs: it implements GraphCapturer (graph.go), and the engine replays
// its decode and MTP-round steps as graphs unless told not to
// (--no-cuda-graph), which the bench document reports (config.use_cuda_graph,
// decode_path cuda_graph / mtp_cuda_graph).
const CUDAGraphs = true

// OpScratchUser is implemented by backends whose ops need device scratch
// beyond their operands (CUDA: split-KV attention partials, chunked-GDN
// records, conv halos, the sampling buffers). The engine reserves it as the
// workspace arena's last term (pkg/layout CUDAOpScratch, planned like every
// other term) and binds it before the first op; the backend then never
// allocates for an op, and an op needing more than the bound bytes fails
// with an error naming both sizes. Free of the buffer holding the region
// unbinds it.
type OpScratchUser interface {
	BindOpScratch(v View, bytes int64) error
}

// Device is implemented by backends that own a separate device (CUDA): the
// facts the bench environment reports and the measured upload statistics.
type Device interface {
	DeviceFacts() DeviceFacts
	Stats() UploadStats
}

// DeviceFacts describe the device of a Device backend.
type DeviceFacts struct {
	Name                          string
	ID                            int
	RuntimeVersion, DriverVersion int // CUDA encoding: 1000·major + 10·minor
	TotalMem                      int64
	SMs                           int
	Simulated                     bool // the host SIMT harness, not a GPU
}

// UploadStats are measured facts of the uploads so far (the bench
// document's load object).
type UploadStats struct {
	Seconds           float64
	HostToDeviceBytes int64
	PeakStagingBytes  int64
	Uploads           int
}
