package corpus

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadTokenQuotedAsExcerpt: a 5 MB bad token, or a model file given as
// the corpus, is quoted as a short excerpt with its length, not whole
// (issue #22 item 10).
func TestBadTokenQuotedAsExcerpt(t *testing.T) {
	big := "1 2\n3 " + strings.Repeat("x", 5<<20) + " 4\n"
	_, err := Read(strings.NewReader(big), "c.ids", 0)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	want := `c.ids: line 2: token 2: "` + strings.Repeat("x", 64) + `"… (5242880 bytes) is not a non-negative int32 id`
	if msg != want {
		t.Errorf("error (%d bytes) = %.300s, want %s", len(msg), msg, want)
	}
	_, err = ParseLine(strings.Repeat("y", 1000), "c.ids", 7, 0)
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "… (1000 bytes)") {
		t.Errorf("ParseLine error %q: want a short excerpt", err)
	}
	// A binary header: control bytes are escaped, the excerpt stays short.
	hdr := append([]byte("NINF\x00\x01\x1b[2J{\"header\":"), bytes.Repeat([]byte("a"), 28<<10)...)
	_, err = Read(bytes.NewReader(hdr), "m.ninfer", 0)
	if err == nil || len(err.Error()) > 200 || strings.ContainsAny(err.Error(), "\x00\x1b") {
		t.Errorf("model-as-corpus error %q: want a short escaped excerpt", err)
	}
}
