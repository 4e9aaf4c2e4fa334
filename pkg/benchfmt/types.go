// Package benchfmt is the data model of ninfer benchmark results: the
// schema-15 report document (the format of the reference ninfer_bench, see
// shared/reference/ninfer-bench.md §3) and the JSON-lines stream that
// ninfer-bench writes while it runs (docs/BENCH-LINES.md). It holds the
// types, the encoders (exact key order, %.10g doubles, reference string
// escaping) and the decoders; aggregation lives in pkg/report.
package benchfmt

// Schema constants of the report document.
const (
	SchemaVersion = 15
	ArtifactType  = "ninfer_bench_report"
	Tool          = "ninfer_bench"
)

// Test kinds.
const (
	KindPP   = "pp"
	KindTG   = "tg"
	KindPPTG = "pp+tg"
)

// Document is a schema-15 report. Fields are in the order they are written.
type Document struct {
	SchemaVersion int64 // always 15 when produced here
	ArtifactType  string
	Tool          string
	Command       string
	Environment   Environment
	Artifact      Artifact
	Load          Load
	Memory        Memory
	Config        Config
	Tests         []Test
}

// Environment describes where the run happened. The first four fields are
// the reference (CUDA) keys and are always written (nil → null, e.g. gpu_name
// on the CPU backend). Backend, CPUName and Threads are ninfer extensions,
// written after them only when non-nil. Extra holds any other keys found when
// decoding (written last, in their original order, re-serialized compactly).
type Environment struct {
	GPUName            *string
	CUDARuntimeVersion *string
	CUDADriverVersion  *string
	DeviceID           *int64

	Backend *string // e.g. "cuda", "cpu"
	CPUName *string
	Threads *int64

	Extra []RawField
}

// RawField is a key with a raw (already valid, compact) JSON value.
type RawField struct {
	Key  string
	JSON string
}

// Artifact is the weights file.
type Artifact struct {
	Path          string
	FileSizeBytes int64
}

// Load is the model load record.
type Load struct {
	Architecture      string
	Name              string
	Formats           []string
	PrefillSignature  string
	LoadSeconds       float64
	UploadSeconds     float64
	ArtifactBytesRead int64
	HostToDeviceBytes int64
	PeakStagingBytes  int64
	DeviceObjectCount int64
	HostObjectCount   int64
}

// Arena is one memory arena's capacity/used/peak.
type Arena struct {
	CapacityBytes int64
	UsedBytes     int64
	PeakUsedBytes int64
}

// VisionWorkspace is the optional vision arena (null in every benchmark
// report; kept for completeness of the schema).
type VisionWorkspace struct {
	AggregatePromptTokens int64
	MaxItemTokens         int64
	GeneralCapacityBytes  int64
	EncodePeakBytes       int64
	HandoffOffsetBytes    int64
	HandoffCapacityBytes  int64
	HandoffActiveBytes    int64
	HandoffPeakBytes      int64
}

// Memory is the memory plan / summary block.
type Memory struct {
	Device                         int64
	MaxContext                     int64
	KVCapacityMode                 string // "explicit" or "auto"
	KVCapacity                     int64
	KVCapacityPageGroups           int64
	KVCapacityMaxPageGroups        int64
	KVCache                        string
	Weights                        Arena
	Sequence                       Arena
	Workspace                      Arena
	VisionWorkspace                *VisionWorkspace // nil → null
	MinimumRuntimeReservationBytes int64
	KVCapacityIncrementBytes       int64
	RuntimeReservationBytes        int64
	AvailableAfterWeightsBytes     int64
	AvailableAfterStartupBytes     int64
	KVCapacityHeadroomBytes        int64
	PlannedSlackBytes              int64
	CUDAGraphAllowanceBytes        int64
	KVPayloadBytes                 int64
}

// GraphPrime is config.decode_graph_prime.
type GraphPrime struct {
	Primed       bool
	OutputTokens int64
}

// Config is the benchmark configuration block.
type Config struct {
	MaxContext         int64
	PrefillChunk       int64
	KVCache            string
	SpeculativeBackend string
	DraftTokens        int64
	ProposalHead       string
	UseCUDAGraph       bool
	DecodePath         string
	DecodeGraphPrime   GraphPrime
	Repetitions        int64
	Warmup             int64
	CorpusPath         string
	CorpusTokens       int64
}

// Stat is a mean and sample standard deviation; both nil (null) for an empty
// series.
type Stat struct {
	Mean   *float64
	Stddev *float64
}

// Test is one entry of tests[].
type Test struct {
	Label                 string
	Kind                  string
	NPrompt               int64
	NGen                  int64
	RequestedOutputTokens int64
	// NDepth is the context depth of the test (ninfer-bench -d): tokens
	// prefilled, untimed, before each rep. 0 (no depth) is not written, so
	// documents without a depth keep the reference shape; n_depth follows
	// requested_output_tokens when it is written.
	NDepth int64

	PrefillTokS      Stat
	DecodeOutputTokS Stat
	DecodeEngineTokS Stat
	PrepareSeconds   Stat
	PrefillSeconds   Stat
	DecodeSeconds    Stat
	TotalSeconds     Stat

	WorkspacePeakBytes          int64
	WorkspaceAllocatorPeakBytes int64
	Speculative                 Spec
	// SpecTiming is the MTP round breakdown summed over the reps (ninfer
	// extension; nil = absent: no speculation or no decode).
	SpecTiming *SpecTiming
	Reps       []Rep
}

// Rep is one measured repetition.
type Rep struct {
	GeneratedOutputTokens int64
	DecodeOutputTokens    *int64 // nil (null) for pp tests
	DecodeEngineTokens    *int64 // nil (null) for pp tests
	Timings               Timings
	Speculative           Spec
	SpecTiming            *SpecTiming // MTP round breakdown (ninfer extension); nil = absent
	SpecCounts            *SpecCounts // its work counts on a counting backend (ninfer extension); nil = absent
}

// Timings are a rep's wall times in seconds.
type Timings struct {
	PrepareSeconds float64
	VisionSeconds  float64
	PrefillSeconds float64
	DecodeSeconds  float64
	TotalSeconds   float64
}

// Spec is the speculative-decoding block (per rep and summed per test).
type Spec struct {
	Backend             string
	Enabled             bool
	DraftWindow         int64
	Rounds              int64
	DraftedTokens       int64
	AcceptedTokens      int64
	FallbackSteps       int64
	AcceptanceRate      *float64 // accepted/drafted, nil when drafted == 0
	AcceptanceLength    *float64 // 1 + accepted/rounds, nil when rounds == 0
	AcceptedPerPosition []int64
}
