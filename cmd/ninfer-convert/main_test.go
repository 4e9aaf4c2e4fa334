package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main() // started by TestStoppingSignals: be ninfer-convert
	}
	testfixture.Main(m)
}

func runConvert(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"ninfer-convert"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestConvertCLI(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	out := filepath.Join(t.TempDir(), "m.ninfer")
	code, stdout, errs := runConvert("--recipe", "q8", "--name", "cli-test", src, out)
	if code != 0 || stdout != "" || !strings.Contains(errs, "ninfer-convert: wrote "+out) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	f, err := artifact.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "cli-test" || f.Metadata["recipe"] != "q8" {
		t.Errorf("name %q recipe %v", f.Name, f.Metadata["recipe"])
	}
	f.Close()
	// An existing output is kept unless --force.
	if code, _, errs := runConvert("--recipe", "q8", src, out); code != 1 || !strings.Contains(errs, "exists (use --force") {
		t.Errorf("second conversion without --force: exit %d, %q", code, errs)
	}
	if code, _, errs := runConvert("--quiet", "--force", "--recipe", "bf16", src, out); code != 0 || errs != "" {
		t.Errorf("--quiet --force: exit %d, stderr %q", code, errs)
	}
}

func TestConvertReportsFallbacks(t *testing.T) {
	// hidden 96 is not a multiple of 64, so nvfp4 (K%64 == 0) must fall back.
	src := testfixture.HFDir(t, func(o *testmodel.Options) { o.Hidden = 96; o.Intermediate = 256 })
	out := filepath.Join(t.TempDir(), "m.ninfer")
	code, _, errs := runConvert("--recipe", "nvfp4-mlp", src, out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := qwen35.LayerName(0, "mlp/gate_proj") + " [256,96]: nvfp4"
	if !strings.Contains(errs, want) || !strings.Contains(errs, "fell back to q4_g64_fp16") {
		t.Errorf("stderr lacks the fallback note %q:\n%s", want, errs)
	}
}

func TestConvertDraftHead(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.ids")
	os.WriteFile(corpus, []byte("5 5 5 9 9 3 7 7 7 7 300 301"), 0o644)
	out := filepath.Join(dir, "m.ninfer")
	if code, _, errs := runConvert("--quiet", "--recipe", "q8", "--draft-head", "16", "--draft-corpus", corpus, src, out); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := artifact.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, ok := f.Object(qwen35.NameDraftIDs)
	if !ok || f.Proposal == nil || o.Shape[0] != 16 || f.Proposal.Source != corpus {
		t.Fatalf("draft head: object %v ok %t proposal %+v", o, ok, f.Proposal)
	}
}

func TestConvertUsageErrors(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	out := filepath.Join(t.TempDir(), "m.ninfer")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{src}, 2, "expected HF_DIR OUT.ninfer"},
		{[]string{"--recipe", "q3", src, out}, 2, `--recipe "q3": unknown recipe (want bf16, q8, groupwise-int, nvfp4-mlp, fp8, fp32)`},
		{[]string{"--draft-head", "8", src, out}, 2, "--draft-head and --draft-corpus go together"},
		{[]string{"--threads", "-1", src, out}, 2, "--threads"},
		{[]string{"--nope", src, out}, 2, "flag provided but not defined"},
		{[]string{filepath.Join(t.TempDir(), "nothing"), out}, 1, "config.json"},
	}
	for _, c := range cases {
		code, _, errs := runConvert(c.args...)
		if code != c.code || !strings.HasPrefix(errs, "ninfer-convert: ") || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d stderr %q; want exit %d containing %q", c.args, code, errs, c.code, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v left %s behind", c.args, out)
		}
	}
}

