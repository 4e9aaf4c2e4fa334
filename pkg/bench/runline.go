package bench

import (
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/plan"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// runFacts are the measured inputs of the run line.
type runFacts struct {
	backend       string
	threads       int
	isa           string
	activations   string   // backend.ActivationsOf
	int8Formats   []string // backend.Int8Formats of the artifact's formats
	graph         bool
	maxCtx        int
	corpusTokens  int
	loadSeconds   float64        // open + engine construction + sequence allocation
	uploadSeconds float64        // engine.New: weights bound into the backend arena
	afterWeights  int64          // memory available after the weights (A)
	afterStartup  int64          // memory available after the sequence arena
	device        backend.Device // nil for the CPU backend
}

// deviceOf returns the device facts of a device backend (CUDA), else nil.
func deviceOf(be backend.Backend) backend.Device {
	d, _ := be.(backend.Device)
	return d
}

// cudaVersion formats CUDA's 1000·major + 10·minor encoding as "13.0".
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// runLine builds the run line: environment, artifact, load, memory (the
// plan of pkg/plan, checked against the engine's real arenas) and config.
func runLine(p Params, env Env, w *loader.Weights, real arenas, f runFacts) (*benchfmt.RunLine, error) {
	af := w.File()
	cfg := w.Config()

	e := benchfmt.Environment{DeviceID: benchfmt.Ptr(int64(p.Device)), Backend: benchfmt.Ptr(f.backend),
		Threads: benchfmt.Ptr(int64(f.threads))}
	if name := env.CPUName(); name != "" {
		e.CPUName = &name
	}
	staging, h2d := int64(0), real.weights
	if f.device != nil {
		df, st := f.device.DeviceFacts(), f.device.Stats()
		e.GPUName = benchfmt.Ptr(df.Name)
		e.CUDARuntimeVersion = benchfmt.Ptr(cudaVersion(df.RuntimeVersion))
		e.CUDADriverVersion = benchfmt.Ptr(cudaVersion(df.DriverVersion))
		e.DeviceID = benchfmt.Ptr(int64(df.ID))
		staging, h2d = st.PeakStagingBytes, st.HostToDeviceBytes
	}
	if f.isa != "" {
		e.Extra = append(e.Extra, benchfmt.RawField{Key: "isa", JSON: benchfmt.QuoteString(f.isa)})
	}
	if f.activations != "" {
		e.Extra = append(e.Extra, benchfmt.RawField{Key: "activations", JSON: benchfmt.QuoteString(f.activations)})
		// the formats whose decode matmuls ran int8 (what auto resolved to here)
		names := make([]string, len(f.int8Formats))
		for i, n := range f.int8Formats {
			names[i] = benchfmt.QuoteString(n)
		}
		e.Extra = append(e.Extra, benchfmt.RawField{Key: "activations_int8", JSON: "[" + strings.Join(names, ",") + "]"})
	}

	sig, err := af.PrefillSignature()
	if err != nil {
		return nil, fmt.Errorf("%s: prefill signature: %w", termsafe.Path(p.Weights), err)
	}
	// The objects the engine binds are the plan's device objects: the text
	// model, plus the MTP head with --spec mtp and the proposal head with
	// --lm-head-draft.
	objs := make([]plan.Object, len(af.Objects))
	for i := range af.Objects {
		o := &af.Objects[i]
		objs[i] = plan.Object{ID: o.ID, Component: o.Component, Bytes: o.Bytes, Host: !o.IsTensor()}
	}
	dev, err := plan.SelectDevice(objs, planSpec(p.Spec), p.LMHeadDraft)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
	}
	var read int64
	for _, o := range dev {
		read += o.Bytes
	}
	device := int64(len(dev))
	load := benchfmt.Load{
		Architecture: af.Architecture, Name: af.Name, Formats: af.Formats(), PrefillSignature: sig,
		LoadSeconds: f.loadSeconds, UploadSeconds: f.uploadSeconds,
		ArtifactBytesRead: read, HostToDeviceBytes: h2d, PeakStagingBytes: staging,
		DeviceObjectCount: device, HostObjectCount: int64(len(af.ResourceObjects())),
	}
	if load.Formats == nil {
		load.Formats = []string{}
	}

	mem, err := memory(p, cfg, objs, f, real)
	if err != nil {
		return nil, err
	}

	prime := benchfmt.GraphPrime{}
	if f.graph && anyDecode(ExpandTests(p.Prompts, p.Gens, p.Pairs)) {
		prime = benchfmt.GraphPrime{Primed: true, OutputTokens: int64(PrimeOutputs(p.Spec, p.DraftTokens))}
	}
	head := "full"
	if p.LMHeadDraft {
		head = "optimized"
	}
	config := benchfmt.Config{
		MaxContext: int64(f.maxCtx), PrefillChunk: int64(p.PrefillChunk), KVCache: plan.KVDtype(p.KVDtype).CacheName(),
		SpeculativeBackend: p.Spec, DraftTokens: int64(p.DraftTokens), ProposalHead: head,
		UseCUDAGraph: f.graph, DecodePath: DecodePath(p.Spec, f.graph), DecodeGraphPrime: prime,
		Repetitions: int64(p.Repetitions), Warmup: int64(p.Warmup), CorpusPath: p.Corpus, CorpusTokens: int64(f.corpusTokens),
	}
	return &benchfmt.RunLine{
		RunID: env.RunID, SchemaVersion: benchfmt.SchemaVersion, Command: env.Command, Environment: e,
		Artifact: benchfmt.Artifact{Path: p.Weights, FileSizeBytes: af.Size},
		Load:     load, Memory: mem, Config: config,
	}, nil
}

