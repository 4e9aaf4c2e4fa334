package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/corpus"
)

func TestMain(m *testing.M) { testfixture.Main(m) }

const (
	shakespeareTok = "../../models/tiny-shakespeare/tokenizer.json"
	benchCorpus    = "../../models/tiny-shakespeare/bench_corpus.ids"
)

type outcome struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, stdin string, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{name}, args...), strings.NewReader(stdin), &out, &errb)
	return outcome{code, out.String(), errb.String()}
}

// shakespeare is real text: the default model's bench corpus decoded.
func shakespeare(t *testing.T) string {
	t.Helper()
	o := runCmd(t, "", "--tokenizer", shakespeareTok, "--decode", "--whole", benchCorpus)
	if o.code != 0 || len(o.stdout) < 10000 {
		t.Fatalf("decode of the bench corpus: %d %q", o.code, o.stderr)
	}
	return o.stdout
}

// text → ids → text gives the text back, per line and whole, and the ids
// are a corpus that pkg/corpus reads (what ninfer-bench --corpus uses).
func TestRoundTrip(t *testing.T) {
	text := shakespeare(t)
	tok := []string{"--tokenizer", shakespeareTok}

	// Per line: one ids line per text line.
	o := runCmd(t, text, tok...)
	if o.code != 0 {
		t.Fatalf("encode: %d %s", o.code, o.stderr)
	}
	if got, want := strings.Count(o.stdout, "\n"), strings.Count(text, "\n")+1; got != want && got != want-1 {
		t.Errorf("%d id lines for %d text lines", got, want)
	}
	ids, err := corpus.Read(strings.NewReader(o.stdout), "per-line", 4096)
	if err != nil || len(ids) == 0 {
		t.Fatalf("per-line output is not a corpus: %v", err)
	}
	back := runCmd(t, o.stdout, append(tok, "--decode")...)
	if back.code != 0 || strings.TrimSuffix(back.stdout, "\n") != strings.TrimSuffix(text, "\n") {
		t.Errorf("per-line round trip differs (code %d, %s)", back.code, back.stderr)
	}

	// Whole: one sequence, newlines included, written 16 ids per line.
	dir := t.TempDir()
	in, idsFile := filepath.Join(dir, "text.txt"), filepath.Join(dir, "out", "c.ids")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o = runCmd(t, "", append(tok, "--whole", "--output-file", idsFile, in)...)
	if o.code != 0 || o.stdout != "" || !strings.Contains(o.stderr, "wrote "+idsFile) {
		t.Fatalf("whole: %+v", o)
	}
	whole, err := corpus.ReadFile(idsFile, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) <= len(ids) {
		t.Errorf("whole: %d ids, per line %d (the newline tokens are missing)", len(whole), len(ids))
	}
	back = runCmd(t, "", append(tok, "--decode", "--whole", idsFile)...)
	if back.code != 0 || back.stdout != text {
		t.Errorf("whole round trip differs (code %d, %s)", back.code, back.stderr)
	}
}

