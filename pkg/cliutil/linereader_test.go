package cliutil

import (
	"io"
	"strings"
	"testing"
)

// endless is a stream without newlines (< /dev/zero).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestLineReader(t *testing.T) {
	cases := []struct {
		name, in string
		limit    int
		want     []string // lines as returned, then io.EOF
		wantErr  string
	}{
		{"lines", "ab\ncd\n", 8, []string{"ab\n", "cd\n", ""}, ""},
		{"last line unterminated", "ab\ncd", 8, []string{"ab\n", "cd"}, ""},
		{"exactly the limit", "abc\n", 4, []string{"abc\n", ""}, ""},
		{"one past the limit", "abcd\n", 4, nil, "in: line 1 is longer than 4 bytes"},
		{"second line too long", "a\nbcdef\n", 4, nil, "in: line 2 is longer than 4 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewLineReader(strings.NewReader(c.in), "in", c.limit)
			var got []string
			for n := 1; ; n++ {
				line, err := r.ReadLine(n)
				if err != nil && err != io.EOF {
					if c.wantErr == "" || !strings.Contains(err.Error(), c.wantErr) {
						t.Fatalf("line %d: error %v, want %q", n, err, c.wantErr)
					}
					return
				}
				got = append(got, line)
				if err == io.EOF {
					break
				}
			}
			if c.wantErr != "" {
				t.Fatalf("no error, want %q (lines %q)", c.wantErr, got)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("lines %q, want %q", got, c.want)
			}
		})
	}
	// An endless line fails at the limit instead of growing without bound.
	r := NewLineReader(endless{}, "<stdin>", 1<<20)
	if _, err := r.ReadLine(1); err == nil || !strings.Contains(err.Error(), "<stdin>: line 1 is longer than 1048576 bytes") {
		t.Fatalf("endless line: %v", err)
	}
}
