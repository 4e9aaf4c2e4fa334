package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

func TestDepth(t *testing.T) {
	model, corpusPath := fixture(t)
	base := []string{"--weights", model, "--corpus", corpusPath, "--backend", "cpu", "--threads", "2", "-r", "1", "--warmup", "0"}

	code, stream, stderr := runCmd(t, context.Background(), append(base, "-d", "0,20", "-p", "8", "-n", "4")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var depths []string
	for _, line := range strings.Split(strings.TrimSpace(stream), "\n") {
		l, err := benchfmt.ParseLineString(line)
		if err != nil {
			t.Fatal(err)
		}
		if l.Rep != nil {
			depths = append(depths, benchfmt.DisplayLabel(l.Rep.Label, l.Rep.NDepth))
		}
	}
	if got := strings.Join(depths, ","); got != "pp8,pp8 @ d20,tg4,tg4 @ d20" {
		t.Errorf("reps = %s", got)
	}
	code, table, stderr := runCmd(t, context.Background(), append(base, "--n-depth", "16", "-n", "4", "-o", "md")...)
	if code != 0 || !strings.Contains(table, "tg4 @ d16") {
		t.Errorf("table (exit %d, %s):\n%s", code, stderr, table)
	}

	// Depths beyond the context limit are usage errors, before the run.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "100", "-n", "4", "--max-ctx", "64"}, "--n-depth 100: tg4 @ d100 needs 105 tokens of context"},
		{[]string{"-d", "1000000", "-n", "4"}, "above the model's max_position_embeddings"},
		{[]string{"-d", "-1", "-n", "4"}, "-d -1: out of range or not a number (want comma-separated integers in 0..2147483647)"},
		{[]string{"-d", "x", "-n", "4"}, "-d x: out of range or not a number"},
		{[]string{"--n-depth", "5,-2", "-n", "4"}, "--n-depth 5,-2: out of range or not a number"},
	} {
		code, out, stderr := runCmd(t, context.Background(), append(base, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, stderr, c.want)
		}
	}
}
