package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/bench"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		// Started by startChild: be ninfer-bench, with the progress line
		// forced onto stderr so that the test sees which rep runs.
		os.Exit(mainStatus(bench.Env{Progress: os.Stderr, ForceProgress: true}))
	}
	testfixture.Main(m)
}

// fixture returns the tiny q8 model and a corpus of 64 random ids (seeded
// from the test's name, numtest; the seed is in the file name).
func fixture(t *testing.T) (model, corpusPath string) {
	t.Helper()
	seed := numtest.Seed(t, "corpus")
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for i := 0; i < 64; i++ {
		fmt.Fprintf(&b, "%d\n", rng.IntN(512))
	}
	corpusPath = filepath.Join(t.TempDir(), fmt.Sprintf("corpus-seed%d.ids", seed))
	if err := os.WriteFile(corpusPath, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return testfixture.Artifact(t, "q8", nil), corpusPath
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { c.t = c.t.Add(time.Millisecond); return c.t }

func testEnv() bench.Env {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return bench.Env{Now: c.Now, MemAvailable: func() (int64, error) { return 4 << 30, nil },
		CPUName: func() string { return "Test CPU" }, RunID: "cmd-test"}
}

func runCmd(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(ctx, append([]string{"ninfer-bench"}, args...), &o, &e, testEnv())
	return code, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	w := []string{"--weights", "m.ninfer"}
	cases := []struct {
		args []string
		msg  string
	}{
		{nil, "--weights is required"},
		{[]string{"-p", "16"}, "--weights is required"},
		{append(w, "-p", ""), "-p: empty value (want comma-separated integers in 1..2147483647)"},
		{append(w, "-p", "x"), "-p x: out of range or not a number (want comma-separated integers in 1..2147483647)"},
		{append(w, "--n-prompt", "0"), "--n-prompt 0: out of range or not a number (want comma-separated integers in 1..2147483647)"},
		{append(w, "-n", "5,abc"), "-n 5,abc: out of range or not a number (want comma-separated integers in 1..2147483647)"},
		{append(w, "-n", "-3"), "-n -3: out of range or not a number (want comma-separated integers in 1..2147483647)"},
		{append(w, "-pg", "16"), "-pg 16: out of range or not a number (want P,G pairs separated by ';', each in 1..2147483647)"},
		{append(w, "--prompt-gen", "16,8;1,2,3"), "--prompt-gen 16,8;1,2,3: out of range or not a number (want P,G pairs separated by ';', each in 1..2147483647)"},
		{append(w, "-pg", "0,8"), "-pg 0,8: out of range or not a number (want P,G pairs separated by ';', each in 1..2147483647)"},
		{append(w, "-r", "0"), "-r 0: out of range (want 1..4294967295)"},
		{append(w, "--repetitions", "two"), "--repetitions two: not an integer (want 1..4294967295)"},
		{append(w, "--warmup", "-1"), "--warmup -1: out of range (want 0..4294967295)"},
		{append(w, "--max-ctx", "0"), "--max-ctx 0: out of range (want 1..4294967295)"},
		{append(w, "--max-ctx", "1k"), "--max-ctx 1k: not an integer (want 1..4294967295)"},
		{append(w, "--prefill-chunk", "0"), "--prefill-chunk 0: out of range (want a positive multiple of 128)"},
		{append(w, "--prefill-chunk", "-128"), "--prefill-chunk -128: out of range (want a positive multiple of 128)"},
		{append(w, "--prefill-chunk", "99999999999999999999"), "--prefill-chunk 99999999999999999999: out of range (want a positive multiple of 128)"},
		{append(w, "--prefill-chunk", "1k"), "--prefill-chunk 1k: not an integer (want a positive multiple of 128)"},
		{append(w, "--prefill-chunk", "1000"), "--prefill-chunk 1000: out of range (want a positive multiple of 128)"},
		{append(w, "-prefill-chunk", "100"), "-prefill-chunk 100: out of range (want a positive multiple of 128)"},
		{append(w, "--prefill-chunk=100"), "--prefill-chunk 100: out of range (want a positive multiple of 128)"},
		{append(w, "--kv-dtype", "fp16"), "invalid kv-dtype: fp16 (want bf16, int8 or fp8)"},
		{append(w, "--spec", "eagle"), "invalid speculative backend: eagle"},
		{append(w, "--draft-tokens", "0"), "--draft-tokens 0: out of range (want 1..5)"},
		{append(w, "--spec", "mtp", "--draft-tokens", "0"), "--draft-tokens 0: out of range (want 1..5)"},
		// not the reference's "--spec mtp|dflash|dflash2": ninfer offers none of those
		{append(w, "--draft-tokens", "2"), "--draft-tokens and --lm-head-draft require --spec mtp"},
		{append(w, "--lm-head-draft"), "--draft-tokens and --lm-head-draft require --spec mtp"},
		{append(w, "--spec", "none", "--draft-tokens", "2"), "--draft-tokens and --lm-head-draft require --spec mtp"},
		{append(w, "--spec", "dflash"), "invalid speculative backend: dflash (ninfer implements mtp only)"},
		{append(w, "--spec", "mtp"), "--spec mtp requires --draft-tokens in [1,5]"},
		{append(w, "--spec", "mtp", "--draft-tokens", "6"), "--draft-tokens 6: out of range (want 1..5)"},
		{append(w, "--spec", "mtp", "-draft-tokens", "9"), "-draft-tokens 9: out of range (want 1..5)"},
		{append(w, "--spec", "mtp", "--draft-tokens", "99999999999"), "--draft-tokens 99999999999: out of range (want 1..5)"},
		{append(w, "--device", "-1"), "--device -1: out of range (want 0..4294967295)"},
		{append(w, "--threads", "many"), "--threads many: not an integer (want 0..256; 0 = all cores)"},
		{append(w, "--threads", "99999999999999999999"), "--threads 99999999999999999999: out of range (want 0..256; 0 = all cores)"},
		{append(w, "--backend", "metal"), "invalid backend: metal (want auto, cpu or cuda)"},
		{append(w, "--output", "xml"), "invalid output format: xml (want jsonl, json, table (md) or csv)"},
		{append(w, "--format", "xml"), "invalid output format: xml (want jsonl, json, table (md) or csv)"},
		{append(w, "-f", "xml"), "invalid output format: xml (want jsonl, json, table (md) or csv)"},
		{append(w, "-f"), "--format requires value"},
		{append(w, "-o"), "--format requires value"},
		{append(w, "--bogus"), "unknown argument: --bogus"},
		{append(w, "-x"), "unknown argument: -x"},
		// checked before the benchmark runs, not after
		{append(w, "--output-file", "."), "--output-file .: is a directory (want a file path)"},
		{append(w, "extra"), "unknown argument: extra"},
		{[]string{"--weights"}, "--weights requires value"},
		{[]string{"-m"}, "--weights requires value"}, // -m as in ninfer-run and llama-bench
		{append(w, "-p"), "--n-prompt requires value"},
		{append(w, "-pg"), "--prompt-gen requires value"},
		{append(w, "-r"), "--repetitions requires value"},
		// the weights check comes first, like the reference's post-loop checks
		{[]string{"--prefill-chunk", "100"}, "--weights is required"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(t, context.Background(), c.args...)
		if code != 2 || stderr != "ninfer-bench: "+c.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want 2 and %q", c.args, code, stderr, stdout, c.msg)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-h", "--bogus"}, {"--corpus", "c.ids", "-r", "0", "--help", "x"}, {"--lm-head-draft", "-h"}} {
		code, stdout, stderr := runCmd(t, context.Background(), args...)
		if code != 0 || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "--n-prompt") || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestRuntimeErrors(t *testing.T) {
	model, corpusPath := fixture(t)
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"--spec", "mtp", "--draft-tokens", "2", "-n", "8", "--max-ctx", "10"}, "--max-ctx 10 is too small; tg8 needs 13"},
		{[]string{"-p", "16", "--max-ctx", "8"}, "--max-ctx 8 is too small; pp16 needs 16"},
		{[]string{"-p", "65"}, "pp65 exceeds the token-id corpus"},
		// Refused before the engine allocates a KV cache for it.
		{[]string{"-p", "16", "--max-ctx", "100000000"}, model + ": --max-ctx 100000000 exceeds the model's max_position_embeddings 4096"},
		{[]string{"-n", "5000"}, model + ": tg5000 needs 5001 tokens of context, above the model's max_position_embeddings 4096"},
	}
	for _, c := range cases {
		args := append([]string{"--weights", model, "--corpus", corpusPath, "--backend", "cpu"}, c.args...)
		code, stdout, stderr := runCmd(t, context.Background(), args...)
		if code != 1 || stderr != "ninfer-bench: "+c.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want 1 and %q", c.args, code, stderr, stdout, c.msg)
		}
	}
}

