package cliutil

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
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
		// Every tool's arguments are paths: an empty one ('' from an unset
		// shell variable) is a usage error, not "open : no such file".
		for i, a := range c.Args().Slice() {
			if a == "" {
				return Usagef("argument %d is empty (a path is expected)", i+1)
			}
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	return app
}
