package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

const seedPath = "../../pkg/report/testdata/seed_schema15.json"

// seedStream writes the seed as a JSON-lines stream and returns its path.
func seedStream(t *testing.T, runID string) string {
	t.Helper()
	data, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := benchfmt.DecodeDocument(data)
	if err != nil {
		t.Fatal(err)
	}
	b := benchfmt.AppendRunLine(nil, &benchfmt.RunLine{RunID: runID, SchemaVersion: 15, Command: d.Command,
		Environment: d.Environment, Artifact: d.Artifact, Load: d.Load, Memory: d.Memory, Config: d.Config})
	for ti, tt := range d.Tests {
		for ri, r := range tt.Reps {
			b = benchfmt.AppendRepLine(b, &benchfmt.RepLine{RunID: runID, TestIndex: int64(ti), Label: tt.Label, Kind: tt.Kind,
				NPrompt: tt.NPrompt, NGen: tt.NGen, RequestedOutputTokens: tt.RequestedOutputTokens, RepIndex: int64(ri), Rep: r})
		}
		b = benchfmt.AppendTestEndLine(b, &benchfmt.TestEndLine{RunID: runID, TestIndex: int64(ti), Label: tt.Label,
			WorkspacePeakBytes: tt.WorkspacePeakBytes, WorkspaceAllocatorPeakBytes: tt.WorkspaceAllocatorPeakBytes})
	}
	p := filepath.Join(t.TempDir(), runID+".jsonl")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCLI(stdin string, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(append([]string{"ninfer-report"}, args...), strings.NewReader(stdin), &o, &e)
	return code, o.String(), e.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("\n{\"type\":\"rep\",}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.json")
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tampered, bytes.Replace(seed, []byte(`"rounds": 381`), []byte(`"rounds": 382`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	stream := seedStream(t, "r1")
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // substring
		stdout string // substring
	}{
		{"help", []string{"--help"}, 0, "", "Examples:"},
		{"compare help", []string{"compare", "--help"}, 0, "", "Welch"},
		{"unknown flag", []string{"--bogus", seedPath}, 2, "ninfer-report: flag provided but not defined: --bogus", ""},
		{"bad format", []string{"--format", "xml", seedPath}, 2, `--format "xml": want json, md, csv, svg or png`, ""},
		{"flag after files", []string{seedPath, "--format", "md"}, 2, "flag --format after the file arguments", ""},
		{"check with files", []string{"--check", seedPath, seedPath}, 2, "--check takes the document", ""},
		{"compare one arg", []string{"compare", seedPath}, 2, "compare needs exactly two inputs", ""},
		{"compare unknown flag", []string{"compare", "--x", seedPath, seedPath}, 2, "flag provided but not defined", ""},
		{"compare bad format", []string{"compare", "-f", "json", seedPath, seedPath}, 2, `compare --format "json"`, ""},
		{"report flag before compare", []string{"-o", "x.md", "compare", seedPath, seedPath}, 2, `--output-file before "compare": compare's flags go after it`, ""},
		{"report format before compare", []string{"--format", "csv", "compare", seedPath, seedPath}, 2, `--format before "compare"`, ""},
		{"missing file", []string{filepath.Join(dir, "nope.jsonl")}, 1, "nope.jsonl: no such file", ""},
		{"malformed line", []string{bad}, 1, "bad.jsonl:2: not valid JSON", ""},
		{"unknown run", []string{"--run", "zz", stream}, 1, `no run "zz"`, ""},
		{"check seed", []string{"--check", seedPath}, 0, "0 mismatches", ""},
		{"check tampered", []string{"--check", tampered}, 1, "1 aggregate(s) do not match", "tests[0].speculative.rounds: stored 382, recomputed 381"},
		{"check stream", []string{"--check", stream}, 1, "--check " + stream + ": this is a stream of JSON lines, not a schema-15 document", ""},
		{"check missing", []string{"--check", filepath.Join(dir, "none.json")}, 1, "--check: cannot read document", ""},
		{"md", []string{"-f", "md", stream}, 0, "", "| mtp k=2 optimized-head |"},
		{"csv", []string{"--format", "csv", seedPath}, 0, "", "run_id,model,backend"},
		{"compare", []string{"compare", seedPath, stream}, 0, "", "| tg256 "},
		{"same file twice", []string{"--format", "md", seedPath, seedPath}, 1, "ninfer-report: " + seedPath + " is given twice", ""},
		{"empty input", []string{empty}, 1, "ninfer-report: no run in " + empty + " (empty, or not ninfer-bench output", ""},
		{"empty stdin", []string{"-"}, 1, "ninfer-report: no run in <stdin> (empty", ""},
		// -o is --output-file here; ninfer-bench's "-o md" would silently write a file "md".
		{"-o format name", []string{"-o", "md", stream}, 2, "ninfer-report: --output-file md: that is a format name, not a file; for the format use --format md", ""},
		{"compare -o format name", []string{"compare", "-o", "csv", seedPath, stream}, 2, "--output-file csv: that is a format name", ""},
		{"-o directory", []string{"-o", dir, stream}, 2, "ninfer-report: --output-file " + dir + ": is a directory", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI("", c.args...)
			if code != c.code || !strings.Contains(errOut, c.stderr) || !strings.Contains(out, c.stdout) {
				t.Errorf("exit %d (want %d)\nstderr: %s\nstdout: %.300s", code, c.code, errOut, out)
			}
			if c.code == 2 && out != "" {
				t.Errorf("usage error wrote to stdout: %.200q", out)
			}
			if c.code != 0 && strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
				t.Errorf("error is not one clear line: %q", errOut)
			}
		})
	}
}

