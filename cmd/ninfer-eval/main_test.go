package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/corpus"
)

func TestMain(m *testing.M) { testfixture.Main(m) }

type outcome struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, ctx context.Context, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{name}, args...), strings.NewReader(""), &out, &errb)
	return outcome{code, out.String(), errb.String()}
}

// ids writes a corpus of n pseudo-random ids over the tiny model's vocabulary.
func ids(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.ids")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := corpus.Write(f, corpus.Random(512, n, 7), corpus.PerLine); err != nil {
		t.Fatal(err)
	}
	return p
}

func base(extra ...string) []string {
	return append([]string{"--backend", "cpu", "--threads", "2", "--ctx", "32", "--quiet"}, extra...)
}

func TestJSONAndReference(t *testing.T) {
	fp32, q8 := testfixture.Artifact(t, "fp32", nil), testfixture.Artifact(t, "q8", nil)
	c := ids(t, 100)
	o := runCmd(t, context.Background(), base("--weights", fp32, "--weights", q8, "--reference", fp32, "--corpus", c, "--format", "json")...)
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("%+v", o)
	}
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines: %q", o.stdout)
	}
	self, q := gjson.Parse(lines[0]), gjson.Parse(lines[1])
	if self.Get("windows").Int() != 3 || self.Get("tokens").Int() != 3*15 || self.Get("weights").String() != fp32 {
		t.Errorf("line 1: %s", lines[0])
	}
	if self.Get("kl.max").Float() != 0 || self.Get("top1_agreement").Float() != 1 || self.Get("delta_ppl").Float() != 0 {
		t.Errorf("fp32 against itself: %s", lines[0])
	}
	if kl := q.Get("kl.mean").Float(); !(kl > 0 && kl < 0.05) || q.Get("ppl").Float() <= 1 {
		t.Errorf("q8 against fp32: %s", lines[1])
	}

	// The table: a row per model; --output-file; --max-windows, --stride.
	out := filepath.Join(t.TempDir(), "r", "t.md")
	o = runCmd(t, context.Background(), base("--weights", q8, "--corpus", c, "--stride", "16", "--max-windows", "2", "--output-file", out)...)
	b, _ := os.ReadFile(out)
	if o.code != 0 || !strings.Contains(string(b), "| "+q8+" | 30 ") || !strings.Contains(string(b), "2 windows of 32 tokens, stride 16") {
		t.Errorf("table: %+v\n%s", o, b)
	}
}

