// Command ninfer-eval measures the perplexity of .ninfer models over token
// ids or text and, against a reference model, the KL divergence of their
// next-token distributions, top-1 agreement and Δ perplexity (docs/EVAL.md).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/corpus"
	"github.com/ninfer/ninfer/pkg/eval"
	"github.com/ninfer/ninfer/pkg/runner"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

const name = "ninfer-eval"

func main() {
	ctx, _ := cliutil.NotifyStop(context.Background())
	os.Exit(run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command and returns its exit status: 0, 1 for runtime
// errors, 2 for usage errors, 128 + the signal when stopped by one.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := cliutil.SetFlagRanges(cliutil.Prepare(newApp(), stdout, stderr), map[string]string{
		"threads":     cliutil.ThreadsRange,
		"ctx":         fmt.Sprintf("3..%d", math.MaxInt),
		"stride":      fmt.Sprintf("0..%d; 0 = --ctx", math.MaxInt),
		"max-windows": fmt.Sprintf("0..%d; 0 = all", math.MaxInt),
	})
	app.Action = func(c *cli.Context) error { return action(ctx, c, stdout, stderr) }
	return cliutil.Run(app, args, stderr)
}

func newApp() *cli.App {
	return &cli.App{
		Name:      name,
		Usage:     "perplexity of .ninfer models, and KL divergence against a reference",
		UsageText: name + " --weights M.ninfer [--weights M2.ninfer ...] (--corpus C.ids | --text F.txt) [--reference REF.ninfer|REF.logits] [--save-logits F.logits] [--ctx N] [--stride S] [--format table|json] [options]",
		Description: `Scores the ids in windows of --ctx tokens starting every --stride tokens
(default: --ctx, back to back), as llama.cpp's llama-perplexity does: each
window is evaluated from a fresh sequence and only its second half is scored
(the logits of positions ctx/2 .. ctx-2 against the next token), so every
scored token has at least ctx/2 tokens of context. The ids come from
--corpus (a token-id file, the format of ninfer-bench --corpus and
ninfer-tokenize) or --text (a text file tokenized whole with the first
model's tokenizer, special-token text as plain text). --max-windows N scores
the first N windows only.

Result per model: PPL = exp(mean NLL) with its standard error. With
--reference REF.ninfer, each scored token also gets the KL divergence
KL(P_ref || P_model) of the model's next-token distribution from the
reference's (mean ± stderr, median, p99, max), whether the two agree on the
most likely token (top-1 agreement), and the model's NLL minus the
reference's (Δ PPL = PPL - PPL_ref). The models and the reference must have
the same vocabulary (with --text: the same tokenizer.json). Formulas:
docs/EVAL.md.

--save-logits F writes the (single) --weights model's log-probabilities at
every scored token to F (ln p in fixed point, steps of 1/2048 nat, with the
exact NLL and argmax of each row; a header names the model's directory
digest, the tokenizer digest, the corpus sha256, ctx, stride and windows;
written atomically, not when interrupted). --reference F then compares against that file instead of a
model: the run must have the same corpus, tokenizer, vocabulary, ctx, stride
and windows, else it stops naming the field that differs. Format and the
KL error of the rounding: docs/EVAL.md.

--weights may be repeated: every model is loaded at once and scored window
by window (the reference once per window). --format table (default) is a
markdown table, one row per model; json is one JSON line per model.
Progress goes to stderr (--quiet: errors only). Ctrl-C stops after the
window in progress and writes the results over the windows done (json:
"interrupted": true), exit 130 (143 SIGTERM, 129 SIGHUP). --output-file
PATH writes the results atomically when done.

Exit status: 0 ok, 2 usage error, 1 runtime error, 128+N stopped by signal N.

Examples:
   ninfer-eval --weights build/shakespeare-q8.ninfer --corpus models/tiny-shakespeare/bench_corpus.ids --ctx 256
   ninfer-eval --weights q8.ninfer --weights gw.ninfer --reference fp32.ninfer --corpus c.ids --ctx 256 --backend cpu
   ninfer-eval --weights fp32.ninfer --kv-dtype fp32 --corpus c.ids --ctx 256 --save-logits fp32.logits
   ninfer-eval --weights q8.ninfer --reference fp32.logits --corpus c.ids --ctx 256
   ninfer-eval --weights m.ninfer --text wiki.test.raw --ctx 512 --format json --output-file out/ppl.jsonl
   ninfer-tokenize --weights m.ninfer --whole play.txt > play.ids && ninfer-eval --weights m.ninfer --corpus play.ids`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "weights", Aliases: []string{"m"}, Usage: "a .ninfer model `PATH` to evaluate (repeatable; required)"},
			&cli.StringFlag{Name: "reference", Usage: "reference .ninfer model or --save-logits file `PATH`: KL divergence, top-1 agreement and Δ PPL against it"},
			&cli.StringFlag{Name: "save-logits", Usage: "write the model's per-token log-probabilities to `PATH` (a --reference for later runs; one --weights)"},
			&cli.StringFlag{Name: "corpus", Usage: "token-id corpus `PATH` (whitespace-separated ids)"},
			&cli.StringFlag{Name: "text", Usage: "text file `PATH`, tokenized with the model's tokenizer"},
			&cli.IntFlag{Name: "ctx", Value: 512, Usage: "window length in `TOKENS` (≥ 3)"},
			&cli.IntFlag{Name: "stride", Usage: "`TOKENS` between window starts (default: --ctx)"},
			&cli.IntFlag{Name: "max-windows", Usage: "score at most `N` windows (0: all)"},
			&cli.StringFlag{Name: "kv-dtype", Value: "bf16", Usage: "KV cache `DTYPE`: bf16, int8, fp8 or fp32"},
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "compute `BACKEND`: auto, cpu or cuda"},
			&cli.IntFlag{Name: "threads", Usage: "CPU `N` threads (0: all cores)"},
			&cli.StringFlag{Name: "activations", Value: "fp32", Usage: "CPU matmul activations `MODE`: fp32, or int8 (q4–q8 weights at every T, the per-token quantization decode's --activations auto uses)"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "output `FORMAT`: table (alias md) or json (one line per model)"},
			&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` atomically instead of stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress or load lines on stderr"},
		},
	}
}

type options struct {
	weights          []string
	reference        string
	saveLogits       string
	corpus, text     string
	ctx, stride, max int
	kv, backend      string
	activations      string
	threads          int
	format, out      string
	quiet            bool
}

func parse(c *cli.Context) (options, error) {
	o := options{weights: c.StringSlice("weights"), reference: c.String("reference"), saveLogits: c.String("save-logits"), corpus: c.String("corpus"),
		text: c.String("text"), ctx: c.Int("ctx"), stride: c.Int("stride"), max: c.Int("max-windows"),
		kv: c.String("kv-dtype"), backend: c.String("backend"), threads: c.Int("threads"),
		activations: c.String("activations"), format: c.String("format"), out: c.String("output-file"), quiet: c.Bool("quiet")}
	if o.format == "md" {
		o.format = "table"
	}
	if o.stride == 0 {
		o.stride = o.ctx
	}
	switch {
	case c.NArg() > 0:
		return o, cliutil.Usagef("unexpected argument %q (the ids come from --corpus or --text)", c.Args().First())
	case len(o.weights) == 0:
		return o, cliutil.Usagef("--weights is required")
	case slices.Contains(o.weights, ""):
		return o, cliutil.Usagef("--weights is empty")
	case c.IsSet("reference") && o.reference == "":
		return o, cliutil.Usagef("--reference is empty")
	case c.IsSet("save-logits") && o.saveLogits == "":
		return o, cliutil.Usagef("--save-logits is empty")
	case o.saveLogits != "" && len(o.weights) != 1:
		return o, cliutil.Usagef("--save-logits saves one model's logits: give one --weights (%d given)", len(o.weights))
	case c.IsSet("corpus") == c.IsSet("text"):
		return o, cliutil.Usagef("give exactly one of --corpus and --text")
	case o.corpus == "" && o.text == "":
		return o, cliutil.Usagef("--corpus/--text is empty")
	case o.ctx < 3:
		return o, cliutil.CheckFlag(c, "ctx", int64(o.ctx), 3, math.MaxInt, "")
	case o.stride < 0:
		return o, cliutil.CheckFlag(c, "stride", int64(o.stride), 0, math.MaxInt, "0 = --ctx")
	case o.max < 0:
		return o, cliutil.CheckFlag(c, "max-windows", int64(o.max), 0, math.MaxInt, "0 = all")
	case !slices.Contains(runner.KVDtypes, o.kv):
		return o, cliutil.Usagef("--kv-dtype %q: want bf16, int8, fp8 or fp32", o.kv)
	case !slices.Contains([]string{"auto", "cpu", "cuda"}, o.backend):
		return o, cliutil.Usagef("--backend %q: want auto, cpu or cuda", o.backend)
	case o.threads < 0:
		return o, cliutil.CheckThreads(c, o.threads)
	case o.activations != "fp32" && o.activations != "int8":
		return o, cliutil.Usagef("--activations %q: want fp32 or int8", o.activations)
	case o.format != "table" && o.format != "json":
		return o, cliutil.Usagef("--format %q: want table or json", o.format)
	}
	if err := cliutil.CheckThreads(c, o.threads); err != nil {
		return o, err
	}
	if err := cliutil.CheckOutputFile("--output-file", o.out, "--format %s"); err != nil {
		return o, err
	}
	inputs := append([]string{o.reference, o.corpus, o.text}, o.weights...)
	if err := cliutil.CheckOutputFile("--save-logits", o.saveLogits, ""); err != nil {
		return o, err
	}
	if err := cliutil.CheckOutputNotInput("--save-logits", o.saveLogits, inputs...); err != nil {
		return o, err
	}
	if err := cliutil.CheckOutputsDiffer("--output-file", o.out, "--save-logits", o.saveLogits); err != nil {
		return o, err
	}
	return o, cliutil.CheckIO("--output-file", o.out, inputs...)
}

func action(ctx context.Context, c *cli.Context, stdout, stderr io.Writer) error {
	o, err := parse(c)
	if err != nil {
		return err
	}
	var log io.Writer
	if !o.quiet {
		log = stderr
	}
	logf := func(f string, a ...any) {
		if log != nil {
			fmt.Fprintf(log, name+": "+f+"\n", a...)
		}
	}
	// The corpus is read before anything loads: a bad file fails fast, and
	// an id outside the first model's vocabulary (read from its header
	// alone) is named with its file and line.
	var ids []int32
	if o.corpus != "" {
		vocab, err := headerVocab(o.weights[0])
		if err != nil {
			return err
		}
		if ids, err = corpus.ReadFile(o.corpus, vocab); err != nil {
			return err
		}
	}
	var text []byte
	if o.text != "" {
		if text, err = os.ReadFile(o.text); err != nil {
			return fmt.Errorf("--text: %w", err)
		}
	}

	open := func(path string) (*eval.Model, error) {
		t0 := time.Now()
		act := o.activations
		if act == "int8" {
			act = "int8-all" // eval scores by prefill: int8 at every T (backend.ActInt8All)
		}
		m, err := eval.Open(eval.ModelOptions{Weights: path, Backend: o.backend, Threads: o.threads, Ctx: o.ctx, KVDtype: o.kv, Activations: act})
		if err != nil {
			return nil, err
		}
		if m.Note() != "" {
			logf("%s", m.Note())
		}
		logf("loaded %s in %.2f s (backend %s)", termsafe.Path(path), time.Since(t0).Seconds(), m.Backend())
		return m, nil
	}
	var models []eval.Scorer
	var loaded []*eval.Model
	defer func() {
		for _, m := range loaded {
			m.Close()
		}
	}()
	for _, p := range o.weights {
		m, err := open(p)
		if err != nil {
			return err
		}
		loaded = append(loaded, m)
		models = append(models, m)
	}
	var ref eval.Scorer
	var refFile *eval.LogitsFile
	if o.reference != "" && eval.IsLogitsFile(o.reference) {
		if refFile, err = eval.OpenLogits(o.reference); err != nil {
			return fmt.Errorf("--reference %w", err)
		}
		defer refFile.Close()
		ref = refFile
	} else if o.reference != "" {
		m, err := open(o.reference)
		if err != nil {
			return err
		}
		loaded = append(loaded, m)
		ref = m
	}
	if text != nil {
		if ids, err = tokenize(loaded, o, text); err != nil {
			return err
		}
		logf("%s: %d tokens", termsafe.Path(o.text), len(ids))
	}
	windows, err := eval.Windows(len(ids), o.ctx, o.stride, o.max)
	if err != nil {
		return fmt.Errorf("%s: %s", source(o), strings.TrimPrefix(err.Error(), "eval: "))
	}
	logf("%d windows of %d tokens, stride %d, %d tokens scored each", len(windows), o.ctx, o.stride, windows[0].Scored())
	if refFile != nil {
		// Every model must match the saved run: same ids, tokenizer, windows.
		for i, m := range loaded[:len(o.weights)] {
			run := eval.RunHeader(ids, windows, m.VocabSize(), eval.ResourceSHA256(m.Resource, "tokenizer.json"))
			if err := refFile.Header.Check(run); err != nil {
				return fmt.Errorf("--reference %s: %v (against --weights %s)", o.reference, err, o.weights[i])
			}
		}
	}
	var save *eval.LogitsWriter
	if o.saveLogits != "" {
		m := loaded[0]
		h := eval.RunHeader(ids, windows, m.VocabSize(), eval.ResourceSHA256(m.Resource, "tokenizer.json"))
		h.ModelDirectorySHA256, h.Weights = m.DirectorySHA256(), o.weights[0]
		h.KVDtype, h.Backend, h.Activations = o.kv, m.Backend(), o.activations
		if save, err = eval.CreateLogits(o.saveLogits, h); err != nil {
			return fmt.Errorf("--save-logits: %w", err)
		}
		defer save.Abort()
		models[0] = eval.Recording(models[0], save)
	}

	t0 := time.Now()
	last := time.Now()
	progress := func(done, total int, ppl []float64) {
		if log == nil || (done < total && time.Since(last) < time.Second) {
			return
		}
		last = time.Now()
		parts := make([]string, len(ppl))
		for i, p := range ppl {
			parts[i] = fmt.Sprintf("%.4f", p)
		}
		logf("window %d/%d: ppl %s (%.1f s)", done, total, strings.Join(parts, ", "), time.Since(t0).Seconds())
	}
	results, err := eval.Evaluate(ctx, ids, windows, models, ref, progress)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	if save != nil {
		if results[0].Interrupted {
			logf("interrupted: --save-logits %s not written", termsafe.Path(o.saveLogits))
		} else if err := save.Commit(); err != nil {
			return fmt.Errorf("--save-logits: %w", err)
		} else {
			logf("wrote %s", termsafe.Path(o.saveLogits))
		}
	}
	for i := range results {
		r := &results[i]
		r.Weights, r.Reference, r.Corpus = o.weights[i], o.reference, source(o)
		r.Backend, r.KVDtype, r.Stride, r.Seconds = loaded[i].Backend(), o.kv, o.stride, secs
	}
	var buf bytes.Buffer
	if o.format == "json" {
		for _, r := range results {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			buf.Write(append(b, '\n'))
		}
	} else if err := writeTable(&buf, results); err != nil {
		return err
	}
	if o.out != "" {
		if err := cliutil.WriteFileAtomic(o.out, buf.Bytes()); err != nil {
			return fmt.Errorf("--output-file: %w", err)
		}
		logf("wrote %s", termsafe.Path(o.out))
	} else {
		stdout.Write(buf.Bytes())
	}
	if results[0].Interrupted || ctx.Err() != nil {
		// ctx.Err() alone: the stop came during the last window, after
		// Evaluate's last check; the results are complete (and written),
		// but the stop is reported (exit 128+N), not dropped.
		return cliutil.StopCause(ctx)
	}
	return nil
}

func source(o options) string {
	if o.corpus != "" {
		return o.corpus
	}
	return o.text
}

// tokenize encodes --text with the first model's tokenizer; every other
// model and the reference must carry the same tokenizer.json.
func tokenize(models []*eval.Model, o options, text []byte) ([]int32, error) {
	tok, tj, err := eval.Tokenizer(models[0].Resource, o.weights[0])
	if err != nil {
		return nil, fmt.Errorf("--text: %w", err)
	}
	paths := append(slices.Clone(o.weights), o.reference)
	for i, m := range models[1:] {
		other, ok := m.Resource("tokenizer.json")
		if !ok || !bytes.Equal(other, tj) {
			return nil, fmt.Errorf("--text: %s and %s have different tokenizers; tokenize with ninfer-tokenize and use --corpus", paths[0], paths[i+1])
		}
	}
	ids := tok.Encode(string(text), false)
	if len(ids) == 0 {
		return nil, errors.New("--text: " + o.text + ": no tokens")
	}
	return ids, nil
}

// writeTable writes the markdown table: one row per model.
func writeTable(w io.Writer, rs []eval.Result) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft))
	hdr := []any{"model", "tokens", "PPL"}
	withRef := rs[0].KL != nil
	if withRef {
		hdr = append(hdr, "Δ PPL", "KL mean", "KL median", "KL p99", "KL max", "top-1")
	}
	t.Header(hdr...)
	for _, r := range rs {
		row := []string{r.Weights, fmt.Sprint(r.Tokens), fmt.Sprintf("%.4f ± %.4f", r.PPL, r.PPLStdErr)}
		if withRef {
			row = append(row, fmt.Sprintf("%+.4f", *r.DeltaPPL), fmt.Sprintf("%.6f ± %.6f", r.KL.Mean, r.KL.StdErr),
				fmt.Sprintf("%.6f", r.KL.Median), fmt.Sprintf("%.6f", r.KL.P99), fmt.Sprintf("%.6f", r.KL.Max),
				fmt.Sprintf("%.2f ± %.2f %%", 100**r.Top1, 100**r.Top1StdErr))
		}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s: %d windows of %d tokens, stride %d", rs[0].Corpus, rs[0].Windows, rs[0].Ctx, rs[0].Stride)
	if rs[0].Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	if withRef {
		fmt.Fprintf(w, "; reference %s: PPL %.4f ± %.4f", rs[0].Reference, *rs[0].RefPPL, *rs[0].RefPPLStdErr)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// headerVocab is the vocabulary size in the config of the artifact at path,
// from its header alone (nothing is loaded).
func headerVocab(path string) (int, error) {
	f, err := artifact.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cfg, err := f.Config()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return cfg.VocabSize, nil
}