// decodeDoc decodes a document and blanks its command (which differs
// between invocations by the --output flag).
func decodeDoc(t *testing.T, data []byte) []byte {
	t.Helper()
	d, err := benchfmt.DecodeDocument(data)
	if err != nil {
		t.Fatalf("document: %v\n%s", err, data)
	}
	d.Command = ""
	return benchfmt.EncodeDocument(&d)
}

func TestStreamThroughReportEqualsJSON(t *testing.T) {
	model, corpusPath := fixture(t)
	args := []string{"--weights", model, "--corpus", corpusPath, "--backend", "cpu", "--threads", "2",
		"-p", "8", "--n-prompt", "4,8", "-p", "2", "-n", "3", "-pg", "4,2", "-r", "2", "--warmup", "1"}
	code, stream, stderr := runCmd(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("jsonl run: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stream, "\n"), "\n")
	if len(lines) != 1+6*3 {
		t.Fatalf("%d lines, want 19", len(lines))
	}
	first, err := benchfmt.ParseLineString(lines[0])
	if err != nil || first.Run == nil {
		t.Fatalf("first line is not a run line: %v", err)
	}
	if want := "ninfer-bench " + strings.Join(args, " "); first.Run.Command != want {
		t.Errorf("command = %q, want %q", first.Run.Command, want)
	}
	runs, _, err := report.Load([]string{"-"}, strings.NewReader(stream), "")
	if err != nil {
		t.Fatal(err)
	}
	piped, err := report.Render(report.FormatJSON, runs)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, tt := range runs[0].Document.Tests {
		labels = append(labels, tt.Label)
	}
	if got, want := strings.Join(labels, " "), "pp8 pp4 pp8 pp2 tg3 pp4+tg2"; got != want {
		t.Errorf("tests = %s, want %s (argv order across -p and --n-prompt)", got, want)
	}

	code, direct, stderr := runCmd(t, context.Background(), append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("json run: exit %d: %s", code, stderr)
	}
	if a, b := decodeDoc(t, piped), decodeDoc(t, []byte(direct)); !bytes.Equal(a, b) {
		t.Errorf("bench | report differs from bench --output json:\n%s\n---\n%s", a, b)
	}
	if !strings.HasSuffix(direct, "]\n}\n") {
		t.Errorf("document does not end with the reference layout: %q", direct[max(0, len(direct)-20):])
	}

	code, table, _ := runCmd(t, context.Background(), append(args, "--output", "table")...)
	if code != 0 || !strings.Contains(table, "| tiny-hf | q8     | cpu") || !strings.Contains(table, "pp4+tg2 (tg)") {
		t.Errorf("table output (exit %d):\n%s", code, table)
	}
	code, csv, _ := runCmd(t, context.Background(), append(args, "-o", "csv")...)
	if rows := strings.Count(csv, "\n"); code != 0 || rows != 7 || !strings.HasPrefix(csv, "run_id,") {
		t.Errorf("csv output (exit %d, %d rows):\n%s", code, rows, csv)
	}
}

func TestOutputFile(t *testing.T) {
	model, corpusPath := fixture(t)
	for _, format := range []string{"jsonl", "json"} {
		path := filepath.Join(t.TempDir(), "sub", "out."+format)
		code, stdout, stderr := runCmd(t, context.Background(), "--weights", model, "--corpus", corpusPath, "--backend", "cpu",
			"-n", "2", "-r", "1", "--warmup", "0", "--output", format, "--output-file", path)
		if code != 0 || stdout != "" || !strings.Contains(stderr, "ninfer-bench: wrote "+path+"\n") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", format, code, stdout, stderr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if format == "json" {
			if _, err := benchfmt.DecodeDocument(data); err != nil {
				t.Errorf("json file: %v", err)
			}
		} else if n := strings.Count(string(data), "\n"); n != 3 {
			t.Errorf("jsonl file has %d lines, want 3", n)
		}
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
			t.Errorf("%s: temporary files left: %v", format, ents)
		}
	}
}

