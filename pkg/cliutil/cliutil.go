// Package cliutil holds the conventions every ninfer command shares: one
// error line "tool: message" on stderr, exit status 2 for usage errors and 1
// for runtime errors, 128 + the signal number when stopped by a signal
// (signal.go), and atomic output files.
package cliutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
	"github.com/urfave/cli/v2"
)

// UsageError marks an error as a usage error (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ErrInterrupted marks a run stopped by a signal or a cancelled context;
// Stopped (signal.go) matches it and says which signal.
var ErrInterrupted = errors.New("interrupted")

// ExitInterrupted is the exit status of a run stopped by SIGINT (128+2),
// and of one cancelled without a signal.
const ExitInterrupted = 130

// Usagef returns a formatted usage error.
func Usagef(f string, a ...any) error { return UsageError{fmt.Errorf(f, a...)} }

// Prepare sets the app's writers, routes flag-parsing errors to usage
// errors, so that Run can map them to exit status 2, and adds the shared
// --version flag (version.go).
func Prepare(app *cli.App, stdout, stderr io.Writer) *cli.App {
	app.Writer, app.ErrWriter = stdout, stderr
	AddVersion(app)
	app.HideHelpCommand = true
	app.OnUsageError = OnUsageError
	app.ExitErrHandler = func(*cli.Context, error) {}
	return app
}

// Run runs app and returns the process exit status, printing any error as
// one line "name: message" on stderr. It keeps args in app.Metadata["args"]
// (unless the tool put them there), so that messages name a flag as typed.
func Run(app *cli.App, args []string, stderr io.Writer) int {
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	if _, ok := app.Metadata["args"]; !ok {
		app.Metadata["args"] = args // flags as typed, for messages (CheckEmptyFlags)
	}
	err := app.Run(args)
	if err == nil || errors.Is(err, ErrVersionShown) {
		return 0
	}
	msg := UnknownFlagAsGiven(ErrorText(err), "flag provided but not defined: ", args)
	fmt.Fprintf(stderr, "%s: %s\n", app.Name, ErrorLine(msg))
	if errors.Is(err, ErrInterrupted) || errors.Is(err, context.Canceled) {
		return InterruptedStatus(err)
	}
	var ue UsageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "flag provided but not defined") ||
		strings.HasPrefix(err.Error(), "Required flag") {
		return 2
	}
	return 1
}

// OnUsageError is the tools' cli.App.OnUsageError (Prepare sets it): a
// flag-parsing error becomes a usage error, a bad number naming the flag as
// typed and its range (NumberError, SetFlagRanges), any other one in the
// words of FlagMessage.
func OnUsageError(c *cli.Context, err error, _ bool) error {
	if nerr, ok := numberFlagError(c, err); ok {
		return nerr
	}
	return UsageError{FlagMessage(err)}
}

// FlagMessage rewrites the flag package's parse errors, which spell flags
// with one dash ("invalid value \"x\" for flag -seed: parse error"), in the
// tools' words: "--seed: invalid value \"x\"".
func FlagMessage(err error) error {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return err
	}
	i := strings.LastIndex(rest, " for flag -")
	if i < 0 {
		return err
	}
	val, tail := rest[:i], rest[i+len(" for flag -"):]
	flag, why, _ := strings.Cut(tail, ": ")
	dashes := "--"
	if len(flag) == 1 {
		dashes = "-"
	}
	if why = strings.TrimSpace(why); why == "" || why == "parse error" {
		return fmt.Errorf("%s%s: invalid value %s", dashes, flag, val)
	}
	return fmt.Errorf("%s%s: invalid value %s: %s", dashes, flag, val, why)
}

// UnknownFlagAsGiven rewrites "<prefix>-name", the flag package's spelling
// of an unknown flag, with the spelling the user typed ("--name").
func UnknownFlagAsGiven(msg, prefix string, args []string) string {
	rest, ok := strings.CutPrefix(msg, prefix)
	if !ok || !strings.HasPrefix(rest, "-") || strings.ContainsAny(rest, " \n") {
		return msg
	}
	name := strings.TrimPrefix(rest, "-")
	for i, a := range args {
		if i == 0 {
			continue
		}
		if a == "--" {
			break
		}
		flag, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(flag, "-") && strings.TrimLeft(flag, "-") == name {
			return prefix + flag
		}
	}
	return msg
}

// Args checks the positional argument count, as a usage error. urfave/cli
// stops parsing flags at the first positional argument, so a flag typed
// after them arrives here as an argument: the error then names it and says
// that flags go first, instead of only counting arguments.
func Args(c *cli.Context, min, max int, what string) error {
	n := c.NArg()
	if n < min || (max >= 0 && n > max) {
		for _, a := range c.Args().Slice() {
			if strings.HasPrefix(a, "-") && a != "-" && a != "--" {
				if _, err := os.Lstat(a); err != nil { // not a file named like a flag
					flag, _, _ := strings.Cut(a, "=")
					return Usagef("flag %s after the arguments (flags go first, then %s)", termsafe.Quote(flag), what)
				}
			}
		}
		return Usagef("expected %s, got %d argument(s)", what, n)
	}
	return nil
}

// CheckOutputFile checks an output path before any work is done, so that a
// long run does not end in "cannot write". Usage errors: a directory in the
// way, and a bare format name (json, jsonl, md, csv, table), which is what
// "-o json" means to ninfer-bench but a file name to the tools whose -o is
// --output-file; formatHint (e.g. "--format %s", %s standing for the
// name) says what to use instead.
func CheckOutputFile(flag, path, formatHint string) error {
	if path == "" {
		return nil
	}
	switch path {
	case "json", "jsonl", "md", "csv", "table":
		if formatHint != "" {
			return Usagef("%s %s: that is a format name, not a file; for the format use %s (for a file of that name: ./%s)",
				flag, path, strings.ReplaceAll(formatHint, "%s", path), path)
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return Usagef("%s %s: is a directory (want a file path)", flag, path)
	}
	if EndsInSeparator(path) {
		return Usagef("%s %s: ends in %q, a directory path (want a file path)", flag, path, string(os.PathSeparator))
	}
	return nil
}

// EndsInSeparator reports whether path names a directory by its form
// ("out/"): writing a file there would create the directory and then fail.
func EndsInSeparator(path string) bool {
	return path != "" && os.IsPathSeparator(path[len(path)-1])
}

func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("%s: write: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", path, err)
	}
	return nil
}

// WriteFileAtomic writes data to path (mode 0644) through a synced temporary
// file in the same directory and a rename, creating parent directories. On
// failure nothing is left behind and an existing file is unchanged; errors
// name path. An existing symbolic link, device or pipe (/dev/stdout) is
// written through in place, not atomically.
func WriteFileAtomic(path string, data []byte) (err error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory", path)
	}
	if EndsInSeparator(path) {
		return fmt.Errorf("%s: ends in %q, a directory path (want a file path)", path, string(os.PathSeparator))
	}
	if li, err := os.Lstat(path); err == nil && !li.Mode().IsRegular() {
		// A symbolic link, device or pipe (/dev/stdout, /dev/null, a FIFO)
		// is written through in place: a rename would replace the link or
		// the device node itself.
		return writeInPlace(path, data)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: create parent directory: %w", path, err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("%s: write: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("%s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
