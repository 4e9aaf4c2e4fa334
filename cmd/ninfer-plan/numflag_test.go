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
		{[]string{"--gpu", "h100", "--max-ctx", "99999999999999999999"}, "ninfer-plan: --max-ctx 99999999999999999999: out of range (want 1..9223372036854775807)"},
		{[]string{"--gpu", "h100", "--max-ctx", "abc"}, "ninfer-plan: --max-ctx abc: not an integer (want 1..9223372036854775807)"},
		{[]string{"--gpu", "h100", "--kv-capacity", "-5"}, "ninfer-plan: --kv-capacity -5: out of range (want 1..9223372036854775807)"},
		{[]string{"--gpu", "h100", "--spec", "mtp", "--draft-tokens", "99999999999999999999"}, "ninfer-plan: --draft-tokens 99999999999999999999: out of range (want 1..5)"},
		{[]string{"--gpu", "h100", "--spec", "mtp", "--draft-tokens", "0"}, "ninfer-plan: --draft-tokens 0: out of range (want 1..5)"},
		{[]string{"--gpu", "h100", "--device", "-5"}, "ninfer-plan: --device -5: out of range (want 0..9223372036854775807)"},
		{[]string{"--gpu", "h100", "--device", "99999999999999999999"}, "ninfer-plan: --device 99999999999999999999: out of range (want 0..9223372036854775807)"},
		{[]string{"--gpu", "h100", "--runtime-overhead", "999999TiB"}, "ninfer-plan: --runtime-overhead 999999TiB: out of range (want less than the device total, 85520809984 bytes)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"ninfer-plan", "--config", "c.json"}, tc.args...), &stdout, &stderr)
		if code != 2 || stderr.String() != tc.want+"\n" {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
