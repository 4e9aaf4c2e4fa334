package cliutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// MaxErrorLine bounds an error line in bytes: the places that quote input
// text cut it to a short excerpt (termsafe.Quote); this is the net under the
// rest (a tensor name, a dtype or an id quoted whole from a damaged file).
const MaxErrorLine = 1024

// ErrorLine makes an error message one inert line for stderr, which is
// usually a terminal: newlines become spaces, every other control character
// (ESC, CR, BEL, C1 …, from a file name, a model name or input text quoted
// in the message) is shown as a visible escape (termsafe), and a line longer
// than MaxErrorLine bytes keeps its start and end with the length cut
// between them.
func ErrorLine(msg string) string {
	line := termsafe.Escape(strings.ReplaceAll(msg, "\n", " "))
	if len(line) <= MaxErrorLine {
		return line
	}
	head, tail := line[:MaxErrorLine*3/4], line[len(line)-MaxErrorLine/8:]
	for len(head) > 0 && !utf8.RuneStart(line[len(head)]) { // cut on rune boundaries
		head = head[:len(head)-1]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s … (%d bytes cut) … %s", head, len(line)-len(head)-len(tail), tail)
}

// WarningLine formats one "tool: warning: message" line the same way.
func WarningLine(tool, msg string) string {
	return tool + ": warning: " + ErrorLine(msg) + "\n"
}

// ErrorText is err's message for an error line, with the byte position (1
// for the first byte) of a JSON decoding error in it when the message does
// not give one: the encoding/json errors name the offending character or
// type but not where, and the file may be megabytes long (a tokenizer.json,
// a config.json, a model file given as JSON).
func ErrorText(err error) string {
	msg := err.Error()
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || strings.Contains(msg, fmt.Sprintf("byte %d", off)) {
		return msg
	}
	return fmt.Sprintf("%s (at byte %d)", msg, off)
}
