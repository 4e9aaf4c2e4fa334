package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// endless is a stream without newlines (< /dev/zero as text).
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// An endless line (or an endless --whole input) fails with one line naming
// the limit instead of reading until memory runs out. Before the fix line
// mode read one line without bound.
func TestEndlessInputFails(t *testing.T) {
	for _, mode := range [][]string{nil, {"--whole"}} {
		var out, errb bytes.Buffer
		args := append([]string{name, "--tokenizer", shakespeareTok}, mode...)
		code := run(context.Background(), args, endless{}, &out, &errb)
		if code != 1 || strings.Count(errb.String(), "\n") != 1 ||
			!(strings.Contains(errb.String(), "is longer than 67108864 bytes") || strings.Contains(errb.String(), "input larger than 1073741824 bytes")) {
			t.Errorf("%v: exit %d, stderr %q", mode, code, errb.String())
		}
	}
}
