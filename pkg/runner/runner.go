// Package runner is the generation loop behind ninfer-run: it loads a
// .ninfer artifact on a backend, turns prompts (text, chat turns or token
// ids) into ids, prefills them in chunks, samples up to MaxNew tokens with
// pkg/sample, stops at EOS, on the token budget or when the context is
// cancelled, and streams every token to a Sink.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/chat"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/inspect"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/progress"
	"github.com/ninfer/ninfer/pkg/sample"
	"github.com/ninfer/ninfer/pkg/spec"
	"github.com/ninfer/ninfer/pkg/termsafe"
	"github.com/ninfer/ninfer/pkg/tokenizer"
)

// Finish reasons.
const (
	FinishEOS         = "eos"         // an EOS id was generated (it is the last id)
	FinishLength      = "length"      // MaxNew tokens were generated
	FinishInterrupted = "interrupted" // the context was cancelled
)

// KV cache dtypes accepted by Options.KVDtype ("fp32" is the exact debug path).
var KVDtypes = []string{"bf16", "int8", "fp8", "fp32"}

// Options configure a Runner.
type Options struct {
	Weights      string // .ninfer artifact path
	Backend      string // auto, cpu or cuda
	Threads      int    // backend threads; 0 = all cores
	MaxContext   int    // tokens per sequence; 0 = the engine default
	PrefillChunk int    // tokens per prefill step, a multiple of 128; 0 = 1024
	KVDtype      string // bf16 (default), int8, fp8 or fp32
	Activations  string // CPU matmul activations: auto, int8 or fp32 ("" = fp32; backend.ParseActivations)
	MaxNew       int    // tokens to generate per prompt (≥ 0)
	Sampling     sample.Config
	IgnoreEOS    bool
	// EOSIDs overrides the stop ids (nil: generation_config.json's
	// eos_token_id, else the model config's eos ids, else the tokenizer's).
	EOSIDs []int32
	// Chat renders text prompts as one user turn of the Qwen chat format
	// (with an optional system turn and the generation prompt).
	Chat   bool
	System string
	// NoThink is enable_thinking=false: the empty think block is appended
	// after the assistant header.
	NoThink bool
	// Spec selects speculative decoding: "" or "none", or "mtp" (the
	// model's MTP head drafts DraftTokens tokens per round, 1..5; 0 = 2).
	// LMHeadDraft drafts with the reduced-vocabulary proposal head.
	Spec        string
	DraftTokens int
	LMHeadDraft bool
	// NoCUDAGraph decodes eagerly on the CUDA backend (by default its
	// decode steps and MTP rounds replay as CUDA graphs; the tokens are
	// the same either way). The CPU backend never uses graphs.
	NoCUDAGraph bool
	// Verify re-hashes every payload against the artifact's directory and
	// checks every tensor's values before the weights are used (what
	// ninfer-inspect --verify does; slow on big files). Without it a run
	// never reads the hashes: the load stays a mapping.
	Verify bool
	// Log receives load progress and memory lines; nil = silent.
	Log io.Writer
}

// Input is one prompt: token ids when IDs is non-nil, else Text.
type Input struct {
	Text   string
	IDs    []int32
	Source string // where it came from, for error messages (e.g. "stdin:3")
}

// Timings are the per-prompt measurements. The first generated token comes
// from the prefill logits, so decode throughput counts the Decode steps
// (generated tokens − 1) over the time from the first to the last token.
type Timings struct {
	PrefillSeconds  float64 `json:"prefill_s"`
	DecodeSeconds   float64 `json:"decode_s"`
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	PrefillTokPerS  float64 `json:"prefill_tok_s"`
	DecodeTokPerS   float64 `json:"decode_tok_s"`
}

// Result is one prompt's outcome (the --json line).
type Result struct {
	Prompt       string     `json:"prompt,omitempty"` // the text prompt as given (before chat rendering)
	PromptIDs    []int32    `json:"prompt_ids"`
	Text         string     `json:"text"` // generated text, EOS not rendered
	IDs          []int32    `json:"ids"`  // generated ids, the EOS id included
	FinishReason string     `json:"finish_reason"`
	Timings      Timings    `json:"timings"`
	Spec         *SpecStats `json:"speculative,omitempty"` // with --spec mtp
}

