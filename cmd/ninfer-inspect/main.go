// Command ninfer-inspect describes a .ninfer artifact: identity, config,
// formats, byte counts, prefill_signature and the object table; --verify
// re-hashes and validates every payload.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/inspect"
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), args, stderr)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "ninfer-inspect",
		Usage:     "describe a .ninfer artifact",
		UsageText: "ninfer-inspect [--json] [--verify] [--summary] FILE.ninfer",
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

Exit status: 0 ok, 2 usage error, 1 runtime error (including a --verify failure).

Examples:
  ninfer-inspect model.ninfer
  ninfer-inspect --json model.ninfer | jq '.objects[] | select(.format=="q4_g64_fp16") | .id'
  ninfer-inspect --verify --summary model.ninfer`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the summary and objects as JSON"},
			&cli.BoolFlag{Name: "verify", Usage: "read every payload: check hashes and values"},
			&cli.BoolFlag{Name: "summary", Usage: "omit the object table (text output)"},
		},
		Action: func(c *cli.Context) error {
			if err := cliutil.Args(c, 1, 1, "one FILE.ninfer"); err != nil {
				return err
			}
			return inspectFile(c.Args().First(), c.Bool("json"), c.Bool("verify"), !c.Bool("summary"), c.App.Writer, c.App.ErrWriter)
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
		fmt.Fprintln(stderr, verifyLine(path, vr))
	}
	return nil
}

// verifyLine is the one-line --verify outcome; it says when the directory
// is not covered (an artifact without metadata.directory_sha256).
func verifyLine(path string, vr *inspect.VerifyReport) string {
	counts := fmt.Sprintf("%d objects, %d hashes, %d tensors valid", vr.Objects, vr.HashesChecked, vr.TensorsChecked)
	if vr.DirectoryChecked {
		return fmt.Sprintf("ninfer-inspect: verified %s: directory sha256, %s", path, counts)
	}
	return fmt.Sprintf("ninfer-inspect: verified %s: %s; the directory is NOT covered (no metadata.directory_sha256: written before ninfer recorded one; convert again to cover it)", path, counts)
}
