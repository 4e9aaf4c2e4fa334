package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/corpus"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/report"
)

func TestMain(m *testing.M) { testfixture.Main(m) }

// tinyModel returns the path of the default test model converted with q8.
func tinyModel(t *testing.T) string {
	t.Helper()
	return testfixture.Artifact(t, "q8", nil)
}

// draftModel returns the same model with a 160-row proposal head for
// --lm-head-draft.
func draftModel(t *testing.T) string {
	t.Helper()
	draft := make([]int32, 160)
	for i := range draft {
		draft[i] = int32(i * 3)
	}
	return testfixture.Build(t, testfixture.Spec{Recipe: "q8", Draft: draft})
}

// writeCorpus writes n random ids below vocab (seeded from the test's name,
// numtest; the seed is in the failure messages through the file name).
func writeCorpus(t *testing.T, n, vocab int) string {
	t.Helper()
	seed := numtest.Seed(t, "corpus")
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d", r.IntN(vocab))
		if i%16 == 15 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("corpus-seed%d.ids", seed))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeClock advances by step on every reading, so every timing of a run is
// a multiple of step fixed by the number of clock readings.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time { c.t = c.t.Add(c.step); return c.t }

const fakeMem = int64(8) << 30

func testEnv() Env {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0), step: time.Millisecond}
	return Env{
		Now:          clock.Now,
		MemAvailable: func() (int64, error) { return fakeMem, nil },
		CPUName:      func() string { return "Test CPU" },
		RunID:        "test-run",
		Command:      "ninfer-bench --weights m.ninfer",
	}
}

func testParams(weights, corpusPath string) Params {
	p := DefaultParams()
	p.Weights, p.Corpus = weights, corpusPath
	p.Prompts, p.Gens, p.Pairs = []int{16}, []int{8}, [][2]int{{16, 8}}
	p.Repetitions, p.Warmup = 2, 1
	p.Backend, p.Threads = "cpu", 2
	return p
}