// --save-logits then --reference FILE gives what the live reference gives:
// the same reference PPL and top-1 agreement, the KL within the file's
// rounding; a file of another run is refused naming the field.
func TestSaveLogits(t *testing.T) {
	fp32, q8 := testfixture.Artifact(t, "fp32", nil), testfixture.Artifact(t, "q8", nil)
	c := ids(t, 100)
	dir := t.TempDir()
	lf := filepath.Join(dir, "sub", "fp32.logits")
	o := runCmd(t, context.Background(), base("--weights", fp32, "--corpus", c, "--save-logits", lf, "--format", "json")...)
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("save: %+v", o)
	}
	if ents, _ := os.ReadDir(filepath.Dir(lf)); len(ents) != 1 {
		t.Errorf("want only the logits file: %v", ents)
	}
	live := runCmd(t, context.Background(), base("--weights", q8, "--reference", fp32, "--corpus", c, "--format", "json")...)
	saved := runCmd(t, context.Background(), base("--weights", q8, "--reference", lf, "--corpus", c, "--format", "json")...)
	if live.code != 0 || saved.code != 0 {
		t.Fatalf("live %+v\nsaved %+v", live, saved)
	}
	l, s := gjson.Parse(live.stdout), gjson.Parse(saved.stdout)
	for _, k := range []string{"ref_ppl", "top1_agreement", "delta_ppl", "delta_nll.mean", "ppl"} {
		if l.Get(k).Float() != s.Get(k).Float() {
			t.Errorf("%s: live %v, saved %v", k, l.Get(k), s.Get(k))
		}
	}
	kl, ks := l.Get("kl.mean").Float(), s.Get("kl.mean").Float()
	if !(kl > 0) || math.Abs(kl-ks) > 5e-8+1e-4*kl {
		t.Errorf("KL live %v, saved %v", kl, ks)
	}
	if s.Get("reference").String() != lf {
		t.Errorf("reference: %s", saved.stdout)
	}

	// An interrupted run writes no file (and leaves no temporary one).
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := filepath.Join(dir, "stopped", "x.logits")
	o = runCmd(t, cctx, base("--weights", fp32, "--corpus", c, "--save-logits", stopped)...)
	if ents, _ := os.ReadDir(filepath.Dir(stopped)); o.code != cliutil.ExitInterrupted || len(ents) != 0 {
		t.Errorf("interrupted: %+v, files %v", o, ents)
	}

	b, _ := os.ReadFile(lf)
	trunc := filepath.Join(dir, "trunc.logits")
	os.WriteFile(trunc, b[:len(b)/2], 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"other corpus", base("--weights", q8, "--reference", lf, "--corpus", ids(t, 101)), 1, "corpus differs"},
		{"other ctx", append(base("--weights", q8, "--reference", lf, "--corpus", c), "--ctx", "16"), 1, "ctx differs: saved with --ctx 32, this run has 16"},
		{"other stride", base("--weights", q8, "--reference", lf, "--corpus", c, "--stride", "16"), 1, "stride differs"},
		{"fewer windows", base("--weights", q8, "--reference", lf, "--corpus", c, "--max-windows", "1"), 1, "windows differ"},
		{"truncated", base("--weights", q8, "--reference", trunc, "--corpus", c), 1, "truncated"},
		{"two models", base("--weights", q8, "--weights", fp32, "--save-logits", filepath.Join(dir, "x"), "--corpus", c), 2, "give one --weights"},
		{"over input", base("--weights", q8, "--save-logits", c, "--corpus", c), 2, "is the input"},
		// Two outputs naming one new file: the second write replaced the first.
		{"same as --output-file", base("--weights", q8, "--output-file", filepath.Join(dir, "o.out"), "--save-logits", filepath.Join(dir, ".", "o.out"), "--corpus", c), 2, "is also --output-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runCmd(t, context.Background(), tc.args...)
			if o.code != tc.code || !strings.Contains(o.stderr, tc.want) || strings.Count(o.stderr, "\n") != 1 {
				t.Errorf("%+v: want exit %d and one line with %q", o, tc.code, tc.want)
			}
		})
	}
}

// --text is tokenized with the model's tokenizer; progress goes to stderr.
func TestTextProgress(t *testing.T) {
	m := testfixture.Artifact(t, "q8", nil)
	p := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(p, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)), 0o644)
	o := runCmd(t, context.Background(), "--weights", m, "--text", p, "--backend", "cpu", "--ctx", "64", "--format", "json")
	if o.code != 0 || !strings.Contains(o.stderr, "windows of 64 tokens") || !strings.Contains(o.stderr, "ppl") {
		t.Fatalf("%+v", o)
	}
	if r := gjson.Parse(o.stdout); r.Get("windows").Int() < 1 || r.Get("corpus").String() != p {
		t.Errorf("%s", o.stdout)
	}
}