func TestInterrupted(t *testing.T) {
	model, corpusPath := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C before the first rep
	code, stdout, stderr := runCmd(t, ctx, "--weights", model, "--corpus", corpusPath, "--backend", "cpu", "-n", "2")
	if code != 130 || !strings.Contains(stderr, "interrupted") {
		t.Fatalf("exit %d, stderr %q; want 130", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want only the run line, got %d lines", len(lines))
	}
	if l, err := benchfmt.ParseLineString(lines[0]); err != nil || l.Run == nil {
		t.Errorf("run line: %v", err)
	}
}

func TestWantsHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-h"}, true},
		{[]string{"--weights", "-h"}, false}, // the value of --weights
		{[]string{"--weights=m", "-h"}, true},
		{[]string{"--no-cuda-graph", "--help"}, true},
		{[]string{"extra", "-h"}, false}, // the bad argument comes first
		{[]string{"-p", "16"}, false},
	} {
		if got := wantsHelp(c.args); got != c.want {
			t.Errorf("wantsHelp(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestInterruptedDocumentToFile(t *testing.T) {
	model, corpusPath := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCmd(t, ctx, "--weights", model, "--corpus", corpusPath, "--backend", "cpu", "-n", "2",
		"--output", "json", "--output-file", path)
	if code != 130 || stdout != "" || !strings.Contains(stderr, "ninfer-bench: wrote "+path) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := benchfmt.DecodeDocument(data)
	if err != nil || len(d.Tests) != 0 || d.Config.Repetitions != 5 {
		t.Errorf("partial document: %v, %d tests, %+v", err, len(d.Tests), d.Config)
	}
}

// --spec none is accepted (as in ninfer-run and ninfer-plan) and is the
// default; --format, -f, --output and -o are one flag.
func TestSpecNoneAndFormatSpellings(t *testing.T) {
	model, corpusPath := fixture(t)
	base := []string{"--weights", model, "--corpus", corpusPath, "--backend", "cpu", "-n", "2", "-r", "1", "--warmup", "0"}
	for _, extra := range [][]string{{"--format", "table"}, {"-f", "md"}, {"--output", "table", "--spec", "none"}, {"-o", "md"}} {
		code, stdout, stderr := runCmd(t, context.Background(), append(base, extra...)...)
		if code != 0 || !strings.Contains(stdout, "| tiny-hf | q8     | cpu") {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", extra, code, stdout, stderr)
		}
	}
	if code, stdout, _ := runCmd(t, context.Background(), append(base, "--spec", "none")...); code != 0 || !strings.Contains(stdout, `"speculative_backend":"none"`) {
		t.Errorf("--spec none: exit %d, stdout %q", code, stdout)
	}
}

// --verify checks the payload hashes before the run (exit 1 naming the
// object); --quiet leaves only errors and warnings on stderr.
func TestVerifyAndQuiet(t *testing.T) {
	model, corpusPath := fixture(t)
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	f, err := artifact.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := f.Object("text/layers/1/mlp/down_proj")
	data[f.PayloadStart+o.Offset+3] ^= 0x20
	f.Close()
	bad := filepath.Join(t.TempDir(), "bad.ninfer")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--corpus", corpusPath, "--backend", "cpu", "-n", "2", "-r", "1", "--warmup", "0"}
	code, stdout, stderr := runCmd(t, context.Background(), append([]string{"--weights", bad, "--verify"}, args...)...)
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "ninfer-bench: --verify: ") ||
		!strings.Contains(stderr, `"text/layers/1/mlp/down_proj"`) || !strings.Contains(stderr, "sha256 mismatch") {
		t.Fatalf("--verify of a changed payload: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runCmd(t, context.Background(), append([]string{"--weights", model, "--verify"}, args...)...)
	if code != 0 || !strings.Contains(stderr, "ninfer-bench: verified "+model+": directory sha256, ") {
		t.Fatalf("--verify of the fixture: exit %d, stderr %q", code, stderr)
	}
	// Without --corpus the random-corpus note is printed; --quiet drops it,
	// the verified line and the wrote line.
	path := filepath.Join(t.TempDir(), "out.jsonl")
	quiet := []string{"--weights", model, "--backend", "cpu", "-n", "2", "-r", "1", "--warmup", "0", "--verify", "--output-file", path}
	code, _, stderr = runCmd(t, context.Background(), quiet...)
	if code != 0 || !strings.Contains(stderr, "note: ") || !strings.Contains(stderr, "wrote ") {
		t.Fatalf("without --quiet: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCmd(t, context.Background(), append(quiet, "-q")...)
	if code != 0 || stderr != "" {
		t.Fatalf("--quiet: exit %d, stderr %q; want nothing", code, stderr)
	}
}

// --threads is 0..256 with a usage error naming the flag in every tool;
// before, --threads 10000 exited 1 late and -1 said "invalid threads".
func TestThreadsRange(t *testing.T) {
	for _, v := range []string{"-1", "10000"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"ninfer-bench", "--weights", "m.ninfer", "--threads", v}, &stdout, &stderr, bench.Env{})
		want := "ninfer-bench: --threads " + v + ": out of range (want 0..256; 0 = all cores)\n"
		if code != 2 || stderr.String() != want {
			t.Errorf("--threads %s: exit %d stderr %q, want 2 and %q", v, code, stderr.String(), want)
		}
	}
}

// cancelOnWrite cancels a context at the first progress line: the stop
// arrives after the run's check before the (only) rep, as a Ctrl-C during
// the last rep does.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (w cancelOnWrite) Write(p []byte) (int, error) { w.cancel(); return len(p), nil }

// A stop during the last rep used to be dropped: exit 0, no message. The
// output stays complete, and the exit status is 130.
func TestInterruptedDuringLastRep(t *testing.T) {
	model, corpusPath := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := testEnv()
	env.Progress, env.ForceProgress = cancelOnWrite{cancel}, true
	path := filepath.Join(t.TempDir(), "r.jsonl")
	var o, e bytes.Buffer
	code := run(ctx, []string{"ninfer-bench", "--weights", model, "--corpus", corpusPath, "--backend", "cpu",
		"-n", "2", "-r", "1", "--warmup", "0", "--output-file", path}, &o, &e, env)
	if code != 130 || !strings.Contains(e.String(), "interrupted; the output holds the reps measured so far") {
		t.Fatalf("exit %d, stderr %q; want 130 and the interrupted line", code, e.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 { // run, rep, test_end
		t.Errorf("output has %d lines, want 3 (complete): %q", n, data)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestWeightsPathInErrorsIsQuoted: a --weights path with control bytes is
// shown through termsafe.Path in the load error (quoted, escaped), as in
// every tool; before, the "--weights PATH:" prefix showed it raw.
func TestWeightsPathInErrorsIsQuoted(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad\x1b[2J.ninfer")
	if err := os.WriteFile(bad, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, context.Background(), "--weights", bad, "-p", "1", "-n", "1", "-r", "1", "--warmup", "0")
	q := strconv.Quote(bad)
	if code != 1 || !strings.HasPrefix(stderr, "ninfer-bench: --weights "+q+": "+q+": ") || strings.Contains(stderr, "\x1b") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}
