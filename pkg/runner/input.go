package runner

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// ParseIDs parses whitespace-separated non-negative decimal ids. Errors name
// the 1-based token position; vocabulary checks are PromptIDs' job.
func ParseIDs(s string) ([]int32, error) {
	fields := strings.Fields(s)
	ids := make([]int32, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("token %d: %s is not a non-negative decimal id", i+1, termsafe.Quote(f))
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// FormatIDs writes ids as space-separated decimals (no newline).
func FormatIDs(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(int64(id), 10))
	}
	return b.String()
}

// LineReader yields one prompt per non-blank line of a reader: text, or ids
// with IDs set. Blank lines are skipped but counted, so Source names the
// 1-based line ("name: line N").
type LineReader struct {
	sc   *bufio.Scanner
	name string
	ids  bool
	line int
}

// NewLineReader reads prompts from r; name labels Source and errors.
func NewLineReader(r io.Reader, name string, ids bool) *LineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	return &LineReader{sc: sc, name: name, ids: ids}
}

// Name is the label given to NewLineReader ("stdin", a file name).
func (l *LineReader) Name() string { return l.name }

// Next returns the next prompt, or io.EOF after the last.
func (l *LineReader) Next() (Input, error) {
	for l.sc.Scan() {
		l.line++
		s := strings.TrimSuffix(l.sc.Text(), "\r")
		if strings.TrimSpace(s) == "" {
			continue
		}
		src := fmt.Sprintf("%s: line %d", l.name, l.line)
		if !l.ids {
			return Input{Text: s, Source: src}, nil
		}
		ids, err := ParseIDs(s)
		if err != nil {
			return Input{}, fmt.Errorf("%s: line %d: %w", l.name, l.line, err)
		}
		return Input{IDs: ids, Source: src}, nil
	}
	if err := l.sc.Err(); err != nil {
		return Input{}, fmt.Errorf("%s: %w", l.name, err)
	}
	return Input{}, io.EOF
}

// WholeText returns a whole-file text prompt: the content with one trailing
// newline ("\n" or "\r\n") removed.
func WholeText(data []byte, name string) Input {
	s := strings.TrimSuffix(string(data), "\n")
	s = strings.TrimSuffix(s, "\r")
	return Input{Text: s, Source: name}
}