// SpecStats are the speculative-decoding counters of one prompt.
type SpecStats struct {
	Backend             string   `json:"backend"`
	DraftTokens         int      `json:"draft_tokens"`
	Rounds              int      `json:"rounds"`
	DraftedTokens       int      `json:"drafted_tokens"`
	AcceptedTokens      int      `json:"accepted_tokens"`
	FallbackSteps       int      `json:"fallback_steps"`
	AcceptedPerPosition []int    `json:"accepted_per_position"`
	AcceptanceRate      *float64 `json:"acceptance_rate"`   // null when nothing was drafted
	AcceptanceLength    *float64 `json:"acceptance_length"` // 1 + accepted/rounds; null without rounds
}

// Sink receives a prompt's output as it is generated.
type Sink interface {
	// Token is called for every generated id with the text that became
	// complete (only whole UTF-8 characters; "" for an EOS id or while a
	// character is incomplete).
	Token(id int32, text string) error
	// End is called once per prompt that started generating, also when it
	// was interrupted, with the stream decoder's remaining text.
	End(tail string, res *Result) error
}

// Runner owns a loaded model, one sequence and the tokenizer. It runs one
// prompt at a time.
type Runner struct {
	opts    Options
	w       *loader.Weights
	be      backend.Backend
	beName  string
	eng     *engine.Engine
	seq     *engine.Sequence
	mtp     *engine.MTP         // with Spec "mtp"
	mseq    *engine.MTPSequence // owns seq with Spec "mtp"
	dec     *spec.Decoder
	tok     *tokenizer.Tokenizer // nil when the artifact has no tokenizer.json
	eos     map[int32]bool
	sampler *sample.Sampler
	// dsm samples on the device (CUDA, non-speculative): each decode step
	// downloads the token id instead of the logits row. nil = host sampler.
	dsm   *engine.DeviceSampler
	vocab int
}

