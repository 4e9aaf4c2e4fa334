// Package termsafe keeps generated text from driving a terminal: a model
// can emit any byte (ESC sequences that move the cursor, clear the screen
// or retitle the window, BEL, backspace, carriage returns that overwrite a
// line). Writer passes printable text, newlines and tabs through and shows
// every other C0 control, DEL and the C1 controls U+0080–U+009F as visible
// escapes (\r, \x1b, \u009b), so what reaches the terminal is what the
// model wrote, readable and inert. Use it only for a terminal: files and
// pipes get the bytes unchanged.
package termsafe

import (
	"fmt"
	"io"
)

// Writer escapes control characters on their way to W. It is not safe for
// concurrent use. A C1 control split across two writes is still escaped
// (the lead byte 0xC2 is held back until the next byte is known; Flush
// writes it).
type Writer struct {
	W       io.Writer
	pending bool // a 0xC2 lead byte is held back
	out     []byte
}

// Write writes p with its control characters escaped and reports len(p)
// on success.
func (w *Writer) Write(p []byte) (int, error) {
	w.out = w.out[:0]
	for _, b := range p {
		if w.pending {
			w.pending = false
			if b >= 0x80 && b <= 0x9f { // U+0080..U+009F (C1)
				w.out = fmt.Appendf(w.out, `\u%04x`, b)
				continue
			}
			w.out = append(w.out, 0xc2)
		}
		switch {
		case b == '\n' || b == '\t':
			w.out = append(w.out, b)
		case b == '\r':
			w.out = append(w.out, `\r`...)
		case b < 0x20 || b == 0x7f:
			w.out = fmt.Appendf(w.out, `\x%02x`, b)
		case b == 0xc2:
			w.pending = true
		default:
			w.out = append(w.out, b)
		}
	}
	if _, err := w.W.Write(w.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a held-back 0xC2 lead byte (the text ended there).
func (w *Writer) Flush() error {
	if !w.pending {
		return nil
	}
	w.pending = false
	_, err := w.W.Write([]byte{0xc2})
	return err
}
