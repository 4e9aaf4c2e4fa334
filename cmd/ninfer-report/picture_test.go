package main

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPictureFormats(t *testing.T) {
	stream := seedStream(t, "seed")
	code, svg, stderr := runCLI("", "--format", "svg", stream)
	if code != 0 {
		t.Fatalf("svg: exit %d: %s", code, stderr)
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("svg is not XML: %v", err)
		}
	}
	if !strings.Contains(svg, "<svg") || !strings.Contains(svg, "throughput (tokens/s)") {
		t.Errorf("svg lacks the chart: %.300s", svg)
	}

	if code, _, stderr := runCLI("", "--format", "png", stream); code != 2 || !strings.Contains(stderr, "--output-file") {
		t.Errorf("png to stdout: exit %d: %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "c.png")
	if code, _, stderr := runCLI("", "-q", "--format", "png", "--output-file", out, stream); code != 0 {
		t.Fatalf("png: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Errorf("png does not decode: %v", err)
	}

	old := isTerminal
	isTerminal = func(io.Writer) bool { return true }
	defer func() { isTerminal = old }()
	if code, out, stderr := runCLI("", "--format", "svg", stream); code != 2 || out != "" || !strings.Contains(stderr, "terminal") {
		t.Errorf("svg to a terminal: exit %d, %d bytes: %s", code, len(out), stderr)
	}
}
