package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// --format json, -f json and --json print the same document; text is the
// default; --output-file writes the same bytes atomically; --quiet drops
// the verified and wrote lines.
func TestFormatAndOutputFile(t *testing.T) {
	path := testfixture.Artifact(t, "q8", nil)
	_, js, _ := runInspect("--json", path)
	_, text, _ := runInspect(path)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "json"}, js},
		{[]string{"-f", "json"}, js},
		{[]string{"--format", "text"}, text},
	} {
		code, out, errs := runInspect(append(tc.args, path)...)
		if code != 0 || out != tc.want {
			t.Errorf("%q: exit %d stderr %q; output differs from the reference spelling", tc.args, code, errs)
		}
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "sub", "m.json")
	code, out, errs := runInspect("-f", "json", "--verify", "-o", dst, path)
	if code != 0 || out != "" || errs != "ninfer-inspect: wrote "+dst+"\n" {
		t.Fatalf("-o: exit %d stdout %q stderr %q", code, out, errs)
	}
	if b, err := os.ReadFile(dst); err != nil || !strings.Contains(string(b), `"verify": {`) && !strings.Contains(string(b), `"verify":{`) {
		t.Errorf("file: %v %.200s", err, b)
	}
	// Text: the verified line on stderr, then the wrote line.
	if code, _, errs := runInspect("--verify", "-o", filepath.Join(dir, "t.txt"), path); code != 0 ||
		!strings.HasPrefix(errs, "ninfer-inspect: verified "+path) || !strings.HasSuffix(errs, "wrote "+filepath.Join(dir, "t.txt")+"\n") {
		t.Errorf("text --verify -o: exit %d stderr %q", code, errs)
	}
	if code, _, errs := runInspect("-q", "--verify", "-o", filepath.Join(dir, "q.txt"), path); code != 0 || errs != "" {
		t.Errorf("--quiet: exit %d stderr %q", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "yaml", path}, `ninfer-inspect: --format "yaml": want text or json` + "\n"},
		{[]string{"--json", "--format", "text", path}, "ninfer-inspect: --json is --format json; it contradicts --format text\n"},
		{[]string{"-o", "json", path}, "ninfer-inspect: --output-file json: that is a format name, not a file; for the format use --format json (for a file of that name: ./json)\n"},
		{[]string{"-o", dir, path}, "ninfer-inspect: --output-file " + dir + ": is a directory (want a file path)\n"},
	} {
		if code, out, errs := runInspect(c.args...); code != 2 || out != "" || errs != c.want {
			t.Errorf("%q: exit %d stdout %q stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}
