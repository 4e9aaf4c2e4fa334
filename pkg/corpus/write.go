package corpus

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// ParseLine parses one line of a .ids file the way Read does, with the same
// errors: name labels them with the 1-based line number and token position.
func ParseLine(s, name string, line, vocab int) ([]int32, error) {
	fields := strings.Fields(s)
	ids := make([]int32, 0, len(fields))
	for k, w := range fields {
		v, err := strconv.ParseInt(w, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: line %d: token %d: %s is not a non-negative int32 id", name, line, k+1, termsafe.Quote(w))
		}
		if vocab > 0 && v >= int64(vocab) {
			return nil, fmt.Errorf("%s: line %d: token %d: id %d is outside the vocabulary [0,%d)", name, line, k+1, v, vocab)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// AppendLine appends ids as one line of a .ids file: decimal ids separated
// by single spaces, then a newline (an empty sequence is an empty line).
func AppendLine(dst []byte, ids []int32) []byte {
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, '\n')
}

// PerLine is how many ids Write puts on a line, as in the committed
// bench_corpus.ids files.
const PerLine = 16

// Write writes ids in the .ids format, perLine ids per line (≤ 0: all on
// one line); Read gives them back. An empty sequence writes nothing.
func Write(w io.Writer, ids []int32, perLine int) error {
	if perLine <= 0 {
		perLine = max(len(ids), 1)
	}
	bw := bufio.NewWriter(w)
	var buf []byte
	for i := 0; i < len(ids); i += perLine {
		buf = AppendLine(buf[:0], ids[i:min(i+perLine, len(ids))])
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
