package main

import (
	"testing"
)

// An explicitly empty flag value is a usage error naming the flag (the
// shared check of cliutil.AddVersion), not "unset": no output to stdout
// instead of a file, no skipped check, no silent default.
func TestEmptyFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--output-file", "", "r.jsonl"}, "--output-file: empty value (want PATH)"},
		{[]string{"-o", "", "r.jsonl"}, "-o: empty value (want PATH)"},
		{[]string{"--check", ""}, "--check: empty value (want DOC)"},
		{[]string{"compare", "-o", "", "a.json", "b.json"}, "-o: empty value (want PATH)"},
		{[]string{"compare", "--run-a", "", "a.json", "b.json"}, "--run-a: empty value"},
	} {
		code, stdout, stderr := runCLI("", tc.args...)
		if code != 2 || stderr != "ninfer-report: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}
