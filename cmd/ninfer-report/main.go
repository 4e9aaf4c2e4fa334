// Command ninfer-report aggregates ninfer-bench JSON lines into schema-15
// documents, renders them as markdown or CSV, checks stored documents and
// compares two runs.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/termsafe"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
	"github.com/ninfer/ninfer/pkg/report/chart"
)

const name = "ninfer-report"

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the exit status: 0 ok, 2 usage error,
// 1 runtime error (including --check mismatches).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdin, stdout, stderr), args, stderr)
}

func onUsageError(_ *cli.Context, err error, _ bool) error { return cliutil.UsageError{Err: err} }

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	return cliutil.AddVersion(&cli.App{
		Name:      name,
		Usage:     "aggregate, check and compare ninfer-bench results",
		UsageText: name + " [--format json|md|csv|svg|png] [--output-file PATH] [--run ID] [FILES...|-]\n" + name + " --check DOC\n" + name + " compare [--format md|csv] A B",
		Description: `Reads ninfer-bench JSON lines (docs/BENCH-LINES.md) or schema-15 report
documents and writes the schema-15 document (default), a llama-bench style
markdown table or CSV, or draws them (svg, png): prefill and decode tok/s
against the context depth of ninfer-bench -d for each run, or a grouped bar
chart per test without depths; error bars are the reps' stddev. png needs
--output-file; svg is not written to a terminal. Flags go before the files. With no files, standard
input is read unless it is a terminal.

Exit status: 0 ok, 2 usage error, 1 runtime error (including --check mismatches).

Examples:
   ninfer-report run.jsonl > report.json
   cat run.jsonl | ninfer-report -
   ninfer-report --format md run.jsonl
   ninfer-report --format csv --output-file out/all.csv a.jsonl b.jsonl
   ninfer-bench -m m.ninfer --corpus c.ids -d 0,1024,4096 -p 512 -n 128 | ninfer-report --format svg > depth.svg
   ninfer-report --format png --output-file depth.png q8.jsonl groupwise-int.jsonl
   ninfer-report --run 20261201T082308Z-3f9a1c0e both-runs.jsonl
   ninfer-report --check report.json
   ninfer-report compare base.json new.jsonl`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    onUsageError,
		ExitErrHandler:  func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: report.FormatJSON, Usage: "output format: json, md, csv, svg or png (a chart; png needs --output-file)"},
			&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` (atomically) instead of stdout"},
			&cli.StringFlag{Name: "run", Usage: "select the run with this run_id (for a document: its file name)"},
			&cli.StringFlag{Name: "check", Usage: "recompute every aggregate of the schema-15 document `DOC` (- = stdin) from its reps; exit 1 on mismatch"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no 'wrote' or --check summary line on stderr (errors and warnings only)"},
		},
		Action: func(c *cli.Context) error { return reportAction(c, stdin, stdout, stderr) },
		Commands: []*cli.Command{{
			Name:      "compare",
			Usage:     "compare two runs test by test with Welch's t-test",
			UsageText: name + " compare [--format md|csv] [--output-file PATH] A B",
			Description: `A and B are each a JSON-lines stream or a schema-15 document holding one run
(choose with --run-a/--run-b otherwise). Tests match by label; for each,
prefill and decode t/s means, Δ% and the two-sided Welch p-value are shown,
with ~ when p >= 0.05.

Example:
   ninfer-report compare old/report.json new/run.jsonl`,
			OnUsageError: onUsageError,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: report.FormatMD, Usage: "output format: md or csv"},
				&cli.StringFlag{Name: "output-file", Aliases: []string{"o"}, Usage: "write the output to `PATH` (atomically) instead of stdout"},
				&cli.StringFlag{Name: "run-a", Usage: "run_id to use from A"},
				&cli.StringFlag{Name: "run-b", Usage: "run_id to use from B"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no 'wrote' line on stderr (errors and warnings only)"},
			},
			Action: func(c *cli.Context) error { return compareAction(c, stdin, stdout, stderr) },
		}},
	})
}

// fileArgs returns the positional arguments, rejecting flags placed after
// them (urfave/cli stops parsing flags at the first file).
func fileArgs(c *cli.Context) ([]string, error) {
	files := c.Args().Slice()
	for _, f := range files {
		if strings.HasPrefix(f, "-") && f != "-" {
			if _, err := os.Stat(f); err != nil {
				return nil, cliutil.Usagef("flag %s after the file arguments (flags go first)", f)
			}
		}
	}
	return files, nil
}

func emit(c *cli.Context, data []byte, stdout, stderr io.Writer) error {
	path := c.String("output-file")
	if path == "" {
		_, err := stdout.Write(data)
		return err
	}
	if err := cliutil.WriteFileAtomic(path, data); err != nil {
		return err
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(stderr, "%s: wrote %s\n", name, termsafe.Path(path))
	}
	return nil
}

func warn(stderr io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprint(stderr, cliutil.WarningLine(name, w))
	}
}

func stdinIsTerminal(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func reportAction(c *cli.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	files, err := fileArgs(c)
	if err != nil {
		return err
	}
	format := c.String("format")
	if format != report.FormatJSON && format != report.FormatMD && format != report.FormatCSV && !chart.IsFormat(format) {
		return cliutil.Usagef("--format %q: want json, md, csv, svg or png", format)
	}
	if err := cliutil.CheckOutputFile("--output-file", c.String("output-file"), "--format %s"); err != nil {
		return err
	}
	inputs := append([]string{c.String("check")}, files...)
	if len(files) == 0 && c.String("check") == "" {
		inputs = append(inputs, "-") // standard input is read
	}
	if err := cliutil.CheckIO("--output-file", c.String("output-file"), inputs...); err != nil {
		return err
	}
	if err := checkPictureOutput(format, c.String("output-file"), stdout); err != nil {
		return err
	}
	if doc := c.String("check"); doc != "" {
		if len(files) > 0 {
			return cliutil.Usagef("--check takes the document as its value; no other files allowed")
		}
		return checkAction(doc, stdin, stdout, stderr, c.Bool("quiet"))
	}
	if len(files) == 0 {
		if stdinIsTerminal(stdin) {
			return cliutil.Usagef("no input files (give FILES, or - to read standard input)")
		}
		files = []string{"-"}
	}
	runs, warnings, err := report.Load(files, stdin, c.String("run"))
	warn(stderr, warnings)
	if err != nil {
		return err
	}
	out, err := render(format, runs)
	if err != nil {
		return err
	}
	return emit(c, out, stdout, stderr)
}

func checkAction(path string, stdin io.Reader, stdout, stderr io.Writer, quiet bool) error {
	var data []byte
	var err error
	if path == "-" { // like the FILES: "-" is standard input
		if stdinIsTerminal(stdin) {
			return cliutil.Usagef("--check -: standard input is a terminal (pipe the document in)")
		}
		path = "<stdin>"
		data, err = cliutil.ReadAllLimit(stdin, "<stdin>", cliutil.MaxInputBytes)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("--check: cannot read document: %w", err)
	}
	doc, err := benchfmt.DecodeDocument(data)
	if err != nil {
		if first, _, _ := strings.Cut(string(data), "\n"); strings.HasPrefix(first, `{"type":`) {
			return fmt.Errorf("--check %s: this is a stream of JSON lines, not a schema-15 document (make one with: ninfer-report %s > report.json)", path, path)
		}
		return fmt.Errorf("--check %s: %w", path, err)
	}
	res := report.Check(&doc)
	for _, m := range res.Mismatches {
		fmt.Fprintln(stdout, m.String())
	}
	if !quiet {
		fmt.Fprintf(stderr, "%s: checked %d values in %s: %d exact, %d within input rounding, %d mismatches\n",
			name, res.Checked, termsafe.Path(path), res.Exact, res.Rounding, len(res.Mismatches))
	}
	if n := len(res.Mismatches); n > 0 {
		return fmt.Errorf("%s: %d aggregate(s) do not match the reps", path, n)
	}
	return nil
}

func oneRun(path, id string, stdin io.Reader, stderr io.Writer) (report.Run, error) {
	in, err := report.ReadFiles([]string{path}, stdin)
	if in != nil {
		warn(stderr, in.Warnings) // with an error too: a cut-off only line says so
	}
	if err != nil {
		return report.Run{}, err
	}
	runs, err := in.Select(id)
	if err != nil {
		return report.Run{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(runs) != 1 {
		return report.Run{}, fmt.Errorf("%s holds %d runs; pick one with --run-a/--run-b", path, len(runs))
	}
	return runs[0], nil
}

func compareAction(c *cli.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	// "ninfer-report -o x compare A B": the flags before "compare" are the
	// report's, which compare never reads (the output went to stdout).
	if lin := c.Lineage(); len(lin) > 1 && lin[1] != nil {
		for _, f := range lin[1].App.Flags {
			if n := f.Names()[0]; lin[1].IsSet(n) {
				return cliutil.Usagef("--%s before \"compare\": compare's flags go after it (%s compare [--format md|csv] [--output-file PATH] A B)", n, name)
			}
		}
	}
	files, err := fileArgs(c)
	if err != nil {
		return err
	}
	if len(files) != 2 {
		return cliutil.Usagef("compare needs exactly two inputs A and B, got %d", len(files))
	}
	format := c.String("format")
	if format != report.FormatMD && format != report.FormatCSV {
		return cliutil.Usagef("compare --format %q: want md or csv", format)
	}
	if err := cliutil.CheckOutputFile("--output-file", c.String("output-file"), "--format %s"); err != nil {
		return err
	}
	if err := cliutil.CheckIO("--output-file", c.String("output-file"), files...); err != nil {
		return err
	}
	a, err := oneRun(files[0], c.String("run-a"), stdin, stderr)
	if err != nil {
		return err
	}
	b, err := oneRun(files[1], c.String("run-b"), stdin, stderr)
	if err != nil {
		return err
	}
	cmp := report.Compare(&a.Document, &b.Document)
	warn(stderr, cmp.Warnings)
	if len(cmp.Rows) == 0 {
		return fmt.Errorf("%s and %s have no test in common (tests match by label, e.g. pp512, tg128)", files[0], files[1])
	}
	out, err := report.RenderCompare(format, cmp, describe(files[0], &a), describe(files[1], &b))
	if err != nil {
		return err
	}
	return emit(c, out, stdout, stderr)
}

func describe(path string, r *report.Run) string {
	d := &r.Document
	gpu := "cpu"
	if d.Environment.GPUName != nil {
		gpu = *d.Environment.GPUName
	}
	if r.RunID == path {
		return fmt.Sprintf("%s (%s; %s)", path, d.Load.Name, gpu)
	}
	return fmt.Sprintf("%s (run %s; %s; %s)", path, r.RunID, d.Load.Name, gpu)
}