func TestRunEndToEnd(t *testing.T) {
	model := tinyModel(t)
	corpusPath := writeCorpus(t, 64, 512)
	p := testParams(model, corpusPath)
	var col Collect
	res, err := Run(context.Background(), p, testEnv(), &col)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res.Tests) != 3 {
		t.Fatalf("tests = %v", res.Tests)
	}

	// Line sequence: run, then per test 2 reps and test_end.
	var types []string
	for _, l := range col.Lines {
		types = append(types, l.Type)
	}
	wantTypes := "run rep rep test_end rep rep test_end rep rep test_end"
	if got := strings.Join(types, " "); got != wantTypes {
		t.Fatalf("line types = %s, want %s", got, wantTypes)
	}

	run := col.Lines[0].Run
	af, err := artifact.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	cfg, err := af.Config()
	if err != nil {
		t.Fatal(err)
	}
	env := run.Environment
	if env.GPUName != nil || env.CUDARuntimeVersion != nil || env.CUDADriverVersion != nil {
		t.Errorf("CUDA environment keys must be null on cpu: %+v", env)
	}
	if env.DeviceID == nil || *env.DeviceID != 0 || env.Backend == nil || *env.Backend != "cpu" ||
		env.CPUName == nil || *env.CPUName != "Test CPU" || env.Threads == nil || *env.Threads != 2 {
		t.Errorf("environment = %+v", env)
	}
	st, _ := os.Stat(model)
	if run.Artifact.Path != model || run.Artifact.FileSizeBytes != st.Size() {
		t.Errorf("artifact = %+v, want %s %d", run.Artifact, model, st.Size())
	}
	var textTensors, textBytes int64
	for _, tn := range cfg.Tensors() {
		if tn.Component == qwen35.ComponentText {
			o, _ := af.Object(tn.Name)
			textTensors++
			textBytes += o.Bytes
		}
	}
	ld := run.Load
	if ld.Architecture != "Qwen3_5ForCausalLM" || ld.Name != af.Name || strings.Join(ld.Formats, ",") != "bf16,fp32,q8_g32_fp16" {
		t.Errorf("load identity = %+v", ld)
	}
	sig, _ := af.PrefillSignature()
	if ld.PrefillSignature != sig || len(sig) != 64 {
		t.Errorf("prefill_signature = %q, want %q", ld.PrefillSignature, sig)
	}
	// Clock readings: load start, upload start, upload end, load end.
	if ld.LoadSeconds != 0.003 || ld.UploadSeconds != 0.001 {
		t.Errorf("load_seconds %v upload_seconds %v, want 0.003 and 0.001", ld.LoadSeconds, ld.UploadSeconds)
	}
	if ld.DeviceObjectCount != textTensors || ld.HostObjectCount != int64(len(af.ResourceObjects())) || ld.HostObjectCount == 0 ||
		ld.ArtifactBytesRead != textBytes || ld.PeakStagingBytes != 0 || ld.HostToDeviceBytes != run.Memory.Weights.CapacityBytes {
		t.Errorf("load counts = %+v (text tensors %d, bytes %d)", ld, textTensors, textBytes)
	}

	m := run.Memory
	if m.MaxContext != 24 || m.KVCapacityMode != "explicit" || m.KVCapacity != 64 || m.KVCapacityPageGroups != 1 ||
		m.KVCache != "bf16" || m.VisionWorkspace != nil || m.AvailableAfterWeightsBytes != fakeMem ||
		m.AvailableAfterStartupBytes != fakeMem || m.CUDAGraphAllowanceBytes != 0 || m.KVCapacityHeadroomBytes != 0 {
		t.Errorf("memory = %+v", m)
	}
	// One full-attention layer, 2 KV heads, head_dim 64, bf16: 64 tokens · 2 · 4·64.
	if m.KVPayloadBytes != 64*2*256 {
		t.Errorf("kv_payload_bytes = %d, want %d", m.KVPayloadBytes, 64*2*256)
	}
	if m.Weights.CapacityBytes <= 0 || m.Weights.UsedBytes != m.Weights.CapacityBytes || m.Sequence.UsedBytes != m.Sequence.CapacityBytes ||
		m.Workspace.UsedBytes != 0 || m.Workspace.PeakUsedBytes != 0 ||
		m.Workspace.CapacityBytes != engine.WorkspaceBytes(cfg, 24, 1) { // steps of min(chunk 1024, max ctx 24) tokens
		t.Errorf("memory arenas = %+v %+v %+v", m.Weights, m.Sequence, m.Workspace)
	}
	if m.PlannedSlackBytes != fakeMem-m.RuntimeReservationBytes {
		t.Errorf("planned slack %d, want A - reservation = %d", m.PlannedSlackBytes, fakeMem-m.RuntimeReservationBytes)
	}

	c := run.Config
	wantCfg := benchfmt.Config{MaxContext: 24, PrefillChunk: 1024, KVCache: "bf16", SpeculativeBackend: "none", DraftTokens: 0,
		ProposalHead: "full", UseCUDAGraph: false, DecodePath: "eager", DecodeGraphPrime: benchfmt.GraphPrime{},
		Repetitions: 2, Warmup: 1, CorpusPath: corpusPath, CorpusTokens: 64}
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", wantCfg) {
		t.Errorf("config = %+v\nwant     %+v", c, wantCfg)
	}

	// Reps: token counts, SPEC none, exact fake-clock timings.
	wantTimings := map[string]benchfmt.Timings{
		// pp: t0 t1 | prefill | t2 t3
		"pp16": {PrepareSeconds: 0.001, PrefillSeconds: 0.001, DecodeSeconds: 0, TotalSeconds: 0.003},
		// decoding: 8 steps of two readings each, then t3
		"tg8":      {PrepareSeconds: 0.001, PrefillSeconds: 0.001, DecodeSeconds: 0.008, TotalSeconds: 0.019},
		"pp16+tg8": {PrepareSeconds: 0.001, PrefillSeconds: 0.001, DecodeSeconds: 0.008, TotalSeconds: 0.019},
	}
	for _, l := range col.Lines {
		if l.Rep == nil {
			continue
		}
		r := l.Rep
		if r.RunID != "test-run" {
			t.Errorf("run_id %q", r.RunID)
		}
		if got, want := r.Rep.Timings, wantTimings[r.Label]; got != want {
			t.Errorf("%s rep %d timings = %+v, want %+v", r.Label, r.RepIndex, got, want)
		}
		s := r.Rep.Speculative
		if s.Backend != "none" || s.Enabled || s.Rounds != 0 || s.AcceptanceRate != nil || s.AcceptanceLength != nil || len(s.AcceptedPerPosition) != 0 || s.AcceptedPerPosition == nil {
			t.Errorf("%s spec = %+v", r.Label, s)
		}
		switch r.Kind {
		case benchfmt.KindPP:
			if r.Rep.GeneratedOutputTokens != 1 || r.Rep.DecodeOutputTokens != nil || r.Rep.DecodeEngineTokens != nil || r.RequestedOutputTokens != 1 {
				t.Errorf("pp rep tokens = %+v", r.Rep)
			}
		default:
			if r.Rep.GeneratedOutputTokens != 9 || r.RequestedOutputTokens != 9 || r.Rep.DecodeOutputTokens == nil || *r.Rep.DecodeOutputTokens != 8 ||
				r.Rep.DecodeEngineTokens == nil || *r.Rep.DecodeEngineTokens != 8 {
				t.Errorf("%s rep tokens = %+v", r.Label, r.Rep)
			}
		}
	}
	wantPeaks := map[string]int64{
		"pp16":     engine.WorkspaceBytes(cfg, 16, 1),
		"tg8":      engine.WorkspaceBytes(cfg, 1, 1),
		"pp16+tg8": engine.WorkspaceBytes(cfg, 16, 1),
	}
	for _, l := range col.Lines {
		if e := l.TestEnd; e != nil {
			if e.WorkspacePeakBytes != wantPeaks[e.Label] || e.WorkspaceAllocatorPeakBytes != e.WorkspacePeakBytes || e.WorkspacePeakBytes <= 0 {
				t.Errorf("%s peaks = %d/%d, want %d", e.Label, e.WorkspacePeakBytes, e.WorkspaceAllocatorPeakBytes, wantPeaks[e.Label])
			}
		}
	}

	// The document: nulls by kind and rates from the exact timings.
	out, warnings, err := col.Render(OutputJSON)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("render: %v %v", err, warnings)
	}
	doc, err := benchfmt.DecodeDocument(out)
	if err != nil {
		t.Fatalf("decode document: %v\n%s", err, out)
	}
	if chk := report.Check(&doc); len(chk.Mismatches) != 0 {
		t.Errorf("report.Check: %v", chk.Mismatches)
	}
	isNull := func(s benchfmt.Stat) bool { return s.Mean == nil && s.Stddev == nil }
	val := func(s benchfmt.Stat) float64 {
		if s.Mean == nil || s.Stddev == nil {
			return -1
		}
		return *s.Mean
	}
	pp, tg, pptg := doc.Tests[0], doc.Tests[1], doc.Tests[2]
	if !isNull(pp.DecodeOutputTokS) || !isNull(pp.DecodeEngineTokS) || !isNull(pp.DecodeSeconds) || val(pp.PrefillTokS) != 16000 {
		t.Errorf("pp stats: %+v", pp)
	}
	if !isNull(tg.PrefillTokS) || !isNull(tg.PrefillSeconds) || val(tg.DecodeOutputTokS) != 1000 || val(tg.DecodeEngineTokS) != 1000 {
		t.Errorf("tg stats: %+v", tg)
	}
	if val(pptg.PrefillTokS) != 16000 || val(pptg.DecodeOutputTokS) != 1000 || val(pptg.TotalSeconds) != 0.019 || len(pptg.Reps) != 2 {
		t.Errorf("pp+tg stats: %+v", pptg)
	}

	// bench | report == bench --output json: a second, streamed run through
	// the JSON lines and ninfer-report's reader gives the same bytes.
	var stream bytes.Buffer
	if _, err := Run(context.Background(), p, testEnv(), NewLineSink(&stream)); err != nil {
		t.Fatalf("streamed run: %v", err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(stream.String(), "\n"), "\n") {
		if _, err := benchfmt.ParseLineString(line); err != nil {
			t.Fatalf("stream line %d does not parse: %v", i+1, err)
		}
	}
	runs, _, err := report.Load([]string{"-"}, &stream, "")
	if err != nil {
		t.Fatal(err)
	}
	piped, err := report.Render(report.FormatJSON, runs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(piped, out) {
		t.Errorf("bench | report differs from --output json:\n%s\n---\n%s", piped, out)
	}
}

func TestRunKVDtypesAndMaxCtx(t *testing.T) {
	model := tinyModel(t)
	corpusPath := writeCorpus(t, 32, 512)
	for _, c := range []struct {
		kv, cache string
		maxCtx    int
		wantCtx   int64
		kvBytes   int64 // per token and KV head, K+V, head_dim 64
	}{
		{"int8", "int8-group64", 0, 9, 2*64 + 4},
		{"fp8", "fp8-e4m3-row256", 200, 200, 2*64 + 4},
	} {
		p := testParams(model, corpusPath)
		p.Prompts, p.Gens, p.Pairs = nil, []int{8}, nil
		p.Repetitions, p.Warmup = 1, 0
		p.KVDtype, p.MaxCtx = c.kv, c.maxCtx
		var col Collect
		if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
			t.Fatalf("%s: %v", c.kv, err)
		}
		run := col.Lines[0].Run
		pages := (c.wantCtx + 63) / 64
		if run.Config.KVCache != c.cache || run.Memory.KVCache != c.cache || run.Config.MaxContext != c.wantCtx ||
			run.Memory.MaxContext != c.wantCtx || run.Memory.KVCapacity != 64*pages || run.Memory.KVPayloadBytes != pages*64*2*c.kvBytes {
			t.Errorf("%s: config %+v memory %+v", c.kv, run.Config, run.Memory)
		}
		if n := len(col.Lines); n != 3 {
			t.Errorf("%s: %d lines, want 3", c.kv, n)
		}
	}
}

