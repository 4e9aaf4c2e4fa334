package plan

import (
	"fmt"
	"strings"
)

// Constants of the plan.
const (
	PageTokens           = 64               // tokens per KV page (page group)
	ArenaAlignment       = 256              // alignment of every arena term
	DefaultHeadroomBytes = int64(1) << 30   // auto KV capacity headroom
	CUDARuntimeOverhead  = int64(512) << 20 // offline planning: CUDA context + runtime
	MaxDraftTokens       = 5                // MTP k ∈ [1, 5]
	graphSmallBytes      = int64(12) << 20  // graph allowance, short contexts / no spec
	graphLargeBytes      = int64(82) << 20  // graph allowance, MTP above 4096 tokens
	graphSmallCtx        = 4096             // MTP graph allowance threshold
	defaultPrefillChunk  = 1024             // prefill chunk when Options leave it 0
	defaultMaxContextCap = int64(262144)    // auto max-context cap without max_position_embeddings
	MaxAttnSplits        = 64               // split-KV partials per query head (workspace)
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
// FP16 scales: bf16 4d; int8-group64 2d + 2·2·ceil(d/64); fp8-row256
// 2d + 2·2·ceil(d/256). At d = 256: 1024, 528, 516.
func (d KVDtype) BytesPerTokenHead(headDim int) int64 {
	h := int64(headDim)
	switch d {
	case KVInt8:
		return 2*h + 4*ceilDiv(h, 64)
	case KVFP8:
		return 2*h + 4*ceilDiv(h, 256)
	}
	return 4 * h
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
	// HeadroomBytes is the auto-mode headroom (0 = 1 GiB); explicit mode
	// always uses 0.
	HeadroomBytes int64
	// GDNStateSlots overrides the number of GDN state slots (0 = 1 without
	// speculation, k+1 with MTP k).
	GDNStateSlots int

	// The memory budget, one of:
	// AvailableAfterWeightsBytes: A measured after the weights are resident
	// (the engine), or the CPU backend's memory budget for runtime buffers.
	AvailableAfterWeightsBytes int64
	// DeviceTotalBytes: offline planning; A = total − weights − overhead.
	DeviceTotalBytes int64
	// RuntimeOverheadBytes is subtracted from DeviceTotalBytes (0 = 512 MiB
	// on cuda, none on cpu; negative = none).
	RuntimeOverheadBytes int64

	// Measured overrides (0 = computed from ninfer's own layout).
	WorkspaceBytesOverride     int64 // workspace arena capacity
	SequenceOtherBytesOverride int64 // the "seq.*" buffers, as one term
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
		return o, fmt.Errorf("--prefill-chunk must be a multiple of 128 (got %d)", o.PrefillChunk)
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
	if o.KVCapacity > 0 && o.HeadroomBytes != 0 {
		return o, fmt.Errorf("an explicit kv capacity takes no headroom (got %d bytes)", o.HeadroomBytes)
	}
	if o.KVCapacity == 0 && o.HeadroomBytes == 0 {
		o.HeadroomBytes = DefaultHeadroomBytes
	}
	if o.HeadroomBytes < 0 {
		return o, fmt.Errorf("headroom must be non-negative (got %d)", o.HeadroomBytes)
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

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func alignUp(v int64) int64 { return (v + ArenaAlignment - 1) / ArenaAlignment * ArenaAlignment }

// Validate checks the options without a model (the checks New makes first).
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}
