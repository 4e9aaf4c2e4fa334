// Command ninfer-bench benchmarks prompt processing (pp), token generation
// (tg) and both (pp+tg) on a .ninfer model, streaming the results as JSON
// lines (docs/BENCH-LINES.md) or printing the schema-15 report, a markdown
// table or CSV. The benchmark itself lives in pkg/bench.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/ninfer/ninfer/pkg/bench"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/inspect"
)

const name = "ninfer-bench"

// Exit statuses; a stopping signal exits 128 + its number (130 SIGINT,
// 143 SIGTERM, 129 SIGHUP).
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() { os.Exit(mainStatus(bench.Env{Progress: os.Stderr})) }

// mainStatus runs the command on the process's arguments and streams under
// the stopping-signal handler (cliutil.NotifyStop), which stays installed
// until the process exits: a repeated signal must never find the default
// action, which would lose what was measured.
func mainStatus(env bench.Env) int {
	ctx, _ := cliutil.NotifyStop(context.Background())
	return run(ctx, os.Args, os.Stdout, os.Stderr, env)
}

// listValue collects every occurrence of a repeatable flag verbatim (no
// comma splitting, unlike cli.StringSliceFlag).
type listValue struct{ vals []string }

func (l *listValue) Set(s string) error { l.vals = append(l.vals, s); return nil }
func (l *listValue) String() string     { return strings.Join(l.vals, " ") }

// longNames maps every flag spelling to the long name used in messages.
var longNames = map[string]string{"m": "weights", "p": "n-prompt", "n": "n-gen", "pg": "prompt-gen", "d": "n-depth", "r": "repetitions",
	"o": "format", "output": "format", "f": "format"}

// usageMessage rewrites the flag package's parse errors in the reference's
// words: "--n-prompt requires value", "unknown argument: -x".
func usageMessage(err error) error {
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		f = strings.TrimLeft(f, "-")
		if long, ok := longNames[f]; ok {
			f = long
		}
		return cliutil.Usagef("--%s requires value", f)
	}
	if f, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return cliutil.Usagef("unknown argument: %s", f)
	}
	return cliutil.UsageError{Err: err}
}

