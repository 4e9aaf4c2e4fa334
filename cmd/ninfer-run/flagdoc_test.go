package main

import (
	"io"
	"os"
	"testing"

	"github.com/ninfer/ninfer/pkg/cliutil"
)

// docs/CLI.md lists exactly this tool's flags (every spelling, hidden
// ones included), extracted from its cli.App.
func TestFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	app := cliutil.Prepare(newApp(), io.Discard, io.Discard) // as run: Prepare adds --version
	if err := cliutil.CheckFlagDoc(doc, "run", cliutil.FlagNames(app.Flags, !app.HideHelp)); err != nil {
		t.Error(err)
	}
	for _, c := range app.Commands {
		if err := cliutil.CheckFlagDoc(doc, "run "+c.Name, cliutil.FlagNames(c.Flags, !c.HideHelp)); err != nil {
			t.Error(err)
		}
	}
}
