package benchfmt

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets for the two readers of outside input in this package:
// ParseLine (the JSON lines ninfer-bench writes and ninfer-report reads) and
// DecodeDocument (schema-15 documents). Run with
//
//	go test ./pkg/benchfmt -run '^$' -fuzz FuzzParseLine -fuzztime 10m -parallel 1
//	go test ./pkg/benchfmt -run '^$' -fuzz FuzzDecodeDocument -fuzztime 10m -parallel 1
//
// (make fuzz runs them); the seeds, and what the fuzzer found and was kept
// under testdata/fuzz/, run in every go test.

// roundFloats rounds every float64 reachable from v (a pointer) to 10
// significant digits in place: the value a reader gets back once v has been
// written with FormatDouble.
func roundFloats(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			roundFloats(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			roundFloats(v.Field(i))
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			roundFloats(v.Index(i))
		}
	case reflect.Float64:
		v.SetFloat(Round10(v.Float()))
	}
}

// appendLine encodes a decoded line of a known type with the writer's
// encoder (nil for an unknown type).
func appendLine(l Line) []byte {
	switch {
	case l.Run != nil:
		return AppendRunLine(nil, l.Run)
	case l.Rep != nil:
		return AppendRepLine(nil, l.Rep)
	case l.TestEnd != nil:
		return AppendTestEndLine(nil, l.TestEnd)
	}
	return nil
}

// checkOneLineError asserts the error properties every reader here shares:
// a non-empty single line that does not start with a bare ": " (a path or a
// description comes first).
func checkOneLineError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" || strings.ContainsAny(msg, "\n\r") || strings.HasPrefix(msg, ":") {
		t.Fatalf("error is not one line naming what is wrong: %q", msg)
	}
}

