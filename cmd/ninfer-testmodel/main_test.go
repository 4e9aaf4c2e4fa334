package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/hfdir"
)

func TestRun(t *testing.T) {
	root := t.TempDir()
	blocker := filepath.Join(root, "file")
	os.WriteFile(blocker, []byte("x"), 0o644)
	out := filepath.Join(root, "m")
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ok", []string{"--seed", "3", "--layers", "8", "--hidden", "64", "--intermediate", "96", "--vocab", "300", "--dtype", "f32", "--shards", "2", "--multimodal", "--tied", out}, 0, "wrote " + out},
		{"not_empty", []string{out}, 1, "ninfer-testmodel: " + out + ": output directory is not empty (use --force to replace it)\n"},
		{"force", []string{"--force", "--hidden", "64", "--intermediate", "96", out}, 0, "wrote"},
		{"quiet", []string{"--force", "-q", "--hidden", "64", "--intermediate", "96", out}, 0, ""},
		{"no_args", nil, 2, "exactly one OUT_DIR"},
		{"two_args", []string{"a", "b"}, 2, "ninfer-testmodel: expected exactly one OUT_DIR, got 2 argument(s)\n"},
		{"flag_after_dir", []string{"out", "--dtype", "f32"}, 2, "ninfer-testmodel: flag \"--dtype\" after the arguments (flags go first, then exactly one OUT_DIR)\n"},
		{"bad_flag", []string{"--nope", out}, 2, "ninfer-testmodel: flag provided but not defined: --nope\n"},
		{"bad_int", []string{"--layers", "x", out}, 2, "ninfer-testmodel: --layers x: not an integer (want 1..1024)\n"},
		{"bad_dtype", []string{"--dtype", "int4", filepath.Join(root, "x")}, 2, `dtype "int4"`},
		{"bad_vocab", []string{"--vocab", "100", filepath.Join(root, "x")}, 2, "--vocab 100: out of range (want 261..2147483647)"},
		{"runtime", []string{filepath.Join(blocker, "sub")}, 1, "ninfer-testmodel: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"ninfer-testmodel"}, c.args...), &stdout, &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.msg) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, c.code, stderr.String(), c.msg)
			}
			if code != 0 && strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Errorf("error is not one line: %q", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
			if c.name == "quiet" && stderr.Len() != 0 {
				t.Errorf("--quiet: stderr %q", stderr.String())
			}
		})
	}
	d, err := hfdir.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Config.HiddenSize != 64 || d.Config.NumHiddenLayers != 4 || len(d.Shards) != 1 {
		t.Errorf("forced rewrite: hidden %d layers %d shards %v", d.Config.HiddenSize, d.Config.NumHiddenLayers, d.Shards)
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"ninfer-testmodel", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"Examples:", "--multimodal", "--shards", "OUT_DIR"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("help lacks %q", w)
		}
	}
}
