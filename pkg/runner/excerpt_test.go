package runner

import (
	"strings"
	"testing"
)

// TestParseIDsQuotesExcerpt: a huge bad id is quoted as a short excerpt
// (issue #22 item 10).
func TestParseIDsQuotesExcerpt(t *testing.T) {
	_, err := ParseIDs("1 " + strings.Repeat("z", 1<<20))
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "token 2: ") || !strings.Contains(err.Error(), "… (1048576 bytes)") {
		t.Errorf("error %.300q: want a short excerpt with the length", err)
	}
}