// cancelAfter cancels the run's context after n rep lines.
type cancelAfter struct {
	Collect
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Rep(r *benchfmt.RepLine) error {
	if err := c.Collect.Rep(r); err != nil {
		return err
	}
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return nil
}

func TestRunInterrupted(t *testing.T) {
	model := tinyModel(t)
	p := testParams(model, writeCorpus(t, 32, 512))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &cancelAfter{n: 3, cancel: cancel}
	_, err := Run(ctx, p, testEnv(), sink)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	var types []string
	for _, l := range sink.Lines {
		types = append(types, l.Type)
	}
	if got, want := strings.Join(types, " "), "run rep rep test_end rep"; got != want {
		t.Fatalf("lines = %s, want %s", got, want)
	}
	runs, err := sink.Runs()
	if err != nil {
		t.Fatalf("a stopped run must still aggregate: %v", err)
	}
	d := runs[0].Document
	if len(d.Tests) != 2 || len(d.Tests[1].Reps) != 1 || len(runs[0].Warnings) == 0 {
		t.Errorf("tests %d, reps of test 1 %d, warnings %v", len(d.Tests), len(d.Tests[1].Reps), runs[0].Warnings)
	}
}

func TestRunErrors(t *testing.T) {
	model := tinyModel(t)
	dir := t.TempDir()
	good := writeCorpus(t, 20, 512)
	short := writeCorpus(t, 10, 512)
	outside := filepath.Join(dir, "outside.ids")
	if err := os.WriteFile(outside, []byte("1 2 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.ids")
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		mut     func(*Params)
		wantErr string
	}{
		{"proposal head missing", func(p *Params) { p.Spec, p.DraftTokens, p.LMHeadDraft = SpecMTP, 2, true }, "draft_head"},
		{"mtp max-ctx", func(p *Params) { p.Spec, p.DraftTokens, p.MaxCtx = SpecMTP, 2, 24 }, "--max-ctx 24 is too small; pp16+tg8 needs 28"},
		{"max-ctx", func(p *Params) { p.MaxCtx = 23 }, "--max-ctx 23 is too small; pp16+tg8 needs 24"},
		{"prompt beyond corpus", func(p *Params) { p.Corpus = short }, "pp16 exceeds the token-id corpus"},
		{"missing corpus", func(p *Params) { p.Corpus = filepath.Join(dir, "nope.ids") }, "failed to open corpus ids file: " + filepath.Join(dir, "nope.ids")},
		{"empty corpus", func(p *Params) { p.Corpus = empty }, "corpus ids file is empty: " + empty},
		{"id outside vocab", func(p *Params) { p.Corpus = outside }, "outside.ids: line 1: token 3: id 512 is outside the vocabulary [0,512)"},
		{"max-ctx over the model", func(p *Params) { p.MaxCtx = 100_000_000 }, "--max-ctx 100000000 exceeds the model's max_position_embeddings 4096"},
		{"missing weights", func(p *Params) { p.Weights = filepath.Join(dir, "none.ninfer") }, "--weights " + filepath.Join(dir, "none.ninfer")},
	}
	if !backend.CUDABuilt { // with -tags cuda/cudasim, --backend cuda opens a device
		cases = append(cases, struct {
			name    string
			mut     func(*Params)
			wantErr string
		}{"cuda", func(p *Params) { p.Backend = "cuda" }, "no CUDA backend"})
	}
	t.Setenv("NINFER_SOURCE_DIR", "")
	for _, c := range cases {
		p := testParams(model, good)
		c.mut(&p)
		var col Collect
		_, err := Run(context.Background(), p, testEnv(), &col)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		}
		if len(col.Lines) != 0 {
			t.Errorf("%s: %d lines written before the error", c.name, len(col.Lines))
		}
	}
}

