package cliutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestFlagNames(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "format", Aliases: []string{"f", "output", "o"}},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}},
		&cli.StringFlag{Name: "p", Hidden: true},
	}
	if got, want := FlagNames(flags, true), []string{"f", "format", "h", "help", "o", "output", "p", "q", "quiet"}; !slices.Equal(got, want) {
		t.Errorf("FlagNames = %v, want %v", got, want)
	}
	if got := FlagNames(flags, false); slices.Contains(got, "help") {
		t.Errorf("FlagNames without help = %v", got)
	}
}

func TestParseAndCheckFlagTable(t *testing.T) {
	doc := "# x\n\n" + FlagTableMarker + "\n" +
		"| flag | tools | value | meaning |\n|---|---|---|---|\n" +
		"| `--format`, `-f` | run, report compare | F | a \\| b |\n" +
		"| `--quiet` | run | | q |\n\nafter\n| `--ignored` | run | | |\n"
	table, err := ParseFlagTable([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := table["run"]; !slices.Equal(got, []string{"f", "format", "quiet"}) {
		t.Errorf("run: %v", got)
	}
	if got := table["report compare"]; !slices.Equal(got, []string{"f", "format"}) {
		t.Errorf("report compare: %v", got)
	}
	for _, tc := range []struct {
		want []string
		err  string // "" = no error
	}{
		{[]string{"f", "format", "quiet"}, ""},
		{[]string{"f", "format", "quiet", "verify"}, "missing [verify]"},
		{[]string{"f", "format"}, "not flags of the tool [quiet]"},
	} {
		err := CheckFlagDoc([]byte(doc), "run", tc.want)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.want, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want %q", tc.want, err, tc.err)
		}
	}
	for _, bad := range []string{
		"no marker",
		FlagTableMarker + "\n| flag | tools |\n|---|---|\n",      // no rows
		FlagTableMarker + "\n| --format | run |\n",               // no backticks
		FlagTableMarker + "\n| `--q` | run |\n| `--q` | run |\n", // twice
		FlagTableMarker + "\n| `--q` | run, |\n",                 // empty tool
	} {
		if _, err := ParseFlagTable([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The flag table names exactly the tools in cmd/ (and ninfer-report's
// compare command); each tool's own test checks its rows.
func TestFlagTableNamesEveryTool(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ParseFlagTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob("../../cmd/ninfer-*")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"report compare"}
	for _, d := range dirs {
		want = append(want, strings.TrimPrefix(filepath.Base(d), "ninfer-"))
	}
	var got []string
	for tool := range table {
		got = append(got, tool)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("docs/CLI.md flag table names tools %v, want %v", got, want)
	}
}
