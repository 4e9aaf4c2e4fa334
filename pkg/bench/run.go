package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/corpus"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/spec"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// ErrInterrupted is returned by Run when its context was cancelled (Ctrl-C):
// the run stopped after the rep in progress; every line produced before is
// valid and has been handed to the sink.
var ErrInterrupted = errors.New("interrupted")

// Env holds the run's dependencies on the outside world; tests replace them
// to make documents reproducible. Zero fields take the real ones.
type Env struct {
	Now          func() time.Time      // wall clock (default time.Now)
	MemAvailable func() (int64, error) // host memory budget (default /proc/meminfo MemAvailable)
	CPUName      func() string         // default: /proc/cpuinfo "model name"
	RunID        string                // default benchfmt.NewRunID()
	Command      string                // the document's command: argv joined by single spaces
	// Progress receives the status line; it draws only on a terminal unless
	// ForceProgress. nil = none.
	Progress      io.Writer
	ForceProgress bool
	// Verified: the artifact passed --verify before the run (said in the
	// message of a NonFiniteError).
	Verified bool
}

func (e Env) withDefaults() Env {
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.MemAvailable == nil {
		e.MemAvailable = MemAvailable
	}
	if e.CPUName == nil {
		e.CPUName = CPUName
	}
	if e.RunID == "" {
		e.RunID = benchfmt.NewRunID()
	}
	return e
}

// Result summarizes a finished (or interrupted) run.
type Result struct {
	RunID string
	Tests []Test
	// Notes are remarks for stderr: why --backend auto chose the CPU. (The
	// memory object is the plan's, and an engine whose arenas differ from
	// it is an error, with --spec mtp too.)
	Notes []string
}

