package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// A corpus id outside the model's vocabulary is refused before any model
// loads, naming the file and line (it was found only after loading, with
// neither).
func TestCorpusIDBeyondVocab(t *testing.T) {
	m := testfixture.Artifact(t, "q8", nil)
	c := filepath.Join(t.TempDir(), "c.ids")
	if err := os.WriteFile(c, []byte("1 2 3\n4 99999 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runCmd(t, context.Background(), "--backend", "cpu", "--ctx", "4", "--weights", m, "--corpus", c)
	if o.code != 1 || !strings.Contains(o.stderr, c) || !strings.Contains(o.stderr, "line 2") ||
		strings.Contains(o.stderr, "loaded") || strings.Count(o.stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
}
