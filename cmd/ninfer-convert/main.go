// Command ninfer-convert converts a Hugging Face Qwen3.5 model directory into
// a .ninfer artifact with a quantization recipe.
package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/corpus"
	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/progress"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

func main() {
	// The stopping signals are handled for the life of the process: their
	// default action would leave the temporary file behind.
	ctx, _ := cliutil.NotifyStop(context.Background())
	interruptContext = func() (context.Context, context.CancelFunc) { return ctx, func() {} }
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// interruptContext is cancelled by the first stopping signal: SIGINT,
// SIGTERM or SIGHUP (a variable so tests can interrupt). A repeated signal
// is ignored: the stop in progress removes the temporary file and exits
// 128 + the first signal's number.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return cliutil.NotifyStop(context.Background())
}

func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), args, stderr)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	var recipeLines []string
	for _, n := range recipe.Names() {
		r, _ := recipe.Lookup(n)
		recipeLines = append(recipeLines, fmt.Sprintf("  %-14s %s", n, r.Description))
	}
	app := &cli.App{
		Name:      "ninfer-convert",
		Usage:     "convert a Hugging Face Qwen3.5 model directory into a .ninfer artifact",
		UsageText: "ninfer-convert [--recipe NAME] [flags] HF_DIR OUT.ninfer",
		Description: `Reads config.json, the safetensors weights (one file or the shards of
model.safetensors.index.json) and the tokenizer files, checks every tensor
(presence, shape, dtype, NaN/Inf) before writing, then streams tensor by
tensor into OUT.ninfer. The output appears only when complete (temp file +
rename); on any error nothing is left behind. model.visual.* is skipped.

Memory: the checkpoint is memory-mapped, never copied; the peak is the
largest encoded object plus a row of scratch per thread.

Recipes:
` + strings.Join(recipeLines, "\n") + `

Exit status: 0 ok, 2 usage error, 1 runtime error, 128+N stopped by signal N
(130 SIGINT, 143 SIGTERM, 129 SIGHUP; nothing written, the temporary file
removed, also when the signal is repeated).

Examples:
  ninfer-convert --recipe groupwise-int ~/models/Qwen3.5-27B qwen3.5-27b.ninfer
  ninfer-convert --recipe q8 --name tiny ./tiny-hf tiny.ninfer
  ninfer-convert --recipe q8 --draft-head 4096 --draft-corpus corpus.ids ./tiny-hf tiny-draft.ninfer`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "recipe", Value: "groupwise-int", Usage: "quantization recipe `NAME` (see above)"},
			&cli.StringFlag{Name: "name", DefaultText: "the directory name", Usage: "model `NAME` stored in the artifact"},
			&cli.IntFlag{Name: "threads", DefaultText: "0: all cores", Usage: "encoder `THREADS`"},
			&cli.IntFlag{Name: "draft-head", Usage: "add a reduced-vocabulary proposal head of the `N` most frequent corpus tokens"},
			&cli.StringFlag{Name: "draft-corpus", Usage: "token-id corpus `FILE` (.ids) ranking tokens for --draft-head"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite OUT.ninfer if it exists"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bar and no summary"},
		},
		Action: convertAction,
	}
	return cliutil.SetFlagRanges(cliutil.Prepare(app, stdout, stderr), map[string]string{
		"threads":    cliutil.ThreadsRange,
		"draft-head": fmt.Sprintf("0..%d; 0 = none", math.MaxInt),
	})
}