// TestRunRandomCorpus: without --corpus (the reference's default path,
// absent here) the run uses the seeded pseudo-random corpus over the
// model's vocabulary, says so in a note and records it as
// config.corpus_path; the prompts are corpus.Random's ids.
func TestRunRandomCorpus(t *testing.T) {
	model := tinyModel(t)
	t.Setenv("NINFER_SOURCE_DIR", "")
	p := testParams(model, DefaultCorpus)
	p.Prompts, p.Gens, p.Pairs, p.Repetitions, p.Warmup = []int{8}, []int{4}, nil, 1, 0
	var col Collect
	res, err := Run(context.Background(), p, testEnv(), &col)
	if err != nil {
		t.Fatal(err)
	}
	want := corpus.RandomName(512, 4096, corpus.RandomSeed)
	named := 0
	for _, n := range res.Notes {
		if strings.Contains(n, "pseudo-random") && strings.Contains(n, want) {
			named++
		}
	}
	if named != 1 {
		t.Errorf("notes %q, want one naming the pseudo-random corpus %s", res.Notes, want)
	}
	var run *benchfmt.RunLine
	if len(col.Lines) > 0 {
		run = col.Lines[0].Run
	}
	if run == nil || run.Config.CorpusPath != want || run.Config.CorpusTokens != 4096 {
		t.Fatalf("run line %+v, want corpus_path %s of 4096 tokens", run, want)
	}
	if got := RandomCorpusTokens(ExpandTests([]int{8000}, nil, nil)); got != 8000 {
		t.Errorf("a pp8000 test gets a %d-token random corpus, want 8000", got)
	}
}