func TestJSONOutputAndStdin(t *testing.T) {
	stream := seedStream(t, "r1")
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(string(data), "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Equal to the seed except the four tg1024 stddevs that cannot be
	// reproduced from the printed reps (see pkg/report tests): compare the
	// output against a --check of itself and the rest by value.
	doc, err := benchfmt.DecodeDocument([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	sd, _ := benchfmt.DecodeDocument(seed)
	doc.Tests[1].DecodeOutputTokS.Stddev = sd.Tests[1].DecodeOutputTokS.Stddev
	doc.Tests[1].DecodeEngineTokS.Stddev = sd.Tests[1].DecodeEngineTokS.Stddev
	doc.Tests[1].DecodeSeconds.Stddev = sd.Tests[1].DecodeSeconds.Stddev
	doc.Tests[1].TotalSeconds.Stddev = sd.Tests[1].TotalSeconds.Stddev
	if err := benchfmt.SameJSON(seed, benchfmt.EncodeDocument(&doc)); err != nil {
		t.Errorf("stdin stream aggregate differs from the seed: %v", err)
	}

	// A document input is re-emitted by value; --output-file writes atomically.
	outFile := filepath.Join(t.TempDir(), "sub", "dir", "report.json")
	code, out, errOut = runCLI("", "--output-file", outFile, seedPath)
	if code != 0 || out != "" || !strings.Contains(errOut, "ninfer-report: wrote "+outFile) {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	written, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := benchfmt.SameJSON(seed, written); err != nil {
		t.Errorf("re-emitted seed differs: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(outFile))
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}

	// Two runs: JSON needs --run, md shows both.
	other := seedStream(t, "r2")
	code, _, errOut = runCLI("", stream, other)
	if code != 1 || !strings.Contains(errOut, "holds 2 runs (r1, r2); pick one with --run") {
		t.Errorf("two runs as JSON: exit %d %s", code, errOut)
	}
	code, out, _ = runCLI("", "--run", "r2", stream, other)
	if code != 0 || !strings.Contains(out, `"schema_version": 15`) {
		t.Errorf("--run r2: exit %d", code)
	}
	code, out, _ = runCLI("", "-f", "md", stream, other)
	if code != 0 || strings.Count(out, " tg1024 |") != 2 {
		t.Errorf("md of two runs: exit %d\n%s", code, out)
	}
}

// TestCheckStdin: --check - reads the document from standard input, so
// "ninfer-bench -o json | ninfer-report --check -" works.
func TestCheckStdin(t *testing.T) {
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(string(seed), "--check", "-")
	if code != 0 || out != "" || !strings.HasPrefix(errOut, "ninfer-report: checked ") || !strings.Contains(errOut, " values in <stdin>: ") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	tampered := strings.Replace(string(seed), `"rounds": 381`, `"rounds": 382`, 1)
	if code, _, errOut := runCLI(tampered, "--check", "-"); code != 1 || !strings.Contains(errOut, "<stdin>: 1 aggregate(s) do not match") {
		t.Fatalf("tampered: exit %d stderr %q", code, errOut)
	}
}

// TestCompareNothingInCommon: an empty comparison is an error, not an
// empty table with exit 0.
func TestCompareNothingInCommon(t *testing.T) {
	dir := t.TempDir()
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.json")
	// Relabel every test so that no label matches the seed's.
	if err := os.WriteFile(other, bytes.ReplaceAll(seed, []byte(`"label": "`), []byte(`"label": "x`)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("", "compare", seedPath, other)
	if code != 1 || out != "" || !strings.Contains(errOut, "ninfer-report: "+seedPath+" and "+other+" have no test in common") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
}

// Standard input redirected from a file is an input: "-o r.jsonl < r.jsonl"
// (with "-", with no file at all, or as --check -) is refused and leaves
// the file as it was; it used to be replaced by the report.
func TestOutputIsRedirectedStdin(t *testing.T) {
	stream := seedStream(t, "r1")
	want, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-o", stream, "-"},
		{"-o", stream},
		{"--check", "-", "-o", stream},
		{"compare", "-o", stream, "-", seedPath},
	} {
		f, err := os.Open(stream)
		if err != nil {
			t.Fatal(err)
		}
		saved := os.Stdin
		os.Stdin = f
		var o, e bytes.Buffer
		code := run(append([]string{"ninfer-report"}, args...), f, &o, &e)
		os.Stdin = saved
		f.Close()
		if got, _ := os.ReadFile(stream); code != 2 || !strings.Contains(e.String(), "is the input standard input") || !bytes.Equal(got, want) {
			t.Errorf("%q: exit %d, stderr %q, file changed: %v", args, code, e.String(), !bytes.Equal(got, want))
		}
	}
}
