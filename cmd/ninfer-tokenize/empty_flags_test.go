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
		{[]string{"--output-file", ""}, "--output-file: empty value (want PATH)"},
		{[]string{"-o", ""}, "-o: empty value (want PATH)"},
	} {
		r := runCmd(t, "", append([]string{"--tokenizer", "tok.json"}, tc.args...)...)
		code, stdout, stderr := r.code, r.stdout, r.stderr
		if code != 2 || stderr != "ninfer-tokenize: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}