func TestProgressOutput(t *testing.T) {
	model := tinyModel(t)
	p := testParams(model, writeCorpus(t, 32, 512))
	p.Prompts, p.Gens, p.Pairs, p.Repetitions, p.Warmup = []int{8}, nil, nil, 2, 1
	var progressBuf bytes.Buffer
	env := testEnv()
	env.Progress = &progressBuf
	if _, err := Run(context.Background(), p, env, &Collect{}); err != nil {
		t.Fatal(err)
	}
	if progressBuf.Len() != 0 {
		t.Errorf("progress drawn on a non-terminal: %q", progressBuf.String())
	}
	env = testEnv()
	env.Progress, env.ForceProgress = &progressBuf, true
	if _, err := Run(context.Background(), p, env, &Collect{}); err != nil {
		t.Fatal(err)
	}
	got := progressBuf.String()
	for _, want := range []string{"[1/1] pp8 warmup 1/1  - tok/s", "[1/1] pp8 rep 2/2  8000.0 tok/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress %q lacks %q", got, want)
		}
	}
	if !strings.HasSuffix(got, "\n") {
		t.Errorf("progress does not end its line: %q", got)
	}
}

func TestRunSpeculative(t *testing.T) {
	model := tinyModel(t)
	p := testParams(model, writeCorpus(t, 64, 512))
	p.Gens = []int{9}
	p.Spec, p.DraftTokens = SpecMTP, 2
	var col Collect
	if _, err := Run(context.Background(), p, testEnv(), &col); err != nil {
		t.Fatalf("Run --spec mtp: %v", err)
	}
	run := col.Lines[0].Run
	c := run.Config
	if c.SpeculativeBackend != "mtp" || c.DraftTokens != 2 || c.ProposalHead != "full" || c.DecodePath != "mtp_eager" ||
		c.UseCUDAGraph || c.DecodeGraphPrime.Primed || c.MaxContext != 16+8+4 { // pp16+tg8 + 2k
		t.Errorf("config = %+v", c)
	}
	// The MTP head is bound too: more objects and bytes than the text model.
	var plain Collect
	pp := p
	pp.Spec, pp.DraftTokens = SpecNone, 0
	if _, err := Run(context.Background(), pp, testEnv(), &plain); err != nil {
		t.Fatal(err)
	}
	pl := plain.Lines[0].Run
	if run.Load.DeviceObjectCount <= pl.Load.DeviceObjectCount || run.Load.ArtifactBytesRead <= pl.Load.ArtifactBytesRead ||
		run.Memory.Weights.CapacityBytes <= pl.Memory.Weights.CapacityBytes || run.Memory.Sequence.CapacityBytes <= pl.Memory.Sequence.CapacityBytes ||
		run.Memory.KVPayloadBytes <= pl.Memory.KVPayloadBytes {
		t.Errorf("spec load %+v memory %+v\nplain load %+v memory %+v", run.Load, run.Memory, pl.Load, pl.Memory)
	}
	for _, l := range col.Lines {
		r := l.Rep
		if r == nil {
			continue
		}
		s := r.Rep.Speculative
		if s.Backend != "mtp" || !s.Enabled || s.DraftWindow != 2 || len(s.AcceptedPerPosition) != 2 {
			t.Errorf("%s spec = %+v", r.Label, s)
			continue
		}
		if sum := s.AcceptedPerPosition[0] + s.AcceptedPerPosition[1]; sum != s.AcceptedTokens || s.AcceptedTokens > s.DraftedTokens {
			t.Errorf("%s: per position %v, accepted %d, drafted %d", r.Label, s.AcceptedPerPosition, s.AcceptedTokens, s.DraftedTokens)
		}
		if r.Kind == benchfmt.KindPP {
			if s.Rounds != 0 || s.DraftedTokens != 0 || s.AcceptanceRate != nil || s.AcceptanceLength != nil || r.Rep.DecodeEngineTokens != nil {
				t.Errorf("pp rep spec = %+v", s)
			}
			continue
		}
		// Every decode token is committed by a round (1 + accepted) or a
		// fallback step: engine tokens = G, and the clamp drafts at most
		// G−1 tokens beyond the first.
		G := r.NGen
		if *r.Rep.DecodeEngineTokens != G || *r.Rep.DecodeOutputTokens != G || r.Rep.GeneratedOutputTokens != G+1 ||
			s.Rounds+s.AcceptedTokens+s.FallbackSteps != G || s.Rounds == 0 || s.DraftedTokens > 2*s.Rounds {
			t.Errorf("%s rep = %+v spec %+v", r.Label, r.Rep, s)
		}
		if s.AcceptanceRate == nil || *s.AcceptanceRate != float64(s.AcceptedTokens)/float64(s.DraftedTokens) ||
			s.AcceptanceLength == nil || *s.AcceptanceLength != 1+float64(s.AcceptedTokens)/float64(s.Rounds) {
			t.Errorf("%s ratios = %v %v", r.Label, s.AcceptanceRate, s.AcceptanceLength)
		}
		if r.Rep.Timings.DecodeSeconds <= 0 || r.Rep.Timings.PrefillSeconds <= 0 {
			t.Errorf("%s timings = %+v", r.Label, r.Rep.Timings)
		}
	}
	doc := checkedDocument(t, &col)
	if s := doc.Tests[1].Speculative; s.Backend != "mtp" || s.Rounds == 0 || s.AcceptanceLength == nil {
		t.Errorf("tg test spec = %+v", s)
	}
}