// fuzzLineSeeds returns the stream lines of the committed schema-15 seed
// (run line, every rep of a test, a test_end) plus hand-made edge cases.
func fuzzLineSeeds(tb testing.TB) [][]byte {
	doc, err := DecodeDocument(readSeed(tb))
	if err != nil {
		tb.Fatal(err)
	}
	run := &RunLine{RunID: "20261201T082308Z-3f9a1c0e", SchemaVersion: SchemaVersion, Command: doc.Command,
		Environment: doc.Environment, Artifact: doc.Artifact, Load: doc.Load, Memory: doc.Memory, Config: doc.Config}
	seeds := [][]byte{AppendRunLine(nil, run)}
	cpu := *run
	cpu.Environment = Environment{DeviceID: Ptr[int64](0), Backend: Ptr("cpu"), CPUName: Ptr("AMD \"x\"\n"), Threads: Ptr[int64](2),
		Extra: []RawField{{"hip", `{"v":[1,2.5e-7,"a\u0001",null,true]}`}, {"threads", `1.5`}}}
	cpu.Memory.VisionWorkspace = &VisionWorkspace{AggregatePromptTokens: 1, HandoffPeakBytes: 9}
	seeds = append(seeds, AppendRunLine(nil, &cpu))
	for ti, test := range doc.Tests[1:3] {
		for ri, r := range test.Reps[:2] {
			seeds = append(seeds, AppendRepLine(nil, &RepLine{RunID: run.RunID, TestIndex: int64(ti + 1), Label: test.Label,
				Kind: test.Kind, NPrompt: test.NPrompt, NGen: test.NGen, RequestedOutputTokens: test.RequestedOutputTokens,
				RepIndex: int64(ri), Rep: r}))
		}
		seeds = append(seeds, AppendTestEndLine(nil, &TestEndLine{RunID: run.RunID, TestIndex: int64(ti + 1), Label: test.Label,
			WorkspacePeakBytes: test.WorkspacePeakBytes, WorkspaceAllocatorPeakBytes: test.WorkspaceAllocatorPeakBytes}))
	}
	pp := NewRep(KindPP, 0, Timings{PrepareSeconds: 1e-320, PrefillSeconds: -0.0, TotalSeconds: 1.7976931348623157e308}, SpecNone())
	seeds = append(seeds, AppendRepLine(nil, &RepLine{RunID: "r", Label: "pp1", Kind: KindPP, NPrompt: 1, RequestedOutputTokens: 1, Rep: pp}))
	for _, s := range []string{
		`{"type":"progress","pct":5}`,
		`{"type":"rep"`,
		`[1]`,
		`{"type":"test_end","run_id":"x","test_index":-0,"label":"pp1","workspace_peak_bytes":9223372036854775807,"workspace_allocator_peak_bytes":0}`,
		`{"type":"test_end","run_id":"x","test_index":0,"label":"pp1","workspace_peak_bytes":0,"workspace_allocator_peak_bytes":0,"label":"tg2"}`,
		`{"type":"run","run_id":"x","schema_version":16}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	for i, s := range seeds {
		seeds[i] = bytes.TrimSuffix(s, []byte("\n"))
	}
	return seeds
}

// FuzzParseLine checks ParseLine on arbitrary bytes: it is deterministic
// and agrees with ParseLineString; an error is one line; a line of a known
// type re-encodes with the writer's encoder to a single JSON line that
// parses back to the same value (floats at the %.10g the writer keeps) and
// is then a fixed point of encode∘parse; an unknown type decodes to its
// type name only.
func FuzzParseLine(f *testing.F) {
	for _, s := range fuzzLineSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l1, err := ParseLine(data)
		l1s, errs := ParseLineString(string(data))
		if (err == nil) != (errs == nil) || (err != nil && err.Error() != errs.Error()) || !reflect.DeepEqual(l1, l1s) {
			t.Fatalf("ParseLine and ParseLineString disagree: %v / %v", err, errs)
		}
		if err != nil {
			checkOneLineError(t, err)
			return
		}
		enc := appendLine(l1)
		if enc == nil {
			if l1.Type == LineRun || l1.Type == LineRep || l1.Type == LineTestEnd {
				t.Fatalf("known type %q decoded without its record", l1.Type)
			}
			return
		}
		if bytes.IndexByte(enc, '\n') != len(enc)-1 {
			t.Fatalf("encoded line is not one line: %q", enc)
		}
		l2, err := ParseLine(enc[:len(enc)-1])
		if err != nil {
			t.Fatalf("re-encoded line does not parse: %v\n%s", err, enc)
		}
		roundFloats(reflect.ValueOf(&l1))
		if !reflect.DeepEqual(l1, l2) {
			t.Fatalf("round trip changed the line:\n in  %q\n out %q", data, enc)
		}
		enc2 := appendLine(l2)
		l3, err := ParseLine(enc2[:len(enc2)-1])
		if err != nil || !reflect.DeepEqual(l2, l3) || !bytes.Equal(appendLine(l3), enc2) {
			t.Fatalf("encode∘parse is not a fixed point: %v\n%s\n%s", err, enc2, appendLine(l3))
		}
	})
}

// smallDocument is a valid schema-15 document with one test of each kind
// and an MTP spec block, far smaller than the committed seed.
func smallDocument() []byte {
	d := NewDocument()
	d.Command = "ninfer-bench -p 8 -n 4 -r 1"
	d.Environment = Environment{DeviceID: Ptr[int64](0), Backend: Ptr("cpu"), Threads: Ptr[int64](2),
		Extra: []RawField{{"x", `[1,{"a":"\t"}]`}}}
	d.Artifact = Artifact{Path: "m.ninfer", FileSizeBytes: 123}
	d.Load = Load{Architecture: "Qwen3_5ForCausalLM", Name: "tiny", Formats: []string{"bf16"}, LoadSeconds: 0.5}
	d.Memory = Memory{KVCapacityMode: "auto", KVCache: "bf16"}
	d.Config = Config{MaxContext: 64, KVCache: "bf16", SpeculativeBackend: "mtp", DecodePath: "mtp", Repetitions: 1}
	spec := Spec{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 2, DraftedTokens: 4, AcceptedTokens: 1,
		AcceptedPerPosition: []int64{1, 0}}.WithDerived()
	for _, k := range []struct {
		kind string
		p, g int64
	}{{KindPP, 8, 0}, {KindTG, 0, 4}, {KindPPTG, 8, 3}} {
		r := NewRep(k.kind, k.g, Timings{PrepareSeconds: 1e-6, PrefillSeconds: 0.25, DecodeSeconds: 0.125, TotalSeconds: 0.375}, spec)
		d.Tests = append(d.Tests, Test{Label: Label(k.kind, k.p, k.g), Kind: k.kind, NPrompt: k.p, NGen: k.g,
			RequestedOutputTokens: RequestedOutputTokens(k.kind, k.g), PrefillTokS: Stat{Mean: Ptr(32.0), Stddev: Ptr(0.0)},
			Speculative: spec, Reps: []Rep{r}})
	}
	return EncodeDocument(&d)
}

// FuzzDecodeDocument checks DecodeDocument on arbitrary bytes: it is
// deterministic; an error is one line; an accepted document re-encodes to
// text that IsDocument recognises, that ends with "}\n" and that decodes to
// the same value (floats at %.10g), after which encode∘decode is a fixed
// point.
func FuzzDecodeDocument(f *testing.F) {
	seed := readSeed(f)
	small := smallDocument()
	f.Add(seed)
	f.Add(small)
	f.Add(bytes.Replace(small, []byte(`"schema_version": 15`), []byte(`"schema_version": 14`), 1))
	f.Add(bytes.Replace(small, []byte(`"tests": [`), []byte(`"tests": [,`), 1))
	f.Add(bytes.Replace(small, []byte(`"vision_workspace": null`), []byte(`"vision_workspace": {}`), 1))
	f.Add([]byte(`{"schema_version":15}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d1, err := DecodeDocument(data)
		d1b, errb := DecodeDocument(data)
		if (err == nil) != (errb == nil) || (err != nil && err.Error() != errb.Error()) || !reflect.DeepEqual(d1, d1b) {
			t.Fatalf("DecodeDocument is not deterministic: %v / %v", err, errb)
		}
		if err != nil {
			checkOneLineError(t, err)
			return
		}
		if d1.SchemaVersion != SchemaVersion || d1.ArtifactType != ArtifactType || d1.Tests == nil {
			t.Fatalf("accepted a document with schema %d type %q tests %v", d1.SchemaVersion, d1.ArtifactType, d1.Tests)
		}
		enc := EncodeDocument(&d1)
		if !bytes.HasSuffix(enc, []byte("}\n")) || !IsDocument(enc) {
			t.Fatalf("re-encoded document is not recognised as one:\n%s", enc)
		}
		d2, err := DecodeDocument(enc)
		if err != nil {
			t.Fatalf("re-encoded document does not decode: %v\n%s", err, enc)
		}
		roundFloats(reflect.ValueOf(&d1))
		if !reflect.DeepEqual(d1, d2) {
			t.Fatalf("round trip changed the document:\n%s", enc)
		}
		enc2 := EncodeDocument(&d2)
		d3, err := DecodeDocument(enc2)
		if err != nil || !reflect.DeepEqual(d2, d3) || !bytes.Equal(EncodeDocument(&d3), enc2) {
			t.Fatalf("encode∘decode is not a fixed point: %v", err)
		}
	})
}

// TestFuzzSeedsValid: the seeds built here are accepted, so the fuzzers
// start from input that reaches the encoders.
func TestFuzzSeedsValid(t *testing.T) {
	if _, err := DecodeDocument(smallDocument()); err != nil {
		t.Errorf("small document rejected: %v", err)
	}
	for i, s := range fuzzLineSeeds(t)[:9] {
		if l, err := ParseLine(s); err != nil || appendLine(l) == nil {
			t.Errorf("line seed %d rejected: %v\n%s", i, err, s)
		}
	}
}
