package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// flusher is implemented by buffered writers (bufio.Writer).
type flusher interface{ Flush() error }

func flush(w io.Writer) error {
	if f, ok := w.(flusher); ok {
		return f.Flush()
	}
	return nil
}

// TextSink streams the generated text to W, flushing after every token, and
// ends each prompt with a newline.
type TextSink struct{ W io.Writer }

// Token writes the completed text.
func (s TextSink) Token(_ int32, text string) error {
	if text == "" {
		return nil
	}
	if _, err := io.WriteString(s.W, text); err != nil {
		return err
	}
	return flush(s.W)
}

// End writes the decoder's tail and the terminating newline.
func (s TextSink) End(tail string, _ *Result) error {
	if _, err := io.WriteString(s.W, tail+"\n"); err != nil {
		return err
	}
	return flush(s.W)
}

// IDSink streams the generated ids to W as space-separated decimals, one
// line per prompt.
type IDSink struct {
	W io.Writer
	n int
}

// Token writes one id.
func (s *IDSink) Token(id int32, _ string) error {
	b := make([]byte, 0, 12)
	if s.n > 0 {
		b = append(b, ' ')
	}
	s.n++
	b = strconv.AppendInt(b, int64(id), 10)
	if _, err := s.W.Write(b); err != nil {
		return err
	}
	return flush(s.W)
}

// End terminates the line.
func (s *IDSink) End(string, *Result) error {
	s.n = 0
	if _, err := io.WriteString(s.W, "\n"); err != nil {
		return err
	}
	return flush(s.W)
}

// JSONSink writes one JSON line per prompt (the Result) when it ends.
type JSONSink struct{ W io.Writer }

// Token does nothing: the line is written at the end.
func (JSONSink) Token(int32, string) error { return nil }

// End writes the result as one JSON line.
func (s JSONSink) End(_ string, res *Result) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // Encode ends the line with '\n'
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if _, err := s.W.Write(b.Bytes()); err != nil {
		return err
	}
	return flush(s.W)
}
