package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// TestMarkdownTellsRunsApart: two runs of the same model in q8 and
// groupwise-int read alike without a recipe column; two runs alike in
// everything the table shows get a run column (issue #22 item 13a).
func TestMarkdownTellsRunsApart(t *testing.T) {
	a, b := seedDoc(t), seedDoc(t)
	a.Artifact.Path = "/m/model-q8.ninfer"
	b.Artifact.Path = "/m/model-groupwise-int.ninfer"
	md := string(RenderMarkdown([]Run{{RunID: "ra", Document: a}, {RunID: "rb", Document: b}}))
	lines := strings.Split(md, "\n")
	if !strings.HasPrefix(lines[0], "| model ") || !strings.Contains(lines[0], "| recipe ") || strings.Contains(lines[0], "| run ") {
		t.Errorf("header %q: want a recipe column and no run column", lines[0])
	}
	seen := map[string]bool{}
	for _, l := range lines[2:] {
		if l == "" {
			continue
		}
		if seen[l] {
			t.Errorf("two identical rows %q:\n%s", l, md)
		}
		seen[l] = true
	}
	if !strings.Contains(md, "| q8 ") || !strings.Contains(md, "| groupwise-int ") {
		t.Errorf("recipes missing:\n%s", md)
	}
	// Alike in model, recipe, backend, kv and spec: the run id tells them apart.
	md = string(RenderMarkdown([]Run{{RunID: "ra", Document: a}, {RunID: "rc", Document: a}}))
	if !strings.Contains(strings.SplitN(md, "\n", 2)[0], "| run ") || !strings.Contains(md, "| ra ") || !strings.Contains(md, "| rc ") {
		t.Errorf("alike runs without a run column:\n%s", md)
	}
}

// TestMarkdownEscapesNames: a model name with ESC/CR reaches the terminal
// as visible escapes (issue #22 item 11).
func TestMarkdownEscapesNames(t *testing.T) {
	d := seedDoc(t)
	d.Load.Name = "evil\x1b]0;pwned\x07\rname"
	md := string(RenderMarkdown([]Run{{RunID: "r", Document: d}}))
	if strings.ContainsAny(md, "\x1b\x07\r") || !strings.Contains(md, `evil\x1b]0;pwned\x07\rname`) {
		t.Errorf("markdown holds raw control bytes or lacks the escaped name:\n%q", md)
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func streamBytes(lines []benchfmt.Line) []byte {
	var b []byte
	for _, l := range lines {
		switch {
		case l.Run != nil:
			b = benchfmt.AppendRunLine(b, l.Run)
		case l.Rep != nil:
			b = benchfmt.AppendRepLine(b, l.Rep)
		case l.TestEnd != nil:
			b = benchfmt.AppendTestEndLine(b, l.TestEnd)
		}
	}
	return b
}

// TestDocumentPlusItsLinesWarns: a document and the stream it was made
// from are one run counted twice; say so (issue #22 item 13b).
func TestDocumentPlusItsLinesWarns(t *testing.T) {
	d := seedDoc(t)
	stream := writeFile(t, "run.jsonl", streamBytes(docLines(&d, "r1", true)))
	doc := writeFile(t, "report.json", benchfmt.EncodeDocument(&d))
	in, err := ReadFiles([]string{stream, doc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(in.Warnings, "\n")
	if !strings.Contains(w, "run "+doc+" ("+doc+") has the same command and rep timings as run r1") || !strings.Contains(w, "counted twice") {
		t.Errorf("no duplicate warning; warnings:\n%s", w)
	}
	// One of them alone: no such warning.
	in, err = ReadFiles([]string{stream}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range in.Warnings {
		if strings.Contains(x, "counted twice") {
			t.Errorf("warning for a single run: %s", x)
		}
	}
}

// TestNonPositiveTimingsWarn: a rep whose decode seconds are 0 or
// negative is left out of the tok/s mean; the warning names file:line
// (issue #22 item 13c).
func TestNonPositiveTimingsWarn(t *testing.T) {
	none := benchfmt.SpecNone()
	lines := []benchfmt.Line{{Type: "run", Run: synthRun(2)},
		repLine(0, "tg", 0, 16, 0, benchfmt.Timings{DecodeSeconds: 2, TotalSeconds: 2}, none),
		repLine(0, "tg", 0, 16, 1, benchfmt.Timings{DecodeSeconds: 0, TotalSeconds: 1}, none),
		repLine(1, "pp", 64, 0, 0, benchfmt.Timings{PrefillSeconds: -1, TotalSeconds: 1}, none),
		repLine(1, "pp", 64, 0, 1, benchfmt.Timings{PrefillSeconds: 1, TotalSeconds: 1}, none),
	}
	p := writeFile(t, "z.jsonl", streamBytes(lines))
	in, err := ReadFiles([]string{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(in.Warnings, "\n")
	for _, want := range []string{p + ":3: rep 1 of test 0 (tg16) in run syn has decode_seconds 0",
		p + ":4: rep 0 of test 1 (pp64) in run syn has prefill_seconds -1"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Count(w, "left out of the tok/s means") != 2 {
		t.Errorf("want exactly two timing warnings:\n%s", w)
	}
}

// TestOnlyLineCutOff: a file whose only line was cut off mid-write gives
// the documented "dropped unterminated last line" warning with the error
// (issue #22 item 13d).
func TestOnlyLineCutOff(t *testing.T) {
	d := seedDoc(t)
	full := streamBytes(docLines(&d, "r1", true)[:1])
	p := writeFile(t, "cut.jsonl", full[:len(full)/2])
	_, warns, err := Load([]string{p}, nil, "")
	if err == nil {
		t.Fatal("no error")
	}
	w := strings.Join(warns, "\n")
	if !strings.Contains(w, p+":1: dropped unterminated last line (interrupted write?)") {
		t.Errorf("warnings %q, error %v: want the unterminated-line warning", w, err)
	}
	if len(w) > 400 {
		t.Errorf("warning is %d bytes: want a short excerpt of the line", len(w))
	}
}
