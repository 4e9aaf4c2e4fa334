package benchfmt

import (
	"strconv"
)

// emitter writes JSON with a fixed member order. Multi-line containers put
// each member on its own line, indented 2 more than the container's opening
// line; inline containers keep everything on one line. In compact mode every
// container is inline and no optional space is written.
type emitter struct {
	buf     []byte
	compact bool
	stack   []frame
}

type frame struct {
	multiline bool
	tight     bool // inline array without a space after commas
	n         int
	indent    int // indent of the members (multi-line only)
}

func (e *emitter) newline(indent int) {
	e.buf = append(e.buf, '\n')
	for i := 0; i < indent; i++ {
		e.buf = append(e.buf, ' ')
	}
}

// member writes the separator before the next member of the open container.
func (e *emitter) member() {
	if len(e.stack) == 0 {
		return
	}
	f := &e.stack[len(e.stack)-1]
	if f.n > 0 {
		e.buf = append(e.buf, ',')
	}
	switch {
	case f.multiline:
		e.newline(f.indent)
	case f.n > 0 && !f.tight && !e.compact:
		e.buf = append(e.buf, ' ')
	}
	f.n++
}

func (e *emitter) key(k string) {
	e.member()
	e.buf = AppendString(e.buf, k)
	e.buf = append(e.buf, ':')
	if !e.compact {
		e.buf = append(e.buf, ' ')
	}
}

// open starts a container as the value of the last key (or as an array
// element after elem()).
func (e *emitter) open(c byte, multiline, tight bool) {
	indent := 0
	if len(e.stack) > 0 {
		indent = e.stack[len(e.stack)-1].indent
	}
	if e.compact {
		multiline = false
	}
	e.buf = append(e.buf, c)
	e.stack = append(e.stack, frame{multiline: multiline, tight: tight, indent: indent + 2})
}

func (e *emitter) close(c byte) {
	f := e.stack[len(e.stack)-1]
	e.stack = e.stack[:len(e.stack)-1]
	if f.multiline && f.n > 0 {
		e.newline(f.indent - 2)
	}
	e.buf = append(e.buf, c)
}

func (e *emitter) str(k, v string) { e.key(k); e.buf = AppendString(e.buf, v) }
func (e *emitter) i64(k string, v int64) {
	e.key(k)
	e.buf = strconv.AppendInt(e.buf, v, 10)
}
func (e *emitter) f64(k string, v float64) { e.key(k); e.buf = AppendDouble(e.buf, v) }
func (e *emitter) boolean(k string, v bool) {
	e.key(k)
	e.buf = strconv.AppendBool(e.buf, v)
}
func (e *emitter) null(k string)   { e.key(k); e.buf = append(e.buf, "null"...) }
func (e *emitter) raw(k, v string) { e.key(k); e.buf = append(e.buf, v...) }

func (e *emitter) optStr(k string, v *string) {
	if v == nil {
		e.null(k)
		return
	}
	e.str(k, *v)
}

func (e *emitter) optI64(k string, v *int64) {
	if v == nil {
		e.null(k)
		return
	}
	e.i64(k, *v)
}

func (e *emitter) optF64(k string, v *float64) {
	if v == nil {
		e.null(k)
		return
	}
	e.f64(k, *v)
}

func (e *emitter) environment(k string, v Environment) {
	e.key(k)
	e.open('{', false, false)
	e.optStr("gpu_name", v.GPUName)
	e.optStr("cuda_runtime_version", v.CUDARuntimeVersion)
	e.optStr("cuda_driver_version", v.CUDADriverVersion)
	e.optI64("device_id", v.DeviceID)
	if v.Backend != nil {
		e.str("backend", *v.Backend)
	}
	if v.CPUName != nil {
		e.str("cpu_name", *v.CPUName)
	}
	if v.Threads != nil {
		e.i64("threads", *v.Threads)
	}
	for _, f := range v.Extra {
		e.raw(f.Key, f.JSON)
	}
	e.close('}')
}

func (e *emitter) artifact(k string, v Artifact) {
	e.key(k)
	e.open('{', false, false)
	e.str("path", v.Path)
	e.i64("file_size_bytes", v.FileSizeBytes)
	e.close('}')
}

