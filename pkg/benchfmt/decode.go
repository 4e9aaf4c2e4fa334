package benchfmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/termsafe"
	"github.com/tidwall/gjson"
)

// decoder reads gjson values into the typed model, remembering the first
// error with the JSON path where it happened.
type decoder struct {
	err error
	// scratch backing arrays shared by all objects of one decode (objects
	// take consecutive, never-reused ranges), to keep allocations per line low
	keys []string
	vals []gjson.Result
}

func (d *decoder) fail(path, format string, args ...any) {
	switch {
	case d.err != nil:
	case path == "": // the top-level value: no member name to show
		d.err = fmt.Errorf("top level: %s", fmt.Sprintf(format, args...))
	default:
		d.err = fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
}

// obj is a decoded JSON object: its members in order.
type obj struct {
	d    *decoder
	path string
	keys []string
	vals []gjson.Result
	next int // where the next lookup starts: members usually come in the order they are read
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func typeName(r gjson.Result) string {
	switch r.Type {
	case gjson.Null:
		return "null"
	case gjson.False, gjson.True:
		return "boolean"
	case gjson.Number:
		return "number"
	case gjson.String:
		return "string"
	default:
		if r.IsArray() {
			return "array"
		}
		return "object"
	}
}

func (d *decoder) object(path string, r gjson.Result) obj {
	o := obj{d: d, path: path}
	if !r.IsObject() {
		d.fail(path, "want object, got %s", typeName(r))
		return o
	}
	start := len(d.keys)
	r.ForEach(func(k, v gjson.Result) bool {
		d.keys = append(d.keys, k.Str)
		d.vals = append(d.vals, v)
		return true
	})
	o.keys = d.keys[start:len(d.keys):len(d.keys)]
	o.vals = d.vals[start:len(d.vals):len(d.vals)]
	return o
}

// decoders recycles decoders (and their scratch arrays) across lines.
var decoders = sync.Pool{New: func() any {
	return &decoder{keys: make([]string, 0, 64), vals: make([]gjson.Result, 0, 64)}
}}

func getDecoder() *decoder {
	d := decoders.Get().(*decoder)
	d.err = nil
	d.keys, d.vals = d.keys[:0], d.vals[:0]
	return d
}

func putDecoder(d *decoder) {
	clear(d.vals[:cap(d.vals)]) // drop references to the decoded text
	clear(d.keys[:cap(d.keys)])
	decoders.Put(d)
}

func (o *obj) get(k string) (gjson.Result, bool) {
	n := len(o.keys)
	for j := 0; j < n; j++ {
		i := (o.next + j) % n
		if o.keys[i] == k {
			o.next = i + 1
			return o.vals[i], true
		}
	}
	return gjson.Result{}, false
}

func (o *obj) has(k string) bool { _, ok := o.get(k); return ok }

func (o *obj) must(k string) (gjson.Result, bool) {
	v, ok := o.get(k)
	if !ok {
		o.d.fail(join(o.path, k), "missing")
	}
	return v, ok
}

func (o *obj) str(k string) string {
	v, ok := o.must(k)
	if !ok {
		return ""
	}
	if v.Type != gjson.String {
		o.d.fail(join(o.path, k), "want string, got %s", typeName(v))
	}
	return v.Str
}

func (o *obj) optStr(k string) *string {
	v, ok := o.must(k)
	if !ok || v.Type == gjson.Null {
		return nil
	}
	s := o.str(k)
	return &s
}

// rawOrType describes a bad value: numbers by their text, others by type.
func rawOrType(v gjson.Result) string {
	if v.Type == gjson.Number {
		return v.Raw
	}
	return typeName(v)
}

func (o *obj) i64(k string) int64 {
	v, ok := o.must(k)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v.Raw, 10, 64)
	if v.Type != gjson.Number || err != nil {
		o.d.fail(join(o.path, k), "want integer, got %s", rawOrType(v))
	}
	return n
}

func (o *obj) optI64(k string) *int64 {
	v, ok := o.must(k)
	if !ok || v.Type == gjson.Null {
		return nil
	}
	n := o.i64(k)
	return &n
}

func (o *obj) f64(k string) float64 {
	v, ok := o.must(k)
	if !ok {
		return 0
	}
	if v.Type != gjson.Number {
		o.d.fail(join(o.path, k), "want number, got %s", typeName(v))
		return 0
	}
	f, err := parseDouble(v.Raw)
	if err != nil {
		o.d.fail(join(o.path, k), "bad number %s", v.Raw)
	}
	return f
}

// maxDouble10 is FormatDouble(math.MaxFloat64), "1.797693135e+308": %.10g
// rounds the largest double up past the range, so a reader must take that
// spelling back as the largest double.
var maxDouble10, _ = new(big.Float).SetString("1.797693135e+308")

// parseDouble parses a JSON number as FormatDouble wrote it: a value whose
// magnitude is above MaxFloat64 but at most maxDouble10 (the 10-digit
// rounding of ±MaxFloat64) reads as ±MaxFloat64; anything larger is out of
// range (strconv.ErrRange).
func parseDouble(raw string) (float64, error) {
	f, err := strconv.ParseFloat(raw, 64)
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && math.IsInf(f, 0) {
		if r, ok := new(big.Float).SetString(strings.TrimPrefix(raw, "-")); ok && r.Cmp(maxDouble10) <= 0 {
			return math.Copysign(math.MaxFloat64, f), nil
		}
	}
	return f, err
}

func (o *obj) optF64(k string) *float64 {
	v, ok := o.must(k)
	if !ok || v.Type == gjson.Null {
		return nil
	}
	f := o.f64(k)
	return &f
}

func (o *obj) boolean(k string) bool {
	v, ok := o.must(k)
	if !ok {
		return false
	}
	if v.Type != gjson.True && v.Type != gjson.False {
		o.d.fail(join(o.path, k), "want boolean, got %s", typeName(v))
	}
	return v.Type == gjson.True
}

func (o *obj) sub(k string) obj {
	v, _ := o.must(k)
	return o.d.object(join(o.path, k), v)
}

func (o *obj) array(k string) []gjson.Result {
	v, ok := o.must(k)
	if !ok {
		return nil
	}
	if !v.IsArray() {
		o.d.fail(join(o.path, k), "want array, got %s", typeName(v))
		return nil
	}
	return v.Array()
}

func (d *decoder) environment(o obj) Environment {
	var e Environment
	e.GPUName = o.optStr("gpu_name")
	e.CUDARuntimeVersion = o.optStr("cuda_runtime_version")
	e.CUDADriverVersion = o.optStr("cuda_driver_version")
	e.DeviceID = o.optI64("device_id")
	for i, k := range o.keys {
		v := o.vals[i]
		switch k {
		case "gpu_name", "cuda_runtime_version", "cuda_driver_version", "device_id":
		case "backend":
			if v.Type == gjson.String {
				s := v.Str
				e.Backend = &s
				continue
			}
			e.Extra = append(e.Extra, RawField{k, CompactJSON(v)})
		case "cpu_name":
			if v.Type == gjson.String {
				s := v.Str
				e.CPUName = &s
				continue
			}
			e.Extra = append(e.Extra, RawField{k, CompactJSON(v)})
		case "threads":
			if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil && v.Type == gjson.Number {
				e.Threads = &n
				continue
			}
			e.Extra = append(e.Extra, RawField{k, CompactJSON(v)})
		default:
			e.Extra = append(e.Extra, RawField{k, CompactJSON(v)})
		}
	}
	return e
}

func (d *decoder) artifact(o obj) Artifact {
	return Artifact{Path: o.str("path"), FileSizeBytes: o.i64("file_size_bytes")}
}

func (d *decoder) load(o obj) Load {
	l := Load{
		Architecture: o.str("architecture"),
		Name:         o.str("name"),
	}
	l.Formats = []string{}
	for i, f := range o.array("formats") {
		if f.Type != gjson.String {
			d.fail(fmt.Sprintf("%s[%d]", join(o.path, "formats"), i), "want string, got %s", typeName(f))
			continue
		}
		l.Formats = append(l.Formats, f.Str)
	}
	l.PrefillSignature = o.str("prefill_signature")
	l.LoadSeconds = o.f64("load_seconds")
	l.UploadSeconds = o.f64("upload_seconds")
	l.ArtifactBytesRead = o.i64("artifact_bytes_read")
	l.HostToDeviceBytes = o.i64("host_to_device_bytes")
	l.PeakStagingBytes = o.i64("peak_staging_bytes")
	l.DeviceObjectCount = o.i64("device_object_count")
	l.HostObjectCount = o.i64("host_object_count")
	return l
}

func (d *decoder) arena(o obj) Arena {
	return Arena{
		CapacityBytes: o.i64("capacity_bytes"),
		UsedBytes:     o.i64("used_bytes"),
		PeakUsedBytes: o.i64("peak_used_bytes"),
	}
}

func (d *decoder) memory(o obj) Memory {
	m := Memory{
		Device:                  o.i64("device"),
		MaxContext:              o.i64("max_context"),
		KVCapacityMode:          o.str("kv_capacity_mode"),
		KVCapacity:              o.i64("kv_capacity"),
		KVCapacityPageGroups:    o.i64("kv_capacity_page_groups"),
		KVCapacityMaxPageGroups: o.i64("kv_capacity_max_page_groups"),
		KVCache:                 o.str("kv_cache"),
		Weights:                 d.arena(o.sub("weights")),
		Sequence:                d.arena(o.sub("sequence")),
		Workspace:               d.arena(o.sub("workspace")),
	}
	if v, ok := o.must("vision_workspace"); ok && v.Type != gjson.Null {
		w := d.object(join(o.path, "vision_workspace"), v)
		m.VisionWorkspace = &VisionWorkspace{
			AggregatePromptTokens: w.i64("aggregate_prompt_tokens"),
			MaxItemTokens:         w.i64("max_item_tokens"),
			GeneralCapacityBytes:  w.i64("general_capacity_bytes"),
			EncodePeakBytes:       w.i64("encode_peak_bytes"),
			HandoffOffsetBytes:    w.i64("handoff_offset_bytes"),
			HandoffCapacityBytes:  w.i64("handoff_capacity_bytes"),
			HandoffActiveBytes:    w.i64("handoff_active_bytes"),
			HandoffPeakBytes:      w.i64("handoff_peak_bytes"),
		}
	}
	m.MinimumRuntimeReservationBytes = o.i64("minimum_runtime_reservation_bytes")
	m.KVCapacityIncrementBytes = o.i64("kv_capacity_increment_bytes")
	m.RuntimeReservationBytes = o.i64("runtime_reservation_bytes")
	m.AvailableAfterWeightsBytes = o.i64("available_after_weights_bytes")
	m.AvailableAfterStartupBytes = o.i64("available_after_startup_bytes")
	m.KVCapacityHeadroomBytes = o.i64("kv_capacity_headroom_bytes")
	m.PlannedSlackBytes = o.i64("planned_slack_bytes")
	m.CUDAGraphAllowanceBytes = o.i64("cuda_graph_allowance_bytes")
	m.KVPayloadBytes = o.i64("kv_payload_bytes")
	return m
}

func (d *decoder) config(o obj) Config {
	c := Config{
		MaxContext:         o.i64("max_context"),
		PrefillChunk:       o.i64("prefill_chunk"),
		KVCache:            o.str("kv_cache"),
		SpeculativeBackend: o.str("speculative_backend"),
		DraftTokens:        o.i64("draft_tokens"),
		ProposalHead:       o.str("proposal_head"),
		UseCUDAGraph:       o.boolean("use_cuda_graph"),
		DecodePath:         o.str("decode_path"),
	}
	p := o.sub("decode_graph_prime")
	c.DecodeGraphPrime = GraphPrime{Primed: p.boolean("primed"), OutputTokens: p.i64("output_tokens")}
	c.Repetitions = o.i64("repetitions")
	c.Warmup = o.i64("warmup")
	c.CorpusPath = o.str("corpus_path")
	c.CorpusTokens = o.i64("corpus_tokens")
	return c
}

func (d *decoder) spec(o obj) Spec {
	s := Spec{
		Backend:          o.str("backend"),
		Enabled:          o.boolean("enabled"),
		DraftWindow:      o.i64("draft_window"),
		Rounds:           o.i64("rounds"),
		DraftedTokens:    o.i64("drafted_tokens"),
		AcceptedTokens:   o.i64("accepted_tokens"),
		FallbackSteps:    o.i64("fallback_steps"),
		AcceptanceRate:   o.optF64("acceptance_rate"),
		AcceptanceLength: o.optF64("acceptance_length"),
	}
	s.AcceptedPerPosition = []int64{}
	v, ok := o.must("accepted_per_position")
	switch {
	case !ok:
	case !v.IsArray():
		d.fail(join(o.path, "accepted_per_position"), "want array, got %s", typeName(v))
	default:
		i := 0
		v.ForEach(func(_, x gjson.Result) bool {
			n, err := strconv.ParseInt(x.Raw, 10, 64)
			if x.Type != gjson.Number || err != nil {
				d.fail(fmt.Sprintf("%s[%d]", join(o.path, "accepted_per_position"), i), "want integer, got %s", rawOrType(x))
				return false
			}
			s.AcceptedPerPosition = append(s.AcceptedPerPosition, n)
			i++
			return true
		})
	}
	return s
}

func (d *decoder) timings(o obj) Timings {
	return Timings{
		PrepareSeconds: o.f64("prepare_seconds"),
		VisionSeconds:  o.f64("vision_seconds"),
		PrefillSeconds: o.f64("prefill_seconds"),
		DecodeSeconds:  o.f64("decode_seconds"),
		TotalSeconds:   o.f64("total_seconds"),
	}
}

func (d *decoder) rep(o obj) Rep {
	return Rep{
		GeneratedOutputTokens: o.i64("generated_output_tokens"),
		DecodeOutputTokens:    o.optI64("decode_output_tokens"),
		DecodeEngineTokens:    o.optI64("decode_engine_tokens"),
		Timings:               d.timings(o.sub("timings")),
		Speculative:           d.spec(o.sub("speculative")),
		SpecTiming:            d.specTiming(o),
		SpecCounts:            d.specCounts(o),
	}
}

func (d *decoder) stat(o obj, name string) Stat {
	return Stat{Mean: o.optF64(name + "_mean"), Stddev: o.optF64(name + "_stddev")}
}

func (d *decoder) test(o obj) Test {
	t := Test{
		Label:                 o.str("label"),
		Kind:                  o.str("kind"),
		NPrompt:               o.i64("n_prompt"),
		NGen:                  o.i64("n_gen"),
		RequestedOutputTokens: o.i64("requested_output_tokens"),
		NDepth:                o.depth(),
		PrefillTokS:           d.stat(o, "prefill_tok_s"),
		DecodeOutputTokS:      d.stat(o, "decode_output_tok_s"),
		DecodeEngineTokS:      d.stat(o, "decode_engine_tok_s"),
		PrepareSeconds:        d.stat(o, "prepare_seconds"),
		PrefillSeconds:        d.stat(o, "prefill_seconds"),
		DecodeSeconds:         d.stat(o, "decode_seconds"),
		TotalSeconds:          d.stat(o, "total_seconds"),
	}
	t.WorkspacePeakBytes = o.i64("workspace_peak_bytes")
	t.WorkspaceAllocatorPeakBytes = o.i64("workspace_allocator_peak_bytes")
	t.Speculative = d.spec(o.sub("speculative"))
	t.SpecTiming = d.specTiming(o)
	t.Reps = []Rep{}
	for i, r := range o.array("reps") {
		t.Reps = append(t.Reps, d.rep(d.object(fmt.Sprintf("%s[%d]", join(o.path, "reps"), i), r)))
	}
	return t
}

// excerptBytes is how much of a text that is not JSON the error quotes:
// its first bytes, at most 4 bytes of message each once escaped, so that
// the message stays short however long or binary the text is.
const excerptBytes = 16

// notJSON is the error for text (a stream line, a document) that gjson
// does not take as JSON: where decoding failed, as encoding/json's syntax
// error says it (the byte position, 1 for the first byte, of the text's
// length, and what was found there), and the text's first bytes quoted
// (termsafe.Quote: control bytes and invalid UTF-8 escaped), so that a
// binary file or a megabyte line of terminal escapes gives one short inert
// line: `not valid JSON at byte 1 of 5242880: invalid character '\x1b'
// looking for beginning of value; starts "\x1b[2Jx\x1b[2Jx\x1b[2Jx\x1b"…`.
func notJSON(data string) error {
	msg := "not valid JSON"
	var se *json.SyntaxError
	if err := json.Unmarshal([]byte(data), new(json.RawMessage)); errors.As(err, &se) {
		msg = fmt.Sprintf("%s at byte %d of %d: %s", msg, se.Offset, len(data), se.Error())
	}
	return fmt.Errorf("%s; starts %s", msg, excerpt(data, excerptBytes))
}

// excerpt is s quoted (termsafe.Quote), cut after at most n bytes on a
// character boundary with "…" after it when that is not all of s.
func excerpt(s string, n int) string {
	i := 0
	for i < len(s) {
		_, size := utf8.DecodeRuneInString(s[i:]) // an invalid byte is 1
		if i+size > n {
			break
		}
		i += size
	}
	if i == len(s) {
		return termsafe.Quote(s)
	}
	return termsafe.Quote(s[:i]) + "…"
}

// IsDocument reports whether data looks like a schema report document: a
// JSON object with a top-level schema_version and no "type" key (stream
// lines always carry "type").
func IsDocument(data []byte) bool {
	r := gjson.ParseBytes(data)
	if !r.IsObject() {
		return false
	}
	return r.Get("schema_version").Exists() && !r.Get("type").Exists()
}

// DecodeDocument parses a schema-15 document. Errors name the JSON path.
func DecodeDocument(data []byte) (Document, error) {
	if !gjson.ValidBytes(data) {
		return Document{}, notJSON(string(data))
	}
	d := &decoder{}
	o := d.object("", gjson.ParseBytes(data))
	if d.err != nil {
		return Document{}, fmt.Errorf("document: %w", d.err)
	}
	doc := Document{SchemaVersion: o.i64("schema_version")}
	if d.err == nil && doc.SchemaVersion != SchemaVersion {
		return Document{}, fmt.Errorf("schema_version: %d not supported (want %d)", doc.SchemaVersion, SchemaVersion)
	}
	doc.ArtifactType = o.str("artifact_type")
	doc.Tool = o.str("tool")
	doc.Command = o.str("command")
	doc.Environment = d.environment(o.sub("environment"))
	doc.Artifact = d.artifact(o.sub("artifact"))
	doc.Load = d.load(o.sub("load"))
	doc.Memory = d.memory(o.sub("memory"))
	doc.Config = d.config(o.sub("config"))
	doc.Tests = []Test{}
	for i, t := range o.array("tests") {
		doc.Tests = append(doc.Tests, d.test(d.object(fmt.Sprintf("tests[%d]", i), t)))
	}
	if d.err != nil {
		return Document{}, d.err
	}
	if doc.ArtifactType != ArtifactType {
		return Document{}, fmt.Errorf("artifact_type: %s, want %s", termsafe.Quote(doc.ArtifactType), ArtifactType)
	}
	return doc, nil
}

// ParseLine decodes one stream line (without its newline). Errors name the
// field path. A line with an unknown "type" decodes to Line{Type: t} without
// error so readers can skip future line types.
func ParseLine(data []byte) (Line, error) { return ParseLineString(string(data)) }

// ParseLineString is ParseLine on a string (no copy of the text).
func ParseLineString(data string) (Line, error) {
	if !gjson.Valid(data) {
		return Line{}, notJSON(data)
	}
	d := getDecoder()
	defer putDecoder(d)
	o := d.object("", gjson.Parse(data))
	if d.err != nil {
		return Line{}, d.err
	}
	typ := o.str("type")
	if d.err != nil {
		return Line{}, d.err
	}
	l := Line{Type: typ}
	switch typ {
	case LineRun:
		r := &RunLine{RunID: o.str("run_id"), SchemaVersion: o.i64("schema_version")}
		if d.err == nil && r.SchemaVersion != SchemaVersion {
			return Line{}, fmt.Errorf("schema_version: %d not supported (want %d)", r.SchemaVersion, SchemaVersion)
		}
		r.Command = o.str("command")
		r.Environment = d.environment(o.sub("environment"))
		r.Artifact = d.artifact(o.sub("artifact"))
		r.Load = d.load(o.sub("load"))
		r.Memory = d.memory(o.sub("memory"))
		r.Config = d.config(o.sub("config"))
		l.Run = r
	case LineRep:
		l.Rep = &RepLine{
			RunID:                 o.str("run_id"),
			TestIndex:             o.i64("test_index"),
			Label:                 o.str("label"),
			Kind:                  o.str("kind"),
			NPrompt:               o.i64("n_prompt"),
			NGen:                  o.i64("n_gen"),
			RequestedOutputTokens: o.i64("requested_output_tokens"),
			NDepth:                o.depth(),
			RepIndex:              o.i64("rep_index"),
			Rep:                   d.rep(o),
		}
	case LineTestEnd:
		l.TestEnd = &TestEndLine{
			RunID:                       o.str("run_id"),
			TestIndex:                   o.i64("test_index"),
			Label:                       o.str("label"),
			WorkspacePeakBytes:          o.i64("workspace_peak_bytes"),
			WorkspaceAllocatorPeakBytes: o.i64("workspace_allocator_peak_bytes"),
		}
	}
	if d.err != nil {
		return Line{}, d.err
	}
	return l, nil
}

// CompactJSON re-serializes a JSON value on one line, strings escaped like
// the reference writer, numbers verbatim.
func CompactJSON(r gjson.Result) string {
	return string(appendCompact(nil, r))
}

func appendCompact(dst []byte, r gjson.Result) []byte {
	switch {
	case r.IsObject():
		dst = append(dst, '{')
		n := 0
		r.ForEach(func(k, v gjson.Result) bool {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = AppendString(dst, k.Str)
			dst = append(dst, ':')
			dst = appendCompact(dst, v)
			return true
		})
		return append(dst, '}')
	case r.IsArray():
		dst = append(dst, '[')
		for i, v := range r.Array() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCompact(dst, v)
		}
		return append(dst, ']')
	case r.Type == gjson.String:
		return AppendString(dst, r.Str)
	case r.Type == gjson.Number:
		return append(dst, r.Raw...)
	case r.Type == gjson.True:
		return append(dst, "true"...)
	case r.Type == gjson.False:
		return append(dst, "false"...)
	default:
		return append(dst, "null"...)
	}
}