func newApp(ctx context.Context, stdout, stderr io.Writer, env bench.Env) *cli.App {
	// The short and long spellings of the test flags are separate flags that
	// share one list, so that they can be mixed and keep their argv order
	// (urfave/cli aliases refuse "two forms of the same flag").
	prompts, gens, pairs, depths := &listValue{}, &listValue{}, &listValue{}, &listValue{}
	app := &cli.App{
		Name:      name,
		Usage:     "benchmark prefill and decode throughput of a .ninfer model",
		UsageText: name + " --weights M.ninfer [--corpus C.ids] [-p P,...] [-n G,...] [-pg P,G;...] [options]",
		Description: `Runs the reference ninfer_bench test matrix: pp<P> (prefill P corpus tokens
and sample one), tg<G> (one seed token, then G decode steps) and pp<P>+tg<G>.
Tests run in the order all pp, all tg, all pp+tg (argv order within each);
without -p/-n/-pg the tests are pp512 and tg128. -d D,... (llama-bench's
--n-depth) runs every test at each context depth D: each rep first
prefills D corpus tokens, untimed, then times the test after them (the
prompt is the corpus tokens after the depth); tables label it tg128 @ d4096
and the JSON carries n_depth. Each test runs --warmup
discarded reps, then -r measured reps. Greedy decoding, no stop tokens.

Flags: -p, -n, -pg, -r and -o are llama-bench's (-o is the output format,
the same as --format; in the other ninfer tools -o is --output-file and
-p/-n are ninfer-run's --prompt/--max-new): docs/CLI.md.

Output (stdout unless --output-file): --format (-o) jsonl (default) streams
the JSON lines of docs/BENCH-LINES.md, one flushed line per rep (feed them
to ninfer-report); json is the schema-15 document; table (md) a markdown
table; csv one row per test. Progress goes to stderr when it is a terminal
(--quiet: no progress, notes or 'wrote' line).

Payload hashes are not checked by the load (by design: it maps the file and
reads what the engine binds); --verify re-hashes every payload and checks
every tensor's values first, outside the measured load (as ninfer-inspect
--verify), and exits 1 at the first bad object. Ctrl-C stops after the rep in
progress, writes what was measured and exits 130; so do SIGTERM (143) and
SIGHUP (129). A repeated signal (more than 50 ms after the first) stops at
once: the rep in progress is lost, the finished ones are written (the
--output-file holds them, as valid JSON lines or the document of what was
measured) and the status is the first signal's.

Exit status: 0 ok, 2 usage error, 1 runtime error, 128+N stopped by signal N
(130 SIGINT, 143 SIGTERM, 129 SIGHUP).

Examples:
   ninfer-bench --weights build/tiny.ninfer --corpus corpus.ids -p 128 -n 32 -r 3
   ninfer-bench --weights m.ninfer --corpus c.ids -p 512 -p 2048 -n 128 -pg 2048,512 | ninfer-report --format md
   ninfer-bench --weights m.ninfer --corpus c.ids -pg "512,128;4096,128" --kv-dtype int8 --format json --output-file out/r.json
   ninfer-bench --weights m.ninfer --corpus c.ids --backend cpu --threads 2 -o md
   ninfer-bench --weights m.ninfer --corpus c.ids -d 0,1024,4096 -p 512 -n 128 | ninfer-report --format svg -o depth.svg
   ninfer-bench --weights m.ninfer --corpus c.ids --verify --spec mtp --draft-tokens 2 -n 128`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "weights", Aliases: []string{"m"}, Usage: "the .ninfer model `PATH` (required)"},
			&cli.StringFlag{Name: "corpus", Value: bench.DefaultCorpus, Usage: "token-id corpus `PATH` (whitespace-separated ids; retried under $NINFER_SOURCE_DIR); without it and without that file, a seeded pseudo-random corpus over the model's vocabulary (noted on stderr, config.corpus_path random:...)"},
			&cli.GenericFlag{Name: "n-prompt", Value: prompts, Usage: "pp tests (-p): comma list of prompt lengths `P,...` (repeatable)"},
			&cli.GenericFlag{Name: "p", Value: prompts, Hidden: true},
			&cli.GenericFlag{Name: "n-gen", Value: gens, Usage: "tg tests (-n): comma list of generation lengths `G,...` (repeatable)"},
			&cli.GenericFlag{Name: "n", Value: gens, Hidden: true},
			&cli.GenericFlag{Name: "prompt-gen", Value: pairs, Usage: "pp+tg tests (-pg): `P,G;P,G` pairs (repeatable)"},
			&cli.GenericFlag{Name: "pg", Value: pairs, Hidden: true},
			&cli.GenericFlag{Name: "n-depth", Value: depths, Usage: "context depths (-d): run every test after an untimed prefill of `D,...` corpus tokens (llama-bench's -d; tables show tg128 @ d4096; default 0; repeatable)"},
			&cli.GenericFlag{Name: "d", Value: depths, Hidden: true},
			&cli.StringFlag{Name: "repetitions", Aliases: []string{"r"}, Value: "5", Usage: "measured reps per test (`N` ≥ 1)"},
			&cli.StringFlag{Name: "warmup", Value: "1", Usage: "discarded warmup reps per test (`N` ≥ 0)"},
			&cli.StringFlag{Name: "max-ctx", Value: "auto", Usage: "max context in `TOKENS` (auto: what the largest test needs)"},
			&cli.StringFlag{Name: "prefill-chunk", Value: "1024", Usage: "prefill chunk in `TOKENS` (multiple of 128)"},
			&cli.StringFlag{Name: "kv-dtype", Value: bench.DefaultKVDtype, Usage: "KV cache `DTYPE`: bf16, int8 or fp8"},
			&cli.StringFlag{Name: "spec", Value: "none", Usage: "speculative decoding `BACKEND`: none or mtp"},
			&cli.StringFlag{Name: "draft-tokens", Usage: "MTP draft tokens `K` in [1,5] (with --spec mtp)"},
			&cli.BoolFlag{Name: "lm-head-draft", Usage: "draft with the optimized (reduced-vocabulary) proposal head"},
			&cli.BoolFlag{Name: "no-cuda-graph", Usage: "decode eagerly (no CUDA graphs; the CPU backend never uses them)"},
			&cli.StringFlag{Name: "device", Value: "0", Usage: "device `ORDINAL`"},
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "compute `BACKEND`: auto, cpu or cuda"},
			&cli.StringFlag{Name: "threads", Value: "0", Usage: "CPU backend worker `THREADS` (0: all cores)"},
			&cli.StringFlag{Name: "activations", Value: "auto", Usage: "matmul activations `MODE` on the CPU backend: auto (int8 for q4/q5/q6 weights, and for q8 at the avx2 level and at avx512 with VNNI on Intel CPUs, the output head included; fp32 for other formats; docs/CLI.md), int8 (q4–q8 everywhere) or fp32 (recorded as activations)"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f", "output", "o"}, Value: bench.OutputJSONL, Usage: "output `FORMAT`: jsonl, json, table (alias md) or csv (-o/--output: llama-bench's spelling)"},
			&cli.StringFlag{Name: "output-file", Usage: "write the output to `PATH` (atomically, parents created) instead of stdout"},
			&cli.BoolFlag{Name: "verify", Usage: "before loading, re-hash every payload and check every tensor's values (as ninfer-inspect --verify; not timed)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress, notes or 'wrote' line on stderr (errors and warnings only)"},
		},
		Action: func(c *cli.Context) error { return action(ctx, c, stdout, stderr, env) },
	}
	app = cliutil.Prepare(app, stdout, stderr)
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageMessage(err) }
	return app
}

