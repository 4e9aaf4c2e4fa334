package cliutil

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// versionFlag is the --version flag every tool has (Prepare adds it; there
// is no short spelling: -v is not taken).
var versionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version, commit, Go version, backends and CPU ISA levels built in, and exit"}

func init() {
	cli.VersionFlag = versionFlag
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprint(c.App.Writer, c.App.Version) }
}

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
// that sets up its app without Prepare calls it itself).
func AddVersion(app *cli.App) *cli.App {
	app.Version = VersionText(app.Name)
	app.HideVersion = false
	for _, f := range app.Flags {
		if f == versionFlag {
			return app
		}
	}
	app.Flags = append(app.Flags, versionFlag)
	return app
}
