package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// nanArtifact copies the fp32 fixture with a NaN as the first element of
// object id: the directory opens (its digest covers the recorded hashes,
// not the payloads), only a payload check sees the change.
func nanArtifact(t *testing.T, id string) string {
	t.Helper()
	return testfixture.PatchedArtifact(t, "fp32", id, false, func(payload []byte) {
		binary.LittleEndian.PutUint32(payload, 0x7fc00000)
	})
}

func TestOutputUsageErrors(t *testing.T) {
	m := model(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// -f was --prompt-file's short spelling; it is --format now, as in
		// every tool, and a file name there is refused with a pointer.
		{"-f file", []string{"-f", "q.txt", "--prompt", "x"}, `--format "q.txt": want text or json (-f is short for --format, as in every tool; a prompt file is --prompt-file)`},
		{"format", []string{"--format", "md", "--prompt", "x"}, `--format "md": want text or json`},
		{"json against format", []string{"--json", "--format", "text", "--prompt", "x"}, "--json is --format json; it contradicts --format text"},
		{"-o format name", []string{"-o", "json", "--prompt", "x"}, "--output-file json: that is a format name, not a file; for the format use --format json"},
		{"output dir", []string{"--output-file", dir, "--prompt", "x"}, "--output-file " + dir + ": is a directory"},
		{"output slash", []string{"--output-file", filepath.Join(dir, "new") + "/", "--prompt", "x"}, "a directory path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := runCmd(t, context.Background(), "", append([]string{"--weights", m}, tc.args...)...)
			if o.code != 2 || o.stdout != "" || o.stderr != name+": "+tc.want+"\n" && !strings.Contains(o.stderr, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", o.code, o.stdout, o.stderr, tc.want)
			}
			if strings.Count(o.stderr, "\n") != 1 {
				t.Errorf("stderr %q is not one line", o.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("a refused output path was created")
	}
}

func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	prompt := []string{"--max-new", "5", "--prompt", "hello world"}
	want := runCmd(t, context.Background(), "", base(t, append([]string{"--json"}, prompt...)...)...)
	text := runCmd(t, context.Background(), "", base(t, prompt...)...)
	if want.code != 0 || text.code != 0 || want.stdout == "" || text.stdout == "" {
		t.Fatalf("exit %d/%d: %s %s", want.code, text.code, want.stderr, text.stderr)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		same  string // the stdout the file must equal
	}{
		{"--format json", []string{"--format", "json"}, want.stdout},
		{"-f json", []string{"-f", "json"}, want.stdout},
		{"--json", []string{"--json"}, want.stdout},
		{"text", nil, text.stdout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"), "sub", "out")
			args := base(t, append(append(tc.flags, "-o", path), prompt...)...)
			o := runCmd(t, context.Background(), "", args...)
			if o.code != 0 || o.stdout != "" || o.stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and nothing (--quiet)", o.code, o.stdout, o.stderr)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if untimed(string(got)) != untimed(tc.same) {
				t.Errorf("file %q, stdout of the same run without -o %q", got, tc.same)
			}
		})
	}
	// Without --quiet the write is reported like every tool's.
	path := filepath.Join(dir, "loud.jsonl")
	o := runCmd(t, context.Background(), "", "--weights", model(t), "--backend", "cpu", "--json", "--output-file", path, "--max-new", "2", "--prompt", "hi")
	if o.code != 0 || !strings.HasSuffix(o.stderr, name+": wrote "+path+"\n") {
		t.Errorf("exit %d, stderr %q; want a last line %q", o.code, o.stderr, name+": wrote "+path)
	}
	// A runtime error leaves no file: the output is written only when the
	// run ends.
	bad := filepath.Join(dir, "bad.ids")
	o = runCmd(t, context.Background(), "1 2\n3 99999\n", base(t, "--ids", "--max-new", "2", "-o", bad)...)
	if o.code != 1 || !strings.Contains(o.stderr, "outside the vocabulary") {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a run that failed wrote its --output-file")
	}
}

// untimed blanks the timings of JSON lines, which differ between runs.
func untimed(s string) string { return timings.ReplaceAllString(s, `"timings":{}`) }

var timings = regexp.MustCompile(`"timings":\{[^}]*\}`)

// A stopping signal writes what was finished, as on stdout.
func TestOutputFileInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &stallReader{data: "1 2\n", cancel: cancel, block: make(chan struct{})}
	defer close(in.block)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{name}, base(t, "--ids", "--json", "--max-new", "3", "--output-file", path)...), in, &out, &errb)
	data, err := os.ReadFile(path)
	if code != exitInterrupted || err != nil || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q, file error %v", code, out.String(), errb.String(), err)
	}
	if js := jsonLines(t, string(data)); len(js) != 1 || js[0].Get("finish_reason").String() != "length" {
		t.Fatalf("file %q: want the finished prompt's line", data)
	}
}

func TestVerifyAndNonFiniteDiagnosis(t *testing.T) {
	const obj = "text/layers/3/attention/o_proj" // layer 3: the fixture's full-attention layer
	nan := nanArtifact(t, obj)
	args := func(m string, extra ...string) []string {
		return append([]string{"--weights", m, "--backend", "cpu", "--threads", "2", "--max-ctx", "256", "--prefill-chunk", "128",
			"--max-new", "3", "--ids", "--prompt", "1 2 3"}, extra...)
	}
	// No --verify: the payloads are not re-hashed; the non-finite logits are
	// traced to the first op whose output is not finite.
	o := runCmd(t, context.Background(), "", args(nan, "-q")...)
	want := name + ": decode: position 3: no finite logit to sample from: layer 3 (full attention): attention/o_proj output is not finite (NaN at position 0; weight " + obj +
		") (weights may be corrupt: run ninfer-inspect --verify " + nan +
		"; if it passes, the payload is intact, so the weights are numerically broken (e.g. values overflow fp32 in layer 3 (full attention): attention/o_proj))\n"
	if o.code != 1 || o.stderr != want || o.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr\n%q\nwant 1 and\n%q", o.code, o.stdout, o.stderr, want)
	}
	// --verify finds the changed payload before anything runs.
	o = runCmd(t, context.Background(), "", args(nan, "-q", "--verify")...)
	if o.code != 1 || !strings.HasPrefix(o.stderr, name+": --verify: ") || !strings.Contains(o.stderr, `"`+obj+`"`) ||
		!strings.Contains(o.stderr, "sha256 mismatch") || strings.Count(o.stderr, "\n") != 1 {
		t.Fatalf("--verify: exit %d, stderr %q", o.code, o.stderr)
	}
	// A sound artifact passes and says so (not with --quiet).
	good := testfixture.Artifact(t, "fp32", nil)
	o = runCmd(t, context.Background(), "", args(good, "--verify")...)
	if o.code != 0 || !strings.Contains(o.stderr, name+": verified "+good+": directory sha256, ") {
		t.Fatalf("--verify of a sound artifact: exit %d, stderr %q", o.code, o.stderr)
	}
	if o = runCmd(t, context.Background(), "", args(good, "--verify", "-q")...); o.code != 0 || o.stderr != "" {
		t.Fatalf("--verify -q: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestHelpSaysHashesAreNotChecked(t *testing.T) {
	o := runCmd(t, context.Background(), "", "--help")
	for _, s := range []string{"by design, never", "--verify", "--output-file", "--format"} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("--help lacks %q", s)
		}
	}
}
