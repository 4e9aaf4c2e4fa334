package benchfmt

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFormatDoubleMatchesC compares FormatDouble with glibc printf("%.10g")
// output recorded in testdata/c_printf_10g.txt (generator:
// testdata/c_printf_10g.c): "<%a hex float> <%.10g text>" per line, covering
// fixed edge cases (0, -0, 1e-06, 1e10 boundary, halfway cases, denormals,
// max double) and random bit patterns across the whole double range.
func TestFormatDoubleMatchesC(t *testing.T) {
	f, err := os.Open("testdata/c_printf_10g.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		hexText, want, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("line %d: malformed %q", n+1, sc.Text())
		}
		v, err := strconv.ParseFloat(hexText, 64)
		if err != nil {
			t.Fatalf("line %d: parse %q: %v", n+1, hexText, err)
		}
		if got := FormatDouble(v); got != want {
			t.Errorf("FormatDouble(%s) = %q, C printf %%.10g = %q", hexText, got, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 3000 {
		t.Fatalf("only %d reference values read", n)
	}
}

func TestFormatDoubleCases(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{1.323333333e-06, "1.323333333e-06"},
		{1e-06, "1e-06"},
		{54.30914011, "54.30914011"},
		{1.0 / 3.0, "0.3333333333"},
		{17501292292, "1.750129229e+10"}, // decimal exponent 10 >= precision: exponent form
		{1e10, "1e+10"},
		{9999999999, "9999999999"},
		{123456789, "123456789"},            // integer-valued stays plain
		{math.NaN(), "null"},                // no JSON spelling
		{math.Inf(1), "null"},               // no JSON spelling
		{2.975e-05, "2.975e-05"},            // seed value
		{0.0001, "0.0001"},                  // exponent -4 stays fixed
		{0.00001, "1e-05"},                  // exponent -5 switches
		{9999999999.5, "1e+10"},             // rounds up into exponent form
		{-0.5, "-0.5"},                      // sign
		{6.8e-06, "6.8e-06"},                // seed value
		{2.4615384615384617, "2.461538462"}, // seed acceptance_length
	}
	for _, c := range cases {
		if got := FormatDouble(c.v); got != c.want {
			t.Errorf("FormatDouble(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"l1\nl2\r\tx", `"l1\nl2\r\tx"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f\""},
		{"\x1b[0m", `"\u001b[0m"`},
		{"<a>&b", `"<a>&b"`},           // not HTML-escaped
		{"ü€\u2028😀", "\"ü€\u2028😀\""}, // UTF-8 and U+2028 raw
		{"-pg 2048,512;8192,512", `"-pg 2048,512;8192,512"`},
		{"", `""`},
	}
	for _, c := range cases {
		if got := QuoteString(c.in); got != c.want {
			t.Errorf("QuoteString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestRound10(t *testing.T) {
	if got := Round10(54.309140114999); got != 54.30914011 {
		t.Errorf("Round10 = %v", got)
	}
	if got := Round10(1.0 / 3.0); got != 0.3333333333 {
		t.Errorf("Round10(1/3) = %v", got)
	}
}

func readSeed(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/seed_schema15.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSeedRoundTrip(t *testing.T) {
	seed := readSeed(t)
	doc, err := DecodeDocument(seed)
	if err != nil {
		t.Fatalf("decode seed: %v", err)
	}
	// A few spot values so the decode itself is checked, not only the round trip.
	if doc.Command == "" || !strings.Contains(doc.Command, "-pg 2048,512;8192,512") {
		t.Errorf("command = %q", doc.Command)
	}
	if *doc.Environment.GPUName != "NVIDIA RTX PRO 4000 Blackwell" || *doc.Environment.DeviceID != 0 {
		t.Errorf("environment = %+v", doc.Environment)
	}
	if doc.Artifact.FileSizeBytes != 17501292292 || doc.Memory.KVPayloadBytes != 575013888 {
		t.Errorf("artifact/memory = %d %d", doc.Artifact.FileSizeBytes, doc.Memory.KVPayloadBytes)
	}
	if doc.Memory.VisionWorkspace != nil {
		t.Error("vision_workspace should decode as nil")
	}
	if len(doc.Tests) != 4 || doc.Tests[1].Label != "tg1024" || len(doc.Tests[1].Reps) != 3 {
		t.Fatalf("tests = %d", len(doc.Tests))
	}
	tg := doc.Tests[0]
	if tg.PrefillTokS.Mean != nil || tg.PrefillSeconds.Stddev != nil {
		t.Error("tg256 prefill stats should be null")
	}
	if *tg.PrepareSeconds.Mean != 1.323333333e-06 {
		t.Errorf("prepare mean = %v", *tg.PrepareSeconds.Mean)
	}
	if r := tg.Reps[0]; *r.DecodeEngineTokens != 256 || r.Timings.PrefillSeconds != 0.03283906 {
		t.Errorf("rep0 = %+v", r)
	}
	if got := doc.Tests[1].Speculative.AcceptedPerPosition; len(got) != 2 || got[0] != 1005 || got[1] != 819 {
		t.Errorf("accepted_per_position = %v", got)
	}

	enc := EncodeDocument(&doc)
	if err := SameJSON(seed, enc); err != nil {
		t.Fatalf("re-encoded seed differs: %v", err)
	}
	doc2, err := DecodeDocument(enc)
	if err != nil {
		t.Fatalf("decode re-encoded: %v", err)
	}
	if enc2 := EncodeDocument(&doc2); !bytes.Equal(enc, enc2) {
		t.Fatal("second encoding differs from the first")
	}
}

func TestDocumentLayout(t *testing.T) {
	doc, err := DecodeDocument(readSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	enc := string(EncodeDocument(&doc))
	for _, want := range []string{
		"{\n  \"schema_version\": 15,\n  \"artifact_type\": \"ninfer_bench_report\",\n",
		"  \"environment\": {\"gpu_name\": \"NVIDIA RTX PRO 4000 Blackwell\", \"cuda_runtime_version\": \"13.1\", \"cuda_driver_version\": \"13.2\", \"device_id\": 0},\n",
		"  \"load\": {\n    \"architecture\": \"Qwen3_5ForCausalLM\",\n",
		"    \"formats\": [\"bf16\",\"fp32\",\"int32\",\"nvfp4\",\"q4_g64_fp16\",\"q5_g64_fp16\",\"q8_g32_fp16\"],\n",
		"    \"weights\": {\"capacity_bytes\": 17487992064, \"used_bytes\": 17487992064, \"peak_used_bytes\": 17487992064},\n",
		"    \"vision_workspace\": null,\n",
		"    \"decode_graph_prime\": {\"primed\": true, \"output_tokens\": 7},\n",
		"  \"tests\": [\n    {\n      \"label\": \"tg256\",\n",
		"      \"prefill_tok_s_mean\": null,\n",
		"      \"prepare_seconds_mean\": 1.323333333e-06,\n",
		"        \"accepted_per_position\": [240, 147]\n      },\n",
		"      \"reps\": [\n        {\n          \"generated_output_tokens\": 257,\n",
		"          \"timings\": {\"prepare_seconds\": 1.02e-06, \"vision_seconds\": 0, \"prefill_seconds\": 0.03283906, \"decode_seconds\": 4.716577136, \"total_seconds\": 4.749658925},\n",
	} {
		if !strings.Contains(enc, want) {
			t.Errorf("encoded document lacks %q", want)
		}
	}
	if !strings.HasSuffix(enc, "      ]\n    }\n  ]\n}\n") {
		t.Errorf("document ends %q", enc[len(enc)-40:])
	}
}

func TestEnvironmentExtras(t *testing.T) {
	doc, err := DecodeDocument(readSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	doc.Environment = Environment{
		DeviceID: Ptr[int64](0),
		Backend:  Ptr("cpu"),
		CPUName:  Ptr("AMD EPYC \"Genoa\""),
		Threads:  Ptr[int64](2),
		Extra:    []RawField{{"hip_version", `{"major":6,"s":"a\u0001"}`}},
	}
	enc := EncodeDocument(&doc)
	want := `  "environment": {"gpu_name": null, "cuda_runtime_version": null, "cuda_driver_version": null, "device_id": 0, "backend": "cpu", "cpu_name": "AMD EPYC \"Genoa\"", "threads": 2, "hip_version": {"major":6,"s":"a\u0001"}},`
	if !strings.Contains(string(enc), want) {
		t.Fatalf("environment line not found; document:\n%s", enc[:600])
	}
	back, err := DecodeDocument(enc)
	if err != nil {
		t.Fatal(err)
	}
	e := back.Environment
	if e.GPUName != nil || *e.Backend != "cpu" || *e.CPUName != "AMD EPYC \"Genoa\"" || *e.Threads != 2 ||
		len(e.Extra) != 1 || e.Extra[0].JSON != `{"major":6,"s":"a\u0001"}` {
		t.Errorf("environment decoded as %+v", e)
	}
	// A seed key missing is an error naming it.
	bad := strings.Replace(string(enc), `"cuda_driver_version": null, `, "", 1)
	if _, err := DecodeDocument([]byte(bad)); err == nil || !strings.Contains(err.Error(), "environment.cuda_driver_version: missing") {
		t.Errorf("missing key error = %v", err)
	}
}

func TestDecodeDocumentErrors(t *testing.T) {
	seed := string(readSeed(t))
	cases := []struct {
		name, from, to, want string
	}{
		{"schema", `"schema_version": 15`, `"schema_version": 14`, "schema_version: 14 not supported"},
		{"artifact type", `"ninfer_bench_report"`, `"other"`, "artifact_type"},
		{"float for int", `"file_size_bytes": 17501292292`, `"file_size_bytes": 1.5`, "artifact.file_size_bytes: want integer, got 1.5"},
		{"string for number", `"load_seconds": 3.30988622`, `"load_seconds": "3.3"`, "load.load_seconds: want number, got string"},
		{"rep timing", `"decode_seconds": 4.716577136`, `"decode_seconds": null`, "tests[0].reps[0].timings.decode_seconds: want number, got null"},
		{"per position", `[80, 49]`, `[80, "x"]`, "tests[0].reps[0].speculative.accepted_per_position[1]: want integer"},
		{"invalid", `"tests": [`, `"tests": [,`, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := strings.Replace(seed, c.from, c.to, 1)
			if in == seed {
				t.Fatalf("replacement %q not applied", c.from)
			}
			_, err := DecodeDocument([]byte(in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want containing %q", err, c.want)
			}
		})
	}
}

func TestIsDocument(t *testing.T) {
	seed := readSeed(t)
	cases := []struct {
		in   string
		want bool
	}{
		{string(seed), true},
		{`{"type":"run","schema_version":15}`, false},
		{`{"type":"rep"}`, false},
		{`[1,2]`, false},
		{`{"schema_version":15}`, true},
	}
	for _, c := range cases {
		if got := IsDocument([]byte(c.in)); got != c.want {
			t.Errorf("IsDocument(%.30q) = %v", c.in, got)
		}
	}
}

func TestLabels(t *testing.T) {
	cases := []struct {
		label string
		kind  string
		p, g  int64
		req   int64
	}{
		{"pp512", KindPP, 512, 0, 1},
		{"tg128", KindTG, 0, 128, 129},
		{"pp2048+tg512", KindPPTG, 2048, 512, 513},
	}
	for _, c := range cases {
		kind, p, g, err := ParseLabel(c.label)
		if err != nil || kind != c.kind || p != c.p || g != c.g {
			t.Errorf("ParseLabel(%q) = %q %d %d %v", c.label, kind, p, g, err)
		}
		if got := Label(c.kind, c.p, c.g); got != c.label {
			t.Errorf("Label = %q, want %q", got, c.label)
		}
		if got := RequestedOutputTokens(c.kind, c.g); got != c.req {
			t.Errorf("RequestedOutputTokens(%s) = %d, want %d", c.label, got, c.req)
		}
	}
	for _, bad := range []string{"", "pp", "tg0", "pp-1", "xx12", "pp12+", "tg5+pp3", "pp1x"} {
		if _, _, _, err := ParseLabel(bad); err == nil {
			t.Errorf("ParseLabel(%q) accepted", bad)
		}
	}
}

func TestNewRep(t *testing.T) {
	tm := Timings{PrepareSeconds: 1e-6, PrefillSeconds: 0.03, DecodeSeconds: 15.4, TotalSeconds: 15.5}
	// MTP k=2, G=1024 with the clamped last round: 415 full rounds drafting
	// 2 plus one round drafting 1 → 831 drafted.
	spec := Spec{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 416, DraftedTokens: 831,
		AcceptedTokens: 608, AcceptedPerPosition: []int64{335, 273}}
	r := NewRep(KindTG, 1024, tm, spec)
	if r.GeneratedOutputTokens != 1025 || *r.DecodeOutputTokens != 1024 || *r.DecodeEngineTokens != 1024 {
		t.Errorf("tokens = %d %d %d", r.GeneratedOutputTokens, *r.DecodeOutputTokens, *r.DecodeEngineTokens)
	}
	if FormatDouble(*r.Speculative.AcceptanceRate) != "0.7316486161" || FormatDouble(*r.Speculative.AcceptanceLength) != "2.461538462" {
		t.Errorf("rates = %v %v", *r.Speculative.AcceptanceRate, *r.Speculative.AcceptanceLength)
	}
	pp := NewRep(KindPP, 0, tm, SpecNone())
	if pp.GeneratedOutputTokens != 1 || pp.DecodeOutputTokens != nil || pp.DecodeEngineTokens != nil {
		t.Errorf("pp rep = %+v", pp)
	}
	if pp.Speculative.AcceptanceRate != nil || pp.Speculative.AcceptanceLength != nil || pp.Speculative.AcceptedPerPosition == nil {
		t.Errorf("pp spec = %+v", pp.Speculative)
	}
	noSpec := NewRep(KindPPTG, 64, tm, SpecNone())
	if *noSpec.DecodeEngineTokens != 64 {
		t.Errorf("engine tokens without speculation = %d", *noSpec.DecodeEngineTokens)
	}
}

// flushRecorder counts Flush calls to check the writer flushes per line.
type flushRecorder struct {
	bytes.Buffer
	flushes int
}

func (f *flushRecorder) Flush() error { f.flushes++; return nil }

func TestLineRoundTrip(t *testing.T) {
	doc, err := DecodeDocument(readSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	var out flushRecorder
	w := NewLineWriter(&out)
	run := &RunLine{RunID: "r1", SchemaVersion: SchemaVersion, Command: doc.Command + " \"q\"\n",
		Environment: doc.Environment, Artifact: doc.Artifact, Load: doc.Load, Memory: doc.Memory, Config: doc.Config}
	if err := w.WriteRun(run); err != nil {
		t.Fatal(err)
	}
	test := doc.Tests[2]
	for i, r := range test.Reps {
		if err := w.WriteRep(&RepLine{RunID: "r1", TestIndex: 2, Label: test.Label, Kind: test.Kind,
			NPrompt: test.NPrompt, NGen: test.NGen, RequestedOutputTokens: test.RequestedOutputTokens,
			RepIndex: int64(i), Rep: r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteTestEnd(&TestEndLine{RunID: "r1", TestIndex: 2, Label: test.Label,
		WorkspacePeakBytes: 5, WorkspaceAllocatorPeakBytes: 7}); err != nil {
		t.Fatal(err)
	}
	if out.flushes != 5 {
		t.Errorf("flushes = %d, want 5", out.flushes)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines", len(lines))
	}
	if !strings.HasPrefix(lines[1], `{"type":"rep","run_id":"r1","test_index":2,"label":"pp2048+tg512","kind":"pp+tg","n_prompt":2048,"n_gen":512,"requested_output_tokens":513,"rep_index":0,"generated_output_tokens":513,"decode_output_tokens":512,"decode_engine_tokens":512,"timings":{"prepare_seconds":6.8e-06,`) {
		t.Errorf("rep line = %s", lines[1])
	}
	if lines[4] != `{"type":"test_end","run_id":"r1","test_index":2,"label":"pp2048+tg512","workspace_peak_bytes":5,"workspace_allocator_peak_bytes":7}` {
		t.Errorf("test_end line = %s", lines[4])
	}
	l0, err := ParseLine([]byte(lines[0]))
	if err != nil || l0.Run == nil {
		t.Fatalf("run line: %v", err)
	}
	if l0.Run.Command != run.Command || l0.Run.Memory != doc.Memory || l0.Run.Config != doc.Config ||
		*l0.Run.Environment.GPUName != *doc.Environment.GPUName {
		t.Errorf("run line decoded as %+v", l0.Run)
	}
	for i := 1; i <= 3; i++ {
		l, err := ParseLine([]byte(lines[i]))
		if err != nil || l.Rep == nil {
			t.Fatalf("rep line %d: %v", i, err)
		}
		want := test.Reps[i-1]
		got := l.Rep.Rep
		if l.Rep.RepIndex != int64(i-1) || got.Timings != want.Timings || *got.DecodeEngineTokens != *want.DecodeEngineTokens ||
			got.Speculative.Rounds != want.Speculative.Rounds || got.Speculative.AcceptedPerPosition[1] != want.Speculative.AcceptedPerPosition[1] {
			t.Errorf("rep line %d decoded as %+v", i, l.Rep)
		}
	}
	l4, err := ParseLine([]byte(lines[4]))
	if err != nil || l4.TestEnd == nil || l4.TestEnd.WorkspaceAllocatorPeakBytes != 7 {
		t.Errorf("test_end: %+v %v", l4.TestEnd, err)
	}
}

func TestParseLineErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"type":"rep"`, "not valid JSON"},
		{`[1]`, "top level: want object, got array"},
		{`{"run_id":"x"}`, "type: missing"},
		{`{"type":"test_end","run_id":"x","test_index":"0","label":"pp1","workspace_peak_bytes":0,"workspace_allocator_peak_bytes":0}`, "test_index: want integer, got string"},
		{`{"type":"test_end","run_id":"x","test_index":0,"label":"pp1","workspace_peak_bytes":0}`, "workspace_allocator_peak_bytes: missing"},
		{`{"type":"run","run_id":"x","schema_version":16}`, "schema_version: 16 not supported"},
	}
	for _, c := range cases {
		_, err := ParseLine([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.HasPrefix(err.Error(), ":") {
			t.Errorf("ParseLine(%s) err = %v, want %q", c.in, err, c.want)
		}
	}
	l, err := ParseLine([]byte(`{"type":"progress","pct":5}`))
	if err != nil || l.Type != "progress" || l.Run != nil || l.Rep != nil || l.TestEnd != nil {
		t.Errorf("unknown type: %+v %v", l, err)
	}
}

func TestSameJSON(t *testing.T) {
	cases := []struct {
		a, b string
		ok   bool
	}{
		{`{"a":1,"b":[1.5e-06]}`, "{ \"a\": 1, \"b\": [ 0.0000015 ] }", true},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, false},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":null}`, `{"a":0}`, false},
		{`{"a":"x"}`, `{"a":"x","b":1}`, false},
		{`{"a":0.30000000000000004}`, `{"a":0.3}`, true}, // equal at %.10g
		{`{"a":0.3000000001}`, `{"a":0.3}`, false},
	}
	for _, c := range cases {
		if err := SameJSON([]byte(c.a), []byte(c.b)); (err == nil) != c.ok {
			t.Errorf("SameJSON(%s, %s) = %v", c.a, c.b, err)
		}
	}
}
