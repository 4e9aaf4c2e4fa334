package chart

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
)

// fakeRun is a run of model name with a pp and a tg test at each depth
// (3 reps each, rates falling with depth).
func fakeRun(id, name, path string, depths []int64) report.Run {
	d := benchfmt.NewDocument()
	d.Load.Name = name
	d.Load.Formats = []string{"bf16", "fp32", "q8_g32_fp16"}
	d.Artifact.Path = path
	d.Config.KVCache = "bf16"
	d.Config.SpeculativeBackend = "none"
	cpu := "cpu"
	d.Environment.Backend = &cpu
	for _, depth := range depths {
		for _, kind := range []string{benchfmt.KindPP, benchfmt.KindTG} {
			p, g := int64(64), int64(0)
			if kind == benchfmt.KindTG {
				p, g = 0, 32
			}
			t := benchfmt.Test{Label: benchfmt.Label(kind, p, g), Kind: kind, NPrompt: p, NGen: g,
				RequestedOutputTokens: benchfmt.RequestedOutputTokens(kind, g), NDepth: depth}
			for r := 0; r < 3; r++ {
				slow := 1 + float64(depth)/1000 + 0.01*float64(r)
				tm := benchfmt.Timings{PrefillSeconds: 0.01 * slow, DecodeSeconds: 0.02 * slow}
				tm.TotalSeconds = tm.PrefillSeconds + tm.DecodeSeconds
				t.Reps = append(t.Reps, benchfmt.NewRep(kind, g, tm, benchfmt.SpecNone()))
			}
			d.Tests = append(d.Tests, t)
		}
	}
	return report.Run{RunID: id, Document: d}
}

// svgTexts parses the SVG as XML and returns the content of its text
// elements.
func svgTexts(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	inText := false
	sawSVG := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			sawSVG = sawSVG || x.Name.Local == "svg"
			inText = x.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(x))
			}
		}
	}
	if !sawSVG {
		t.Fatal("no <svg> element")
	}
	return texts
}

func count(texts []string, prefix string) int {
	n := 0
	for _, s := range texts {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func TestDepthSVG(t *testing.T) {
	runs := []report.Run{
		fakeRun("a", "tiny-shakespeare", "/tmp/shakespeare-q8.ninfer", []int64{0, 256, 1024}),
		fakeRun("b", "tiny-shakespeare", "/tmp/shakespeare-groupwise-int.ninfer", []int64{0, 256, 1024}),
	}
	names := RunNames(runs)
	if names[0] != "tiny-shakespeare q8 no spec" || names[1] != "tiny-shakespeare groupwise-int no spec" {
		t.Errorf("names = %q", names)
	}
	svg, err := Render(FormatSVG, runs)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, svg)
	// Two panels (prefill, decode), each with one legend entry per run.
	for i, name := range names {
		if n := count(texts, name); n != 2 {
			t.Errorf("run %d: legend %q appears %d times, want once per panel (2)", i, name, n)
		}
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"context depth (tokens already in the KV cache)", "prefill throughput (tokens/s)",
		"decode throughput (output tokens/s)", "against context depth", "1024"} {
		if !strings.Contains(all, want) {
			t.Errorf("SVG text lacks %q:\n%s", want, all)
		}
	}
}

func TestBarsSVGAndPNG(t *testing.T) {
	runs := []report.Run{
		fakeRun("a", "m1", "/x/m1-q8.ninfer", []int64{0}),
		fakeRun("b", "m1", "/x/m1-q8.ninfer", []int64{0}),
		fakeRun("c", "m2", "/x/other.ninfer", []int64{0}),
	}
	runs[1].Document.Config.KVCache = "fp8"
	if HasDepth(runs) {
		t.Fatal("HasDepth without depths")
	}
	names := RunNames(runs)
	want := []string{"m1 q8 no spec, kv bf16", "m1 q8 no spec, kv fp8", "m2 q8_g32_fp16 no spec"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("names = %q, want %q", names, want)
	}
	svg, err := Render(FormatSVG, runs)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, svg)
	for _, name := range names {
		if n := count(texts, name); n != 1 {
			t.Errorf("legend %q appears %d times, want 1", name, n)
		}
	}
	for _, cat := range []string{"pp64", "tg32", "throughput (tokens/s)"} {
		if count(texts, cat) == 0 {
			t.Errorf("no %q label", cat)
		}
	}
	data, err := Render(FormatPNG, runs)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
		t.Errorf("PNG is %v", b)
	}
}

func TestRenderErrors(t *testing.T) {
	if _, err := Render("gif", []report.Run{fakeRun("a", "m", "m.ninfer", []int64{0})}); err == nil {
		t.Error("gif accepted")
	}
	if _, err := Render(FormatSVG, nil); err == nil {
		t.Error("no runs accepted")
	}
}