// run executes the command and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env bench.Env) int {
	env.Command = strings.Join(args, " ")
	if len(args) > 0 && wantsHelp(args[1:]) {
		args = []string{args[0], "--help"} // help wins over any bad argument after it
	}
	app := newApp(ctx, stdout, stderr, env)
	app.Metadata = map[string]any{"args": args} // flags as typed, for messages (flags.go)
	err := app.Run(args)
	switch {
	case err == nil, errors.Is(err, cliutil.ErrVersionShown):
		return exitOK
	case errors.Is(err, bench.ErrInterrupted):
		cause := cliutil.StopCause(ctx)
		fmt.Fprintf(stderr, "%s: %v; the output holds the reps measured so far\n", name, cause)
		return cliutil.InterruptedStatus(cause)
	}
	msg := cliutil.UnknownFlagAsGiven(cliutil.ErrorText(err), "unknown argument: ", args)
	fmt.Fprintf(stderr, "%s: %s\n", name, cliutil.ErrorLine(msg))
	var ue cliutil.UsageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitRuntime
}

// wantsHelp reports whether -h/--help appears as an argument (not as the
// value of a flag), scanning left to right like the reference.
func wantsHelp(args []string) bool {
	boolFlags := map[string]bool{"lm-head-draft": true, "no-cuda-graph": true, "verify": true, "quiet": true, "q": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return false
		}
		name := strings.TrimLeft(a, "-")
		if name == "h" || name == "help" {
			return true
		}
		if !strings.Contains(name, "=") && !boolFlags[name] {
			i++ // skip the flag's value
		}
	}
	return false
}

