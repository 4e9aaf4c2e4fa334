// Command ninfer-run generates text (or token ids) from a .ninfer model:
// one prompt from a flag or file, or one prompt per stdin line.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/runner"
	"github.com/ninfer/ninfer/pkg/sample"
	"github.com/ninfer/ninfer/pkg/spec"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

const name = "ninfer-run"

// exitInterrupted is the status after Ctrl-C (128 + SIGINT); SIGTERM
// exits 143 and SIGHUP 129 (cliutil.Stopped).
const exitInterrupted = 130

func main() { os.Exit(mainStatus()) }

// mainStatus runs the command under the stopping-signal handler
// (cliutil.NotifyStop), installed for the life of the process: a repeated
// signal never finds the default action, which would cut a line short.
func mainStatus() int {
	ctx, _ := cliutil.NotifyStop(context.Background())
	return run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
}

// intFlags are the integer flags checked against a range (cliutil.CheckFlag:
// "FLAG VALUE: out of range (want LO..HI[; note])", the flag as typed,
// exit 2, as in every tool); --prefill-chunk and the float flags are in
// floatFlags' words.
var intFlags = []struct {
	name   string
	lo, hi int64
	note   string
}{
	{"max-new", 0, math.MaxInt, ""},
	{"max-ctx", 0, math.MaxInt, "0 = the model default"},
	{"threads", 0, cliutil.MaxThreads, "0 = all cores"},
	{"top-k", 0, math.MaxInt, "0 = off"},
	{"draft-tokens", 1, spec.MaxDraftTokens, ""},
}

// prefillChunkWant is the --prefill-chunk range in words.
const prefillChunkWant = "a positive multiple of 128"

// floatFlags are the sampling flags, each with its valid values (ok) and
// their words.
var floatFlags = []struct {
	name string
	ok   func(float64) bool
	want string
}{
	{"temperature", func(v float64) bool { return finite(v) && v >= 0 }, "a finite number ≥ 0; 0 = greedy"},
	{"top-p", func(v float64) bool { return v >= 0 && v <= 1 }, "0..1; 0 or 1 = off"},
	{"min-p", func(v float64) bool { return v >= 0 && v < 1 }, "0 ≤ P < 1; 0 = off"},
	{"presence-penalty", finite, "a finite number"},
	{"frequency-penalty", finite, "a finite number"},
	{"repetition-penalty", func(v float64) bool { return finite(v) && v >= 0 }, "a finite number ≥ 0; 0 or 1 = off"},
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// flagRanges words the valid range of the numeric flags for a value the
// flag package refuses (too large, not a number), as options checks them.
var flagRanges = func() map[string]string {
	m := map[string]string{"prefill-chunk": prefillChunkWant}
	for _, f := range intFlags {
		m[f.name] = fmt.Sprintf("%d..%d", f.lo, f.hi)
		if f.note != "" {
			m[f.name] += "; " + f.note
		}
	}
	for _, f := range floatFlags {
		m[f.name] = f.want
	}
	return m
}()

// checkNumbers checks the numeric flags' values (intFlags, --prefill-chunk,
// floatFlags); --draft-tokens only with --spec mtp (options refuses it
// without).
func checkNumbers(c *cli.Context) error {
	for _, f := range intFlags {
		if f.name == "draft-tokens" && (!c.IsSet(f.name) || c.String("spec") != "mtp") {
			continue
		}
		if err := cliutil.CheckFlag(c, f.name, int64(c.Int(f.name)), f.lo, f.hi, f.note); err != nil {
			return err
		}
	}
	if v := c.Int("prefill-chunk"); v < 128 || v%128 != 0 {
		return cliutil.OutOfRange(cliutil.Typed(c, "prefill-chunk"), strconv.Itoa(v), prefillChunkWant)
	}
	for _, f := range floatFlags {
		if v := c.Float64(f.name); !f.ok(v) {
			return cliutil.OutOfRange(cliutil.Typed(c, f.name), strconv.FormatFloat(v, 'g', -1, 64), f.want)
		}
	}
	return nil
}

// run runs the command and returns its exit status: 0, 1 for runtime
// errors, 2 for usage errors, 128 + the signal when stopped by one (130
// SIGINT, 143 SIGTERM, 129 SIGHUP).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	interrupted := false
	app := cliutil.Prepare(newApp(), stdout, stderr)
	cliutil.SetFlagRanges(app, flagRanges)
	app.Action = func(c *cli.Context) error {
		var err error
		interrupted, err = action(ctx, c, stdin, stdout, stderr)
		return err
	}
	code := cliutil.Run(app, args, stderr)
	if code == 0 && interrupted {
		cause := cliutil.StopCause(ctx)
		fmt.Fprintf(stderr, "%s: %v\n", name, cause)
		return cliutil.InterruptedStatus(cause)
	}
	return code
}

