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
		{[]string{"--threads", "99999999999999999999", "--prompt", "x"}, "ninfer-run: --threads 99999999999999999999: out of range (want 0..256; 0 = all cores)"},
		{[]string{"-threads=many", "--prompt", "x"}, "ninfer-run: -threads many: not an integer (want 0..256; 0 = all cores)"},
		{[]string{"--seed", "-5", "--prompt", "x"}, "ninfer-run: --seed -5: out of range (want 0..18446744073709551615)"},
		{[]string{"--seed", "99999999999999999999", "--prompt", "x"}, "ninfer-run: --seed 99999999999999999999: out of range (want 0..18446744073709551615)"},
		{[]string{"-n", "1.5", "--prompt", "x"}, "ninfer-run: -n 1.5: not an integer (want 0..9223372036854775807)"},
		{[]string{"--temperature", "hot", "--prompt", "x"}, "ninfer-run: --temperature hot: not a number (want a finite number ≥ 0; 0 = greedy)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"ninfer-run"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
		if code != 2 || stderr.String() != tc.want+"\n" {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestNumericFlagInRangeChecks: a parsed value outside a flag's range is
// the usage error of every tool (cliutil.CheckFlag / OutOfRange, as
// ninfer-bench words it): "FLAG VALUE: out of range (want …)", the flag as
// typed (alias or one dash), exit 2, checked before the model is opened.
// Before, ninfer-run said "--max-new -1 must be ≥ 0" and named the long
// flag whatever was typed.
func TestNumericFlagInRangeChecks(t *testing.T) {
	const m = "/nonexistent/m.ninfer" // the checks come first
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-new", "-1"}, "--max-new -1: out of range (want 0..9223372036854775807)"},
		{[]string{"-n", "-1"}, "-n -1: out of range (want 0..9223372036854775807)"},
		{[]string{"-max-new=-2"}, "-max-new -2: out of range (want 0..9223372036854775807)"},
		{[]string{"--max-ctx", "-1"}, "--max-ctx -1: out of range (want 0..9223372036854775807; 0 = the model default)"},
		{[]string{"--threads", "999"}, "--threads 999: out of range (want 0..256; 0 = all cores)"},
		{[]string{"-threads", "-1"}, "-threads -1: out of range (want 0..256; 0 = all cores)"},
		{[]string{"--top-k", "-1"}, "--top-k -1: out of range (want 0..9223372036854775807; 0 = off)"},
		{[]string{"--spec", "mtp", "--draft-tokens", "0"}, "--draft-tokens 0: out of range (want 1..5)"},
		{[]string{"--prefill-chunk", "0"}, "--prefill-chunk 0: out of range (want a positive multiple of 128)"},
		{[]string{"--prefill-chunk", "200"}, "--prefill-chunk 200: out of range (want a positive multiple of 128)"},
		{[]string{"-t", "-0.5"}, "-t -0.5: out of range (want a finite number ≥ 0; 0 = greedy)"},
		{[]string{"--temperature", "inf"}, "--temperature +Inf: out of range (want a finite number ≥ 0; 0 = greedy)"},
		{[]string{"--top-p", "1.5"}, "--top-p 1.5: out of range (want 0..1; 0 or 1 = off)"},
		{[]string{"--min-p", "1"}, "--min-p 1: out of range (want 0 ≤ P < 1; 0 = off)"},
		{[]string{"--presence-penalty", "nan"}, "--presence-penalty NaN: out of range (want a finite number)"},
		{[]string{"--repetition-penalty", "-1"}, "--repetition-penalty -1: out of range (want a finite number ≥ 0; 0 or 1 = off)"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"ninfer-run", "--weights", m, "--prompt", "x"}, tc.args...)
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || stderr.String() != "ninfer-run: "+tc.want+"\n" {
			t.Errorf("%q: exit %d stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
