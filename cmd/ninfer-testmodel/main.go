// Command ninfer-testmodel writes a tiny random Qwen3.5 Hugging Face model
// directory, deterministically from a seed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/termsafe"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

const name = "ninfer-testmodel"

func main() {
	// The stopping signals are handled for the life of the process: their
	// default action would leave the temporary directory behind.
	ctx, _ := cliutil.NotifyStop(context.Background())
	interruptContext = func() (context.Context, context.CancelFunc) { return ctx, func() {} }
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// interruptContext is cancelled by the first stopping signal: SIGINT,
// SIGTERM or SIGHUP (a variable so tests can interrupt). The stop removes
// the temporary directory and exits 128 + the signal's number; a repeated
// signal is ignored, as in ninfer-convert.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return cliutil.NotifyStop(context.Background())
}

func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), args, stderr)
}

// sizeFlags are the size flags and their valid ranges (what the model
// format allows; pkg/testmodel limits.go).
var sizeFlags = []struct {
	name   string
	lo, hi int64
}{
	{"layers", 1, testmodel.MaxLayers},
	{"hidden", 1, testmodel.MaxDim},
	{"intermediate", 1, testmodel.MaxDim},
	{"vocab", int64(testmodel.VocabMin()), testmodel.MaxVocab},
	{"mtp-layers", 0, testmodel.MaxLayers},
	{"shards", 1, testmodel.MaxShards},
}

// noPrefix drops the package's "testmodel: " prefix: the line already
// starts with the tool's name.
func noPrefix(err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "testmodel: "); ok {
		return errors.New(rest)
	}
	return err
}