// Open loads the artifact and prepares the engine and one sequence.
func Open(o Options) (r *Runner, err error) {
	if o.Spec == spec.BackendMTP && o.DraftTokens == 0 {
		o.DraftTokens = DefaultDraftTokens
	}
	if err := spec.ValidateFlags(o.Spec, o.DraftTokens); err != nil {
		return nil, err
	}
	specOn := o.Spec == spec.BackendMTP
	if o.LMHeadDraft && !specOn {
		return nil, fmt.Errorf("--lm-head-draft needs --spec mtp")
	}
	if o.MaxNew < 0 {
		return nil, fmt.Errorf("--max-new %d must be ≥ 0", o.MaxNew)
	}
	if o.PrefillChunk != 0 && (o.PrefillChunk < 128 || o.PrefillChunk%128 != 0) {
		return nil, fmt.Errorf("--prefill-chunk %d must be a positive multiple of 128", o.PrefillChunk)
	}
	sampler, err := sample.New(o.Sampling)
	if err != nil {
		return nil, err
	}
	logf := func(f string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, f+"\n", a...)
		}
	}
	start := time.Now()
	logf("loading %s", termsafe.Path(o.Weights))
	r = &Runner{opts: o, sampler: sampler}
	defer func() {
		if err != nil {
			r.Close()
			r = nil
		}
	}()
	if r.w, err = loader.OpenWeights(o.Weights); err != nil {
		return r, err
	}
	if o.Verify {
		vr, err := inspect.Verify(r.w.File())
		if err != nil {
			return r, fmt.Errorf("--verify: %w", err)
		}
		logf("%s", inspect.VerifySummary(o.Weights, vr))
	}
	cfg := r.w.Config()
	r.vocab = cfg.VocabSize
	// Checked before the engine allocates the KV cache for it (a huge
	// --max-ctx would otherwise allocate first and fail, or succeed, later).
	if mp := cfg.MaxPositionEmbeddings; o.MaxContext > 0 && mp > 0 && o.MaxContext > mp {
		return r, fmt.Errorf("--max-ctx %d exceeds the model's max_position_embeddings %d (%s)", o.MaxContext, mp, o.Weights)
	}
	if err = r.loadTokenizer(); err != nil {
		return r, err
	}
	if err = r.setEOS(); err != nil {
		return r, err
	}
	var note string
	if r.be, r.beName, note, err = loader.NewBackend(o.Backend, o.Threads); err != nil {
		return r, err
	}
	if err = backend.SetActivations(r.be, o.Activations); err != nil {
		return r, err
	}
	if note != "" {
		logf("%s", note)
	}
	eo := engine.Options{MaxContext: o.MaxContext, PrefillChunk: o.PrefillChunk, KVDtype: o.KVDtype, Threads: o.Threads,
		CUDAGraph: r.beName == loader.BackendCUDA && !o.NoCUDAGraph, Progress: o.Log}
	if specOn {
		// A verify pass scores k+1 tokens, each with its own GDN state slot.
		eo.StateSlots, eo.LogitsRows = o.DraftTokens+1, o.DraftTokens+1
	}
	if r.eng, err = engine.New(r.w, r.be, eo); err != nil {
		return r, fmt.Errorf("%s: %w", o.Weights, err)
	}
	if specOn {
		err = r.openSpec()
	} else {
		r.seq, err = r.eng.NewSequence()
		if err == nil && r.beName == loader.BackendCUDA {
			r.dsm, err = r.seq.NewDeviceSampler(o.Sampling)
		}
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w", o.Weights, err)
	}
	eff := r.eng.Options()
	ar := r.eng.Arenas()
	isa := "" // the CPU backend's instruction set, with its integer-dot extensions
	if x, ok := r.be.(interface{ ISADetail() string }); ok {
		isa = ", " + x.ISADetail()
		// what the activation mode resolved to on this CPU
		act := "int8 decode activations: none"
		if f := backend.Int8Formats(r.be, r.w.File().Formats()); len(f) > 0 {
			act = "int8 decode activations: " + strings.Join(f, " ")
		}
		isa += ", " + act
	}
	logf("loaded in %.2f s: backend %s (%d threads%s), max context %d, prefill chunk %d, kv %s",
		time.Since(start).Seconds(), r.beName, r.be.Threads(), isa, eff.MaxContext, eff.PrefillChunk, kvName(eff.KVDtype))
	if specOn {
		ma := r.mtp.Arenas()
		logf("memory: weights %s, workspace %s (shared with the mtp step), sequence+mtp %s, mtp weights %s; spec mtp, %d draft tokens%s",
			progress.Bytes(ar["weights"]), progress.Bytes(ar["workspace"]), progress.Bytes(r.mseq.Bytes()),
			progress.Bytes(ma["mtp.weights"]), o.DraftTokens,
			map[bool]string{true: " (proposal head)", false: ""}[o.LMHeadDraft])
	} else {
		logf("memory: weights %s, workspace %s, sequence %s", progress.Bytes(ar["weights"]),
			progress.Bytes(ar["workspace"]), progress.Bytes(r.seq.Bytes()))
	}
	return r, nil
}

// DefaultDraftTokens is the draft length of --spec mtp without --draft-tokens.
const DefaultDraftTokens = 2

// openSpec binds the MTP head and builds the speculative decoder.
func (r *Runner) openSpec() error {
	var err error
	if r.mtp, err = r.eng.LoadMTP(r.w, engine.MTPOptions{ProposalHead: r.opts.LMHeadDraft}); err != nil {
		return err
	}
	if r.mseq, err = r.mtp.NewMTPSequence(); err != nil {
		return err
	}
	r.seq = r.mseq.Sequence()
	eos := make([]int32, 0, len(r.eos))
	for id := range r.eos {
		eos = append(eos, id)
	}
	slices.Sort(eos)
	r.dec, err = spec.NewDecoder(r.mseq, r.mseq, spec.Options{K: r.opts.DraftTokens, Sampler: r.sampler,
		EOS: eos, IgnoreEOS: r.opts.IgnoreEOS, Proposal: r.opts.LMHeadDraft})
	return err
}

