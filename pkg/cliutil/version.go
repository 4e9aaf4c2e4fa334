package cliutil

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// versionUsage is the help text of the --version flag every tool has.
const versionUsage = "print the version, commit, Go version, backends and CPU ISA levels built in, and exit"

// ErrVersionShown stops a run after --version printed the version; Run
// maps it to exit status 0.
var ErrVersionShown = errors.New("version shown")

// BuildInfo is what --version reports.
type BuildInfo struct {
	Module    string   // module path
	Version   string   // module version ("(devel)" for a source build)
	Commit    string   // vcs.revision, "unknown" when not recorded
	Modified  bool     // vcs.modified
	GoVersion string   // the toolchain
	Backends  []string // compute backends compiled in: cpu, and cuda with the cuda or cudasim tag
	ISAs      []string // CPU kernel ISA levels compiled in
}

// ReadBuildInfo gathers the BuildInfo of this binary.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Module: "github.com/ninfer/ninfer", Version: "(devel)", Commit: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path != "" {
			b.Module = bi.Main.Path
		}
		if bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if s.Value != "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	b.Backends = []string{"cpu"}
	if CUDABuilt {
		b.Backends = append(b.Backends, "cuda")
	}
	b.ISAs = CPUISAs()
	return b
}

// CPUISAs are the CPU kernel levels compiled in: scalar everywhere, and on
// amd64 the AVX2 and AVX-512 bodies (kernels/cpu, function-level target
// attributes; which one runs is chosen at run time).
func CPUISAs() []string {
	if runtime.GOARCH == "amd64" {
		return []string{"scalar", "avx2", "avx512"}
	}
	return []string{"scalar"}
}

// VersionText is the --version output of tool.
func VersionText(tool string) string {
	b := ReadBuildInfo()
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("%s %s\nmodule: %s\ncommit: %s\ngo: %s\nbackends: %s\ncpu isa: %s\n",
		tool, b.Version, b.Module, commit, b.GoVersion, strings.Join(b.Backends, ", "), strings.Join(b.ISAs, ", "))
}

// AddVersion gives app the shared --version flag (Prepare calls it; a tool
// that sets up its app without Prepare calls it itself). Each app gets its
// own flag value (urfave/cli's flags record parse state, so one shared flag
// object would race between apps run concurrently), and urfave/cli's global
// version flag and printer stay unused: the app's Before prints the version
// and stops the run with ErrVersionShown. The same Before refuses an empty
// positional argument (every tool's arguments are paths) as a usage error.
func AddVersion(app *cli.App) *cli.App {
	app.HideVersion = true
	for _, f := range app.Flags {
		for _, n := range f.Names() {
			if n == "version" {
				return app
			}
		}
	}
	app.Flags = append(app.Flags, &cli.BoolFlag{Name: "version", Usage: versionUsage})
	before := app.Before
	app.Before = func(c *cli.Context) error {
		if c.Bool("version") {
			fmt.Fprint(c.App.Writer, VersionText(c.App.Name))
			return ErrVersionShown
		}
		if c.NArg() == 0 || app.Command(c.Args().First()) == nil { // a subcommand checks its own
			if err := checkEmptyArgs(c); err != nil {
				return err
			}
		}
		if err := CheckEmptyFlags(c, app.Flags); err != nil {
			return err
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	checkCommandFlags(app.Commands)
	return app
}

// checkEmptyArgs refuses an empty positional argument. Every tool's
// arguments are paths: an empty one (an unset shell variable, quoted) is a
// usage error, not "open : no such file".
func checkEmptyArgs(c *cli.Context) error {
	for i, a := range c.Args().Slice() {
		if a == "" {
			return Usagef("argument %d is empty (a path is expected)", i+1)
		}
	}
	return nil
}

// checkCommandFlags gives each subcommand (and theirs) the empty-argument
// and empty-value checks of its own arguments and flags, which the app's
// Before runs too early to see.
func checkCommandFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		cmd := cmd
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if len(cmd.Subcommands) == 0 || c.NArg() == 0 || cmd.Command(c.Args().First()) == nil {
				if err := checkEmptyArgs(c); err != nil {
					return err
				}
			}
			if err := CheckEmptyFlags(c, cmd.Flags); err != nil {
				return err
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
		checkCommandFlags(cmd.Subcommands)
	}
}

// CheckEmptyFlags refuses a string flag of flags given explicitly with an
// empty value ("--output-file=", "--spec=", "-o \"$UNSET\""), a usage
// error naming the flag as typed: "--output-file: empty value (want
// PATH)". An empty value is never meant: taken as unset it would write to
// stdout instead of a file, skip a check or fall back to a default without
// a word. Every tool runs it from the Before that AddVersion installs, for
// the app's flags and each subcommand's. String-list flags are refused when
// any of their values is empty; other flags parse their own values.
func CheckEmptyFlags(c *cli.Context, flags []cli.Flag) error {
	set := c.LocalFlagNames() // this command's flags given (not a parent's)
	for _, f := range flags {
		names := f.Names()
		if !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(set, n) }) {
			continue
		}
		var usage string
		switch f := f.(type) {
		case *cli.StringFlag:
			if c.String(f.Name) != "" {
				continue
			}
			usage = f.Usage
		case *cli.PathFlag:
			if c.Path(f.Name) != "" {
				continue
			}
			usage = f.Usage
		case *cli.StringSliceFlag:
			if !slices.Contains(c.StringSlice(f.Name), "") {
				continue
			}
			usage = f.Usage
		default:
			continue
		}
		args, _ := c.App.Metadata["args"].([]string)
		flag := FlagAsGiven(args, names...)
		if placeholder := usagePlaceholder(usage); placeholder != "" {
			return Usagef("%s: empty value (want %s)", flag, placeholder)
		}
		return Usagef("%s: empty value", flag)
	}
	return nil
}

// usagePlaceholder is the `NAME` a flag's usage text marks for its value
// (urfave/cli's convention), or "".
func usagePlaceholder(usage string) string {
	_, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "`")
	if !ok {
		return ""
	}
	return name
}
