package corpus

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzRead fuzzes the .ids corpus reader (go test ./pkg/corpus -run '^$'
// -fuzz FuzzRead -fuzztime 10m -parallel 1; make fuzz).

// FuzzRead checks Read on arbitrary bytes and vocabulary sizes: it is
// deterministic; an error is one line that starts with the input's name and
// says where (line N, or the scanner's reason); accepted ids are in [0,
// vocab) (int32 when vocab ≤ 0), no more than one per two input bytes (an
// id and a separator), and round-trip: written one per line, or all on one
// line with tabs, they read back as the same ids.
func FuzzRead(f *testing.F) {
	f.Add([]byte("1 2 3\n4\t5\r\n\n  6  \n"), 0)
	f.Add([]byte("0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"), 16)
	f.Add([]byte("2147483647 0\n"), 0)
	f.Add([]byte("2147483648\n"), 0)
	f.Add([]byte("-1\n"), 0)
	f.Add([]byte("+7 007\n"), 8)
	f.Add([]byte("3 x 4\n"), 0)
	f.Add([]byte("1\u00a02\u20283\u00854"), 0)
	f.Add([]byte("5 6 7"), 6)
	f.Add([]byte(""), 0)
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		const name = "fuzz.ids"
		ids, err := Read(bytes.NewReader(data), name, vocab)
		ids2, err2 := Read(bytes.NewReader(data), name, vocab)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !slices.Equal(ids, ids2) {
			t.Fatalf("Read is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, name+": ") {
				t.Fatalf("error is not one line naming the input: %q", msg)
			}
			if ids != nil {
				t.Fatalf("error with ids %v", ids)
			}
			return
		}
		if len(ids) > (len(data)+1)/2 {
			t.Fatalf("%d ids from %d bytes", len(ids), len(data))
		}
		for _, id := range ids {
			if id < 0 || (vocab > 0 && int(id) >= vocab) {
				t.Fatalf("id %d accepted with vocab %d", id, vocab)
			}
		}
		var lines, tabs []byte
		for i, id := range ids {
			lines = append(strconv.AppendInt(lines, int64(id), 10), '\n')
			if i > 0 {
				tabs = append(tabs, '\t')
			}
			tabs = strconv.AppendInt(tabs, int64(id), 10)
		}
		for _, enc := range [][]byte{lines, tabs} {
			back, err := Read(bytes.NewReader(enc), name, vocab)
			if err != nil || !slices.Equal(back, ids) {
				t.Fatalf("ids %v do not round-trip through %q: %v %v", ids, enc, back, err)
			}
		}
	})
}