// ResolveCorpusPath returns path, or NINFER_SOURCE_DIR/path when path does
// not exist and that variable is set (the reference's fallback).
func ResolveCorpusPath(path string) string {
	if _, err := os.Stat(path); err == nil || filepath.IsAbs(path) {
		return path
	}
	if dir := os.Getenv("NINFER_SOURCE_DIR"); dir != "" {
		if alt := filepath.Join(dir, path); fileExists(alt) {
			return alt
		}
	}
	return path
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// RandomCorpusTokens is the size of the pseudo-random fallback corpus for
// tests: 4096 ids, or the longest prompt when that is longer.
func RandomCorpusTokens(tests []Test) int {
	n := 4096
	for _, t := range tests {
		if t.HasPrefill() || t.NDepth > 0 {
			n = max(n, t.NDepth+t.PromptTokens())
		}
	}
	return n
}

// session is a loaded model ready to run reps: the artifact, the backend,
// the engine (and MTP head), one sequence, and the run line describing them.
type session struct {
	cfg     qwen35.Config
	eng     *engine.Engine
	reps    *repRunner
	run     *benchfmt.RunLine
	notes   []string
	closers []func()
}

func (s *session) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// open loads everything a run needs, in the reference's order: the weights
// and corpus (with the corpus checks), the backend, max_context, the engine
// (timed as upload), the sequence, and then the load and memory records.
func open(p Params, env Env, tests []Test) (s *session, err error) {
	s = &session{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	specOn := p.Spec == SpecMTP
	loadStart := env.Now()
	w, err := loader.OpenWeights(p.Weights)
	if err != nil {
		return s, fmt.Errorf("--weights %s: %w", termsafe.Path(p.Weights), err)
	}
	s.closers = append(s.closers, func() { w.Close() })
	s.cfg = w.Config()
	if err := CheckDepthModelContext(tests, p.Spec, p.DraftTokens, p.MaxCtx, s.cfg.MaxPositionEmbeddings); err != nil {
		return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
	}

	var ids []int32
	corpusPath := ResolveCorpusPath(p.Corpus)
	if p.Corpus == DefaultCorpus && !fileExists(corpusPath) {
		// The reference's default path exists only inside its source tree:
		// without --corpus, a seeded pseudo-random corpus over the vocabulary
		// (as llama-bench does), named in config.corpus_path.
		n := RandomCorpusTokens(tests)
		ids = corpus.Random(s.cfg.VocabSize, n, corpus.RandomSeed)
		p.Corpus = corpus.RandomName(s.cfg.VocabSize, n, corpus.RandomSeed)
		s.notes = append(s.notes, fmt.Sprintf("no --corpus (and no %s): prompts are %d seeded pseudo-random token ids over the %d-token vocabulary (config.corpus_path %q); speed is real, MTP acceptance on random text is not meaningful — give --corpus PATH for real text",
			DefaultCorpus, n, s.cfg.VocabSize, p.Corpus))
	} else if ids, err = corpus.ReadFile(corpusPath, s.cfg.VocabSize); err != nil {
		return s, err
	}
	if err := CheckCorpus(tests, len(ids)); err != nil {
		return s, err
	}

	be, beName, note, err := loader.NewBackend(p.Backend, p.Threads)
	if err != nil {
		return s, err
	}
	if err := backend.SetActivations(be, p.Activations); err != nil {
		be.Close()
		return s, err
	}
	if note != "" {
		s.notes = append(s.notes, note)
	}
	s.closers = append(s.closers, func() { be.Close() })
	// Decode graphs need a backend that captures them (CUDA): the engine
	// replays decode steps and MTP rounds as graphs unless --no-cuda-graph.
	graph := beName == loader.BackendCUDA && !p.NoCUDAGraph && backend.CUDAGraphs && backend.CapturesGraphs(be)

	need := RequiredContext(tests, p.Spec, p.DraftTokens, graph)
	maxCtx, err := ResolveMaxContext(p.MaxCtx, need)
	if err != nil {
		return s, err
	}
	if err := CheckModelContext(maxCtx, p.MaxCtx, need, s.cfg.MaxPositionEmbeddings); err != nil {
		return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
	}

	opts := engine.Options{MaxContext: maxCtx, PrefillChunk: p.PrefillChunk, KVDtype: p.KVDtype, Threads: be.Threads(), StateSlots: 1,
		CUDAGraph: graph, Progress: env.Progress}
	if specOn {
		// A verify pass scores k+1 tokens, each with its own GDN state slot.
		opts.StateSlots, opts.LogitsRows = p.DraftTokens+1, p.DraftTokens+1
	}
	uploadStart := env.Now()
	if s.eng, err = engine.New(w, be, opts); err != nil {
		return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
	}
	s.closers = append(s.closers, s.eng.Close)
	var mtp *engine.MTP
	if specOn {
		if mtp, err = s.eng.LoadMTP(w, engine.MTPOptions{ProposalHead: p.LMHeadDraft}); err != nil {
			return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
		}
		s.closers = append(s.closers, mtp.Close)
	}
	uploadEnd := env.Now()
	afterWeights, err := env.MemAvailable()
	if err != nil {
		return s, err
	}

	s.reps = &repRunner{now: env.Now, corpus: ids}
	var seqBytes int64
	if specOn {
		mseq, err := mtp.NewMTPSequence()
		if err != nil {
			return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
		}
		s.closers = append(s.closers, mseq.Close)
		// On a backend that counts its ops, the decoder's clock also reads
		// the counters and the target and drafter tell it the lap's phase
		// (spec_counts, spectiming_counts.go); elsewhere it is unchanged.
		var target spec.Target = mseq
		var drafter spec.Drafter = mseq
		o := spec.Options{K: p.DraftTokens, IgnoreEOS: true, Proposal: p.LMHeadDraft}
		if sc := newSpecCounter(be); sc != nil {
			target, drafter, o.Now = countedTarget{mseq, sc}, countedDrafter{mseq, sc}, sc.now
			s.reps.counts = sc
		}
		dec, err := spec.NewDecoder(target, drafter, o)
		if err != nil {
			return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
		}
		s.reps.mseq, s.reps.dec, seqBytes = mseq, dec, mseq.Bytes()
	} else {
		seq, err := s.eng.NewSequence()
		if err != nil {
			return s, fmt.Errorf("%s: %w", termsafe.Path(p.Weights), err)
		}
		s.closers = append(s.closers, seq.Close)
		s.reps.seq, seqBytes = seq, seq.Bytes()
	}
	loadEnd := env.Now()
	afterStartup, err := env.MemAvailable()
	if err != nil {
		return s, err
	}

	s.run, err = runLine(p, env, w, engineArenas(s.eng, mtp, seqBytes), runFacts{
		backend: beName, threads: be.Threads(), graph: graph, maxCtx: maxCtx, corpusTokens: len(ids),
		loadSeconds: loadEnd.Sub(loadStart).Seconds(), uploadSeconds: uploadEnd.Sub(uploadStart).Seconds(),
		afterWeights: afterWeights, afterStartup: afterStartup, isa: isaOf(be), device: deviceOf(be),
		activations: backend.ActivationsOf(be), int8Formats: backend.Int8Formats(be, w.File().Formats()),
	})
	return s, err
}

// Run executes the benchmark described by p (already validated) and sends
// the run line, one rep line per measured rep and one test_end line per
// test to sink. Cancelling ctx stops the run after the current rep and
// returns ErrInterrupted.
func Run(ctx context.Context, p Params, env Env, sink Sink) (Result, error) {
	env = env.withDefaults()
	tests := WithDepths(ExpandTests(p.Prompts, p.Gens, p.Pairs), p.Depths)
	res := Result{RunID: env.RunID, Tests: tests}
	s, err := open(p, env, tests)
	res.Notes = append(res.Notes, s.notes...)
	if err != nil {
		return res, err
	}
	defer s.close()
	if err := sink.Run(s.run); err != nil {
		return res, err
	}
	if prime := s.run.Config.DecodeGraphPrime; prime.Primed {
		// The untimed, unreported decode-graph prime. Unreachable on the
		// CPU backend, which has no graphs.
		if _, _, err := s.reps.rep(newTest(benchfmt.KindTG, 0, int(prime.OutputTokens)-1)); err != nil {
			return res, fmt.Errorf("decode graph prime: %w", err)
		}
	}
	prog := newProgress(env.Progress, env.ForceProgress)
	defer prog.done()
	for ti, t := range tests {
		if err := runTest(ctx, p, env, s, ti, t, sink, prog, len(tests)); err != nil {
			return res, err
		}
	}
	return res, nil
}

// runTest runs the warmups and measured reps of test ti and writes its rep
// and test_end lines.
func runTest(ctx context.Context, p Params, env Env, s *session, ti int, t Test, sink Sink, prog *progress, nTests int) error {
	peaks, hasPeaks := any(s.eng).(interface {
		ResetMemoryPeaks()
		WorkspacePeakBytes() int64
	})
	if hasPeaks {
		peaks.ResetMemoryPeaks()
	}
	var rates []float64
	for i := 0; i < p.Warmup+p.Repetitions; i++ {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		warm := i < p.Warmup
		if warm {
			prog.show(ProgressLine(ti, nTests, t.DisplayLabel(), i, p.Warmup, true, rates))
		} else {
			prog.show(ProgressLine(ti, nTests, t.DisplayLabel(), i-p.Warmup, p.Repetitions, false, rates))
		}
		s.reps.last = nil
		tm, sp, err := s.reps.rep(t)
		if err != nil && s.reps.dec != nil && strings.Contains(err.Error(), specNoFinite) {
			return s.reps.diagnose(t, p.Weights, env.Verified, err.Error())
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.DisplayLabel(), err)
		}
		if warm {
			continue
		}
		if i == p.Warmup { // the first measured rep: are the logits finite?
			if err := s.reps.checkFinite(t, p.Weights, env.Verified); err != nil {
				return err
			}
		}
		line := &benchfmt.RepLine{RunID: env.RunID, TestIndex: int64(ti), Label: t.Label, Kind: t.Kind,
			NPrompt: int64(t.NPrompt), NGen: int64(t.NGen), RequestedOutputTokens: int64(t.RequestedOutputTokens()),
			NDepth: int64(t.NDepth), RepIndex: int64(i - p.Warmup), Rep: benchfmt.NewRep(t.Kind, int64(t.NGen), tm, sp)}
		if s.reps.dec != nil { // the MTP round breakdown (spec_timing)
			line.Rep.SpecTiming = specTiming(t, s.reps.dec.Breakdown(), p.DraftTokens, s.reps.probeSteps, s.reps.probe, line.Rep)
			if s.reps.counts != nil { // and its work counts (spec_counts)
				line.Rep.SpecCounts = s.reps.counts.counts(t, s.reps.dec.Breakdown(), p.DraftTokens, line.Rep)
			}
		}
		if err := sink.Rep(line); err != nil {
			return err
		}
		if rate, ok := progressRate(t, tm); ok {
			rates = append(rates, rate)
		}
	}
	logical := workspacePeak(s.cfg, s.eng.Options(), t)
	alloc := logical
	if hasPeaks {
		alloc = peaks.WorkspacePeakBytes()
	}
	if err := sink.TestEnd(&benchfmt.TestEndLine{RunID: env.RunID, TestIndex: int64(ti), Label: t.Label,
		WorkspacePeakBytes: logical, WorkspaceAllocatorPeakBytes: alloc}); err != nil {
		return err
	}
	prog.show(ProgressLine(ti, nTests, t.DisplayLabel(), p.Repetitions-1, p.Repetitions, false, rates))
	return nil
}

func anyDecode(tests []Test) bool {
	for _, t := range tests {
		if t.HasDecode() {
			return true
		}
	}
	return false
}

func progressRate(t Test, tm benchfmt.Timings) (float64, bool) {
	if t.Kind == benchfmt.KindPP {
		return float64(t.NPrompt) / tm.PrefillSeconds, tm.PrefillSeconds > 0
	}
	return float64(t.NGen) / tm.DecodeSeconds, tm.DecodeSeconds > 0
}

// workspacePeak is the logical peak of the target's workspace in a test:
// the engine's dry run (engine.WorkspaceBytes) of its largest step, the
// first prefill chunk or a decode step (one token, or a verify pass of
// StateSlots = k+1 tokens with speculation). With --spec mtp the MTP step
// runs in the same arena (layout.MTPWorkspace), so the allocator peak also
// covers its phases; this logical figure stays the target's.
func workspacePeak(c qwen35.Config, o engine.Options, t Test) int64 {
	peak := engine.WorkspaceBytes(c, min(o.PrefillChunk, t.PromptTokens()), o.LogitsRows)
	if t.HasDecode() {
		peak = max(peak, engine.WorkspaceBytes(c, max(1, o.StateSlots), o.LogitsRows))
	}
	return peak
}

// arenas are the engine's real allocations, as reported in memory.
type arenas struct {
	weights, workspace, sequence int64
}

// engineArenas sums the target's and the MTP head's arenas as the memory
// object reports them (pkg/plan does the same): weights (text + mtp.weights),
// the workspace (one arena: the MTP step runs in the target's workspace,
// which LoadMTP sizes for both) and the sequence (target sequence +
// mtp.sequence: seqBytes is MTPSequence.Bytes with --spec mtp).
func engineArenas(eng *engine.Engine, mtp *engine.MTP, seqBytes int64) arenas {
	a := eng.Arenas()
	out := arenas{weights: a["weights"], workspace: a["workspace"], sequence: seqBytes}
	if mtp != nil {
		out.weights += mtp.Arenas()["mtp.weights"]
	}
	return out
}

func isaOf(be any) string {
	if x, ok := be.(interface{ ISA() string }); ok {
		return x.ISA()
	}
	return ""
}

// repRunner runs single reps on one sequence: plain greedy decoding on seq,
// or MTP speculative decoding with dec on mseq.
type repRunner struct {
	now    func() time.Time
	corpus []int32
	prompt []int32
	seq    *engine.Sequence
	mseq   *engine.MTPSequence
	dec    *spec.Decoder
	// The plain probe of the last spec rep (spectiming.go).
	probeSteps int
	probe      time.Duration
	// counts are the op counts of the spec reps (spec_counts), nil on a
	// backend that does not count its ops.
	counts *specCounter
	// last is the last logits row of the last rep (plain reps and the
	// spec reps' plain probe): checkFinite looks at it (finite.go).
	last []float32
}

// rep runs one repetition of t on a fresh (reset, untimed) sequence: the
// prompt prepared from the corpus (timed as prepare), then generation of
// exactly requested_output_tokens with no stop tokens. total = prepare +
// the wall time from the start of prefill to the last token.
func (r *repRunner) rep(t Test) (benchfmt.Timings, benchfmt.Spec, error) {
	if r.dec != nil {
		return r.specRep(t)
	}
	if err := r.seq.Reset(); err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	if err := r.fillDepth(t, func(ids []int32) error { _, err := r.seq.Prefill(ids, false); return err }); err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	t0 := r.now()
	r.prompt = append(r.prompt[:0], r.corpus[t.NDepth:t.NDepth+t.PromptTokens()]...)
	t1 := r.now()
	// prefill = the prompt's prefill plus the greedy first token.
	logits, err := r.seq.Prefill(r.prompt, false)
	if err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	tok := argmax(logits)
	t2 := r.now()
	r.last = logits
	produced := 1
	// decode = Σ over the G steps of one engine step plus the greedy argmax.
	var decode time.Duration
	if t.HasDecode() {
		for i := 0; i < t.NGen; i++ {
			a := r.now()
			logits, err := r.seq.Decode(tok)
			if err != nil {
				return benchfmt.Timings{}, benchfmt.Spec{}, fmt.Errorf("decode step %d: %w", i, err)
			}
			tok = argmax(logits)
			decode += r.now().Sub(a)
			produced++
			r.last = logits
		}
	}
	t3 := r.now()
	if want := t.RequestedOutputTokens(); produced != want {
		return benchfmt.Timings{}, benchfmt.Spec{}, fmt.Errorf("generated %d output tokens, requested %d", produced, want)
	}
	prepare := t1.Sub(t0)
	return benchfmt.Timings{
		PrepareSeconds: prepare.Seconds(),
		PrefillSeconds: t2.Sub(t1).Seconds(),
		DecodeSeconds:  decode.Seconds(),
		TotalSeconds:   (prepare + t3.Sub(t1)).Seconds(),
	}, benchfmt.SpecNone(), nil
}

// specRep runs one rep with the speculative decoder. prefill and decode are
// the decoder's own split (spec.Timing: prefill = target and MTP prefill,
// the first token and the first drafts; decode = every round and fallback
// step after that, host bookkeeping included).
func (r *repRunner) specRep(t Test) (benchfmt.Timings, benchfmt.Spec, error) {
	var err error
	if r.probeSteps, r.probe, err = r.plainProbe(t); err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	if err := r.mseq.Reset(); err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	if err := r.fillDepth(t, func(ids []int32) error { _, err := r.mseq.Prefill(ids); return err }); err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	t0 := r.now()
	r.prompt = append(r.prompt[:0], r.corpus[t.NDepth:t.NDepth+t.PromptTokens()]...)
	t1 := r.now()
	want := t.RequestedOutputTokens()
	if r.counts != nil {
		r.counts.begin()
	}
	out, st, err := r.dec.Generate(r.prompt, want, nil)
	if err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	t3 := r.now()
	if len(out) != want {
		return benchfmt.Timings{}, benchfmt.Spec{}, fmt.Errorf("generated %d output tokens, requested %d", len(out), want)
	}
	if err := st.Check(); err != nil {
		return benchfmt.Timings{}, benchfmt.Spec{}, err
	}
	tm := r.dec.Timing()
	prepare := t1.Sub(t0)
	sp := benchfmt.Spec{Backend: st.Backend, Enabled: st.Enabled, DraftWindow: int64(st.DraftWindow), Rounds: int64(st.Rounds),
		DraftedTokens: int64(st.DraftedTokens), AcceptedTokens: int64(st.AcceptedTokens), FallbackSteps: int64(st.FallbackSteps),
		AcceptedPerPosition: make([]int64, len(st.AcceptedPerPosition))}
	for i, v := range st.AcceptedPerPosition {
		sp.AcceptedPerPosition[i] = int64(v)
	}
	if t.HasDecode() && sp.Rounds+sp.AcceptedTokens+sp.FallbackSteps != int64(t.NGen) {
		return benchfmt.Timings{}, benchfmt.Spec{}, fmt.Errorf("speculative decoder committed %d decode tokens (rounds %d + accepted %d + fallback %d), want %d",
			sp.Rounds+sp.AcceptedTokens+sp.FallbackSteps, sp.Rounds, sp.AcceptedTokens, sp.FallbackSteps, t.NGen)
	}
	return benchfmt.Timings{
		PrepareSeconds: prepare.Seconds(),
		PrefillSeconds: tm.Prefill.Seconds(),
		DecodeSeconds:  tm.Decode.Seconds(),
		TotalSeconds:   (prepare + t3.Sub(t1)).Seconds(),
	}, sp, nil
}

// argmax is greedy sampling on the host: the first index of the largest
// logit (NaN never wins).
func argmax(x []float32) int32 {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range x {
		if v > best {
			best, bi = v, i
		}
	}
	return int32(bi)
}
