// Command ninfer-plan prints the device memory plan of a model: from a
// .ninfer artifact (--weights) or from a Hugging Face config.json and a
// quantization recipe (--config --recipe) before converting.
package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/termsafe"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/gpu"
	"github.com/ninfer/ninfer/pkg/plan"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

const name = "ninfer-plan"

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command and returns its exit status: 0, 1 for runtime
// errors, 2 for usage errors.
func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(cliutil.SetFlagRanges(newApp(stdout, stderr), map[string]string{
		"device": fmt.Sprintf("0..%d", math.MaxInt),
	}), args, stderr)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return cliutil.AddVersion(&cli.App{
		Name:      name,
		Usage:     "print the device memory plan of a model (schema-15 memory object)",
		UsageText: name + " (--weights M.ninfer | --config config.json [--recipe R]) (--device-memory SIZE | --gpu NAME | --available SIZE) [options]",
		Description: `Plans the weights, sequence (KV cache, GDN state) and workspace arenas,
the CUDA graph allowance and the KV capacity exactly as the engine will
allocate them. Offline, the memory available after the weights (A) is the
device total minus the weights minus a fixed runtime overhead (512 MiB on
cuda).

With --kv-capacity auto the plan keeps a headroom out of A and fills the
rest: by default the smaller of 1 GiB and A/4 (1 GiB from A = 4 GiB up, as
the reference; a quarter of a smaller budget). --headroom SIZE sets it;
--headroom 0 keeps none.

--backend: cuda (the default: a plan is for a device), cpu (no graphs, no
runtime overhead), or auto: cuda when this machine has an NVIDIA GPU that
nvidia-smi reports (device --device), else cpu, which is what --backend
auto of a CUDA build of ninfer-run and ninfer-bench picks here; the choice
and its reason are noted on stderr.

Output: --format table (the default; alias md) or json (or --json: the
schema-15 memory object); --output-file PATH writes it to PATH (atomically)
instead of stdout.

Sizes take B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB.
Known GPUs: ` + strings.Join(gpu.Names(), ", ") + `.
Recipes: ` + strings.Join(recipe.Names(), ", ") + `.

Exit status: 0 ok, 2 usage error, 1 runtime error (including a plan that does not fit).

Examples:
  ninfer-plan --weights model.ninfer --gpu rtx-4090 --max-ctx 32768 --kv-dtype int8
  ninfer-plan --weights model.ninfer --device-memory 24GiB --spec mtp --draft-tokens 2 --format json
  ninfer-plan --weights model.ninfer --backend auto --gpu local --max-ctx 8192
  ninfer-plan --config config.json --recipe groupwise-int --gpu h200 --kv-capacity auto
  ninfer-plan --config config.json --backend cpu --available 8GiB --max-ctx 4096
  ninfer-plan --config config.json --backend cpu --available 512MiB --headroom 0`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    cliutil.OnUsageError,
		ExitErrHandler:  func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "weights", Aliases: []string{"m"}, Usage: "plan for the .ninfer artifact `PATH` (header only is read)"},
			&cli.StringFlag{Name: "config", Usage: "plan from a Hugging Face config.json `PATH` before converting"},
			&cli.StringFlag{Name: "recipe", Value: "groupwise-int", Usage: "quantization `RECIPE` for --config"},
			&cli.StringFlag{Name: "device-memory", Usage: "device total memory `SIZE` (e.g. 24GiB)"},
			&cli.StringFlag{Name: "gpu", Usage: "take the device total of a known GPU `NAME` (e.g. h200, rtx-4090), or of this machine's GPU with \"local\" (nvidia-smi)"},
			&cli.StringFlag{Name: "available", Usage: "memory `SIZE` available after the weights (measured, or the CPU backend's budget)"},
			&cli.StringFlag{Name: "runtime-overhead", Usage: "runtime overhead `SIZE` subtracted from the device total (default 512MiB on cuda, 0 on cpu)"},
			&cli.StringFlag{Name: "backend", Value: "cuda", Usage: "engine `BACKEND`: cuda, cpu (no graphs, no overhead) or auto (cuda when nvidia-smi reports a GPU here, else cpu)"},
			&cli.StringFlag{Name: "max-ctx", Usage: "max context in `TOKENS` (default: the explicit kv capacity, or the largest that fits)"},
			&cli.StringFlag{Name: "kv-capacity", Value: "auto", Usage: "KV capacity in `TOKENS`, or auto"},
			&cli.StringFlag{Name: "kv-dtype", Value: "bf16", Usage: "KV cache `DTYPE`: bf16, int8 or fp8"},
			&cli.StringFlag{Name: "headroom", Usage: "auto-mode headroom `SIZE` kept out of A; 0 = none (default: the smaller of 1GiB and A/4)"},
			&cli.StringFlag{Name: "prefill-chunk", Value: "1024", Usage: "prefill chunk in `TOKENS` (multiple of 128)"},
			&cli.StringFlag{Name: "spec", Value: "none", Usage: "speculative `BACKEND`: none or mtp"},
			&cli.StringFlag{Name: "draft-tokens", Usage: "MTP draft tokens `K` in [1,5]"},
			&cli.BoolFlag{Name: "lm-head-draft", Usage: "use the optimized (reduced-vocabulary) proposal head"},
			&cli.BoolFlag{Name: "no-cuda-graph", Usage: "plan eager decode (no graph allowance)"},
			&cli.IntFlag{Name: "device", Usage: "device `ORDINAL` reported as memory.device"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "output `FORMAT`: table (alias md) or json (the schema-15 memory object)"},
			&cli.BoolFlag{Name: "json", Usage: "shorthand for --format json"},
			&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` (atomically) instead of stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no --backend auto note or 'wrote' line on stderr (errors only)"},
		},
		Action: func(c *cli.Context) error { return action(c, stdout, stderr) },
	})
}

func action(c *cli.Context, stdout, stderr io.Writer) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("unexpected argument %q", c.Args().First())
	}
	o, err := options(c, stderr)
	if err != nil {
		return err
	}
	format := c.String("format")
	if c.Bool("json") {
		if c.IsSet("format") && format != "json" {
			return cliutil.Usagef("--json is --format json; it contradicts --format %s", format)
		}
		format = "json"
	}
	switch format {
	case "table", "md", "json":
	default:
		return cliutil.Usagef("--format %q: want table (md) or json", format)
	}
	if err := cliutil.CheckOutputFile("--output-file", c.String("output-file"), "--format %s"); err != nil {
		return err
	}
	if err := cliutil.CheckIO("--output-file", c.String("output-file"), c.String("weights"), c.String("config")); err != nil {
		return err
	}
	var cfg qwen35.Config
	var objs []plan.Object
	switch w, cf := c.String("weights"), c.String("config"); {
	case w != "" && cf != "":
		return cliutil.Usagef("--weights and --config are mutually exclusive")
	case w == "" && cf == "":
		return cliutil.Usagef("--weights or --config is required")
	case w != "":
		if c.IsSet("recipe") {
			return cliutil.Usagef("--recipe applies to --config only")
		}
		if cfg, objs, err = weightsFromArtifact(w); err != nil {
			return err
		}
		if err := plan.CheckProposalHead(objs, o); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
	default:
		r, err := recipe.Lookup(c.String("recipe"))
		if err != nil {
			return cliutil.Usagef("--recipe %q: unknown recipe (want %s)", c.String("recipe"), strings.Join(recipe.Names(), ", "))
		}
		if cfg, objs, err = weightsFromConfig(cf, r, o.LMHeadDraft); err != nil {
			return err
		}
	}
	p, err := plan.New(cfg, objs, o)
	if err != nil {
		return err
	}
	var out []byte
	if format == "json" {
		if out, err = p.Memory.JSON(); err != nil {
			return fmt.Errorf("encode memory object: %w", err)
		}
	} else {
		var b strings.Builder
		if err := p.WriteTable(&b); err != nil {
			return fmt.Errorf("render table: %w", err)
		}
		out = []byte(b.String())
	}
	if path := c.String("output-file"); path != "" {
		if err := cliutil.WriteFileAtomic(path, out); err != nil {
			return err
		}
		if !c.Bool("quiet") {
			fmt.Fprintf(stderr, "%s: wrote %s\n", name, termsafe.Path(path))
		}
		return nil
	}
	_, err = stdout.Write(out)
	return err
}

// probeGPU asks the machine's driver for a GPU (--backend auto); a
// variable so that tests choose the answer.
var probeGPU = gpu.QueryLocal

// resolveBackend maps --backend to the plan's backend: auto is cuda when
// nvidia-smi reports the device, else cpu; note says which and why.
func resolveBackend(c *cli.Context) (b plan.Backend, note string, err error) {
	switch v := c.String("backend"); v {
	case "cuda":
		return plan.BackendCUDA, "", nil
	case "cpu":
		return plan.BackendCPU, "", nil
	case "auto":
		dev := c.Int("device")
		card, err := probeGPU(dev)
		if err != nil {
			return plan.BackendCPU, fmt.Sprintf("--backend auto: planning for cpu (no GPU here: %v)", err), nil
		}
		return plan.BackendCUDA, fmt.Sprintf("--backend auto: planning for cuda (this machine's GPU %d: %s)", dev, card.Name), nil
	default:
		return "", "", cliutil.Usagef("invalid backend: %s (want auto, cpu or cuda)", v)
	}
}

// prefillChunkWant is the --prefill-chunk range in words, as ninfer-run
// and ninfer-bench give it.
const prefillChunkWant = "a positive multiple of 128"

// prefillChunk parses a --prefill-chunk value (typed: the flag as the user
// typed it): a positive multiple of 128, else the shared out-of-range usage
// error, before plan.Options.Validate words it otherwise.
func prefillChunk(s, typed string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, cliutil.NumberError(typed, s, prefillChunkWant)
	}
	if n < 128 || n%128 != 0 {
		return 0, cliutil.OutOfRange(typed, s, prefillChunkWant)
	}
	return n, nil
}

// options turns the flags into plan options; every error is a usage error.
func options(c *cli.Context, stderr io.Writer) (o plan.Options, err error) {
	args, _ := c.App.Metadata["args"].([]string) // flags as typed, for messages
	// inRange parses an integer flag in lo..hi; an error names the flag as
	// typed, the value and the range.
	inRange := func(flag string, lo, hi int64) (int64, error) {
		s := c.String(flag)
		typed := cliutil.FlagAsGiven(args, flag)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, cliutil.NumberError(typed, s, fmt.Sprintf("%d..%d", lo, hi))
		}
		return n, cliutil.CheckRange(typed, n, lo, hi, "")
	}
	positive := func(flag string) (int64, error) { return inRange(flag, 1, math.MaxInt64) }
	size := func(flag string) (int64, error) {
		n, err := plan.ParseSize(c.String(flag))
		if err != nil {
			return 0, cliutil.Usagef("--%s: %v", flag, err)
		}
		return n, nil
	}
	// sizeOrNone parses a size where 0 means none: -1 in the options.
	sizeOrNone := func(flag string) (int64, error) {
		n, err := plan.ParseSizeOrZero(c.String(flag))
		if err != nil {
			return 0, cliutil.Usagef("--%s: %v", flag, err)
		}
		if n == 0 {
			return -1, nil
		}
		return n, nil
	}
	if o.KVDtype, err = plan.ParseKVDtype(c.String("kv-dtype")); err != nil {
		return o, cliutil.UsageError{Err: err}
	}
	if o.Spec, err = plan.ParseSpec(c.String("spec")); err != nil {
		return o, cliutil.UsageError{Err: err}
	}
	var note string
	if o.Backend, note, err = resolveBackend(c); err != nil {
		return o, err
	}
	defer func() {
		if err == nil && note != "" && !c.Bool("quiet") {
			fmt.Fprintf(stderr, "%s: note: %s\n", name, note) // once the flags are good
		}
	}()
	if c.IsSet("max-ctx") {
		if o.MaxContext, err = positive("max-ctx"); err != nil {
			return o, err
		}
	}
	if s := c.String("kv-capacity"); s != "auto" {
		if o.KVCapacity, err = positive("kv-capacity"); err != nil {
			return o, err
		}
		if c.IsSet("headroom") {
			return o, cliutil.Usagef("--headroom applies to --kv-capacity auto only")
		}
	}
	if c.IsSet("headroom") {
		if o.HeadroomBytes, err = sizeOrNone("headroom"); err != nil {
			return o, err
		}
	}
	if o.PrefillChunk, err = prefillChunk(c.String("prefill-chunk"), cliutil.FlagAsGiven(args, "prefill-chunk")); err != nil {
		return o, err
	}
	if c.IsSet("draft-tokens") {
		n, err := inRange("draft-tokens", 1, plan.MaxDraftTokens)
		if err != nil {
			return o, err
		}
		o.DraftTokens = int(n)
	}
	o.LMHeadDraft = c.Bool("lm-head-draft")
	o.UseCUDAGraph = !c.Bool("no-cuda-graph") && o.Backend == plan.BackendCUDA
	o.Device = c.Int("device")
	if err := cliutil.CheckRange(cliutil.FlagAsGiven(args, "device"), int64(o.Device), 0, math.MaxInt, ""); err != nil {
		return o, err
	}

	budgets := 0
	for _, f := range []string{"device-memory", "gpu", "available"} {
		if c.IsSet(f) {
			budgets++
		}
	}
	if budgets != 1 {
		return o, cliutil.Usagef("give exactly one of --device-memory, --gpu or --available")
	}
	switch {
	case c.IsSet("device-memory"):
		if o.DeviceTotalBytes, err = size("device-memory"); err != nil {
			return o, err
		}
	case c.IsSet("gpu"):
		var card gpu.Card
		if c.String("gpu") == gpu.Local {
			if card, err = gpu.QueryLocal(c.Int("device")); err != nil {
				return o, fmt.Errorf("--gpu local: %w", err)
			}
		} else if card, err = gpu.Lookup(c.String("gpu")); err != nil {
			return o, cliutil.Usagef("--gpu: %v", err)
		}
		o.DeviceTotalBytes = card.MemoryBytes
	default:
		if o.AvailableAfterWeightsBytes, err = size("available"); err != nil {
			return o, err
		}
	}
	if c.IsSet("runtime-overhead") {
		if o.AvailableAfterWeightsBytes > 0 {
			return o, cliutil.Usagef("--runtime-overhead applies to --device-memory and --gpu only")
		}
		if o.RuntimeOverheadBytes, err = sizeOrNone("runtime-overhead"); err != nil {
			return o, err
		}
		// An overhead that leaves nothing of the device total fits no model:
		// the flags contradict each other, whatever the weights.
		if o.RuntimeOverheadBytes >= o.DeviceTotalBytes {
			return o, cliutil.Usagef("%s %s: out of range (want less than the device total, %d bytes)",
				cliutil.FlagAsGiven(args, "runtime-overhead"), c.String("runtime-overhead"), o.DeviceTotalBytes)
		}
	}
	if err := o.Validate(); err != nil {
		return o, cliutil.UsageError{Err: err}
	}
	return o, nil
}

// weightsFromConfig plans from a Hugging Face config.json and a recipe.
func weightsFromConfig(path string, r recipe.Recipe, withProposal bool) (qwen35.Config, []plan.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return qwen35.Config{}, nil, fmt.Errorf("read config: %w", err)
	}
	cfg, _, err := qwen35.ParseHFConfig(data)
	if err != nil {
		return qwen35.Config{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	objs, _, err := plan.FromRecipe(cfg, r, withProposal)
	if err != nil {
		return qwen35.Config{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, objs, nil
}

// weightsFromArtifact reads the config and the object directory of a
// .ninfer artifact (header only).
func weightsFromArtifact(path string) (qwen35.Config, []plan.Object, error) {
	f, err := artifact.Open(path)
	if err != nil {
		return qwen35.Config{}, nil, err
	}
	defer f.Close()
	cfg, err := f.Config()
	if err != nil {
		return qwen35.Config{}, nil, err
	}
	objs := make([]plan.Object, len(f.Objects))
	for i, o := range f.Objects {
		objs[i] = plan.Object{ID: o.ID, Component: o.Component, Bytes: o.Bytes, Host: !o.IsTensor()}
	}
	return cfg, objs, nil
}