// memory is the memory object: pkg/plan's plan with the engine's options
// (explicit KV capacity = max context, the CPU backend, A = MemAvailable
// after the weights were bound, the measured free memory after startup).
// The engine sizes and carves its arenas from the same pkg/layout terms, so
// the plan's weights, sequence and workspace equal the engine's allocations
// exactly (with --spec mtp the weights and sequence include the MTP head's
// own arenas, mtp.weights and mtp.sequence, and the workspace its step's
// phases); a difference is an error.
func memory(p Params, cfg qwen35.Config, objs []plan.Object, f runFacts, real arenas) (benchfmt.Memory, error) {
	pl, err := plan.New(cfg, objs, PlanOptions(p, f.backend, f.graph, f.maxCtx, f.afterWeights, f.afterStartup))
	if err != nil {
		return benchfmt.Memory{}, fmt.Errorf("memory plan for %s: %w", p.Weights, err)
	}
	m := pl.Memory
	out := benchfmt.Memory{
		Device: int64(m.Device), MaxContext: m.MaxContext, KVCapacityMode: m.KVCapacityMode, KVCapacity: m.KVCapacity,
		KVCapacityPageGroups: m.KVCapacityPageGroups, KVCapacityMaxPageGroups: m.KVCapacityMaxPageGroups, KVCache: m.KVCache,
		Weights:                        arena(m.Weights),
		Sequence:                       arena(m.Sequence),
		Workspace:                      arena(m.Workspace),
		MinimumRuntimeReservationBytes: m.MinimumRuntimeReservationBytes,
		KVCapacityIncrementBytes:       m.KVCapacityIncrementBytes,
		RuntimeReservationBytes:        m.RuntimeReservationBytes,
		AvailableAfterWeightsBytes:     m.AvailableAfterWeightsBytes,
		AvailableAfterStartupBytes:     m.AvailableAfterStartupBytes,
		KVCapacityHeadroomBytes:        m.KVCapacityHeadroomBytes,
		PlannedSlackBytes:              m.PlannedSlackBytes,
		CUDAGraphAllowanceBytes:        m.CUDAGraphAllowanceBytes,
		KVPayloadBytes:                 m.KVPayloadBytes,
	}
	planned := arenas{weights: m.Weights.CapacityBytes, sequence: m.Sequence.CapacityBytes, workspace: m.Workspace.CapacityBytes}
	if planned != real {
		return benchfmt.Memory{}, fmt.Errorf("internal: the engine's arenas differ from the memory plan for %s: weights %d planned, %d allocated; sequence %d planned, %d allocated; workspace %d planned, %d allocated",
			p.Weights, planned.weights, real.weights, planned.sequence, real.sequence, planned.workspace, real.workspace)
	}
	return out, nil
}

// PlanOptions are the pkg/plan options of a bench run of p: the options
// ninfer-plan takes as --weights P --backend B --available A --max-ctx C
// --kv-capacity C --kv-dtype --prefill-chunk --spec --draft-tokens
// --lm-head-draft [--no-cuda-graph], plus the measured free memory after
// startup (0 = planned).
func PlanOptions(p Params, backend string, graph bool, maxCtx int, afterWeights, afterStartup int64) plan.Options {
	be := plan.BackendCPU
	if backend == loader.BackendCUDA {
		be = plan.BackendCUDA
	}
	return plan.Options{
		MaxContext: int64(maxCtx), KVCapacity: int64(maxCtx), KVDtype: plan.KVDtype(p.KVDtype),
		PrefillChunk: int64(p.PrefillChunk), Spec: planSpec(p.Spec), DraftTokens: p.DraftTokens, LMHeadDraft: p.LMHeadDraft,
		UseCUDAGraph: graph, Backend: be, Device: p.Device,
		AvailableAfterWeightsBytes: afterWeights, AvailableAfterStartupBytes: afterStartup,
	}
}

func arena(a plan.ArenaUsage) benchfmt.Arena {
	return benchfmt.Arena{CapacityBytes: a.CapacityBytes, UsedBytes: a.UsedBytes, PeakUsedBytes: a.PeakUsedBytes}
}

func planSpec(s string) plan.Spec {
	if s == SpecMTP {
		return plan.SpecMTP
	}
	return plan.SpecNone
}