func kvName(s string) string {
	if s == "" {
		return "bf16"
	}
	return s
}

func (r *Runner) loadTokenizer() error {
	tj, ok := r.w.Resource("tokenizer.json")
	if !ok {
		return nil
	}
	tc, _ := r.w.Resource("tokenizer_config.json")
	tok, err := tokenizer.Load(tj, tc)
	if err != nil {
		return fmt.Errorf("%s: %w", r.opts.Weights, err)
	}
	if gc, ok := r.w.Resource("generation_config.json"); ok {
		if err := tok.SetGenerationConfig(gc); err != nil {
			return fmt.Errorf("%s: %w", r.opts.Weights, err)
		}
	}
	r.tok = tok
	return nil
}

// setEOS picks the stop ids: the override, generation_config.json's
// eos_token_id, the model config's, then the tokenizer's eos_token.
func (r *Runner) setEOS() error {
	ids := r.opts.EOSIDs
	if ids == nil {
		if gc, ok := r.w.Resource("generation_config.json"); ok {
			g, err := tokenizer.ParseGenerationEOS(gc)
			if err != nil {
				return fmt.Errorf("%s: %w", r.opts.Weights, err)
			}
			ids = g
		}
	}
	if ids == nil {
		for _, e := range r.w.Config().EOSTokenIDs {
			ids = append(ids, int32(e))
		}
	}
	if ids == nil && r.tok != nil {
		ids = r.tok.EOSIDs()
	}
	r.eos = map[int32]bool{}
	for _, id := range ids {
		r.eos[id] = true
	}
	return nil
}

// Close frees the sequence, the engine, the backend and the mapping.
func (r *Runner) Close() error {
	switch {
	case r.mseq != nil:
		r.mseq.Close() // closes seq too
	case r.seq != nil:
		r.seq.Close()
	}
	r.mseq, r.seq, r.dsm = nil, nil, nil // the device sampler's state lived in the sequence
	if r.mtp != nil {
		r.mtp.Close()
		r.mtp = nil
	}
	if r.eng != nil {
		r.eng.Close()
		r.eng = nil
	}
	var err error
	if r.be != nil {
		err = r.be.Close()
		r.be = nil
	}
	if r.w != nil {
		if e := r.w.Close(); err == nil {
			err = e
		}
		r.w = nil
	}
	return err
}

// VocabSize is the model's vocabulary (embedding rows): ids must be below it.
func (r *Runner) VocabSize() int { return r.vocab }

// MaxContext is the effective context limit per prompt.
func (r *Runner) MaxContext() int { return r.eng.Options().MaxContext }

// Tokenizer returns the artifact's tokenizer (nil if it has none).
func (r *Runner) Tokenizer() *tokenizer.Tokenizer { return r.tok }

// IsEOS reports whether id is a stop id (IgnoreEOS aside).
func (r *Runner) IsEOS(id int32) bool { return r.eos[id] }

// BackendName is the backend in use ("cpu" or "cuda").
func (r *Runner) BackendName() string { return r.beName }

// PromptText is the text that is tokenized for a text prompt: the prompt
// itself, or with Options.Chat the rendered chat (system turn if any, the
// user turn, the assistant generation prompt, and the empty think block
// with NoThink).
func (r *Runner) PromptText(text string) (string, error) {
	if !r.opts.Chat {
		return text, nil
	}
	var msgs []chat.Message
	if r.opts.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: r.opts.System})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: text})
	return chat.Render(msgs, chat.Options{AddGenerationPrompt: true, DisableThinking: r.opts.NoThink})
}

