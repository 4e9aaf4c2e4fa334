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
		{[]string{"--weights", ""}, "--weights: empty value (want PATH)"},
		{[]string{"--save-logits", ""}, "--save-logits: empty value (want PATH)"},
	} {
		var o, e bytes.Buffer
		code := run(context.Background(), append([]string{"ninfer-eval", "--weights", "m.ninfer", "--corpus", "c.ids"}, tc.args...), strings.NewReader(""), &o, &e)
		stdout, stderr := o.String(), e.String()
		if code != 2 || stderr != "ninfer-eval: "+tc.msg+"\n" || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, \"\", %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}