func (e *emitter) load(k string, v Load) {
	e.key(k)
	e.open('{', true, false)
	e.str("architecture", v.Architecture)
	e.str("name", v.Name)
	e.key("formats")
	e.open('[', false, true)
	for _, f := range v.Formats {
		e.member()
		e.buf = AppendString(e.buf, f)
	}
	e.close(']')
	e.str("prefill_signature", v.PrefillSignature)
	e.f64("load_seconds", v.LoadSeconds)
	e.f64("upload_seconds", v.UploadSeconds)
	e.i64("artifact_bytes_read", v.ArtifactBytesRead)
	e.i64("host_to_device_bytes", v.HostToDeviceBytes)
	e.i64("peak_staging_bytes", v.PeakStagingBytes)
	e.i64("device_object_count", v.DeviceObjectCount)
	e.i64("host_object_count", v.HostObjectCount)
	e.close('}')
}

func (e *emitter) arena(k string, v Arena) {
	e.key(k)
	e.open('{', false, false)
	e.i64("capacity_bytes", v.CapacityBytes)
	e.i64("used_bytes", v.UsedBytes)
	e.i64("peak_used_bytes", v.PeakUsedBytes)
	e.close('}')
}

func (e *emitter) memory(k string, v Memory) {
	e.key(k)
	e.open('{', true, false)
	e.i64("device", v.Device)
	e.i64("max_context", v.MaxContext)
	e.str("kv_capacity_mode", v.KVCapacityMode)
	e.i64("kv_capacity", v.KVCapacity)
	e.i64("kv_capacity_page_groups", v.KVCapacityPageGroups)
	e.i64("kv_capacity_max_page_groups", v.KVCapacityMaxPageGroups)
	e.str("kv_cache", v.KVCache)
	e.arena("weights", v.Weights)
	e.arena("sequence", v.Sequence)
	e.arena("workspace", v.Workspace)
	if w := v.VisionWorkspace; w == nil {
		e.null("vision_workspace")
	} else {
		e.key("vision_workspace")
		e.open('{', false, false)
		e.i64("aggregate_prompt_tokens", w.AggregatePromptTokens)
		e.i64("max_item_tokens", w.MaxItemTokens)
		e.i64("general_capacity_bytes", w.GeneralCapacityBytes)
		e.i64("encode_peak_bytes", w.EncodePeakBytes)
		e.i64("handoff_offset_bytes", w.HandoffOffsetBytes)
		e.i64("handoff_capacity_bytes", w.HandoffCapacityBytes)
		e.i64("handoff_active_bytes", w.HandoffActiveBytes)
		e.i64("handoff_peak_bytes", w.HandoffPeakBytes)
		e.close('}')
	}
	e.i64("minimum_runtime_reservation_bytes", v.MinimumRuntimeReservationBytes)
	e.i64("kv_capacity_increment_bytes", v.KVCapacityIncrementBytes)
	e.i64("runtime_reservation_bytes", v.RuntimeReservationBytes)
	e.i64("available_after_weights_bytes", v.AvailableAfterWeightsBytes)
	e.i64("available_after_startup_bytes", v.AvailableAfterStartupBytes)
	e.i64("kv_capacity_headroom_bytes", v.KVCapacityHeadroomBytes)
	e.i64("planned_slack_bytes", v.PlannedSlackBytes)
	e.i64("cuda_graph_allowance_bytes", v.CUDAGraphAllowanceBytes)
	e.i64("kv_payload_bytes", v.KVPayloadBytes)
	e.close('}')
}

func (e *emitter) config(k string, v Config) {
	e.key(k)
	e.open('{', true, false)
	e.i64("max_context", v.MaxContext)
	e.i64("prefill_chunk", v.PrefillChunk)
	e.str("kv_cache", v.KVCache)
	e.str("speculative_backend", v.SpeculativeBackend)
	e.i64("draft_tokens", v.DraftTokens)
	e.str("proposal_head", v.ProposalHead)
	e.boolean("use_cuda_graph", v.UseCUDAGraph)
	e.str("decode_path", v.DecodePath)
	e.key("decode_graph_prime")
	e.open('{', false, false)
	e.boolean("primed", v.DecodeGraphPrime.Primed)
	e.i64("output_tokens", v.DecodeGraphPrime.OutputTokens)
	e.close('}')
	e.i64("repetitions", v.Repetitions)
	e.i64("warmup", v.Warmup)
	e.str("corpus_path", v.CorpusPath)
	e.i64("corpus_tokens", v.CorpusTokens)
	e.close('}')
}