// PromptIDs turns an input into token ids: ids are checked against the
// vocabulary; text is rendered (PromptText) and encoded with special tokens
// recognized.
func (r *Runner) PromptIDs(in Input) ([]int32, error) {
	where := in.Source
	if where == "" {
		where = "prompt"
	}
	if in.IDs != nil {
		for i, id := range in.IDs {
			if id < 0 || int(id) >= r.vocab {
				return nil, fmt.Errorf("%s: token %d: id %d is outside the vocabulary [0,%d)", where, i+1, id, r.vocab)
			}
		}
		if len(in.IDs) == 0 {
			return nil, fmt.Errorf("%s: the prompt has no ids", where)
		}
		return in.IDs, nil
	}
	if r.tok == nil {
		return nil, fmt.Errorf("%s: the artifact has no tokenizer.json; give token ids with --ids", r.opts.Weights)
	}
	text, err := r.PromptText(in.Text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ids := r.tok.Encode(text, true)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: the prompt is empty", where)
	}
	return ids, nil
}

// ErrContextLimit is wrapped by Run when a prompt and MaxNew do not fit.
var ErrContextLimit = errors.New("context limit")

// gen is one prompt's generation state: the result being built, the stream
// decoder and the sink.
type gen struct {
	r    *Runner
	res  Result
	dec  *tokenizer.StreamDecoder
	text []byte
	out  Sink
	t1   time.Time // when the first token was emitted
}

// token records a generated id, streams its text and reports whether it is
// a stop id.
func (g *gen) token(id int32) (eos bool, err error) {
	if len(g.res.IDs) == 0 {
		g.t1 = time.Now()
	}
	g.res.IDs = append(g.res.IDs, id)
	g.res.Timings.GeneratedTokens = len(g.res.IDs)
	eos = !g.r.opts.IgnoreEOS && g.r.eos[id]
	piece := ""
	if g.dec != nil && !eos {
		piece = g.dec.Add(id)
		g.text = append(g.text, piece...)
	}
	if g.out != nil {
		err = g.out.Token(id, piece)
	}
	return eos, err
}

// finish completes the result and ends the sink's output.
func (g *gen) finish(reason string) (Result, error) {
	g.res.FinishReason = reason
	g.res.Timings.DecodeSeconds = since(g.t1)
	g.res.Timings.finish()
	tail := ""
	if g.dec != nil {
		tail = g.dec.Flush()
		g.text = append(g.text, tail...)
	}
	g.res.Text = string(g.text)
	if g.out != nil {
		if err := g.out.End(tail, &g.res); err != nil {
			return g.res, err
		}
	}
	return g.res, nil
}

// Run generates for one prompt on a fresh sequence. Cancelling ctx stops
// generation between prefill chunks or tokens: the result then has finish
// reason "interrupted" and the error is nil. out may be nil.
func (r *Runner) Run(ctx context.Context, in Input, out Sink) (Result, error) {
	g := &gen{r: r, out: out, res: Result{IDs: []int32{}}}
	if in.IDs == nil {
		g.res.Prompt = in.Text
	}
	ids, err := r.PromptIDs(in)
	if err != nil {
		return g.res, err
	}
	g.res.PromptIDs = ids
	g.res.Timings.PromptTokens = len(ids)
	if maxCtx := r.MaxContext(); len(ids)+r.opts.MaxNew > maxCtx {
		where := in.Source
		if where == "" {
			where = "prompt"
		}
		return g.res, fmt.Errorf("%s: %w: prompt of %d tokens + --max-new %d exceeds --max-ctx %d",
			where, ErrContextLimit, len(ids), r.opts.MaxNew, maxCtx)
	}
	if r.tok != nil {
		g.dec = r.tok.NewStreamDecoder()
	}
	if r.dec != nil {
		return r.runSpec(ctx, ids, g)
	}
	if err := r.seq.Reset(); err != nil {
		return g.res, err
	}
	if r.dsm != nil {
		return r.runDevice(ctx, ids, g)
	}
	r.sampler.Reset()
	r.sampler.AddPrompt(ids)

	// Prefill chunk by chunk so that an interrupt is seen between chunks.
	t0 := time.Now()
	chunk := r.eng.Options().PrefillChunk
	var logits []float32
	for done := 0; done < len(ids); {
		if ctx.Err() != nil {
			g.res.Timings.PrefillSeconds = time.Since(t0).Seconds()
			return g.finish(FinishInterrupted)
		}
		n := min(chunk, len(ids)-done)
		if logits, err = r.seq.Prefill(ids[done:done+n], false); err != nil {
			return g.res, fmt.Errorf("prefill: %w", err)
		}
		done += n
	}
	g.res.Timings.PrefillSeconds = time.Since(t0).Seconds()

	for len(g.res.IDs) < r.opts.MaxNew {
		if ctx.Err() != nil {
			return g.finish(FinishInterrupted)
		}
		id := r.sampler.Sample(logits, int64(r.seq.Pos()))
		if id < 0 {
			return g.res, r.noFiniteLogit(fmt.Sprintf("decode: position %d: no finite logit to sample from", r.seq.Pos()), ids, g.res.IDs)
		}
		r.sampler.Accept(id)
		eos, err := g.token(id)
		if err != nil {
			return g.res, err
		}
		if eos {
			return g.finish(FinishEOS)
		}
		if len(g.res.IDs) == r.opts.MaxNew {
			break
		}
		if logits, err = r.seq.Decode(id); err != nil {
			return g.res, fmt.Errorf("decode: %w", err)
		}
	}
	return g.finish(FinishLength)
}

