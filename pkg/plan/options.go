package plan

import (
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/layout"
)

// Constants of the plan.
const (
	PageTokens           = layout.KVPage    // tokens per KV page (page group)
	ArenaAlignment       = layout.Align     // alignment of every arena term
	DefaultHeadroomBytes = int64(1) << 30   // auto KV capacity headroom from 4 GiB budgets up (the reference's)
	HeadroomDivisor      = 4                // auto headroom = min(DefaultHeadroomBytes, A/HeadroomDivisor)
	CUDARuntimeOverhead  = int64(512) << 20 // offline planning: CUDA context + runtime
	MaxDraftTokens       = 5                // MTP k ∈ [1, 5]
	graphSmallBytes      = int64(12) << 20  // graph allowance, short contexts / no spec
	graphLargeBytes      = int64(82) << 20  // graph allowance, MTP above 4096 tokens
	graphSmallCtx        = 4096             // MTP graph allowance threshold
	defaultPrefillChunk  = 1024             // prefill chunk when Options leave it 0
	defaultMaxContextCap = int64(262144)    // auto max-context cap without max_position_embeddings
)

// KVDtype is the KV cache element type as the CLIs spell it.
type KVDtype string

// KV cache dtypes.
const (
	KVBF16 KVDtype = "bf16"
	KVInt8 KVDtype = "int8"
	KVFP8  KVDtype = "fp8"
)

// ParseKVDtype parses a --kv-dtype value.
func ParseKVDtype(s string) (KVDtype, error) {
	switch d := KVDtype(strings.ToLower(s)); d {
	case KVBF16, KVInt8, KVFP8:
		return d, nil
	}
	return "", fmt.Errorf("invalid kv-dtype %q (want bf16, int8 or fp8)", s)
}

// CacheName is the kv_cache name of the memory object.
func (d KVDtype) CacheName() string {
	switch d {
	case KVInt8:
		return "int8-group64"
	case KVFP8:
		return "fp8-e4m3-row256"
	}
	return "bf16"
}

// BytesPerTokenHead is the K+V size of one token of one KV head, codes plus
// fp16 scales, as the engine stores it (layout.KVPlaneBytes): bf16 4d;
// int8-group64 2d + 2·2·ceil(d/64); fp8 2d + 2·2 (one scale per head
// vector; the reference's fp8-row256 2d + 2·2·ceil(d/256) is the same for
// d ≤ 256). At d = 256: 1024, 528, 516.
func (d KVDtype) BytesPerTokenHead(headDim int) int64 {
	code, scale, err := layout.KVPlaneBytes(string(d), headDim)
	if err != nil {
		code, scale, _ = layout.KVPlaneBytes("bf16", headDim)
	}
	return 2 * (code + scale)
}

// Spec is the speculative decoding backend.
type Spec string

// Speculative backends.
const (
	SpecNone Spec = "none"
	SpecMTP  Spec = "mtp"
)

// ParseSpec parses a --spec value ("" means none).
func ParseSpec(s string) (Spec, error) {
	switch s {
	case "", "none":
		return SpecNone, nil
	case "mtp":
		return SpecMTP, nil
	}
	return "", fmt.Errorf("invalid speculative backend: %s", s)
}

// Backend is the engine backend the plan is for.
type Backend string

// Backends.
const (
	BackendCUDA Backend = "cuda"
	BackendCPU  Backend = "cpu"
)

