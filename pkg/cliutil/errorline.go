package cliutil

import (
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