// runDevice is Run's loop with the device sampler: the same prefill chunks,
// then each token is drawn on the device from logits that stay there (at
// the sequence position, as the host loop draws), and only its id comes
// back.
func (r *Runner) runDevice(ctx context.Context, ids []int32, g *gen) (Result, error) {
	if err := r.dsm.Reset(ids); err != nil {
		return g.res, err
	}
	t0 := time.Now()
	chunk := r.eng.Options().PrefillChunk
	var id int32
	for done := 0; done < len(ids); {
		if ctx.Err() != nil {
			g.res.Timings.PrefillSeconds = time.Since(t0).Seconds()
			return g.finish(FinishInterrupted)
		}
		n := min(chunk, len(ids)-done)
		var err error
		if done+n < len(ids) {
			_, err = r.seq.Prefill(ids[done:done+n], false)
		} else {
			id, err = r.seq.PrefillSample(ids[done:done+n], r.dsm)
		}
		if err != nil {
			return g.res, fmt.Errorf("prefill: %w", err)
		}
		done += n
	}
	g.res.Timings.PrefillSeconds = time.Since(t0).Seconds()

	for len(g.res.IDs) < r.opts.MaxNew {
		if ctx.Err() != nil {
			return g.finish(FinishInterrupted)
		}
		if id < 0 {
			return g.res, r.noFiniteLogit(fmt.Sprintf("decode: position %d: no finite logit to sample from", r.seq.Pos()), ids, g.res.IDs)
		}
		eos, err := g.token(id)
		if err != nil {
			return g.res, err
		}
		if eos {
			return g.finish(FinishEOS)
		}
		if len(g.res.IDs) == r.opts.MaxNew {
			break
		}
		if id, err = r.seq.DecodeSample(id, r.dsm); err != nil {
			return g.res, fmt.Errorf("decode: %w", err)
		}
	}
	return g.finish(FinishLength)
}