// params turns the flags into bench.Params; every error is a usage error.
func params(c *cli.Context) (bench.Params, error) {
	p := bench.DefaultParams()
	if c.NArg() > 0 {
		return p, cliutil.Usagef("unknown argument: %s", c.Args().First())
	}
	p.Weights = c.String("weights")
	p.Corpus = c.String("corpus")
	var err error
	for _, f := range []struct {
		flag string
		dst  *[]int
	}{{"n-prompt", &p.Prompts}, {"n-gen", &p.Gens}} {
		for _, v := range c.Generic(f.flag).(*listValue).vals {
			xs, err := bench.ParseIntList(f.flag, v)
			if err != nil {
				return p, listError(c, f.flag, v, err)
			}
			*f.dst = append(*f.dst, xs...)
		}
	}
	for _, v := range c.Generic("prompt-gen").(*listValue).vals {
		pairs, err := bench.ParsePairs(v)
		if err != nil {
			return p, listError(c, "prompt-gen", v, err)
		}
		p.Pairs = append(p.Pairs, pairs...)
	}
	for _, v := range c.Generic("n-depth").(*listValue).vals {
		ds, err := bench.ParseDepthList(v)
		if err != nil {
			return p, listError(c, "n-depth", v, err)
		}
		p.Depths = append(p.Depths, ds...)
	}
	counts := []struct {
		flag string
		min  int64
		dst  *int
	}{{"repetitions", 1, &p.Repetitions}, {"warmup", 0, &p.Warmup}, {"prefill-chunk", 1, &p.PrefillChunk},
		{"device", 0, &p.Device}, {"threads", 0, &p.Threads}}
	if v := c.String("max-ctx"); v != "auto" {
		counts = append(counts, struct {
			flag string
			min  int64
			dst  *int
		}{"max-ctx", 1, &p.MaxCtx})
	}
	if c.IsSet("draft-tokens") {
		counts = append(counts, struct {
			flag string
			min  int64
			dst  *int
		}{"draft-tokens", 1, &p.DraftTokens})
	}
	for _, f := range counts {
		if *f.dst, err = bench.ParseCount(f.flag, c.String(f.flag), f.min); err != nil {
			return p, countError(c, f.flag, c.String(f.flag), f.min, err)
		}
	}
	if p.KVDtype, err = bench.ParseKVDtype(c.String("kv-dtype")); err != nil {
		return p, cliutil.UsageError{Err: err}
	}
	if p.Activations = c.String("activations"); p.Activations != "auto" && p.Activations != "int8" && p.Activations != "fp32" {
		return p, cliutil.Usagef("--activations %q: want auto, int8 or fp32", p.Activations)
	}
	if v := c.String("spec"); v != bench.SpecNone {
		if p.Spec, err = bench.ParseSpec(v); err != nil {
			return p, cliutil.UsageError{Err: err}
		}
	}
	p.LMHeadDraft = c.Bool("lm-head-draft")
	p.NoCUDAGraph = c.Bool("no-cuda-graph")
	if p.Backend, err = bench.ParseBackend(c.String("backend")); err != nil {
		return p, cliutil.UsageError{Err: err}
	}
	if p.Output, err = bench.ParseOutput(c.String("format")); err != nil {
		return p, cliutil.UsageError{Err: err}
	}
	p.OutputFile = c.String("output-file")
	if err := cliutil.CheckOutputFile("--output-file", p.OutputFile, ""); err != nil {
		return p, err
	}
	if err := checkBenchInputs(c, p); err != nil {
		return p, err
	}
	if err := p.Validate(); err != nil {
		return p, validateError(c, err)
	}
	// A depth beyond an explicit --max-ctx is refused before anything is
	// loaded; against the model's own limit, as soon as its header is read
	// (bench.DepthContextError).
	tests := bench.WithDepths(bench.ExpandTests(p.Prompts, p.Gens, p.Pairs), p.Depths)
	if err := bench.CheckDepthContext(tests, p.Spec, p.DraftTokens, p.MaxCtx); err != nil {
		return p, cliutil.UsageError{Err: err}
	}
	return p, nil
}

func action(ctx context.Context, c *cli.Context, stdout, stderr io.Writer, env bench.Env) error {
	p, err := params(c)
	if err != nil {
		return err
	}
	quiet := c.Bool("quiet")
	if quiet {
		env.Progress = nil
	}
	if c.Bool("verify") {
		// Before the run: the measured load stays what a run without
		// --verify does.
		vr, err := inspect.VerifyFile(p.Weights)
		if err != nil {
			return fmt.Errorf("--verify: %w", err)
		}
		env.Verified = true
		if !quiet {
			fmt.Fprintf(stderr, "%s: %s\n", name, inspect.VerifySummary(p.Weights, vr))
		}
	}
	out := newOutput(p, stdout, stderr)
	out.quiet = quiet
	// A repeated stopping signal writes what is finished at once, from the
	// signal handler, while the rep in progress (maybe a long one) runs on.
	defer cliutil.OnHardStop(ctx, func() { out.hardStop(cliutil.StopCause(ctx), statusWriter(stderr)) })()
	res, runErr := bench.Run(ctx, p, env, out)
	if runErr == nil && ctx.Err() != nil {
		// The stop came during the last rep, after the run's last check:
		// the output is complete, but the stop is reported (exit 128+N) and
		// not dropped, as it is at any other rep.
		runErr = bench.ErrInterrupted
	}
	for _, n := range res.Notes {
		if !quiet {
			fmt.Fprintf(stderr, "%s: note: %s\n", name, n)
		}
	}
	if runErr != nil && !errors.Is(runErr, bench.ErrInterrupted) {
		if de := (bench.DepthContextError{}); errors.As(runErr, &de) {
			return cliutil.UsageError{Err: runErr}
		}
		return runErr
	}
	if _, err := out.finish(); err != nil {
		return err
	}
	return runErr
}

// statusWriter is stderr, first clearing the progress line when stderr is
// a terminal.
func statusWriter(stderr io.Writer) io.Writer {
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(f, "\r\x1b[K")
	}
	return stderr
}
