package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/runner"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(mainStatus()) // started by startChild: be ninfer-run
	}
	testfixture.Main(m)
}

func model(t *testing.T) string {
	t.Helper()
	return testfixture.Artifact(t, "q8", nil)
}

type outcome struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, ctx context.Context, stdin string, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{name}, args...), strings.NewReader(stdin), &out, &errb)
	return outcome{code, out.String(), errb.String()}
}

// base are the flags of a quick, deterministic run.
func base(t *testing.T, extra ...string) []string {
	return append([]string{"--weights", model(t), "--backend", "cpu", "--threads", "2", "--max-ctx", "256",
		"--prefill-chunk", "128", "--quiet", "--ignore-eos"}, extra...)
}

func jsonLines(t *testing.T, s string) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if !gjson.Valid(l) {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, gjson.Parse(l))
	}
	return out
}

func ids(r gjson.Result) []int32 {
	var v []int32
	for _, x := range r.Array() {
		v = append(v, int32(x.Int()))
	}
	return v
}

func TestExitCodes(t *testing.T) {
	m := model(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string // in the one stderr line
	}{
		{"chunk", []string{"--weights", m, "--prompt", "x", "--prefill-chunk", "100"}, "", 2, "ninfer-run: --prefill-chunk 100: out of range (want a positive multiple of 128)"},
		{"unknown flag", []string{"--weights", m, "--prompt", "x", "--bogus"}, "", 2, "bogus"},
		{"no weights flag", []string{"--prompt", "x"}, "", 2, "--weights is required"},
		{"positional", []string{"--weights", m, "hello"}, "", 2, `unexpected argument "hello"`},
		{"kv dtype", []string{"--weights", m, "--prompt", "x", "--kv-dtype", "int4"}, "", 2, "--kv-dtype"},
		{"both prompts", []string{"--weights", m, "--prompt", "x", "--prompt-file", "f"}, "", 2, "mutually exclusive"},
		{"system without chat", []string{"--weights", m, "--prompt", "x", "--system", "s"}, "", 2, "--chat"},
		{"think both", []string{"--weights", m, "--prompt", "x", "--chat", "--think", "--no-think"}, "", 2, "--no-think"},
		{"chat ids", []string{"--weights", m, "--prompt", "1 2", "--chat", "--ids"}, "", 2, "--ids"},
		{"draft without spec", []string{"--weights", m, "--prompt", "x", "--draft-tokens", "2"}, "", 2, "--spec mtp"},
		{"draft range", []string{"--weights", m, "--prompt", "x", "--spec", "mtp", "--draft-tokens", "9"}, "", 2, "ninfer-run: --draft-tokens 9: out of range (want 1..5)"},
		{"temperature", []string{"--weights", m, "--prompt", "x", "--temperature", "-1"}, "", 2, "ninfer-run: --temperature -1: out of range (want a finite number ≥ 0; 0 = greedy)"},
		{"top-p NaN", []string{"--weights", m, "--prompt", "x", "--top-p", "nan"}, "", 2, "ninfer-run: --top-p NaN: out of range (want 0..1; 0 or 1 = off)"},
		{"frequency-penalty inf", []string{"--weights", m, "--prompt", "x", "--frequency-penalty", "inf"}, "", 2, "ninfer-run: --frequency-penalty +Inf: out of range (want a finite number)"},
		{"max-new", []string{"--weights", m, "--prompt", "x", "--max-new", "-3"}, "", 2, "ninfer-run: --max-new -3: out of range (want 0..9223372036854775807)"},
		{"bad prompt ids", []string{"--weights", m, "--ids", "--prompt", "1 b"}, "", 2, "token 2"},
		{"missing weights", []string{"--weights", filepath.Join(dir, "nope.ninfer"), "--prompt", "x"}, "", 1, "nope.ninfer"},
		{"missing prompt file", []string{"--weights", m, "--prompt-file", filepath.Join(dir, "nope.txt")}, "", 1, "nope.txt"},
		{"spec name", []string{"--weights", m, "--prompt", "x", "--spec", "eagle"}, "", 2, "--spec"},
		{"lm-head-draft", []string{"--weights", m, "--prompt", "x", "--lm-head-draft"}, "", 2, "--spec mtp"},
		{"no proposal head", []string{"--weights", m, "--prompt", "x", "--spec", "mtp", "--lm-head-draft"}, "", 1, "proposal head"},
		{"out of vocab", []string{"--weights", m, "--ids", "-q"}, "1 2\n\n3 4 99999\n", 1, "stdin: line 3: token 3: id 99999 is outside the vocabulary"},
		{"context", []string{"--weights", m, "--max-ctx", "16", "-q", "--prompt", "the quick brown fox jumps"}, "", 1, "--max-ctx 16"},
		{"max-ctx over the model", []string{"--weights", m, "--max-ctx", "100000000", "-q", "--prompt", "x"}, "", 1, "--max-ctx 100000000 exceeds the model's max_position_embeddings 4096"},
		{"empty stdin", []string{"--weights", m}, "", 1, "ninfer-run: stdin: no prompt (no non-blank line)"},
		{"blank stdin", []string{"--weights", m, "--ids"}, "\n  \n\r\n", 1, "ninfer-run: stdin: no prompt (no non-blank line)"},
		{"seed flag spelling", []string{"--weights", m, "--prompt", "x", "--seed", "-1"}, "", 2, "--seed -1: out of range (want 0..18446744073709551615)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runCmd(t, context.Background(), tc.stdin, tc.args...)
			if o.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", o.code, tc.code, o.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(o.stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if tc.code == 2 && (len(lines) != 1 || o.stdout != "") {
				// A usage error is one line on stderr; no help text on stdout.
				t.Fatalf("usage error: stdout %q, stderr %q; want only one stderr line", o.stdout, o.stderr)
			}
			if !strings.HasPrefix(last, name+": ") || !strings.Contains(last, tc.want) {
				t.Fatalf("last stderr line %q, want \"%s: ...%s...\"", last, name, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	o := runCmd(t, context.Background(), "", "--help")
	if o.code != 0 || !strings.Contains(o.stdout, "Examples:") || !strings.Contains(o.stdout, "--max-ctx") {
		t.Fatalf("exit %d, help %q", o.code, o.stdout)
	}
}

func TestIDsRoundTrip(t *testing.T) {
	// Text prompts as JSON give prompt ids and generated ids ...
	o := runCmd(t, context.Background(), "the cat sat\n\non the mat\n", base(t, "--json", "--max-new", "6")...)
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	js := jsonLines(t, o.stdout)
	if len(js) != 2 {
		t.Fatalf("%d JSON lines for 2 prompts", len(js))
	}
	var in, want strings.Builder
	for _, j := range js {
		in.WriteString(runner.FormatIDs(ids(j.Get("prompt_ids"))) + "\n")
		want.WriteString(runner.FormatIDs(ids(j.Get("ids"))) + "\n")
	}
	// ... and the same prompts as ids give the same ids, one line each.
	o = runCmd(t, context.Background(), in.String(), base(t, "--ids", "--max-new", "6")...)
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	if o.stdout != want.String() {
		t.Fatalf("--ids output %q, want %q", o.stdout, want.String())
	}
	// --prompt with --ids.
	first := strings.SplitN(in.String(), "\n", 2)[0]
	o = runCmd(t, context.Background(), "", base(t, "--ids", "--max-new", "6", "--prompt", first)...)
	if o.code != 0 || o.stdout != strings.SplitN(want.String(), "\n", 2)[0]+"\n" {
		t.Fatalf("exit %d, output %q", o.code, o.stdout)
	}
}

func TestJSONAndTextAgree(t *testing.T) {
	o := runCmd(t, context.Background(), "", base(t, "--json", "--max-new", "9", "--prompt", "hello world")...)
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	js := jsonLines(t, o.stdout)
	if len(js) != 1 {
		t.Fatalf("%d lines", len(js))
	}
	j := js[0]
	if j.Get("prompt").String() != "hello world" || j.Get("finish_reason").String() != "length" ||
		len(ids(j.Get("ids"))) != 9 || j.Get("timings.generated_tokens").Int() != 9 ||
		j.Get("timings.prompt_tokens").Int() != int64(len(ids(j.Get("prompt_ids")))) ||
		!(j.Get("timings.decode_tok_s").Float() > 0) || !(j.Get("timings.prefill_tok_s").Float() > 0) {
		t.Fatalf("JSON line %s", j.Raw)
	}
	txt := runCmd(t, context.Background(), "", base(t, "--max-new", "9", "--prompt", "hello world")...)
	if txt.code != 0 || txt.stdout != j.Get("text").String()+"\n" {
		t.Fatalf("text output %q, JSON text %q", txt.stdout, j.Get("text").String())
	}
	if txt.stderr != "" {
		t.Errorf("--quiet run wrote %q to stderr", txt.stderr)
	}
	loud := runCmd(t, context.Background(), "", "--weights", model(t), "--backend", "cpu", "--max-new", "2", "--prompt", "hi")
	if loud.code != 0 || !strings.Contains(loud.stderr, "memory:") || !strings.Contains(loud.stderr, "generated 2 tokens") {
		t.Errorf("stderr without --quiet: %q", loud.stderr)
	}
	for _, l := range strings.Split(strings.TrimSuffix(loud.stderr, "\n"), "\n") {
		if !strings.HasPrefix(l, name+": ") {
			t.Errorf("stderr line %q lacks the %q prefix", l, name+": ")
		}
	}
}

func TestPromptFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(p, []byte("first line\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		extra   []string
		prompts []string
	}{
		{nil, []string{"first line\nsecond line"}},
		{[]string{"--each-line"}, []string{"first line", "second line"}},
	} {
		t.Run(fmt.Sprint(tc.extra), func(t *testing.T) {
			o := runCmd(t, context.Background(), "", base(t, append([]string{"--json", "--max-new", "2", "--prompt-file", p}, tc.extra...)...)...)
			if o.code != 0 {
				t.Fatalf("exit %d: %s", o.code, o.stderr)
			}
			var got []string
			for _, j := range jsonLines(t, o.stdout) {
				got = append(got, j.Get("prompt").String())
			}
			if !slices.Equal(got, tc.prompts) {
				t.Fatalf("prompts %q, want %q", got, tc.prompts)
			}
		})
	}
}

func TestChatFlag(t *testing.T) {
	o := runCmd(t, context.Background(), "", base(t, "--json", "--max-new", "1", "--chat", "--no-think", "--system", "S", "--prompt", "hi")...)
	plain := runCmd(t, context.Background(), "", base(t, "--json", "--max-new", "1", "--prompt",
		"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")...)
	if o.code != 0 || plain.code != 0 {
		t.Fatalf("exit %d/%d: %s %s", o.code, plain.code, o.stderr, plain.stderr)
	}
	got, want := ids(jsonLines(t, o.stdout)[0].Get("prompt_ids")), ids(jsonLines(t, plain.stdout)[0].Get("prompt_ids"))
	if !slices.Equal(got, want) || len(got) < 10 {
		t.Fatalf("--chat prompt ids %v, want the rendered chat's %v", got, want)
	}
}

func TestSeeds(t *testing.T) {
	gen := func(seed string) string {
		o := runCmd(t, context.Background(), "", base(t, "--ids", "--max-new", "12", "--temperature", "1", "--seed", seed, "--prompt", "5 6 7")...)
		if o.code != 0 {
			t.Fatalf("exit %d: %s", o.code, o.stderr)
		}
		return o.stdout
	}
	a, b, c := gen("11"), gen("11"), gen("12")
	if a != b || a == c {
		t.Fatalf("seed 11: %q and %q; seed 12: %q", a, b, c)
	}
}

func TestInterrupted(t *testing.T) {
	// Ctrl-C before any prompt ran: exit 130 and nothing on stdout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := runCmd(t, ctx, "", base(t, "--prompt", "hello")...)
	if o.code != exitInterrupted || o.stdout != "" || o.stderr != "ninfer-run: interrupted\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = runCmd(t, ctx, "1 2\n3 4\n", base(t, "--ids", "--json")...)
	if o.code != exitInterrupted || o.stdout != "" {
		t.Fatalf("exit %d, stdout %q", o.code, o.stdout)
	}
}

// stallReader yields its data, then cancels and blocks like a pipe whose
// writer is still open: Ctrl-C while ninfer-run waits for the next prompt.
type stallReader struct {
	data   string
	cancel context.CancelFunc
	block  chan struct{}
}

func (r *stallReader) Read(p []byte) (int, error) {
	if r.data != "" {
		n := copy(p, r.data)
		r.data = r.data[n:]
		return n, nil
	}
	r.cancel()
	<-r.block
	return 0, io.EOF
}

func TestInterruptedWaitingForPrompt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &stallReader{data: "1 2\n", cancel: cancel, block: make(chan struct{})}
	defer close(in.block)
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{name}, base(t, "--ids", "--json", "--max-new", "3")...), in, &out, &errb)
	js := jsonLines(t, out.String())
	if code != exitInterrupted || errb.String() != "ninfer-run: interrupted\n" || len(js) != 1 ||
		js[0].Get("finish_reason").String() != "length" || len(js[0].Get("ids").Array()) != 3 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 130, the first prompt's line, one interrupted line", code, out.String(), errb.String())
	}
}

