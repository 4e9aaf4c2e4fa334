package corpus

import (
	"os"
	"path/filepath"
	"slices"
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
		{"5 6\r\n7\r\n", 10, []int32{5, 6, 7}, ""},
		{"1 x 3", 0, nil, `c.ids: line 1: token 2: "x" is not a non-negative int32 id`},
		{"1 -2", 0, nil, `c.ids: line 1: token 2: "-2" is not`},
		{"1 2 10", 10, nil, "c.ids: line 1: token 3: id 10 is outside the vocabulary [0,10)"},
		{"3000000000", 0, nil, `c.ids: line 1: token 1: "3000000000"`},
		{"1 2\r\n\n3 4 10\n", 10, nil, "c.ids: line 3: token 3: id 10 is outside"},
	}
	for _, c := range cases {
		got, err := Read(strings.NewReader(c.in), "c.ids", c.vocab)
		if c.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
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

func TestRandom(t *testing.T) {
	a, b := Random(1000, 5000, RandomSeed), Random(1000, 5000, RandomSeed)
	if len(a) != 5000 || !slices.Equal(a, b) {
		t.Fatalf("Random is not deterministic (%d ids)", len(a))
	}
	seen := map[int32]bool{}
	for _, id := range a {
		if id < 0 || id >= 1000 {
			t.Fatalf("id %d outside [0,1000)", id)
		}
		seen[id] = true
	}
	if len(seen) < 990 { // 5000 uniform draws over 1000 ids leave ≈ 7 unseen
		t.Errorf("%d distinct ids in 5000 draws over 1000: not uniform", len(seen))
	}
	if c := Random(1000, 5000, RandomSeed+1); slices.Equal(a, c) {
		t.Error("another seed gives the same ids")
	}
	if Random(0, 10, 1) != nil || Random(10, 0, 1) != nil {
		t.Error("an empty vocabulary or length gives ids")
	}
	if got := RandomName(4096, 8192, 7); got != "random:seed=7,tokens=8192,vocab=4096" {
		t.Errorf("RandomName = %q", got)
	}
}
