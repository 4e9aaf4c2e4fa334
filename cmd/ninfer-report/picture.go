package main

import (
	"io"
	"os"

	"golang.org/x/term"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/report"
	"github.com/ninfer/ninfer/pkg/report/chart"
)

// render renders runs in a table format (pkg/report) or as a picture
// (pkg/report/chart).
func render(format string, runs []report.Run) ([]byte, error) {
	if chart.IsFormat(format) {
		return chart.Render(format, runs)
	}
	return report.Render(format, runs)
}

// isTerminal reports whether w is a terminal.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// checkPictureOutput refuses, before reading any input, a picture that
// would land on a terminal: png always needs --output-file (binary data),
// svg only when stdout is a terminal.
func checkPictureOutput(format, outputFile string, stdout io.Writer) error {
	if !chart.IsFormat(format) || outputFile != "" {
		return nil
	}
	if format == chart.FormatPNG {
		return cliutil.Usagef("--format png needs --output-file PATH (a PNG is binary)")
	}
	if isTerminal(stdout) {
		return cliutil.Usagef("--format svg: standard output is a terminal; give --output-file PATH or redirect it (> chart.svg)")
	}
	return nil
}
