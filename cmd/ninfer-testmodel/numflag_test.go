package main

import (
	"bytes"
	"testing"
)

// TestNumericFlagRange: a numeric flag value the flag package refuses (too
// large for its type, negative for an unsigned one, not a number) is a
// usage error naming the flag as typed, the value and the valid range.
func TestNumericFlagRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seed", "-5", "out"}, "ninfer-testmodel: --seed -5: out of range (want 0..18446744073709551615)"},
		{[]string{"--seed", "99999999999999999999", "out"}, "ninfer-testmodel: --seed 99999999999999999999: out of range (want 0..18446744073709551615)"},
		{[]string{"--layers", "99999999999999999999", "out"}, "ninfer-testmodel: --layers 99999999999999999999: out of range (want 1..1024)"},
		{[]string{"-shards=x", "out"}, "ninfer-testmodel: -shards x: not an integer (want 1..99999)"},
		{[]string{"--vocab", "-99999999999999999999", "out"}, "ninfer-testmodel: --vocab -99999999999999999999: out of range (want 261..2147483647)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"ninfer-testmodel"}, tc.args...), &stdout, &stderr)
		if code != 2 || stderr.String() != tc.want+"\n" {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
