package main

import (
	"bytes"
	"context"
	"strings"
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
		{[]string{"--spec", ""}, "--spec: empty value (want BACKEND)"},
	} {
		var o, e bytes.Buffer
		code := run(context.Background(), append([]string{"ninfer-run", "--weights", "m.ninfer", "--prompt", "hi"}, tc.args...), strings.NewReader(""), &o, &e)
		stdout, stderr := o.String(), e.String()
		if code != 2 || stderr != "ninfer-run: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}
