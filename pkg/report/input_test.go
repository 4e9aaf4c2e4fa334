package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFilesInputErrors(t *testing.T) {
	dir := t.TempDir()
	seed := seedBytes(t)
	doc := filepath.Join(dir, "r.json")
	empty := filepath.Join(dir, "e.jsonl")
	for p, b := range map[string][]byte{doc: seed, empty: []byte("\n\n")} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		names []string
		stdin string
		want  string
	}{
		{[]string{doc, doc}, "", doc + " is given twice"},
		{[]string{doc, filepath.Join(dir, ".", "r.json")}, "", "is given twice"},
		{[]string{empty}, "", "no run in " + empty + " (empty, or not ninfer-bench output"},
		{[]string{"-"}, "", "no run in <stdin> (empty"},
	} {
		_, err := ReadFiles(c.names, strings.NewReader(c.stdin))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadFiles(%v) = %v, want %q", c.names, err, c.want)
		}
	}
	in, err := ReadFiles([]string{doc}, nil)
	if err != nil || len(in.Runs) != 1 || in.Runs[0].RunID != doc {
		t.Fatalf("one document: %+v, %v", in, err)
	}
}