func convertAction(c *cli.Context) error {
	if err := cliutil.Args(c, 2, 2, "HF_DIR OUT.ninfer"); err != nil {
		return err
	}
	src, dst := c.Args().Get(0), c.Args().Get(1)
	r, err := recipe.Lookup(c.String("recipe"))
	if err != nil {
		return cliutil.Usagef("--recipe %q: unknown recipe (want %s)", c.String("recipe"), strings.Join(recipe.Names(), ", "))
	}
	if err := cliutil.CheckThreads(c, c.Int("threads")); err != nil {
		return err
	}
	if err := checkModelName(c.String("name"), src); err != nil {
		return err
	}
	if err := cliutil.CheckFlag(c, "draft-head", int64(c.Int("draft-head")), 0, math.MaxInt, "0 = none"); err != nil {
		return err
	}
	if (c.Int("draft-head") > 0) != (c.String("draft-corpus") != "") {
		return cliutil.Usagef("--draft-head and --draft-corpus go together")
	}
	if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
		return cliutil.Usagef("%s: not a directory (want the Hugging Face model directory HF_DIR)", src)
	}
	if cliutil.EndsInSeparator(dst) {
		return cliutil.Usagef("%s: ends in %q, a directory path (want the OUT.ninfer file path)", dst, string(os.PathSeparator))
	}
	if err := cliutil.CheckIO("", dst, convertInputs(src, c.String("draft-corpus"))...); err != nil {
		return err
	}
	if fi, err := os.Lstat(dst); err == nil {
		switch {
		case fi.IsDir():
			return cliutil.Usagef("%s is a directory (want the OUT.ninfer file path)", dst)
		case !fi.Mode().IsRegular():
			// The output is renamed into place: over a device such as
			// /dev/null or a link such as /dev/stdout that would replace
			// the node itself.
			return cliutil.Usagef("%s is not a regular file (the output is renamed into place; give a file path)", dst)
		case !c.Bool("force"):
			return fmt.Errorf("%s exists (use --force to overwrite)", dst)
		}
	}
	// Like every --output-file: missing parent directories are created.
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("%s: create parent directory: %w", dst, err)
	}
	stderr := c.App.ErrWriter
	// Without --force the output is created exclusively: of two runs
	// racing for dst exactly one wins (the check above is not atomic).
	opts := convert.Options{Recipe: r, Name: c.String("name"), Workers: c.Int("threads"), NoReplace: !c.Bool("force")}
	if !c.Bool("quiet") {
		opts.Log, opts.Progress = stderr, stderr
	}
	if n := c.Int("draft-head"); n > 0 {
		d, err := draftHead(src, c.String("draft-corpus"), n, stderr)
		if err != nil {
			return err
		}
		opts.Draft = d
	}
	ctx, stop := interruptContext()
	defer stop()
	res, err := convert.Convert(ctx, src, dst, opts)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: %s was not written", cliutil.StopCause(ctx), dst)
	}
	if err != nil {
		return err
	}
	if !c.Bool("quiet") {
		rate := 0.0
		if res.Seconds > 0 {
			rate = float64(res.InputBytes) / res.Seconds / 1e6
		}
		fmt.Fprintf(stderr, "ninfer-convert: wrote %s: %d objects, %s payload, %d fallbacks, %.1f s (%.0f MB/s of checkpoint input), peak object %s\n",
			termsafe.Path(dst), res.Objects, progress.Bytes(res.FileBytes), len(res.Fallbacks), res.Seconds, rate, progress.Bytes(res.MaxObject))
	}
	return nil
}

// draftHead ranks corpus tokens and always keeps the tokenizer's special
// tokens.
func draftHead(src, corpusPath string, n int, stderr io.Writer) (*convert.DraftHead, error) {
	dir, err := hfdir.Open(src)
	if err != nil {
		return nil, err
	}
	vocab := dir.Config.VocabSize
	if n > vocab {
		fmt.Fprintf(stderr, "ninfer-convert: note: --draft-head %d exceeds the vocabulary size %d; the head keeps all %d tokens\n", n, vocab, vocab)
	}
	var special []int32
	if tj, err := dir.Resource(hfdir.TokenizerFile); err == nil && len(tj) > 0 {
		for _, id := range gjson.GetBytes(tj, "added_tokens.#(special==true)#.id").Array() {
			special = append(special, int32(id.Int()))
		}
	}
	for _, id := range dir.EOSTokenIDs() {
		special = append(special, int32(id))
	}
	dir.Close()
	ids, err := corpus.ReadFile(corpusPath, vocab)
	if err != nil {
		return nil, err
	}
	top, err := convert.TopTokens(ids, vocab, n, special)
	if err != nil {
		return nil, fmt.Errorf("--draft-head: %w", err)
	}
	return &convert.DraftHead{TokenIDs: top, Source: corpusPath}, nil
}

// convertInputs are the files a conversion reads: the regular files of
// HF_DIR (config, safetensors, tokenizer) and the --draft-corpus.
//
// Every entry but a directory is listed, so that CheckIO refuses a named
// pipe (config.json as a FIFO blocked the conversion forever) or a link to
// a device (tokenizer.json -> /dev/zero was skipped as missing, and the
// artifact silently lost its tokenizer); links to regular files, as in the
// Hugging Face cache, pass.
func convertInputs(src, draftCorpus string) []string {
	var in []string
	if ents, err := os.ReadDir(src); err == nil {
		for _, e := range ents {
			p := filepath.Join(src, e.Name())
			if e.IsDir() {
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				continue // a link to a directory
			}
			in = append(in, p)
		}
	}
	return append(in, draftCorpus)
}
