package main

import (
	"path/filepath"

	"github.com/ninfer/ninfer/pkg/cliutil"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// checkModelName refuses a model name with control characters (ESC, CR,
// newline, tab, C1) or invalid UTF-8: ninfer-inspect and the ninfer-bench
// and ninfer-report tables print the stored name, so it must be plain text.
// Without --name the name is HF_DIR's base name, checked the same way.
func checkModelName(name, src string) error {
	if name != "" {
		if termsafe.HasControl(name) {
			return cliutil.Usagef("--name %s: control characters are not allowed in a model name", termsafe.Quote(name))
		}
		return nil
	}
	if base := filepath.Base(filepath.Clean(src)); termsafe.HasControl(base) {
		return cliutil.Usagef("the model name would be the directory name %s, which holds control characters; give --name", termsafe.Quote(base))
	}
	return nil
}
