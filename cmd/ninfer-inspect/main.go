// Command ninfer-inspect describes a .ninfer artifact: identity, config,
// formats, byte counts, prefill_signature and the object table; --verify
// re-hashes and validates every payload.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/inspect"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), args, stderr)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "ninfer-inspect",
		Usage:     "describe a .ninfer artifact",
		UsageText: "ninfer-inspect [--format text|json] [--verify] [--summary] [--output-file PATH] FILE.ninfer",
		Description: `Reads only the header and directory (fast on multi-GB files) and prints a
summary (identity, architecture, key dims, formats, object counts, bytes per
component and per format, prefill_signature) and the object table.
Opening checks the directory: its SHA-256 (metadata.directory_sha256, which
covers the config and every object's recorded hash) and the config against
every tensor's shape and the tensor inventory; an artifact edited after it
was written fails here. Older artifacts without the digest still open; the
summary and --verify say the directory is not covered.
--verify also reads every payload: it checks the recorded SHA-256 of each
object and the validity of every tensor's values (finite floats, legal
scales and codes); it exits 1 at the first problem, naming the object.
The summary lists the config fields the converter defaulted because
config.json left them out ("config defaults"; JSON config_defaults: null
when the artifact does not record them).
Legacy v2 containers are shown too (no config or signature).
--format json (or --json) prints the summary and the objects as one JSON
document (with --verify, its "verify" report); --output-file PATH writes the
output to PATH (atomically, parents created) instead of stdout. The --verify
line goes to stderr (--quiet: errors only).

ninfer-run and ninfer-bench never re-hash the payloads unless given --verify
(the load stays a mapping); this is the check to run when a model produces
non-finite logits. If it passes, the payload is intact, so the weights are
numerically broken (e.g. values overflow fp32 in the layer that ninfer-run
or ninfer-bench names).
The header's artifact_id is recorded in metadata.artifact_id, so the digest
covers it; older artifacts without it open, and --verify says it is not
covered.

Exit status: 0 ok, 2 usage error, 1 runtime error (including a --verify failure).

Examples:
  ninfer-inspect model.ninfer
  ninfer-inspect --format json model.ninfer | jq '.objects[] | select(.format=="q4_g64_fp16") | .id'
  ninfer-inspect --verify --summary model.ninfer
  ninfer-inspect --format json --verify --output-file out/model.json model.ninfer`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "output `FORMAT`: text or json"},
			&cli.BoolFlag{Name: "json", Usage: "shorthand for --format json"},
			&cli.BoolFlag{Name: "verify", Usage: "read every payload: check hashes and values"},
			&cli.BoolFlag{Name: "summary", Usage: "omit the object table (text output)"},
			&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` (atomically, parents created) instead of stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no --verify or 'wrote' line on stderr (errors only)"},
		},
		Action: func(c *cli.Context) error {
			if err := cliutil.Args(c, 1, 1, "one FILE.ninfer"); err != nil {
				return err
			}
			format := c.String("format")
			if c.Bool("json") {
				if c.IsSet("format") && format != "json" {
					return cliutil.Usagef("--json is --format json; it contradicts --format %s", format)
				}
				format = "json"
			}
			if format != "text" && format != "json" {
				return cliutil.Usagef("--format %q: want text or json", format)
			}
			path := c.String("output-file")
			if err := cliutil.CheckOutputFile("--output-file", path, "--format %s"); err != nil {
				return err
			}
			if err := cliutil.CheckIO("--output-file", path, c.Args().First()); err != nil {
				return err
			}
			stderr := c.App.ErrWriter
			if c.Bool("quiet") {
				stderr = io.Discard
			}
			var out bytes.Buffer
			if err := inspectFile(c.Args().First(), format == "json", c.Bool("verify"), !c.Bool("summary"), &out, stderr); err != nil {
				return err
			}
			if path == "" {
				_, err := c.App.Writer.Write(out.Bytes())
				return err
			}
			if err := cliutil.WriteFileAtomic(path, out.Bytes()); err != nil {
				return fmt.Errorf("--output-file: %w", err)
			}
			fmt.Fprintf(stderr, "ninfer-inspect: wrote %s\n", termsafe.Path(path))
			return nil
		},
	}
	return cliutil.Prepare(app, stdout, stderr)
}

func inspectFile(path string, asJSON, verify, table bool, stdout, stderr io.Writer) error {
	var f *artifact.File
	var err error
	if verify {
		f, err = artifact.OpenMapped(path)
	} else {
		f, err = artifact.Open(path)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := inspect.Summarize(f)
	if err != nil {
		return err
	}
	var vr *inspect.VerifyReport
	if verify {
		r, err := inspect.Verify(f)
		if err != nil {
			return err
		}
		vr = &r
	}
	if asJSON {
		if vr == nil {
			return inspect.WriteJSON(stdout, s)
		}
		return inspect.WriteJSON(stdout, struct {
			inspect.Summary
			Verify *inspect.VerifyReport `json:"verify"`
		}{s, vr})
	}
	if err := inspect.WriteText(stdout, s, table); err != nil {
		return err
	}
	if vr != nil {
		fmt.Fprintln(stderr, "ninfer-inspect: "+inspect.VerifySummary(path, *vr))
	}
	return nil
}
