package convert

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/tokenizer"
)

// checkFrontend parses the frontend files the artifact will carry exactly
// as ninfer-run does when it loads them (tokenizer.CheckFrontend): a file
// that run would refuse is refused here, naming the file, instead of being
// copied into an artifact that converts, inspects and verifies cleanly and
// only fails when it is run. res maps a resource name to its bytes (absent
// or empty: not carried).
func checkFrontend(src string, res map[string][]byte) error {
	if err := tokenizer.CheckFrontend(res[hfdir.TokenizerFile], res[hfdir.TokenizerConfig], res[hfdir.GenerationFile]); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}
