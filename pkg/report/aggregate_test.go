package report

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/benchfmt"
)

func seedBytes(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/seed_schema15.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seedDoc(t testing.TB) benchfmt.Document {
	t.Helper()
	d, err := benchfmt.DecodeDocument(seedBytes(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// docLines converts a document to the stream ninfer-bench would have written.
func docLines(d *benchfmt.Document, runID string, withEnds bool) []benchfmt.Line {
	lines := []benchfmt.Line{{Type: benchfmt.LineRun, Run: &benchfmt.RunLine{RunID: runID, SchemaVersion: 15,
		Command: d.Command, Environment: d.Environment, Artifact: d.Artifact, Load: d.Load, Memory: d.Memory, Config: d.Config}}}
	for ti, t := range d.Tests {
		for ri, r := range t.Reps {
			lines = append(lines, benchfmt.Line{Type: benchfmt.LineRep, Rep: &benchfmt.RepLine{RunID: runID, TestIndex: int64(ti),
				Label: t.Label, Kind: t.Kind, NPrompt: t.NPrompt, NGen: t.NGen, RequestedOutputTokens: t.RequestedOutputTokens,
				RepIndex: int64(ri), Rep: r}})
		}
		if withEnds {
			lines = append(lines, benchfmt.Line{Type: benchfmt.LineTestEnd, TestEnd: &benchfmt.TestEndLine{RunID: runID,
				TestIndex: int64(ti), Label: t.Label, WorkspacePeakBytes: t.WorkspacePeakBytes,
				WorkspaceAllocatorPeakBytes: t.WorkspaceAllocatorPeakBytes}})
		}
	}
	return lines
}

// encodeLines writes lines as stream text.
func encodeLines(lines []benchfmt.Line) []byte {
	var b []byte
	for _, l := range lines {
		switch {
		case l.Run != nil:
			b = benchfmt.AppendRunLine(b, l.Run)
		case l.Rep != nil:
			b = benchfmt.AppendRepLine(b, l.Rep)
		case l.TestEnd != nil:
			b = benchfmt.AppendTestEndLine(b, l.TestEnd)
		}
	}
	return b
}

// The seed's test-level aggregates recomputed from its reps. All of them
// reproduce exactly at %.10g except four tg1024 stddevs: those reps'
// timings were printed with only 8 decimals (15.44796308 s), and the
// stddev of three nearly equal values amplifies that rounding to the 7th
// significant digit. Those four must agree within the propagated rounding.
func TestAggregateReproducesSeed(t *testing.T) {
	seed := seedDoc(t)
	// Through the text stream, not just the structs.
	in, err := ReadFilesFromBytes(t, map[string][]byte{"seed.jsonl": encodeLines(docLines(&seed, "seed", true))})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Runs) != 1 || len(in.Warnings) != 0 {
		t.Fatalf("runs %d warnings %v", len(in.Runs), in.Warnings)
	}
	got := in.Runs[0].Document
	inexact := map[string]bool{}
	for ti := range seed.Tests {
		for _, m := range Metrics() {
			a, b := statField(&seed.Tests[ti], m), statField(&got.Tests[ti], m)
			for _, f := range []struct {
				suffix string
				s, g   **float64
			}{{"_mean", &a.Mean, &b.Mean}, {"_stddev", &a.Stddev, &b.Stddev}} {
				if optFloatText(*f.s) == optFloatText(*f.g) {
					continue
				}
				path := fmt.Sprintf("%s.%s%s", seed.Tests[ti].Label, m, f.suffix)
				inexact[path] = true
				if *f.s == nil || *f.g == nil || math.Abs(**f.s-**f.g) > 1e-6*math.Abs(**f.s) {
					t.Errorf("%s: seed %s, aggregated %s", path, optFloatText(*f.s), optFloatText(*f.g))
				}
				*f.g = *f.s // so that the whole-document comparison below covers the rest
			}
		}
	}
	want := map[string]bool{
		"tg1024.decode_output_tok_s_stddev": true, "tg1024.decode_engine_tok_s_stddev": true,
		"tg1024.decode_seconds_stddev": true, "tg1024.total_seconds_stddev": true,
	}
	if fmt.Sprint(inexact) != fmt.Sprint(want) {
		t.Errorf("values not reproduced exactly: %v, want only %v", inexact, want)
	}
	if err := benchfmt.SameJSON(seedBytes(t), benchfmt.EncodeDocument(&got)); err != nil {
		t.Errorf("aggregated document differs from the seed: %v", err)
	}
	// And the aggregated document passes --check.
	if res := Check(&got); len(res.Mismatches) != 0 {
		t.Errorf("aggregated document fails Check: %v", res.Mismatches)
	}
}

// ReadFilesFromBytes writes the named contents to a temp dir and reads them.
func ReadFilesFromBytes(t testing.TB, files map[string][]byte) (*Input, error) {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for n, b := range files {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	return ReadFiles(names, nil)
}

func TestSeedReencodeStable(t *testing.T) {
	seed := seedDoc(t)
	enc := benchfmt.EncodeDocument(&seed)
	back, err := benchfmt.DecodeDocument(enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := benchfmt.SameJSON(seedBytes(t), benchfmt.EncodeDocument(&back)); err != nil {
		t.Fatal(err)
	}
}

func f64(v float64) *float64 { return &v }

func synthRun(cfgReps int64) *benchfmt.RunLine {
	return &benchfmt.RunLine{RunID: "syn", SchemaVersion: 15, Command: "ninfer-bench -p 4 -n 8",
		Environment: benchfmt.Environment{DeviceID: benchfmt.Ptr[int64](0), Backend: benchfmt.Ptr("cpu"), Threads: benchfmt.Ptr[int64](2)},
		Load:        benchfmt.Load{Name: "tiny", Formats: []string{"bf16"}},
		Memory:      benchfmt.Memory{KVCapacityMode: "explicit", KVCache: "bf16"},
		Config:      benchfmt.Config{Repetitions: cfgReps, SpeculativeBackend: "none", KVCache: "bf16", DecodePath: "eager"}}
}

func repLine(ti int64, kind string, p, g, ri int64, tm benchfmt.Timings, spec benchfmt.Spec) benchfmt.Line {
	return benchfmt.Line{Type: "rep", Rep: &benchfmt.RepLine{RunID: "syn", TestIndex: ti, Label: benchfmt.Label(kind, p, g),
		Kind: kind, NPrompt: p, NGen: g, RequestedOutputTokens: benchfmt.RequestedOutputTokens(kind, g), RepIndex: ri,
		Rep: benchfmt.NewRep(kind, g, tm, spec)}}
}

func endLine(ti int64, label string, ws, alloc int64) benchfmt.Line {
	return benchfmt.Line{Type: "test_end", TestEnd: &benchfmt.TestEndLine{RunID: "syn", TestIndex: ti, Label: label,
		WorkspacePeakBytes: ws, WorkspaceAllocatorPeakBytes: alloc}}
}

func TestAggregateNullsAndStats(t *testing.T) {
	none := benchfmt.SpecNone()
	lines := []benchfmt.Line{
		{Type: "run", Run: synthRun(3)},
		// pp4: prefill 0.5, 0.25, 0 (skipped for the rate, kept for seconds)
		repLine(0, "pp", 4, 0, 0, benchfmt.Timings{PrepareSeconds: 1, PrefillSeconds: 0.5, TotalSeconds: 2}, none),
		repLine(0, "pp", 4, 0, 1, benchfmt.Timings{PrepareSeconds: 3, PrefillSeconds: 0.25, TotalSeconds: 4}, none),
		repLine(0, "pp", 4, 0, 2, benchfmt.Timings{PrepareSeconds: 5, PrefillSeconds: 0, TotalSeconds: 6}, none),
		endLine(0, "pp4", 100, 90),
		// tg8 with prefill seconds present in the reps: still null at test level.
		repLine(1, "tg", 0, 8, 0, benchfmt.Timings{PrefillSeconds: 0.03, DecodeSeconds: 2, TotalSeconds: 2.1}, none),
		repLine(1, "tg", 0, 8, 1, benchfmt.Timings{PrefillSeconds: 0.03, DecodeSeconds: 4, TotalSeconds: 4.1}, none),
		endLine(1, "tg8", 200, 190),
	}
	doc, err := Aggregate(lines)
	if err != nil {
		t.Fatal(err)
	}
	pp, tg := doc.Tests[0], doc.Tests[1]
	type want struct {
		name     string
		got      benchfmt.Stat
		mean, sd *float64
	}
	for _, w := range []want{
		{"pp prefill_tok_s", pp.PrefillTokS, f64(12), f64(math.Sqrt(32))}, // rates 8, 16
		{"pp decode_output_tok_s", pp.DecodeOutputTokS, nil, nil},
		{"pp decode_engine_tok_s", pp.DecodeEngineTokS, nil, nil},
		{"pp prepare_seconds", pp.PrepareSeconds, f64(3), f64(2)},
		{"pp prefill_seconds", pp.PrefillSeconds, f64(0.25), f64(0.25)},
		{"pp decode_seconds", pp.DecodeSeconds, nil, nil},
		{"pp total_seconds", pp.TotalSeconds, f64(4), f64(2)},
		{"tg prefill_tok_s", tg.PrefillTokS, nil, nil},
		{"tg prefill_seconds", tg.PrefillSeconds, nil, nil},
		{"tg decode_output_tok_s", tg.DecodeOutputTokS, f64(3), f64(math.Sqrt(2))}, // rates 4, 2
		{"tg decode_engine_tok_s", tg.DecodeEngineTokS, f64(3), f64(math.Sqrt(2))},
		{"tg decode_seconds", tg.DecodeSeconds, f64(3), f64(math.Sqrt(2))},
	} {
		if optFloatText(w.got.Mean) != optFloatText(w.mean) || optFloatText(w.got.Stddev) != optFloatText(w.sd) {
			t.Errorf("%s = %s ± %s, want %s ± %s", w.name, optFloatText(w.got.Mean), optFloatText(w.got.Stddev), optFloatText(w.mean), optFloatText(w.sd))
		}
	}
	if pp.Reps[0].DecodeOutputTokens != nil || pp.Reps[0].DecodeEngineTokens != nil || *tg.Reps[1].DecodeEngineTokens != 8 {
		t.Error("per-rep decode token nulls")
	}
	if pp.WorkspacePeakBytes != 100 || tg.WorkspaceAllocatorPeakBytes != 190 {
		t.Errorf("workspace peaks %d %d", pp.WorkspacePeakBytes, tg.WorkspaceAllocatorPeakBytes)
	}
	if pp.Speculative.Backend != "none" || pp.Speculative.AcceptanceRate != nil || pp.Speculative.AcceptanceLength != nil {
		t.Errorf("no-backend spec = %+v", pp.Speculative)
	}
	enc := string(benchfmt.EncodeDocument(&doc))
	for _, s := range []string{`"decode_output_tok_s_mean": null,`, `"prefill_seconds_stddev": null,`, `"decode_output_tokens": null,`,
		`"gpu_name": null`, `"backend": "cpu"`, `"accepted_per_position": []`} {
		if !strings.Contains(enc, s) {
			t.Errorf("document lacks %s", s)
		}
	}
	if res := Check(&doc); len(res.Mismatches) != 0 || res.Rounding != 0 {
		t.Errorf("Check on aggregated doc: %+v", res)
	}
}

func TestSumSpecPadding(t *testing.T) {
	reps := []benchfmt.Rep{
		{Speculative: benchfmt.Spec{Backend: "none", Enabled: false, AcceptedPerPosition: []int64{}}},
		{Speculative: benchfmt.Spec{Backend: "mtp", Enabled: true, DraftWindow: 2, Rounds: 10, DraftedTokens: 20, AcceptedTokens: 7,
			FallbackSteps: 1, AcceptedPerPosition: []int64{5, 2}}},
		{Speculative: benchfmt.Spec{Backend: "dflash", Enabled: true, DraftWindow: 3, Rounds: 5, DraftedTokens: 15, AcceptedTokens: 9,
			FallbackSteps: 2, AcceptedPerPosition: []int64{4, 3, 2}}},
		{Speculative: benchfmt.Spec{Backend: "dflash2", Enabled: false, DraftWindow: 1, AcceptedPerPosition: []int64{1}}},
	}
	s := SumSpec(reps)
	if s.Backend != "dflash2" || !s.Enabled || s.DraftWindow != 3 || s.Rounds != 15 || s.DraftedTokens != 35 ||
		s.AcceptedTokens != 16 || s.FallbackSteps != 3 || fmt.Sprint(s.AcceptedPerPosition) != "[10 5 2]" {
		t.Errorf("SumSpec = %+v", s)
	}
	if benchfmt.FormatDouble(*s.AcceptanceRate) != "0.4571428571" || benchfmt.FormatDouble(*s.AcceptanceLength) != "2.066666667" {
		t.Errorf("ratios %v %v", *s.AcceptanceRate, *s.AcceptanceLength)
	}
	empty := SumSpec(nil)
	if empty.Backend != "none" || empty.AcceptanceRate != nil || empty.AcceptedPerPosition == nil {
		t.Errorf("empty SumSpec = %+v", empty)
	}
	zero := SumSpec(reps[:1])
	if zero.AcceptanceRate != nil || zero.AcceptanceLength != nil {
		t.Errorf("drafted 0 / rounds 0 must give null ratios: %+v", zero)
	}
}

// simulateMTP runs the clamped MTP loop of reference §7 for one request of
// G decode tokens with draft window k: each round verifies
// extent = min(k, remaining−1) drafts, accepts a ≤ extent of them and
// commits a+1 tokens. accept(extent) picks a.
func simulateMTP(k, g int64, accept func(extent int64) int64) benchfmt.Spec {
	s := benchfmt.Spec{Backend: "mtp", Enabled: true, DraftWindow: k, AcceptedPerPosition: make([]int64, k)}
	remaining := g
	for remaining > 0 {
		extent := min(k, remaining-1)
		if extent == 0 {
			s.FallbackSteps++ // single-token step: nothing left to draft for
			remaining--
			continue
		}
		a := accept(extent)
		s.Rounds++
		s.DraftedTokens += extent
		s.AcceptedTokens += a
		for i := int64(0); i < a; i++ {
			s.AcceptedPerPosition[i]++
		}
		remaining -= a + 1
	}
	return s
}

func TestClampedMTPArithmetic(t *testing.T) {
	// Scripted to the seed's tg1024 rep: 415 full rounds accepting 607
	// drafts in total, then one clamped round (2 tokens left → extent 1)
	// accepting 1.
	const k, g = 2, 1024
	round := 0
	script := func(extent int64) int64 {
		round++
		if extent < k {
			return 1
		}
		if round <= 192 { // 192·2 + 223·1 = 607
			return 2
		}
		return 1
	}
	s := simulateMTP(k, g, script)
	if s.Rounds != 416 || s.DraftedTokens != 831 || s.AcceptedTokens != 608 || s.FallbackSteps != 0 {
		t.Fatalf("scripted MTP = %+v", s)
	}
	if s.Rounds+s.AcceptedTokens+s.FallbackSteps != g {
		t.Fatal("rounds + accepted + fallback != G")
	}
	// Three such reps aggregate to the seed's tg1024 test-level SPEC.
	var lines []benchfmt.Line
	lines = append(lines, benchfmt.Line{Type: "run", Run: synthRun(3)})
	for ri := int64(0); ri < 3; ri++ {
		lines = append(lines, repLine(0, "tg", 0, g, ri, benchfmt.Timings{DecodeSeconds: 15 + float64(ri)}, s))
	}
	doc, err := Aggregate(lines)
	if err != nil {
		t.Fatal(err)
	}
	ts := doc.Tests[0].Speculative
	if ts.Rounds != 1248 || ts.DraftedTokens != 2493 || ts.AcceptedTokens != 1824 ||
		benchfmt.FormatDouble(*ts.AcceptanceRate) != "0.7316486161" || benchfmt.FormatDouble(*ts.AcceptanceLength) != "2.461538462" {
		t.Errorf("test SPEC = %+v", ts)
	}
	for _, r := range doc.Tests[0].Reps {
		if *r.DecodeEngineTokens != g || *r.DecodeOutputTokens != g {
			t.Errorf("engine/output tokens %d/%d", *r.DecodeEngineTokens, *r.DecodeOutputTokens)
		}
	}

	// Random acceptance: the invariants hold for any k and G.
	rng := numtest.Seeded(t)
	for i := 0; i < 200; i++ {
		k := int64(1 + rng.IntN(5))
		g := int64(1 + rng.IntN(2000))
		s := simulateMTP(k, g, func(extent int64) int64 { return rng.Int64N(extent + 1) })
		var sum int64
		for _, n := range s.AcceptedPerPosition {
			sum += n
		}
		if s.Rounds+s.AcceptedTokens+s.FallbackSteps != g || sum != s.AcceptedTokens || s.DraftedTokens > k*s.Rounds ||
			s.EngineTokens(g) != g {
			t.Fatalf("k=%d G=%d: %+v", k, g, s)
		}
		r := benchfmt.NewRep("tg", g, benchfmt.Timings{DecodeSeconds: 1}, s)
		d := benchfmt.Document{Tests: []benchfmt.Test{{Label: benchfmt.Label("tg", 0, g), Kind: "tg", NGen: g,
			RequestedOutputTokens: g + 1, Reps: []benchfmt.Rep{r}}}}
		Summarize(&d.Tests[0])
		if res := Check(&d); len(res.Mismatches) != 0 {
			t.Fatalf("%v", res.Mismatches)
		}
	}
}

func TestDuplicateLabelsAreDistinctTests(t *testing.T) {
	none := benchfmt.SpecNone()
	tm := benchfmt.Timings{PrefillSeconds: 1, TotalSeconds: 1}
	lines := []benchfmt.Line{{Type: "run", Run: synthRun(1)},
		repLine(1, "pp", 4, 0, 0, benchfmt.Timings{PrefillSeconds: 2, TotalSeconds: 2}, none), // out of order on purpose
		repLine(0, "pp", 4, 0, 0, tm, none),
		endLine(0, "pp4", 1, 1), endLine(1, "pp4", 2, 2),
	}
	doc, err := Aggregate(lines)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Tests) != 2 || *doc.Tests[0].PrefillTokS.Mean != 4 || *doc.Tests[1].PrefillTokS.Mean != 2 || doc.Tests[1].WorkspacePeakBytes != 2 {
		t.Errorf("tests = %+v", doc.Tests)
	}
}

func TestTruncatedStream(t *testing.T) {
	seed := seedDoc(t)
	lines := docLines(&seed, "cut", true)
	// Interrupted during test 2 (pp2048+tg512): its test_end and last rep
	// and all of test 3 are missing; the last written line is cut in half.
	var kept []benchfmt.Line
	for _, l := range lines {
		if l.Rep != nil && (l.Rep.TestIndex > 2 || l.Rep.TestIndex == 2 && l.Rep.RepIndex == 2) ||
			l.TestEnd != nil && l.TestEnd.TestIndex >= 2 {
			continue
		}
		kept = append(kept, l)
	}
	text := encodeLines(kept)
	partial := benchfmt.AppendRepLine(nil, lines[len(lines)-2].Rep)
	text = append(text, '\n') // a blank line is fine
	text = append(text, partial[:len(partial)/2]...)
	in, err := ReadFilesFromBytes(t, map[string][]byte{"cut.jsonl": text})
	if err != nil {
		t.Fatal(err)
	}
	doc := in.Runs[0].Document
	if len(doc.Tests) != 3 || len(doc.Tests[2].Reps) != 2 {
		t.Fatalf("tests %d", len(doc.Tests))
	}
	if doc.Tests[2].WorkspacePeakBytes != seed.Tests[1].WorkspacePeakBytes {
		t.Errorf("peak of the unfinished test = %d, want last known %d", doc.Tests[2].WorkspacePeakBytes, seed.Tests[1].WorkspacePeakBytes)
	}
	joined := strings.Join(in.Warnings, "\n")
	for _, w := range []string{"unterminated last line", "test 2 (pp2048+tg512) has no test_end line", "has 2 of 3 reps"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
	if res := Check(&doc); len(res.Mismatches) != 0 {
		t.Errorf("truncated aggregate fails Check: %v", res.Mismatches)
	}
	// No test_end at all: peaks 0.
	var noEnds []benchfmt.Line
	for _, l := range docLines(&seed, "x", false) {
		noEnds = append(noEnds, l)
	}
	d2, err := Aggregate(noEnds)
	if err != nil || d2.Tests[0].WorkspacePeakBytes != 0 || d2.Tests[3].WorkspaceAllocatorPeakBytes != 0 {
		t.Errorf("no test_end: %v %+v", err, d2.Tests[0].WorkspacePeakBytes)
	}
}

func TestStreamErrors(t *testing.T) {
	seed := seedDoc(t)
	good := encodeLines(docLines(&seed, "r", true))
	goodLines := strings.SplitAfter(string(good), "\n")
	cases := []struct {
		name string
		text string
		want string
	}{
		{"malformed", goodLines[0] + "{\"type\":\"rep\",\n" + strings.Join(goodLines[1:], ""), "bad.jsonl:2: not valid JSON"},
		{"wrong type", goodLines[0] + strings.Replace(goodLines[1], `"n_gen":256`, `"n_gen":"256"`, 1), "bad.jsonl:2: n_gen: want integer, got string"},
		{"no run line", strings.Join(goodLines[1:], ""), `run_id "r": no run line (first line of that run at`},
		{"duplicate rep", goodLines[0] + goodLines[1] + goodLines[1], "bad.jsonl:3: duplicate rep 0 of test 0"},
		{"inconsistent test", goodLines[0] + goodLines[1] + strings.Replace(goodLines[2], `"label":"tg256"`, `"label":"tg257"`, 1), "bad.jsonl:3: test 0 of run \"r\" is tg257"},
		{"bad kind", goodLines[0] + strings.Replace(goodLines[1], `"kind":"tg"`, `"kind":"xx"`, 1), `bad.jsonl:2: kind "xx"`},
		{"second run line", goodLines[0] + goodLines[0], "bad.jsonl:2: second run line"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFilesFromBytes(t, map[string][]byte{"bad.jsonl": []byte(c.text)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want containing %q", err, c.want)
			}
		})
	}
	// Unknown line types and CRLF are tolerated.
	text := strings.ReplaceAll(string(good), "\n", "\r\n") + "{\"type\":\"progress\",\"pct\":50}\n\n  \n"
	in, err := ReadFilesFromBytes(t, map[string][]byte{"ok.jsonl": []byte(text)})
	if err != nil || len(in.Runs) != 1 || !strings.Contains(strings.Join(in.Warnings, ""), `unknown type "progress"`) {
		t.Errorf("tolerant read: %v %v", err, in)
	}
}

func TestMultipleRuns(t *testing.T) {
	seed := seedDoc(t)
	text := append(encodeLines(docLines(&seed, "a", true)), encodeLines(docLines(&seed, "b", true))...)
	in, err := ReadFilesFromBytes(t, map[string][]byte{"two.jsonl": text, "seed.json": seedBytes(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Runs) != 3 || in.Runs[0].RunID != "a" || in.Runs[1].RunID != "b" || !strings.HasSuffix(in.Runs[2].RunID, "seed.json") {
		t.Fatalf("runs = %d", len(in.Runs))
	}
	if _, err := RenderJSON(in.Runs); err == nil || !strings.Contains(err.Error(), "holds 3 runs") {
		t.Errorf("RenderJSON of 3 runs: %v", err)
	}
	sel, err := in.Select("b")
	if err != nil || len(sel) != 1 {
		t.Fatal(err)
	}
	out, err := RenderJSON(sel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Select("zzz"); err == nil {
		t.Error("unknown run selected")
	}
	md := RenderMarkdown(in.Runs)
	if n := bytes.Count(md, []byte(" tg256 |")); n != 3 {
		t.Errorf("markdown shows tg256 %d times, want 3:\n%s", n, md)
	}
	_ = out
}

func TestTestEndWithoutReps(t *testing.T) {
	lines := []benchfmt.Line{{Type: "run", Run: synthRun(2)},
		repLine(0, "tg", 0, 16, 0, benchfmt.Timings{DecodeSeconds: 2, TotalSeconds: 2}, benchfmt.SpecNone()),
		endLine(0, "tg16", 10, 11),
		endLine(1, "pp64+tg16", 20, 21), // its rep lines were lost
	}
	c := NewCollector()
	for i, l := range lines {
		if err := c.Add(Loc{File: "f", Line: i + 1}, l); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := c.Runs()
	if err != nil {
		t.Fatal(err)
	}
	d := runs[0].Document
	if len(d.Tests) != 2 {
		t.Fatalf("%d tests", len(d.Tests))
	}
	e := d.Tests[1]
	if e.Kind != "pp+tg" || e.NPrompt != 64 || e.NGen != 16 || e.RequestedOutputTokens != 17 || len(e.Reps) != 0 ||
		e.DecodeSeconds.Mean != nil || e.Speculative.Backend != "none" || e.WorkspacePeakBytes != 20 {
		t.Errorf("rep-less test = %+v", e)
	}
	w := strings.Join(runs[0].Warnings, "\n")
	if !strings.Contains(w, "test 1 (pp64+tg16) has no rep lines") || !strings.Contains(w, "test 0 (tg16) has 1 of 2 reps") {
		t.Errorf("warnings:\n%s", w)
	}
	// A test_end whose label disagrees with the reps is an error.
	c = NewCollector()
	_ = c.Add(Loc{Line: 1}, lines[0])
	_ = c.Add(Loc{Line: 2}, lines[1])
	if err := c.Add(Loc{Line: 3}, endLine(0, "tg17", 0, 0)); err == nil || !strings.Contains(err.Error(), `line 3: test_end label "tg17" does not match rep label "tg16" at line 2`) {
		t.Errorf("label mismatch: %v", err)
	}
}