// TestConvertOutputPaths: a directory as OUT is a usage error up front
// (exit 2, like every tool's output path; even with --force), and missing parents are created like every --output-file.
func TestConvertOutputPaths(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir := t.TempDir()
	for _, args := range [][]string{{"--recipe", "q8", src, dir}, {"--force", "--recipe", "q8", src, dir}} {
		code, _, errs := runConvert(args...)
		if code != 2 || errs != "ninfer-convert: "+dir+" is a directory (want the OUT.ninfer file path)\n" {
			t.Errorf("%v: exit %d stderr %q", args, code, errs)
		}
	}
	// A device is refused even with --force: the rename would replace it.
	if code, _, errs := runConvert("--force", "--recipe", "q8", src, os.DevNull); code != 2 ||
		errs != "ninfer-convert: "+os.DevNull+" is not a regular file (the output is renamed into place; give a file path)\n" {
		t.Errorf("--force onto %s: exit %d stderr %q", os.DevNull, code, errs)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode().IsRegular() {
		t.Fatalf("%s is no longer a device: %v %v", os.DevNull, fi, err)
	}
	link := filepath.Join(dir, "stdout-like")
	if err := os.Symlink(filepath.Join(dir, "elsewhere.ninfer"), link); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runConvert("--force", "--recipe", "q8", src, link); code != 2 || !strings.Contains(errs, link+" is not a regular file") {
		t.Errorf("--force onto a symlink: exit %d stderr %q", code, errs)
	}
	// A path ending in "/" names a directory: refused before anything is
	// created (it used to leave an empty directory and a rename error).
	slash := filepath.Join(dir, "x") + string(os.PathSeparator)
	if code, _, errs := runConvert("--recipe", "q8", src, slash); code != 2 || !strings.Contains(errs, "a directory path") {
		t.Errorf("%s: exit %d stderr %q, want a usage error", slash, code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Errorf("refusing %s left a directory behind (stat: %v)", slash, err)
	}
	out := filepath.Join(dir, "new dir", "sub", "m.ninfer")
	if code, _, errs := runConvert("--quiet", "--recipe", "q8", src, out); code != 0 || errs != "" {
		t.Fatalf("missing parents: exit %d stderr %q", code, errs)
	}
	if f, err := artifact.Open(out); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
}

// TestConvertInterrupted: SIGINT exits 130 with one line and leaves nothing.
func TestConvertInterrupted(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "m.ninfer")
	saved := interruptContext
	defer func() { interruptContext = saved }()
	interruptContext = func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	code, _, errs := runConvert("--quiet", "--recipe", "q8", src, out)
	if code != 130 || errs != "ninfer-convert: interrupted: "+out+" was not written\n" {
		t.Errorf("exit %d stderr %q; want 130 and one interrupted line", code, errs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestConvertDraftHeadOverVocab(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir := t.TempDir()
	corpus := filepath.Join(dir, "c.ids")
	os.WriteFile(corpus, []byte("5 5 9 3\n7 300\n"), 0o644)
	out := filepath.Join(dir, "m.ninfer")
	code, _, errs := runConvert("--quiet", "--recipe", "q8", "--draft-head", "100000", "--draft-corpus", corpus, src, out)
	if code != 0 || errs != "ninfer-convert: note: --draft-head 100000 exceeds the vocabulary size 512; the head keeps all 512 tokens\n" {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
	f, err := artifact.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if o, ok := f.Object(qwen35.NameDraftIDs); !ok || o.Shape[0] != 512 {
		t.Fatalf("draft ids %v ok %t, want 512 rows", o, ok)
	}
}

// TestConvertNotesMissingTokenizer: a directory without tokenizer.json still
// converts, with a note that the artifact needs token ids.
func TestConvertNotesMissingTokenizer(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir := filepath.Join(t.TempDir(), "no tok")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "m.ninfer")
	code, _, errs := runConvert("--recipe", "q8", dir, out)
	want := "ninfer-convert: note: " + dir + " has no tokenizer.json: the artifact runs on token ids only (ninfer-run --ids)\n"
	if code != 0 || !strings.HasPrefix(errs, want) {
		t.Fatalf("exit %d stderr %q; want it to start with %q", code, errs, want)
	}
	if code, _, errs := runConvert("--force", "--recipe", "q8", src, out); code != 0 || strings.Contains(errs, "note:") {
		t.Errorf("with a tokenizer: exit %d stderr %q", code, errs)
	}
}

// editConfig rewrites dir/config.json with the given top-level members
// removed.
func editConfig(t *testing.T, dir string, remove ...string) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range remove {
		if _, ok := m[k]; !ok {
			t.Fatalf("config.json has no %q", k)
		}
		delete(m, k)
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A config.json without rope_parameters takes the transformers defaults
// (θ 10000, not the checkpoints' 1e7); the converter says so on stderr and
// records them in the artifact.
func TestConvertNotesConfigDefaults(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	editConfig(t, src, "rope_parameters", "max_position_embeddings")
	out := filepath.Join(t.TempDir(), "m.ninfer")
	code, _, errs := runConvert("--recipe", "q8", src, out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "config.json leaves out 3 config fields; using the transformers Qwen3_5TextConfig defaults: rope_theta=10000, partial_rotary_factor=0.25, max_position_embeddings=32768\n"
	if !strings.Contains(errs, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}
	f, err := artifact.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, _ := f.Config()
	d, ok := f.ConfigDefaults()
	if cfg.RopeTheta != 10000 || !ok || len(d) != 3 || fmt.Sprint(d["rope_theta"]) != "10000" || fmt.Sprint(d["max_position_embeddings"]) != "32768" {
		t.Errorf("rope θ %g, config_defaults %v (recorded %t)", cfg.RopeTheta, d, ok)
	}
	// A complete config.json defaults nothing and records {}.
	full := filepath.Join(t.TempDir(), "full.ninfer")
	code, _, errs = runConvert("--recipe", "q8", testfixture.HFDir(t, nil), full)
	if code != 0 || strings.Contains(errs, "leaves out") {
		t.Fatalf("complete config: exit %d, stderr %q", code, errs)
	}
	g, err := artifact.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if d, ok := g.ConfigDefaults(); !ok || len(d) != 0 {
		t.Errorf("complete config: config_defaults %v (recorded %t), want {}", d, ok)
	}
}
