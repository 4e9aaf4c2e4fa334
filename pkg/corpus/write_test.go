package corpus

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		ids     []int32
		perLine int
		want    string
	}{
		{nil, 16, ""},
		{[]int32{0}, 16, "0\n"},
		{[]int32{1, 2, 3}, 2, "1 2\n3\n"},
		{[]int32{1, 2, 3, 4}, 2, "1 2\n3 4\n"},
		{[]int32{5, 2147483647}, 0, "5 2147483647\n"},
	} {
		var b bytes.Buffer
		if err := Write(&b, tc.ids, tc.perLine); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("Write(%v, %d) = %q, want %q", tc.ids, tc.perLine, b.String(), tc.want)
		}
		got, err := Read(strings.NewReader(b.String()), "w", 0)
		if err != nil || !slices.Equal(got, tc.ids) && len(tc.ids) > 0 {
			t.Errorf("Read(Write(%v)) = %v, %v", tc.ids, got, err)
		}
	}
}

// ParseLine gives Read's ids and Read's errors, line by line.
func TestParseLineMatchesRead(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"1 2  3\t4", ""},
		{"", ""},
		{"1 x", `c.ids: line 1: token 2: "x" is not a non-negative int32 id`},
		{"-1", `c.ids: line 1: token 1: "-1" is not a non-negative int32 id`},
		{"9 10", "c.ids: line 1: token 2: id 10 is outside the vocabulary [0,10)"},
	} {
		ids, err := ParseLine(tc.line, "c.ids", 1, 10)
		rids, rerr := Read(strings.NewReader(tc.line), "c.ids", 10)
		gotErr, readErr := "", ""
		if err != nil {
			gotErr = err.Error()
		}
		if rerr != nil {
			readErr = rerr.Error()
		}
		if gotErr != tc.want || readErr != tc.want {
			t.Errorf("%q: ParseLine error %q, Read error %q, want %q", tc.line, gotErr, readErr, tc.want)
		}
		if err == nil && !slices.Equal(ids, rids) && len(ids)+len(rids) > 0 {
			t.Errorf("%q: ParseLine %v, Read %v", tc.line, ids, rids)
		}
	}
}
