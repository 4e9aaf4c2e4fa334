package corpus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	cases := []struct {
		in      string
		vocab   int
		want    []int32
		wantErr string
	}{
		{"1 2 3\n4\t5", 0, []int32{1, 2, 3, 4, 5}, ""},
		{"  7\n\n 0 ", 10, []int32{7, 0}, ""},
		{"1 x 3", 0, nil, `token 1: "x" is not`},
		{"1 -2", 0, nil, `token 1: "-2"`},
		{"1 2 10", 10, nil, "token 2: id 10 is outside the vocabulary [0,10)"},
		{"3000000000", 0, nil, "token 0"},
	}
	for _, c := range cases {
		got, err := Read(strings.NewReader(c.in), "c.ids", c.vocab)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("Read(%q) error = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Fatalf("Read(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Read(%q)[%d] = %d, want %d", c.in, i, got[i], c.want[i])
			}
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "e.ids")
	os.WriteFile(empty, []byte(" \n"), 0o644)
	if _, err := ReadFile(empty, 0); err == nil || !strings.Contains(err.Error(), "corpus ids file is empty") {
		t.Errorf("empty file: err = %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.ids"), 0); err == nil || !strings.Contains(err.Error(), "failed to open corpus ids file") {
		t.Errorf("missing file: err = %v", err)
	}
}