func newApp(stdout, stderr io.Writer) *cli.App {
	d := testmodel.DefaultOptions()
	app := &cli.App{
		Name:      name,
		Usage:     "write a tiny random Qwen3.5 Hugging Face model directory",
		UsageText: name + " [options] OUT_DIR",
		Description: `Generates config.json, safetensors weights (text trunk + MTP head), a small
byte-level BPE tokenizer.json, tokenizer_config.json, generation_config.json and
chat_template.jinja. The output depends only on the options.

Sizes are checked against what the model format allows (a usage error names
the flag and its range), and the memory the generation needs is estimated
first: a model larger than the available memory is refused before anything
is written. OUT_DIR is checked first: not the current directory (or one
that contains it) nor a file; a non-empty OUT_DIR needs --force, which
replaces only a model directory (config.json and the weights). The output
appears only when complete; on an error or a stop nothing is left behind.

Exit status: 0 ok, 2 usage error, 1 runtime error, 128+N stopped by signal N
(130 SIGINT, 143 SIGTERM, 129 SIGHUP; nothing written, the temporary
directory removed).

Examples:
   ` + name + ` /tmp/tiny
   ` + name + ` --seed 7 --layers 8 --dtype f32 /tmp/tiny8
   ` + name + ` --multimodal --shards 3 --tied --force /tmp/tiny-mm
   ` + name + ` --shape qwen3.5-0.8b /tmp/q35-08b          # real 0.8B shape, random weights
   ` + name + ` --shape qwen3.5-9b --layers 4 /tmp/q35-9b-l4  # 9B widths, 4 layers`,
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "PRNG `SEED`"},
			&cli.StringFlag{Name: "shape", Usage: "real Qwen3.5 `SHAPE` preset: " + strings.Join(testmodel.ShapeNames(), ", ") + " (size flags given override it)"},
			&cli.IntFlag{Name: "layers", Value: d.Layers, Usage: "`N` decoder layers (every 4th is full attention)"},
			&cli.IntFlag{Name: "hidden", Value: d.Hidden, Usage: "hidden `SIZE`"},
			&cli.IntFlag{Name: "intermediate", Value: d.Intermediate, Usage: "MLP intermediate `SIZE`"},
			&cli.IntFlag{Name: "vocab", Value: d.Vocab, Usage: "`N` vocabulary rows (≥ tokenizer size)"},
			&cli.IntFlag{Name: "mtp-layers", Value: d.MTPLayers, Usage: "`N` MTP layers (0: no mtp.* tensors)"},
			&cli.BoolFlag{Name: "tied", Usage: "tie the output head to the embedding (no lm_head.weight)"},
			&cli.BoolFlag{Name: "multimodal", Usage: "Qwen3_5ForConditionalGeneration layout with model.visual.* dummies"},
			&cli.StringFlag{Name: "dtype", Value: d.DType, Usage: "weight `DTYPE`: bf16, f16 or f32"},
			&cli.IntFlag{Name: "shards", Value: d.Shards, Usage: "`N` safetensors shards (>1 writes an index)"},
			&cli.BoolFlag{Name: "force", Usage: "replace a non-empty OUT_DIR that is a model directory"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no 'wrote' line on stderr (errors only)"},
		},
		Action: func(c *cli.Context) error {
			if err := cliutil.Args(c, 1, 1, "exactly one OUT_DIR"); err != nil {
				return err
			}
			for _, f := range sizeFlags {
				if err := cliutil.CheckRange("--"+f.name, c.Int64(f.name), f.lo, f.hi, ""); err != nil {
					return err
				}
			}
			o := d
			o.Seed, o.Layers, o.Hidden = c.Uint64("seed"), c.Int("layers"), c.Int("hidden")
			o.Intermediate, o.Vocab, o.MTPLayers = c.Int("intermediate"), c.Int("vocab"), c.Int("mtp-layers")
			o.Tied, o.Multimodal, o.DType, o.Shards = c.Bool("tied"), c.Bool("multimodal"), c.String("dtype"), c.Int("shards")
			if c.IsSet("shape") {
				var err error
				if o, err = applyShape(c, o); err != nil {
					return err
				}
			}
			if err := o.Validate(); err != nil {
				return cliutil.UsageError{Err: noPrefix(err)}
			}
			out := c.Args().First()
			if err := checkOut(out, c.Bool("force")); err != nil {
				return err
			}
			if err := cliutil.CheckMemory("the model ("+sizeDesc(o)+")", o.MemoryEstimate()); err != nil {
				return err
			}
			ctx, stop := interruptContext()
			defer stop()
			m, err := testmodel.WriteDirContext(ctx, out, o, c.Bool("force"))
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("%w: %s was not written", cliutil.StopCause(ctx), termsafe.Path(out))
			}
			if err != nil {
				// An existing output is a runtime error, like ninfer-convert's
				// "exists (use --force to overwrite)".
				return noPrefix(err)
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(stderr, "%s: wrote %s: %d tensors (%d bytes), tokenizer %d tokens (%d merges)\n",
					name, termsafe.Path(out), m.Tensors, m.WeightBytes, m.TokenizerSize, m.Merges)
			}
			return nil
		},
	}
	ranges := map[string]string{}
	for _, f := range sizeFlags {
		ranges[f.name] = fmt.Sprintf("%d..%d", f.lo, f.hi)
	}
	return cliutil.SetFlagRanges(cliutil.Prepare(app, stdout, stderr), ranges)
}

// checkOut checks OUT_DIR before any work (testmodel.CheckOutDir): the
// current directory or an ancestor, a non-directory, and with --force a
// non-empty directory that is not a model directory are usage errors
// (exit 2); a non-empty directory without --force is a runtime error (exit
// 1), like ninfer-convert's "exists (use --force to overwrite)".
func checkOut(out string, force bool) error {
	err := testmodel.CheckOutDir(out, force)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, testmodel.ErrHoldsCwd), errors.Is(err, testmodel.ErrNotDir), errors.Is(err, testmodel.ErrNotModelDir):
		return cliutil.UsageError{Err: noPrefix(err)}
	}
	return noPrefix(err)
}

func sizeDesc(o testmodel.Options) string {
	return fmt.Sprintf("--layers %d --hidden %d --intermediate %d --vocab %d --dtype %s", o.Layers, o.Hidden, o.Intermediate, o.Vocab, o.DType)
}