// runSpec generates with the speculative decoder. Its Generate prefills
// and decodes in one call, so the prefill time is measured up to the first
// token, and an interrupt is seen before the prefill or between tokens.
func (r *Runner) runSpec(ctx context.Context, ids []int32, g *gen) (Result, error) {
	if err := r.mseq.Reset(); err != nil {
		return g.res, err
	}
	if ctx.Err() != nil {
		return g.finish(FinishInterrupted)
	}
	var sinkErr error
	interrupted, eos := false, false
	t0 := time.Now()
	emit := func(id int32) bool {
		if len(g.res.IDs) == 0 {
			g.res.Timings.PrefillSeconds = time.Since(t0).Seconds()
		}
		if eos, sinkErr = g.token(id); sinkErr != nil {
			return false
		}
		if !eos && len(g.res.IDs) < r.opts.MaxNew && ctx.Err() != nil {
			interrupted = true
			return false
		}
		return true
	}
	_, st, err := r.dec.Generate(ids, r.opts.MaxNew, emit)
	if err != nil && strings.Contains(err.Error(), specNoFinite) {
		return g.res, r.noFiniteLogit("decode: "+err.Error(), ids, g.res.IDs)
	}
	if err != nil {
		return g.res, fmt.Errorf("decode: %w", err)
	}
	if sinkErr != nil {
		return g.res, sinkErr
	}
	if len(g.res.IDs) == 0 {
		g.res.Timings.PrefillSeconds = time.Since(t0).Seconds()
	}
	ss := &SpecStats{Backend: st.Backend, DraftTokens: st.DraftWindow, Rounds: st.Rounds, DraftedTokens: st.DraftedTokens,
		AcceptedTokens: st.AcceptedTokens, FallbackSteps: st.FallbackSteps, AcceptedPerPosition: st.AcceptedPerPosition}
	if v, ok := st.AcceptanceRate(); ok {
		ss.AcceptanceRate = &v
	}
	if v, ok := st.AcceptanceLength(); ok {
		ss.AcceptanceLength = &v
	}
	g.res.Spec = ss
	switch {
	case interrupted:
		return g.finish(FinishInterrupted)
	case eos:
		return g.finish(FinishEOS)
	}
	return g.finish(FinishLength)
}

func since(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return time.Since(t).Seconds()
}

func (t *Timings) finish() {
	if t.PrefillSeconds > 0 {
		t.PrefillTokPerS = float64(t.PromptTokens) / t.PrefillSeconds
	}
	if t.DecodeSeconds > 0 && t.GeneratedTokens > 1 {
		t.DecodeTokPerS = float64(t.GeneratedTokens-1) / t.DecodeSeconds
	}
}

// specNoFinite is how pkg/spec says that a target step left no token to
// pick (every logit NaN or -Inf).
const specNoFinite = "all logits NaN or -Inf"

// NonFiniteError is Run's error when a step's logits hold no finite value
// to sample from. The runner then re-runs the prompt and the tokens
// generated so far op by op (engine.Sequence.DiagnoseNonFinite) to name the
// first op whose output is not finite.
type NonFiniteError struct {
	Msg       string            // "decode: position 12: no finite logit to sample from"
	Weights   string            // the artifact
	Tokens    int               // tokens re-run for the diagnosis
	Backend   string            // the backend they were re-run on
	Verified  bool              // the artifact passed --verify at load
	Diagnosis *engine.NonFinite // nil: every output was finite in the re-run
	DiagErr   error             // the re-run itself failed
}

func (e *NonFiniteError) Error() string {
	verify := engine.NonFiniteHint(e.Weights, e.Verified, e.Diagnosis)
	switch {
	case e.DiagErr != nil:
		return fmt.Sprintf("%s (re-running the %d tokens op by op to find the cause failed: %v; %s)", e.Msg, e.Tokens, e.DiagErr, verify)
	case e.Diagnosis == nil:
		return fmt.Sprintf("%s (an eager op-by-op re-run of the %d tokens on the %s backend found every output finite, so the cause is on a path it does not take: CUDA graphs (try --no-cuda-graph), device sampling or the MTP verify step; %s)",
			e.Msg, e.Tokens, e.Backend, verify)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Msg, e.Diagnosis, verify)
}

// noFiniteLogit diagnoses a step without a finite logit: prompt and the
// ids generated so far are run again op by op on the sequence (which is
// reset by the next Run). Only after that failure: never in the hot path.
func (r *Runner) noFiniteLogit(msg string, prompt, generated []int32) error {
	hist := append(slices.Clone(prompt), generated...)
	e := &NonFiniteError{Msg: msg, Weights: r.opts.Weights, Tokens: len(hist), Backend: r.beName, Verified: r.opts.Verify}
	e.Diagnosis, e.DiagErr = r.seq.DiagnoseNonFinite(hist)
	return e
}