func TestRunProposalHead(t *testing.T) {
	model := draftModel(t)
	p := testParams(model, writeCorpus(t, 32, 512))
	p.Prompts, p.Gens, p.Pairs, p.Repetitions, p.Warmup = nil, []int{6}, nil, 1, 0
	p.Spec, p.DraftTokens = SpecMTP, 1
	var full Collect
	if _, err := Run(context.Background(), p, testEnv(), &full); err != nil {
		t.Fatal(err)
	}
	p.LMHeadDraft = true
	var opt Collect
	if _, err := Run(context.Background(), p, testEnv(), &opt); err != nil {
		t.Fatalf("--lm-head-draft: %v", err)
	}
	a, b := full.Lines[0].Run, opt.Lines[0].Run
	if a.Config.ProposalHead != "full" || b.Config.ProposalHead != "optimized" {
		t.Errorf("proposal heads %q %q", a.Config.ProposalHead, b.Config.ProposalHead)
	}
	// The proposal head (text/draft_head and its token ids) is bound only
	// with --lm-head-draft.
	if b.Load.DeviceObjectCount != a.Load.DeviceObjectCount+2 || b.Load.ArtifactBytesRead <= a.Load.ArtifactBytesRead {
		t.Errorf("objects %d → %d, bytes %d → %d", a.Load.DeviceObjectCount, b.Load.DeviceObjectCount, a.Load.ArtifactBytesRead, b.Load.ArtifactBytesRead)
	}
	r := opt.Lines[1].Rep
	if s := r.Rep.Speculative; s.DraftWindow != 1 || s.Rounds+s.AcceptedTokens+s.FallbackSteps != 6 {
		t.Errorf("rep spec = %+v", s)
	}
}