func (e *emitter) spec(k string, v Spec) {
	e.key(k)
	e.open('{', true, false)
	e.str("backend", v.Backend)
	e.boolean("enabled", v.Enabled)
	e.i64("draft_window", v.DraftWindow)
	e.i64("rounds", v.Rounds)
	e.i64("drafted_tokens", v.DraftedTokens)
	e.i64("accepted_tokens", v.AcceptedTokens)
	e.i64("fallback_steps", v.FallbackSteps)
	e.optF64("acceptance_rate", v.AcceptanceRate)
	e.optF64("acceptance_length", v.AcceptanceLength)
	e.key("accepted_per_position")
	e.open('[', false, false)
	for _, n := range v.AcceptedPerPosition {
		e.member()
		e.buf = strconv.AppendInt(e.buf, n, 10)
	}
	e.close(']')
	e.close('}')
}

func (e *emitter) timings(k string, v Timings) {
	e.key(k)
	e.open('{', false, false)
	e.f64("prepare_seconds", v.PrepareSeconds)
	e.f64("vision_seconds", v.VisionSeconds)
	e.f64("prefill_seconds", v.PrefillSeconds)
	e.f64("decode_seconds", v.DecodeSeconds)
	e.f64("total_seconds", v.TotalSeconds)
	e.close('}')
}

func (e *emitter) stat(name string, s Stat) {
	e.optF64(name+"_mean", s.Mean)
	e.optF64(name+"_stddev", s.Stddev)
}

// repBody writes the rep members shared by the document and the rep line.
func (e *emitter) repBody(r Rep) {
	e.i64("generated_output_tokens", r.GeneratedOutputTokens)
	e.optI64("decode_output_tokens", r.DecodeOutputTokens)
	e.optI64("decode_engine_tokens", r.DecodeEngineTokens)
	e.timings("timings", r.Timings)
	e.spec("speculative", r.Speculative)
	e.specTiming(r.SpecTiming)
	e.specCounts(r.SpecCounts)
}

func (e *emitter) test(t Test) {
	e.member()
	e.open('{', true, false)
	e.str("label", t.Label)
	e.str("kind", t.Kind)
	e.i64("n_prompt", t.NPrompt)
	e.i64("n_gen", t.NGen)
	e.i64("requested_output_tokens", t.RequestedOutputTokens)
	if t.NDepth != 0 {
		e.i64("n_depth", t.NDepth)
	}
	e.stat("prefill_tok_s", t.PrefillTokS)
	e.stat("decode_output_tok_s", t.DecodeOutputTokS)
	e.stat("decode_engine_tok_s", t.DecodeEngineTokS)
	e.stat("prepare_seconds", t.PrepareSeconds)
	e.stat("prefill_seconds", t.PrefillSeconds)
	e.stat("decode_seconds", t.DecodeSeconds)
	e.stat("total_seconds", t.TotalSeconds)
	e.i64("workspace_peak_bytes", t.WorkspacePeakBytes)
	e.i64("workspace_allocator_peak_bytes", t.WorkspaceAllocatorPeakBytes)
	e.spec("speculative", t.Speculative)
	e.specTiming(t.SpecTiming)
	e.key("reps")
	e.open('[', true, false)
	for _, r := range t.Reps {
		e.member()
		e.open('{', true, false)
		e.repBody(r)
		e.close('}')
	}
	e.close(']')
	e.close('}')
}

// AppendDocument appends the schema-15 document in the reference layout:
// top-level keys at indent 2; environment, artifact, arenas,
// decode_graph_prime and timings on one line; load, memory, config, tests,
// SPEC and reps multi-line. The text ends with "}\n".
func AppendDocument(dst []byte, d *Document) []byte {
	e := &emitter{buf: dst}
	e.open('{', true, false)
	e.i64("schema_version", d.SchemaVersion)
	e.str("artifact_type", d.ArtifactType)
	e.str("tool", d.Tool)
	e.str("command", d.Command)
	e.environment("environment", d.Environment)
	e.artifact("artifact", d.Artifact)
	e.load("load", d.Load)
	e.memory("memory", d.Memory)
	e.config("config", d.Config)
	e.key("tests")
	e.open('[', true, false)
	for _, t := range d.Tests {
		e.test(t)
	}
	e.close(']')
	e.close('}')
	return append(e.buf, '\n')
}

// EncodeDocument returns the document text.
func EncodeDocument(d *Document) []byte { return AppendDocument(nil, d) }

// NewDocument returns a document with the schema constants filled in.
func NewDocument() Document {
	return Document{SchemaVersion: SchemaVersion, ArtifactType: ArtifactType, Tool: Tool}
}