func TestStopped(t *testing.T) {
	m := testfixture.Artifact(t, "q8", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := runCmd(t, ctx, base("--weights", m, "--corpus", ids(t, 100), "--format", "json")...)
	if o.code != cliutil.ExitInterrupted || !gjson.Get(o.stdout, "interrupted").Bool() {
		t.Errorf("%+v", o)
	}
}

func TestErrors(t *testing.T) {
	m := testfixture.Artifact(t, "q8", nil)
	dir := t.TempDir()
	c := ids(t, 100)
	bad := filepath.Join(dir, "bad.ids")
	os.WriteFile(bad, []byte("1 2\n3 -4\n"), 0o644)
	short := filepath.Join(dir, "short.ids")
	os.WriteFile(short, []byte("1 2 3 4\n"), 0o644)
	big := filepath.Join(dir, "big.ids")
	os.WriteFile(big, []byte(strings.Repeat("1 ", 40)+"600\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no weights", []string{"--corpus", c}, 2, "--weights is required"},
		{"no ids", []string{"--weights", m}, 2, "exactly one of --corpus and --text"},
		{"both", []string{"--weights", m, "--corpus", c, "--text", c}, 2, "exactly one of --corpus and --text"},
		{"ctx", []string{"--weights", m, "--corpus", c, "--ctx", "2"}, 2, "ninfer-eval: --ctx 2: out of range (want 3..9223372036854775807)"},
		{"ctx one dash", []string{"--weights", m, "--corpus", c, "-ctx=2"}, 2, "ninfer-eval: -ctx 2: out of range (want 3..9223372036854775807)"},
		{"stride", []string{"--weights", m, "--corpus", c, "--stride", "-1"}, 2, "ninfer-eval: --stride -1: out of range (want 0..9223372036854775807; 0 = --ctx)"},
		{"max-windows", []string{"--weights", m, "--corpus", c, "--max-windows", "-1"}, 2, "ninfer-eval: --max-windows -1: out of range (want 0..9223372036854775807; 0 = all)"},
		{"threads one dash", []string{"--weights", m, "--corpus", c, "-threads", "-1"}, 2, "ninfer-eval: -threads -1: out of range (want 0..256; 0 = all cores)"},
		{"kv", []string{"--weights", m, "--corpus", c, "--kv-dtype", "q4"}, 2, "--kv-dtype \"q4\""},
		{"backend", []string{"--weights", m, "--corpus", c, "--backend", "tpu"}, 2, "--backend \"tpu\""},
		{"format", []string{"--weights", m, "--corpus", c, "--format", "csv"}, 2, "--format \"csv\""},
		{"output json", []string{"--weights", m, "--corpus", c, "-o", "json"}, 2, "format name"},
		{"argument", []string{"--weights", m, "x.ids"}, 2, "unexpected argument"},
		{"ctx int", []string{"--weights", m, "--corpus", c, "--ctx", "x"}, 2, "--ctx"},
		{"missing corpus", []string{"--weights", m, "--corpus", filepath.Join(dir, "none.ids")}, 1, "none.ids"},
		{"bad corpus", []string{"--weights", m, "--corpus", bad}, 1, "bad.ids: line 2: token 2"},
		{"short corpus", base("--weights", m, "--corpus", short), 1, "4 tokens do not fill one window of 32"},
		{"id outside", base("--weights", m, "--corpus", big), 1, "outside the vocabulary [0,512)"},
		{"missing weights", base("--weights", filepath.Join(dir, "no.ninfer"), "--corpus", c), 1, "no.ninfer"},
		{"ctx too big", []string{"--weights", m, "--corpus", c, "--ctx", "100000", "--backend", "cpu"}, 1, "max_position_embeddings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runCmd(t, context.Background(), tc.args...)
			if o.code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", o.code, tc.code, o.stderr)
			}
			last := o.stderr
			if i := strings.LastIndex(strings.TrimSuffix(last, "\n"), "\n"); i >= 0 {
				last = last[i+1:]
			}
			if !strings.HasPrefix(last, name+": ") || !strings.Contains(last, tc.want) || o.stdout != "" {
				t.Errorf("stderr %q: want a last line with %q (stdout %q)", o.stderr, tc.want, o.stdout)
			}
		})
	}
}

// docs/CLI.md lists exactly this tool's flags.
func TestFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	app := cliutil.Prepare(newApp(), io.Discard, io.Discard) // as run: Prepare adds --version
	if err := cliutil.CheckFlagDoc(doc, "eval", cliutil.FlagNames(app.Flags, !app.HideHelp)); err != nil {
		t.Error(err)
	}
}

// stopAfterFirstCheck is a context that is cancelled just after its first
// Err(), which finds it live: the stop arrives after Evaluate's check
// before the (last) window, as a Ctrl-C during the last window does.
type stopAfterFirstCheck struct {
	context.Context
	cancel  context.CancelFunc
	checked bool
}

func (c *stopAfterFirstCheck) Err() error {
	if !c.checked {
		c.checked = true
		defer c.cancel()
		return nil
	}
	return c.Context.Err()
}

// A stop during the last window used to be dropped (exit 0, no message):
// the results are complete and written, and the exit status is 130.
func TestStoppedDuringLastWindow(t *testing.T) {
	m := testfixture.Artifact(t, "q8", nil)
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := &stopAfterFirstCheck{Context: inner, cancel: cancel}
	out := filepath.Join(t.TempDir(), "r.json")
	o := runCmd(t, ctx, base("--weights", m, "--corpus", ids(t, 100), "--max-windows", "1", "--format", "json", "--output-file", out)...)
	if o.code != cliutil.ExitInterrupted || !strings.Contains(o.stderr, "interrupted") {
		t.Fatalf("%+v: want exit %d and the interrupted line", o, cliutil.ExitInterrupted)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if r := gjson.ParseBytes(data); r.Get("interrupted").Bool() || r.Get("windows").Int() != 1 {
		t.Errorf("want the complete result: %s", data)
	}
}
