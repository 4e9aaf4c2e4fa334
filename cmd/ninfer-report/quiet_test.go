package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --quiet (-q) leaves only errors and warnings on stderr: no wrote line,
// no --check summary; the output itself is unchanged.
func TestQuiet(t *testing.T) {
	dir := t.TempDir()
	stream := seedStream(t, "r1")
	for _, tc := range []struct {
		name string
		args []string // "OUT" is replaced by a fresh output path
		loud string   // on stderr without --quiet
	}{
		{"report", []string{"-f", "md", "-o", "OUT", stream}, "ninfer-report: wrote "},
		{"check", []string{"--check", seedPath}, "ninfer-report: checked "},
		{"compare", []string{"compare", "-o", "OUT", seedPath, stream}, "ninfer-report: wrote "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := func(quiet bool) []string {
				out := filepath.Join(dir, tc.name+map[bool]string{true: "-q", false: ""}[quiet]+".out")
				var a []string
				for i, s := range tc.args {
					if s == "OUT" {
						s = out
					}
					if quiet && (i == 0 && s != "compare" || i == 1 && tc.args[0] == "compare") {
						a = append(a, "-q")
					}
					a = append(a, s)
				}
				return a
			}
			code, loudOut, errs := runCLI("", args(false)...)
			if code != 0 || !strings.Contains(errs, tc.loud) {
				t.Fatalf("%q: exit %d stderr %q; want %q", args(false), code, errs, tc.loud)
			}
			code, quietOut, errs := runCLI("", args(true)...)
			if code != 0 || errs != "" || quietOut != loudOut {
				t.Fatalf("%q: exit %d stderr %q; want nothing on stderr and the same stdout", args(true), code, errs)
			}
			if tc.name != "check" {
				a, _ := os.ReadFile(filepath.Join(dir, tc.name+".out"))
				b, _ := os.ReadFile(filepath.Join(dir, tc.name+"-q.out"))
				if len(a) == 0 || string(a) != string(b) {
					t.Errorf("the --quiet file differs (%d vs %d bytes)", len(a), len(b))
				}
			}
		})
	}
}