// Options are the inputs of New besides the config and the objects.
// Zero values mean the documented default.
type Options struct {
	// MaxContext is the longest sequence in tokens. 0: the explicit
	// KVCapacity, or in auto mode the largest context that fits (capped at
	// max_position_embeddings).
	MaxContext int64
	// KVCapacity is the explicit KV capacity in tokens; 0 means auto.
	KVCapacity int64
	KVDtype    KVDtype // "" = bf16
	// PrefillChunk is the prefill chunk in tokens (multiple of 128; 0 = 1024).
	PrefillChunk int64
	Spec         Spec // "" = none
	DraftTokens  int  // MTP k, [1,5] with Spec mtp, else 0
	LMHeadDraft  bool // optimized proposal head (needs a spec)
	UseCUDAGraph bool // capture decode graphs (set it: false means eager)
	Backend      Backend
	// MaxConcurrency is C; only 1 is supported (0 = 1).
	MaxConcurrency int
	Device         int // device ordinal, reported as memory.device
	// HeadroomBytes is the auto-mode headroom: 0 = the default rule,
	// AutoHeadroom(A) (min(1 GiB, A/4)); negative = none (0 bytes);
	// positive = that many bytes. Explicit mode always uses none.
	HeadroomBytes int64
	// GDNStateSlots overrides the number of GDN state slots (0 = 1 without
	// speculation, k+1 with MTP k).
	GDNStateSlots int
	// ConvStateBytes overrides the GDN conv state element size (0 = the
	// engine's, layout.ConvStateElemBytes; the seed reconciliation uses
	// the reference's bf16, 2).
	ConvStateBytes int
	// LogitsRows are the rows of the logits workspace (engine
	// Options.LogitsRows; 0 = 1 without speculation, k+1 with MTP k, as
	// ninfer-bench runs the engine); capped at the prefill chunk.
	LogitsRows int64
	// BackendScratchBytes is the backend's memory outside the arenas (the
	// CPU kernels' per-thread scratch, CPU.ScratchBytes(), measured). It is
	// reported as Plan.ScratchBytes and in the table only: it is allocated
	// with the backend, before A is measured, so it is not part of the
	// runtime reservation or the memory object.
	BackendScratchBytes int64

	// The memory budget, one of:
	// AvailableAfterWeightsBytes: A measured after the weights are resident
	// (the engine), or the CPU backend's memory budget for runtime buffers.
	AvailableAfterWeightsBytes int64
	// DeviceTotalBytes: offline planning; A = total − weights − overhead.
	DeviceTotalBytes int64
	// RuntimeOverheadBytes is subtracted from DeviceTotalBytes (0 = 512 MiB
	// on cuda, none on cpu; negative = none).
	RuntimeOverheadBytes int64

	// ReferenceMTPKV sizes the MTP KV cache (kv.mtp) by the reference
	// formula L_mtp·(pages + C·ceil((k−1)/64))·64·kv_heads·B instead of the
	// engine's layout.MTPGeometry (one layer over the main pages): the seed
	// reconciliation only.
	ReferenceMTPKV bool

	// Measured overrides (0 = computed from ninfer's own layout).
	WorkspaceBytesOverride     int64 // workspace arena capacity
	SequenceOtherBytesOverride int64 // the non-state sequence buffers (block table, ctl.*), as one term
	AvailableAfterStartupBytes int64 // measured free memory after startup
}