// The artifact's tokenizer (--weights) and special tokens.
func TestWeightsSpecialChat(t *testing.T) {
	m := testfixture.Artifact(t, "q8", nil)
	on := runCmd(t, "<|im_start|>user\n", "--weights", m)
	off := runCmd(t, "<|im_start|>user\n", "--weights", m, "--special=false")
	if on.code != 0 || off.code != 0 {
		t.Fatalf("%+v %+v", on, off)
	}
	onIDs, _ := corpus.Read(strings.NewReader(on.stdout), "on", 0)
	offIDs, _ := corpus.Read(strings.NewReader(off.stdout), "off", 0)
	if len(onIDs) == 0 || len(offIDs) <= len(onIDs) {
		t.Errorf("special on %v, off %v: want the marker as one id only with --special", onIDs, offIDs)
	}
	// The special token is left out of the text with --decode --special=false.
	dec := runCmd(t, on.stdout, "--weights", m, "--decode", "--special=false")
	if dec.code != 0 || dec.stdout != "user\n" {
		t.Errorf("decode without special: %+v", dec)
	}
	// --chat: a conversation per line; the array and object forms.
	conv := `[{"role":"user","content":"Hi"}]` + "\n" + `{"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":true}` + "\n"
	c := runCmd(t, conv, "--weights", m, "--chat")
	if c.code != 0 {
		t.Fatalf("chat: %+v", c)
	}
	lines := strings.Split(strings.TrimSuffix(c.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("chat: %q", c.stdout)
	}
	text := runCmd(t, c.stdout, "--weights", m, "--decode")
	want := "<|im_start|>user\nHi<|im_end|>\n\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n\n"
	if text.stdout != want {
		t.Errorf("chat decoded %q, want %q", text.stdout, want)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.ids")
	os.WriteFile(bad, []byte("1 2\n3 x 4\n"), 0o644)
	tok := []string{"--tokenizer", shakespeareTok}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"no tokenizer", nil, "", 2, "exactly one of --weights and --tokenizer"},
		{"both", []string{"--weights", "a", "--tokenizer", "b"}, "", 2, "exactly one of"},
		{"two files", append(tok, "a", "b"), "", 2, "expected at most one input FILE, got 2 argument(s)"},
		{"flag after file", append(tok, "a", "--whole", "b"), "", 2, `flag "--whole" after the arguments (flags go first, then at most one input FILE)`},
		{"chat decode", append(tok, "--chat", "--decode"), "", 2, "--chat renders text"},
		{"chat no special", append(tok, "--chat", "--special=false"), "", 2, "--special=false"},
		{"unknown flag", append(tok, "--nope"), "", 2, "--nope"},
		{"output dir", append(tok, "--output-file", dir), "", 2, "is a directory"},
		{"missing tokenizer", []string{"--tokenizer", filepath.Join(dir, "none.json")}, "", 1, "--tokenizer"},
		{"missing weights", []string{"--weights", filepath.Join(dir, "none.ninfer")}, "", 1, "none.ninfer"},
		{"missing input", append(tok, filepath.Join(dir, "none.txt")), "", 1, "none.txt"},
		{"bad id", append(tok, "--decode", bad), "", 1, "bad.ids: line 2: token 2: \"x\" is not a non-negative int32 id"},
		{"bad id whole", append(tok, "--decode", "--whole", bad), "", 1, "bad.ids: line 2: token 2"},
		{"id outside", append(tok, "--decode"), "1 4096\n", 1, "stdin: line 1: token 2: id 4096 is outside the vocabulary [0,4096)"},
		{"bad chat", append(tok, "--chat"), "[{\"role\":\"user\",\"content\":\"a\"}]\n{\"role\":1}\n", 1, "stdin: line 2: --chat: not a conversation"},
		{"bad role", append(tok, "--chat", "--whole"), `[{"role":"bot","content":"a"}]`, 1, "unknown role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runCmd(t, tc.stdin, tc.args...)
			if o.code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", o.code, tc.code, o.stderr)
			}
			if strings.Count(o.stderr, "\n") != 1 || !strings.HasPrefix(o.stderr, name+": ") || !strings.Contains(o.stderr, tc.want) {
				t.Errorf("stderr %q: want one line with %q", o.stderr, tc.want)
			}
		})
	}
}

// A cancelled context (a stopping signal) exits 130 and writes no
// --output-file.
func TestStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "o.ids")
	var so, se bytes.Buffer
	code := run(ctx, []string{name, "--tokenizer", shakespeareTok, "--output-file", out}, strings.NewReader("a\nb\n"), &so, &se)
	if code != cliutil.ExitInterrupted {
		t.Errorf("exit %d, want 130 (%s)", code, se.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}

// docs/CLI.md lists exactly this tool's flags.
func TestFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	app := cliutil.Prepare(newApp(), io.Discard, io.Discard) // as run: Prepare adds --version
	if err := cliutil.CheckFlagDoc(doc, "tokenize", cliutil.FlagNames(app.Flags, !app.HideHelp)); err != nil {
		t.Error(err)
	}
}