// SameJSON compares two JSON texts by parsed value: same keys in the same
// order, same array lengths, same strings, booleans and nulls, and numbers
// with the same text once re-formatted at %.10g (integers must match
// exactly). It returns nil or an error naming the first difference's path.
func SameJSON(a, b []byte) error {
	if !gjson.ValidBytes(a) {
		return fmt.Errorf("first text is not valid JSON")
	}
	if !gjson.ValidBytes(b) {
		return fmt.Errorf("second text is not valid JSON")
	}
	return sameValue("$", gjson.ParseBytes(a), gjson.ParseBytes(b))
}

func sameValue(path string, a, b gjson.Result) error {
	if typeName(a) != typeName(b) {
		return fmt.Errorf("%s: %s vs %s", path, typeName(a), typeName(b))
	}
	switch {
	case a.IsObject():
		var ak, bk []string
		var av, bv []gjson.Result
		a.ForEach(func(k, v gjson.Result) bool { ak = append(ak, k.Str); av = append(av, v); return true })
		b.ForEach(func(k, v gjson.Result) bool { bk = append(bk, k.Str); bv = append(bv, v); return true })
		for i := 0; i < len(ak) || i < len(bk); i++ {
			switch {
			case i >= len(ak):
				return fmt.Errorf("%s: extra key %s in second", path, termsafe.Quote(bk[i]))
			case i >= len(bk):
				return fmt.Errorf("%s: key %s missing in second", path, termsafe.Quote(ak[i]))
			case ak[i] != bk[i]:
				return fmt.Errorf("%s: key #%d is %s vs %s", path, i, termsafe.Quote(ak[i]), termsafe.Quote(bk[i]))
			}
			if err := sameValue(path+"."+ak[i], av[i], bv[i]); err != nil {
				return err
			}
		}
	case a.IsArray():
		aa, ba := a.Array(), b.Array()
		if len(aa) != len(ba) {
			return fmt.Errorf("%s: %d vs %d elements", path, len(aa), len(ba))
		}
		for i := range aa {
			if err := sameValue(fmt.Sprintf("%s[%d]", path, i), aa[i], ba[i]); err != nil {
				return err
			}
		}
	case a.Type == gjson.Number:
		if a.Raw == b.Raw {
			return nil
		}
		ai, aerr := strconv.ParseInt(a.Raw, 10, 64)
		bi, berr := strconv.ParseInt(b.Raw, 10, 64)
		if aerr == nil && berr == nil {
			if ai != bi {
				return fmt.Errorf("%s: %d vs %d", path, ai, bi)
			}
			return nil
		}
		if FormatDouble(a.Num) != FormatDouble(b.Num) {
			return fmt.Errorf("%s: %s vs %s", path, a.Raw, b.Raw)
		}
	case a.Type == gjson.String:
		if a.Str != b.Str {
			return fmt.Errorf("%s: %s vs %s", path, termsafe.Quote(a.Str), termsafe.Quote(b.Str))
		}
	}
	return nil
}