// withDefaults fills the zero-valued options and validates them.
func (o Options) withDefaults() (Options, error) {
	if o.KVDtype == "" {
		o.KVDtype = KVBF16
	}
	if _, err := ParseKVDtype(string(o.KVDtype)); err != nil {
		return o, err
	}
	if o.Spec == "" {
		o.Spec = SpecNone
	}
	if _, err := ParseSpec(string(o.Spec)); err != nil {
		return o, err
	}
	if o.Backend == "" {
		o.Backend = BackendCUDA
	}
	if o.Backend != BackendCUDA && o.Backend != BackendCPU {
		return o, fmt.Errorf("invalid backend %q (want cuda or cpu)", o.Backend)
	}
	if o.PrefillChunk == 0 {
		o.PrefillChunk = defaultPrefillChunk
	}
	if o.PrefillChunk < 0 || o.PrefillChunk%128 != 0 {
		// the tools' own check (cliutil.OutOfRange) says the same words
		return o, fmt.Errorf("--prefill-chunk %d: out of range (want a positive multiple of 128)", o.PrefillChunk)
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = 1
	}
	if o.MaxConcurrency != 1 {
		return o, fmt.Errorf("max concurrency %d is not supported (only 1)", o.MaxConcurrency)
	}
	switch o.Spec {
	case SpecNone:
		if o.DraftTokens != 0 || o.LMHeadDraft {
			return o, fmt.Errorf("--draft-tokens and --lm-head-draft require --spec mtp")
		}
	case SpecMTP:
		if o.DraftTokens < 1 || o.DraftTokens > MaxDraftTokens {
			return o, fmt.Errorf("--spec mtp requires --draft-tokens in [1,%d]", MaxDraftTokens)
		}
	}
	if o.MaxContext < 0 || o.KVCapacity < 0 {
		return o, fmt.Errorf("max context and kv capacity must be non-negative")
	}
	if o.MaxContext == 0 && o.KVCapacity > 0 {
		o.MaxContext = o.KVCapacity
	}
	if o.KVCapacity > 0 && o.HeadroomBytes > 0 {
		return o, fmt.Errorf("an explicit kv capacity takes no headroom (got %d bytes)", o.HeadroomBytes)
	}
	if o.LogitsRows < 0 || o.BackendScratchBytes < 0 {
		return o, fmt.Errorf("logits rows and backend scratch must be non-negative")
	}
	if o.LogitsRows == 0 {
		o.LogitsRows = 1
		if o.Spec == SpecMTP {
			o.LogitsRows = int64(o.DraftTokens) + 1
		}
	}
	o.LogitsRows = min(o.LogitsRows, o.PrefillChunk)
	if o.ConvStateBytes != 0 && o.ConvStateBytes != 2 && o.ConvStateBytes != 4 {
		return o, fmt.Errorf("conv state element size %d must be 2 (bf16) or 4 (fp32)", o.ConvStateBytes)
	}
	if o.GDNStateSlots < 0 {
		return o, fmt.Errorf("GDN state slots must be non-negative (got %d)", o.GDNStateSlots)
	}
	if (o.AvailableAfterWeightsBytes > 0) == (o.DeviceTotalBytes > 0) {
		return o, fmt.Errorf("give exactly one memory budget: the device total or the memory available after weights")
	}
	if o.RuntimeOverheadBytes == 0 && o.Backend == BackendCUDA {
		o.RuntimeOverheadBytes = CUDARuntimeOverhead
	}
	if o.RuntimeOverheadBytes < 0 {
		o.RuntimeOverheadBytes = 0
	}
	if o.WorkspaceBytesOverride < 0 || o.SequenceOtherBytesOverride < 0 || o.AvailableAfterStartupBytes < 0 {
		return o, fmt.Errorf("measured overrides must be non-negative")
	}
	return o, nil
}

// KVCapacityMode is "explicit" or "auto".
func (o Options) KVCapacityMode() string {
	if o.KVCapacity > 0 {
		return "explicit"
	}
	return "auto"
}

// AutoHeadroom is the default auto-mode headroom for A bytes available
// after the weights: the reference's 1 GiB from A = 4 GiB up, a quarter of
// A below, so a small budget keeps three quarters of itself.
func AutoHeadroom(A int64) int64 {
	return max(0, min(DefaultHeadroomBytes, A/HeadroomDivisor))
}

// headroom is the auto-mode headroom these options take out of A: 0 in
// explicit mode or when none is asked for (negative HeadroomBytes),
// AutoHeadroom(A) by default.
func (o Options) headroom(A int64) int64 {
	switch {
	case o.KVCapacity > 0 || o.HeadroomBytes < 0:
		return 0
	case o.HeadroomBytes == 0:
		return AutoHeadroom(A)
	}
	return o.HeadroomBytes
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Validate checks the options without a model (the checks New makes first).
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}
