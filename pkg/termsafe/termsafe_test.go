package termsafe

import (
	"bytes"
	"testing"
)

func TestWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"text passes", []string{"Enter HAMLET.\n\tHam. To be, or not — ’tis\n"}, "Enter HAMLET.\n\tHam. To be, or not — ’tis\n"},
		{"escape sequence", []string{"a\x1b[2Jb"}, `a\x1b[2Jb`},
		{"bell backspace del", []string{"\a\b\x7f"}, `\x07\x08\x7f`},
		{"carriage return", []string{"line\roverwrite"}, `line\roverwrite`},
		{"C1 CSI", []string{"x\u009b31my"}, `x\u009b31my`},
		{"C1 split across writes", []string{"x\xc2", "\x9by"}, `x\u009by`},
		{"latin-1 supplement kept", []string{"caf\u00e9 \u00a0\u00bd"}, "caf\u00e9 \u00a0\u00bd"},
		{"lead byte kept when not C1", []string{"\xc2", "\xa9"}, "\u00a9"},
		{"nul", []string{"a\x00b"}, `a\x00b`},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		w := &Writer{W: &b}
		for _, s := range tc.writes {
			n, err := w.Write([]byte(s))
			if err != nil || n != len(s) {
				t.Fatalf("%s: Write = %d, %v", tc.name, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, b.String(), tc.want)
		}
	}
	var b bytes.Buffer
	w := &Writer{W: &b}
	w.Write([]byte("end\xc2"))
	w.Flush()
	if b.String() != "end\xc2" {
		t.Errorf("a trailing lead byte: %q", b.String())
	}
}
