package cliutil

import (
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// ErrorLine makes an error message one inert line for stderr, which is
// usually a terminal: newlines become spaces and every other control
// character (ESC, CR, BEL, C1 …, from a file name, a model name or input
// text quoted in the message) is shown as a visible escape (termsafe).
func ErrorLine(msg string) string {
	return termsafe.Escape(strings.ReplaceAll(msg, "\n", " "))
}

// WarningLine formats one "tool: warning: message" line the same way.
func WarningLine(tool, msg string) string {
	return tool + ": warning: " + ErrorLine(msg) + "\n"
}
