package artifact

import (
	"bytes"
	"strings"
	"testing"
)

// A config whose max_position_embeddings is 0 or negative used to open
// (read as "no limit": ninfer-plan then planned 262,144 tokens); it is
// rejected on open, naming the field.
func TestOpenRejectsMaxPositionEmbeddings(t *testing.T) {
	b := validFile(t)
	js, payload := splitFile(t, b)
	from := []byte(`"max_position_embeddings":4096`)
	if !bytes.Contains(js, from) {
		t.Fatal("fixture config has no max_position_embeddings 4096")
	}
	for _, v := range []string{"0   ", "-1  ", "-409"} {
		ed := reseal(bytes.Replace(js, from, []byte(`"max_position_embeddings":`+v), 1))
		out := assembleV3(ed, payload)
		_, err := parse("x", bytes.NewReader(out), int64(len(out)), false)
		if err == nil || !strings.Contains(err.Error(), "max_position_embeddings must be in [1, ") {
			t.Errorf("max_position_embeddings %s: %v", strings.TrimSpace(v), err)
		}
	}
}
