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
		{[]string{"--threads", "99999999999999999999", "a", "b"}, "ninfer-convert: --threads 99999999999999999999: out of range (want 0..256; 0 = all cores)"},
		{[]string{"--threads", "x", "a", "b"}, "ninfer-convert: --threads x: not an integer (want 0..256; 0 = all cores)"},
		{[]string{"--draft-head", "99999999999999999999", "a", "b"}, "ninfer-convert: --draft-head 99999999999999999999: out of range (want 0..9223372036854775807; 0 = none)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"ninfer-convert"}, tc.args...), &stdout, &stderr)
		if code != 2 || stderr.String() != tc.want+"\n" {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