func newApp() *cli.App {
	return &cli.App{
		Name:      name,
		Usage:     "generate text or token ids with a .ninfer model",
		UsageText: name + " --weights M.ninfer [--prompt TEXT | --prompt-file F | < prompts.txt] [--format text|json] [--output-file PATH] [options]",
		Description: `Prompts: --prompt TEXT is one prompt; --prompt-file F reads the whole file
as one prompt (one trailing newline removed; "-" = stdin), or one prompt per
non-blank line with --each-line; without either, stdin is read one prompt per
non-blank line (stdin must not be a terminal; an input without a prompt is
an error). Each prompt runs on a fresh sequence. Special tokens written in a prompt (e.g. <|im_start|>) are
recognized.

--chat renders each prompt as a user turn of the Qwen chat format (optional
--system turn) followed by the assistant header; --no-think appends the empty
<think></think> block (enable_thinking=false).

--ids: prompts are whitespace-separated decimal token ids, one prompt per
line, and the generated ids are written the same way, one line per prompt.
An id outside the vocabulary is an error naming its line and position.

Output: the generated text is streamed to stdout (whole UTF-8 characters,
flushed per token), one newline after each prompt; on a terminal, control
characters other than newline and tab (ESC sequences, CR, BEL, C1) are shown
as visible escapes (\x1b, \r, \u009b) so model output cannot drive the
terminal (--raw writes them as they are; files and pipes always get the raw
bytes); --format json (or --json) prints instead one JSON line per prompt: prompt, prompt_ids, text, ids, finish_reason
(eos|length|interrupted) and timings (prefill_s, decode_s, prompt_tokens,
generated_tokens, prefill_tok_s, decode_tok_s; decode tok/s counts the
generated tokens after the first, which comes from the prefill). Load
progress, memory and per-prompt timings go to stderr (--quiet: errors only).
--output-file PATH writes the same output to PATH instead of stdout, once,
atomically (temporary file and rename, parent directories created) when the
run ends, also after a stopping signal (with what was finished); after an
error nothing is written.

Payload hashes: loading maps the artifact and checks its directory (the
digest over the config and the recorded object hashes) but, by design, never
reads the payloads to re-hash them: that would read every byte of a
multi-GB file before the first token. --verify does it first (what
ninfer-inspect --verify does: every SHA-256 and every tensor's values) and
exits 1 at the first bad object. When a step's logits hold no finite value,
the prompt and the tokens so far are run again op by op and the error names
the first layer and op whose output is not finite, e.g. "layer 3 (full
attention): attention/o_proj output is not finite (...) (weights may be
corrupt: run ninfer-inspect --verify M.ninfer)".

Generation stops at an EOS id (generation_config.json's eos_token_id, else the
model config's) unless --ignore-eos, or after --max-new tokens. The EOS id is
listed in the ids but not rendered as text. Context limit: a prompt whose
tokens plus --max-new exceed --max-ctx is an error naming both (nothing is
clamped). Ctrl-C stops cleanly: the partial output line is terminated, the
finish reason is "interrupted", and the exit status is 130; SIGTERM (143)
and SIGHUP (129) do the same. A repeated signal (more than 50 ms after the
first) stops at once: the lines written so far stay complete (the prompt in
progress gets no --json line; a text or ids line is terminated).

--spec mtp: speculative decoding with the model's MTP head, --draft-tokens K
drafts per round verified in one target pass; the output is the same as
without it (greedy: identical ids; sampling: the same distribution), and the
JSON line gains a "speculative" object (rounds, drafted/accepted tokens,
acceptance rate and length).

Exit status: 0 ok, 1 runtime error, 2 usage error, 128+N stopped by signal
N (130 SIGINT, 143 SIGTERM, 129 SIGHUP).

Examples:
  ninfer-run --weights qwen.ninfer --prompt "The capital of France is"
  ninfer-run --weights qwen.ninfer --chat --no-think --prompt "Write a haiku about GPUs" --max-new 256
  ninfer-run --weights qwen.ninfer --chat --temperature 0.7 --top-p 0.8 --top-k 20 --seed 42 --prompt-file q.txt
  ninfer-run --weights qwen.ninfer --format json --max-new 64 < prompts.txt > results.jsonl
  ninfer-run --weights qwen.ninfer --verify --prompt-file q.txt --output-file out/answer.txt
  ninfer-run --weights qwen.ninfer --spec mtp --draft-tokens 3 --prompt "Count to twenty:"
  echo "151644 872 198" | ninfer-run --weights qwen.ninfer --ids --max-new 16
  ninfer-run --weights qwen.ninfer --backend cpu --threads 8 --kv-dtype int8 --max-ctx 8192 --prompt-file long.txt`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "weights", Aliases: []string{"m"}, Usage: "the .ninfer model `PATH` (required)"},
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "one prompt `TEXT` (ids with --ids)"},
			&cli.StringFlag{Name: "prompt-file", Usage: "read the prompt from `FILE` (- = stdin)"},
			&cli.BoolFlag{Name: "each-line", Usage: "with --prompt-file: one prompt per non-blank line"},
			&cli.BoolFlag{Name: "chat", Usage: "render prompts as a user turn of the Qwen chat format"},
			&cli.StringFlag{Name: "system", Usage: "with --chat: a system turn `TEXT`"},
			&cli.BoolFlag{Name: "think", Usage: "with --chat: leave thinking on (the default)"},
			&cli.BoolFlag{Name: "no-think", Usage: "with --chat: disable thinking (empty think block)"},
			&cli.BoolFlag{Name: "ids", Usage: "prompts and output are token ids"},
			&cli.IntFlag{Name: "max-new", Aliases: []string{"n"}, Value: 128, Usage: "generate at most `N` tokens per prompt"},
			&cli.IntFlag{Name: "max-ctx", DefaultText: "min(max_position_embeddings, 4096)", Usage: "context limit in `TOKENS` (at most max_position_embeddings)"},
			&cli.IntFlag{Name: "prefill-chunk", Value: 1024, Usage: "prefill chunk in `TOKENS` (a multiple of 128)"},
			&cli.StringFlag{Name: "kv-dtype", Value: "bf16", Usage: "KV cache `DTYPE`: bf16, int8, fp8 (fp32: exact, for debugging)"},
			&cli.Float64Flag{Name: "temperature", Aliases: []string{"t"}, Usage: "sampling temperature `T` (0 = greedy)"},
			&cli.IntFlag{Name: "top-k", Usage: "keep the `K` most likely tokens (0 = off)"},
			&cli.Float64Flag{Name: "top-p", Usage: "nucleus sampling mass `P` (0 or 1 = off)"},
			&cli.Float64Flag{Name: "min-p", Usage: "drop tokens below `P` × the top probability (0 = off)"},
			&cli.Float64Flag{Name: "presence-penalty", Usage: "subtract `X` from tokens already generated"},
			&cli.Float64Flag{Name: "frequency-penalty", Usage: "subtract `X` per earlier occurrence"},
			&cli.Float64Flag{Name: "repetition-penalty", Usage: "divide logits of seen tokens by `R` (0 or 1 = off)"},
			&cli.Uint64Flag{Name: "seed", Usage: "sampling `SEED` (same seed, same output)"},
			&cli.BoolFlag{Name: "ignore-eos", Usage: "do not stop at EOS ids"},
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "`BACKEND`: auto (CUDA when built in and present), cpu or cuda"},
			&cli.IntFlag{Name: "threads", Usage: "CPU backend `THREADS` (0 = all cores)"},
			&cli.StringFlag{Name: "activations", Value: "auto", Usage: "matmul activations `MODE` on the CPU backend: auto (int8 for q4/q5/q6 weights, and for q8 at the avx2 level and at avx512 with VNNI on Intel CPUs, the output head included; fp32 for other formats; docs/CLI.md), int8 (q4–q8 everywhere) or fp32"},
			&cli.BoolFlag{Name: "no-cuda-graph", Usage: "decode eagerly (no CUDA graphs; the same tokens, slower; the CPU backend never uses them)"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "output `FORMAT`: text (streamed; ids with --ids) or json (one JSON line per prompt)"},
			&cli.BoolFlag{Name: "json", Usage: "shorthand for --format json"},
			&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` (atomically, parents created) instead of stdout"},
			&cli.BoolFlag{Name: "verify", Usage: "before loading, re-hash every payload and check every tensor's values (as ninfer-inspect --verify; a run does not by default)"},
			&cli.BoolFlag{Name: "raw", Usage: "on a terminal, write control characters of the generated text as they are (default: shown as visible escapes)"},
			&cli.StringFlag{Name: "spec", Value: "none", Usage: "speculative decoding `BACKEND`: none or mtp"},
			&cli.IntFlag{Name: "draft-tokens", DefaultText: "2", Usage: "with --spec mtp: draft `K` tokens per round (1-5)"},
			&cli.BoolFlag{Name: "lm-head-draft", Usage: "with --spec mtp: draft with the reduced-vocabulary proposal head (convert with --draft-head)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no load or timing lines on stderr"},
		},
	}
}

// output is where and how the results go.
type output struct {
	format string // text or json
	file   string // --output-file; "" = stdout
}

// outputOptions checks --format, --json and --output-file.
func outputOptions(c *cli.Context) (output, error) {
	out := output{format: c.String("format"), file: c.String("output-file")}
	if c.Bool("json") {
		if c.IsSet("format") && out.format != "json" {
			return out, cliutil.Usagef("--json is --format json; it contradicts --format %s", out.format)
		}
		out.format = "json"
	}
	if out.format != "text" && out.format != "json" {
		return out, cliutil.Usagef("--format %q: want text or json (-f is short for --format, as in every tool; a prompt file is --prompt-file)", out.format)
	}
	if err := cliutil.CheckOutputFile("--output-file", out.file, "--format %s"); err != nil {
		return out, err
	}
	return out, nil
}

// options turns the flags into runner options, checking usage.
func options(c *cli.Context, stderr io.Writer) (runner.Options, error) {
	o := runner.Options{
		Weights: c.String("weights"), Backend: c.String("backend"), Threads: c.Int("threads"),
		MaxContext: c.Int("max-ctx"), PrefillChunk: c.Int("prefill-chunk"), KVDtype: c.String("kv-dtype"),
		Activations: c.String("activations"), MaxNew: c.Int("max-new"), IgnoreEOS: c.Bool("ignore-eos"),
		Chat: c.Bool("chat"), System: c.String("system"), NoThink: c.Bool("no-think"),
		Spec: c.String("spec"), DraftTokens: c.Int("draft-tokens"), LMHeadDraft: c.Bool("lm-head-draft"),
		NoCUDAGraph: c.Bool("no-cuda-graph"), Verify: c.Bool("verify"),
		Sampling: sample.Config{
			Temperature: c.Float64("temperature"), TopK: c.Int("top-k"), TopP: c.Float64("top-p"), MinP: c.Float64("min-p"),
			PresencePenalty: c.Float64("presence-penalty"), FrequencyPenalty: c.Float64("frequency-penalty"),
			RepetitionPenalty: c.Float64("repetition-penalty"), Seed: c.Uint64("seed"),
		},
	}
	if !c.Bool("quiet") {
		o.Log = linePrefixer{w: stderr, prefix: name + ": "}
	}
	switch {
	case c.NArg() > 0:
		return o, cliutil.Usagef("unexpected argument %q (give the prompt with --prompt)", c.Args().First())
	case !c.IsSet("weights"):
		return o, cliutil.Usagef("--weights is required")
	case o.Weights == "":
		return o, cliutil.Usagef("--weights is empty")
	case c.IsSet("prompt") && c.IsSet("prompt-file"):
		return o, cliutil.Usagef("--prompt and --prompt-file are mutually exclusive")
	case c.Bool("each-line") && !c.IsSet("prompt-file"):
		return o, cliutil.Usagef("--each-line applies to --prompt-file only")
	case c.Bool("think") && o.NoThink:
		return o, cliutil.Usagef("--think and --no-think are mutually exclusive")
	case !o.Chat && (c.IsSet("system") || c.IsSet("think") || c.IsSet("no-think")):
		return o, cliutil.Usagef("--system, --think and --no-think need --chat")
	case o.Chat && c.Bool("ids"):
		return o, cliutil.Usagef("--chat renders text prompts; it cannot be combined with --ids")
	case !slices.Contains(runner.KVDtypes, o.KVDtype):
		return o, cliutil.Usagef("--kv-dtype %q: want bf16, int8 or fp8", o.KVDtype)
	case !slices.Contains([]string{"auto", "int8", "fp32"}, o.Activations):
		return o, cliutil.Usagef("--activations %q: want auto, int8 or fp32", o.Activations)
	case !slices.Contains([]string{"auto", "cpu", "cuda"}, o.Backend):
		return o, cliutil.Usagef("--backend %q: want auto, cpu or cuda", o.Backend)
	case o.Spec != "none" && o.Spec != "mtp":
		return o, cliutil.Usagef("--spec %q: want none or mtp", o.Spec)
	case c.IsSet("draft-tokens") && o.Spec != "mtp":
		return o, cliutil.Usagef("--draft-tokens needs --spec mtp")
	case o.LMHeadDraft && o.Spec != "mtp":
		return o, cliutil.Usagef("--lm-head-draft needs --spec mtp")
	}
	if err := checkNumbers(c); err != nil {
		return o, err
	}
	if err := o.Sampling.Validate(); err != nil {
		return o, cliutil.UsageError{Err: err} // a backstop: checkNumbers checks every sampling flag first
	}
	promptIn := c.String("prompt-file")
	if !c.IsSet("prompt") && !c.IsSet("prompt-file") {
		promptIn = "-" // prompts are read from standard input
	}
	return o, cliutil.CheckIO("--output-file", c.String("output-file"), o.Weights, promptIn)
}

// source yields prompts until io.EOF.
type source interface{ Next() (runner.Input, error) }

type single struct {
	in   runner.Input
	done bool
}

func (s *single) Next() (runner.Input, error) {
	if s.done {
		return runner.Input{}, io.EOF
	}
	s.done = true
	return s.in, nil
}

// prompts picks the prompt source from the flags.
func prompts(c *cli.Context, stdin io.Reader) (source, func(), error) {
	ids := c.Bool("ids")
	nop := func() {}
	switch {
	case c.IsSet("prompt"):
		p := c.String("prompt")
		if !ids {
			return &single{in: runner.Input{Text: p, Source: "--prompt"}}, nop, nil
		}
		v, err := runner.ParseIDs(p)
		if err != nil {
			return nil, nop, cliutil.Usagef("--prompt: %w", err)
		}
		return &single{in: runner.Input{IDs: v, Source: "--prompt"}}, nop, nil
	case c.IsSet("prompt-file"):
		path := c.String("prompt-file")
		var r io.Reader = stdin
		closeFn := nop
		if path != "-" {
			f, err := os.Open(path)
			if err != nil {
				return nil, nop, fmt.Errorf("--prompt-file: %w", err)
			}
			r, closeFn = f, func() { f.Close() }
		} else {
			path = "stdin"
		}
		if ids || c.Bool("each-line") {
			return runner.NewLineReader(r, path, ids), closeFn, nil
		}
		data, err := io.ReadAll(r)
		closeFn()
		if err != nil {
			return nil, nop, fmt.Errorf("--prompt-file %s: %w", path, err)
		}
		return &single{in: runner.WholeText(data, path)}, nop, nil
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return nil, nop, cliutil.Usagef("no prompt: give --prompt or --prompt-file, or pipe prompts on stdin (one per line)")
	}
	return runner.NewLineReader(stdin, "stdin", ids), nop, nil
}

// linePrefixer starts every log line with "ninfer-run: ", like every other
// stderr line of the tools; each Write is one or more whole lines.
type linePrefixer struct {
	w      io.Writer
	prefix string
}

func (l linePrefixer) Write(p []byte) (int, error) {
	lines := strings.SplitAfter(string(p), "\n")
	var b strings.Builder
	for _, ln := range lines {
		if ln != "" {
			b.WriteString(l.prefix)
			b.WriteString(ln)
		}
	}
	if _, err := io.WriteString(l.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// errStopped: Ctrl-C while waiting for the next prompt.
var errStopped = errors.New("interrupted while waiting for a prompt")

// nextPrompt is src.Next, abandoned when ctx is cancelled: Ctrl-C must stop
// a run that waits on a pipe with no prompt yet (the read is left behind;
// the process exits).
func nextPrompt(ctx context.Context, src source) (runner.Input, error) {
	if ctx.Err() != nil {
		return runner.Input{}, errStopped
	}
	type result struct {
		in  runner.Input
		err error
	}
	ch := make(chan result, 1)
	go func() {
		in, err := src.Next()
		ch <- result{in, err}
	}()
	select {
	case r := <-ch:
		return r.in, r.err
	case <-ctx.Done():
		return runner.Input{}, errStopped
	}
}

// action runs every prompt; it reports whether generation was interrupted.
func action(ctx context.Context, c *cli.Context, stdin io.Reader, stdout, stderr io.Writer) (bool, error) {
	o, err := options(c, stderr)
	if err != nil {
		return false, err
	}
	out, err := outputOptions(c)
	if err != nil {
		return false, err
	}
	src, closeSrc, err := prompts(c, stdin)
	if err != nil {
		return false, err
	}
	defer closeSrc()
	// The first prompt is read before the model loads: an empty input is
	// an error (not a silent success), found without loading anything.
	in, err := nextPrompt(ctx, src)
	if errors.Is(err, errStopped) {
		return true, nil
	}
	if err == io.EOF {
		what := "the input"
		if lr, ok := src.(*runner.LineReader); ok {
			what = lr.Name()
		}
		return false, fmt.Errorf("%s: no prompt (no non-blank line)", what)
	}
	if err != nil {
		return false, err
	}
	sink := newSink(c, out, stdout, stderr, o.Log != nil)
	defer sink.close(false)
	// A repeated stopping signal ends the process from the signal handler
	// (maybe during a long load or prefill chunk): the output then ends
	// with complete lines.
	defer cliutil.OnHardStop(ctx, func() { sink.hardStop(cliutil.StopCause(ctx), stderr) })()

	interrupted, err := generate(ctx, o, src, in, sink)
	if err != nil {
		return false, err
	}
	return interrupted, sink.close(true)
}

// newSink builds the output chain: the text, ids or JSON sink over a
// buffered stdout (through termsafe on a terminal unless --raw) or, with
// --output-file, over a buffer committed to the file by close(true).
func newSink(c *cli.Context, out output, stdout, stderr io.Writer, verbose bool) *guardedSink {
	dst := stdout
	var file *bytes.Buffer
	if out.file != "" {
		file = &bytes.Buffer{}
		dst = file
	}
	w := bufio.NewWriter(dst)
	var text io.Writer = w
	flushAll := w.Flush
	if f, ok := dst.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !c.Bool("raw") {
		// A terminal gets the model's control characters as visible escapes.
		tw := &termsafe.Writer{W: w}
		text = tw
		flushAll = func() error { tw.Flush(); return w.Flush() }
	}
	var inner runner.Sink = runner.TextSink{W: text}
	switch {
	case out.format == "json":
		inner = runner.JSONSink{W: w}
	case c.Bool("ids"):
		inner = &runner.IDSink{W: w}
	}
	g := &guardedSink{sink: inner, w: text, lines: out.format != "json", flush: flushAll}
	if file != nil {
		g.commit = func() error {
			if err := cliutil.WriteFileAtomic(out.file, file.Bytes()); err != nil {
				return fmt.Errorf("--output-file: %w", err)
			}
			if verbose {
				fmt.Fprintf(stderr, "%s: wrote %s\n", name, termsafe.Path(out.file))
			}
			return nil
		}
	}
	return g
}

// generate loads the model and runs in and every further prompt of src.
func generate(ctx context.Context, o runner.Options, src source, in runner.Input, sink runner.Sink) (bool, error) {
	r, err := runner.Open(o)
	if err != nil {
		return false, err
	}
	defer r.Close()

	for ; ; in, err = nextPrompt(ctx, src) {
		if errors.Is(err, errStopped) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		res, err := r.Run(ctx, in, sink)
		if err != nil {
			return false, err
		}
		if o.Log != nil {
			t := res.Timings
			line := fmt.Sprintf("prompt %d tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s (%.1f tok/s), finish %s",
				t.PromptTokens, t.PrefillSeconds, t.PrefillTokPerS, t.GeneratedTokens, t.DecodeSeconds, t.DecodeTokPerS, res.FinishReason)
			if sp := res.Spec; sp != nil {
				line += fmt.Sprintf("; mtp: %d rounds, %d of %d drafts accepted", sp.Rounds, sp.AcceptedTokens, sp.DraftedTokens)
				if sp.AcceptanceLength != nil {
					line += fmt.Sprintf(", acceptance length %.2f", *sp.AcceptanceLength)
				}
			}
			fmt.Fprintln(o.Log, line)
		}
		if res.FinishReason == runner.FinishInterrupted {
			return true, nil
		}
	}
}

// guardedSink serializes the sink's writes with the hard stop of a
// repeated signal, so that the process never exits in the middle of a
// line: a --json line is written whole or not at all, and a text or ids
// line in progress is terminated.
type guardedSink struct {
	mu     sync.Mutex
	sink   runner.Sink
	w      io.Writer    // where a text or ids line is terminated
	lines  bool         // text or ids: Token writes part of a line
	flush  func() error // flushes every writer
	commit func() error // writes the --output-file; nil: stdout
	open   bool         // a text or ids line is started and not ended
	closed bool
}

func (g *guardedSink) Token(id int32, text string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errStopped
	}
	g.open = g.lines
	return g.sink.Token(id, text)
}

func (g *guardedSink) End(tail string, res *runner.Result) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errStopped
	}
	g.open = false
	return g.sink.End(tail, res)
}

// close flushes the writers; nothing is written after it. With keep (the
// run ended, completely or stopped by a signal) it also commits the
// --output-file; after an error (keep false) nothing is written there.
// Only the first call acts.
func (g *guardedSink) close(keep bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	g.flush() // stdout: a closed pipe is not an error of the run
	if keep && g.commit != nil {
		return g.commit()
	}
	return nil
}

// hardStop is the repeated signal's hook: it ends the line in progress,
// flushes, and keeps the lock until the process exits.
func (g *guardedSink) hardStop(why error, stderr io.Writer) {
	g.mu.Lock() // held: the process exits after this hook
	var err error
	if !g.closed {
		g.closed = true
		if g.open {
			io.WriteString(g.w, "\n")
		}
		g.flush()
		if g.commit != nil {
			err = g.commit()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v, then again: stopped at once, within the prompt in progress; %v\n", name, why, err)
		return
	}
	fmt.Fprintf(stderr, "%s: %v, then again: stopped at once, within the prompt in progress\n", name, why)
}
