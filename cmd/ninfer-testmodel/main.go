// Command ninfer-testmodel writes a tiny random Qwen3.5 Hugging Face model
// directory, deterministically from a seed.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

const name = "ninfer-testmodel"

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// usageError marks errors that exit with status 2.
type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	if err := app.Run(args); err != nil {
		msg := cliutil.UnknownFlagAsGiven(err.Error(), "flag provided but not defined: ", args)
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.TrimPrefix(msg, "testmodel: "))
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func newApp(stdout, stderr io.Writer) *cli.App {
	d := testmodel.DefaultOptions()
	return &cli.App{
		Name:      name,
		Usage:     "write a tiny random Qwen3.5 Hugging Face model directory",
		UsageText: name + " [options] OUT_DIR",
		Description: `Generates config.json, safetensors weights (text trunk + MTP head), a small
byte-level BPE tokenizer.json, tokenizer_config.json, generation_config.json and
chat_template.jinja. The output depends only on the options.

Exit status: 0 ok, 2 usage error, 1 runtime error.

Examples:
   ` + name + ` /tmp/tiny
   ` + name + ` --seed 7 --layers 8 --dtype f32 /tmp/tiny8
   ` + name + ` --multimodal --shards 3 --tied --force /tmp/tiny-mm`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{cliutil.FlagMessage(err)}
		},
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "PRNG `SEED`"},
			&cli.IntFlag{Name: "layers", Value: d.Layers, Usage: "`N` decoder layers (every 4th is full attention)"},
			&cli.IntFlag{Name: "hidden", Value: d.Hidden, Usage: "hidden `SIZE`"},
			&cli.IntFlag{Name: "intermediate", Value: d.Intermediate, Usage: "MLP intermediate `SIZE`"},
			&cli.IntFlag{Name: "vocab", Value: d.Vocab, Usage: "`N` vocabulary rows (≥ tokenizer size)"},
			&cli.IntFlag{Name: "mtp-layers", Value: d.MTPLayers, Usage: "`N` MTP layers (0: no mtp.* tensors)"},
			&cli.BoolFlag{Name: "tied", Usage: "tie the output head to the embedding (no lm_head.weight)"},
			&cli.BoolFlag{Name: "multimodal", Usage: "Qwen3_5ForConditionalGeneration layout with model.visual.* dummies"},
			&cli.StringFlag{Name: "dtype", Value: d.DType, Usage: "weight `DTYPE`: bf16, f16 or f32"},
			&cli.IntFlag{Name: "shards", Value: d.Shards, Usage: "`N` safetensors shards (>1 writes an index)"},
			&cli.BoolFlag{Name: "force", Usage: "replace a non-empty OUT_DIR"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no 'wrote' line on stderr (errors only)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{fmt.Errorf("want exactly one OUT_DIR argument, got %d", c.NArg())}
			}
			o := d
			o.Seed, o.Layers, o.Hidden = c.Uint64("seed"), c.Int("layers"), c.Int("hidden")
			o.Intermediate, o.Vocab, o.MTPLayers = c.Int("intermediate"), c.Int("vocab"), c.Int("mtp-layers")
			o.Tied, o.Multimodal, o.DType, o.Shards = c.Bool("tied"), c.Bool("multimodal"), c.String("dtype"), c.Int("shards")
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			m, err := testmodel.WriteDir(c.Args().First(), o, c.Bool("force"))
			if err != nil {
				// An existing output is a runtime error, like ninfer-convert's
				// "exists (use --force to overwrite)".
				return err
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(stderr, "%s: wrote %s: %d tensors (%d bytes), tokenizer %d tokens (%d merges)\n",
					name, c.Args().First(), m.Tensors, m.WeightBytes, m.TokenizerSize, m.Merges)
			}
			return nil
		},
	}
}