func TestSpecMTP(t *testing.T) {
	plain := runCmd(t, context.Background(), "", base(t, "--json", "--max-new", "10", "--prompt", "a b c d e f")...)
	sp := runCmd(t, context.Background(), "", base(t, "--json", "--max-new", "10", "--spec", "mtp", "--draft-tokens", "3", "--prompt", "a b c d e f")...)
	if plain.code != 0 || sp.code != 0 {
		t.Fatalf("exit %d/%d: %s %s", plain.code, sp.code, plain.stderr, sp.stderr)
	}
	p, s := jsonLines(t, plain.stdout)[0], jsonLines(t, sp.stdout)[0]
	if !slices.Equal(ids(p.Get("ids")), ids(s.Get("ids"))) || len(ids(s.Get("ids"))) != 10 {
		t.Fatalf("--spec mtp ids %s, plain %s", s.Get("ids").Raw, p.Get("ids").Raw)
	}
	if p.Get("speculative").Exists() || s.Get("speculative.backend").String() != "mtp" ||
		s.Get("speculative.draft_tokens").Int() != 3 || s.Get("speculative.rounds").Int() < 1 {
		t.Fatalf("speculative objects: plain %s, spec %s", p.Get("speculative").Raw, s.Get("speculative").Raw)
	}
}
