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
		{[]string{"--draft-corpus", ""}, "--draft-corpus: empty value (want FILE)"},
		{[]string{"--name", ""}, "--name: empty value (want NAME)"},
	} {
		code, stdout, stderr := runConvert(append(tc.args, "hf", "out.ninfer")...)
		if code != 2 || stderr != "ninfer-convert: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}
