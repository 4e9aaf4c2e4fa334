package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/hfdir"
)

// --shape sets every size of the preset; the size flags given override it.
func TestShapeFlag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m")
	var stdout, stderr bytes.Buffer
	args := []string{"ninfer-testmodel", "-q", "--shape", "qwen3.5-0.8b", "--layers", "4", "--hidden", "64",
		"--intermediate", "96", "--vocab", "300", "--mtp-layers", "0", "--tied=false", out}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	d, err := hfdir.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := d.Config
	// Overridden: layers, hidden, intermediate, vocab, mtp, tie; from the
	// preset: every head count and head dim.
	if c.NumHiddenLayers != 4 || c.HiddenSize != 64 || c.IntermediateSize != 96 || c.VocabSize != 300 ||
		c.MTPNumHiddenLayers != 0 || c.TieWordEmbeddings || c.NumAttentionHeads != 8 || c.NumKeyValueHeads != 2 ||
		c.HeadDim != 256 || c.LinearNumKeyHeads != 16 || c.LinearNumValueHeads != 16 ||
		c.LinearKeyHeadDim != 128 || c.LinearValueHeadDim != 128 {
		t.Errorf("config %+v", c)
	}

	stderr.Reset()
	if code := run([]string{"ninfer-testmodel", "--shape", "qwen9", out + "2"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), `unknown shape "qwen9": want one of qwen3.5-0.8b, qwen3.5-2b, qwen3.5-9b, qwen3.5-27b`) {
		t.Errorf("bad shape: exit %d, %q", code, stderr.String())
	}
}
