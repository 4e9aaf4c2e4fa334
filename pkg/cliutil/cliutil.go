// Package cliutil holds the conventions every ninfer command shares: one
// error line "tool: message" on stderr, exit status 2 for usage errors and 1
// for runtime errors, and atomic output files.
package cliutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// UsageError marks an error as a usage error (exit status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a formatted usage error.
func Usagef(f string, a ...any) error { return UsageError{fmt.Errorf(f, a...)} }

// Prepare sets the app's writers and routes flag-parsing errors to usage
// errors, so that Run can map them to exit status 2.
func Prepare(app *cli.App, stdout, stderr io.Writer) *cli.App {
	app.Writer, app.ErrWriter = stdout, stderr
	app.HideHelpCommand = true
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return UsageError{err} }
	app.ExitErrHandler = func(*cli.Context, error) {}
	return app
}

// Run runs app and returns the process exit status, printing any error as
// one line "name: message" on stderr.
func Run(app *cli.App, args []string, stderr io.Writer) int {
	err := app.Run(args)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %s\n", app.Name, strings.ReplaceAll(err.Error(), "\n", " "))
	var ue UsageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "flag provided but not defined") ||
		strings.HasPrefix(err.Error(), "Required flag") {
		return 2
	}
	return 1
}

// Args checks the positional argument count, as a usage error.
func Args(c *cli.Context, min, max int, what string) error {
	n := c.NArg()
	if n < min || (max >= 0 && n > max) {
		return Usagef("expected %s, got %d argument(s)", what, n)
	}
	return nil
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory and a rename, creating parent directories.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	tmp := path + ".tmp-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
