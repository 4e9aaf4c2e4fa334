package main

import (
	"bytes"
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
		{[]string{"--dtype", ""}, "--dtype: empty value (want DTYPE)"},
		{[]string{"--shape", ""}, "--shape: empty value (want SHAPE)"},
	} {
		var o, e bytes.Buffer
		code := run(append(append([]string{"ninfer-testmodel"}, tc.args...), t.TempDir()), &o, &e)
		stdout, stderr := o.String(), e.String()
		if code != 2 || stderr != "ninfer-testmodel: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}
