package main

import (
	"bytes"
	"context"
	"strings"
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
		{[]string{"--threads", "99999999999999999999"}, "ninfer-eval: --threads 99999999999999999999: out of range (want 0..256; 0 = all cores)"},
		{[]string{"--ctx", "99999999999999999999"}, "ninfer-eval: --ctx 99999999999999999999: out of range (want 3..9223372036854775807)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"ninfer-eval"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
		if code != 2 || stderr.String() != tc.want+"\n" {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
