package artifact

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every byte of the fixed header that a reader interprets (magic, version,
// json_bytes, artifact_id) is either checked on open or covered by the
// directory digest: flipping any bit of it makes Open fail.
func TestEveryHeaderBitIsCovered(t *testing.T) {
	b := validFile(t)
	f, err := parse("valid", bytes.NewReader(b), int64(len(b)), false)
	if err != nil {
		t.Fatal(err)
	}
	if !f.ArtifactIDChecked || f.Metadata[MetaArtifactID] != hex.EncodeToString(f.ID[:]) {
		t.Fatalf("metadata.artifact_id %v, header id %x, checked %t", f.Metadata[MetaArtifactID], f.ID, f.ArtifactIDChecked)
	}
	for i := 0; i < HeaderSize; i++ {
		for bit := 0; bit < 8; bit++ {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			if _, err := parse("flipped", bytes.NewReader(c), int64(len(c)), false); err == nil {
				t.Errorf("header byte %d bit %d flipped: the file still opens", i, bit)
			} else if i >= 16 && !strings.Contains(err.Error(), "does not match metadata.artifact_id") {
				t.Errorf("header byte %d bit %d flipped: %v", i, bit, err)
			}
		}
	}
}

func TestArtifactIDRecordRules(t *testing.T) {
	b := validFile(t)
	js, payload := splitFile(t, b)
	id := hex.EncodeToString(b[16:32])
	for _, c := range []struct{ name, from, to, want string }{
		{"upper case", `"artifact_id":"` + id, `"artifact_id":"` + strings.ToUpper(id), "metadata.artifact_id must be a string of 32 lowercase hex digits"},
		{"not a string", `"artifact_id":"` + id + `"`, `"artifact_id":1234`, "metadata.artifact_id must be a string"},
	} {
		ed := reseal(bytes.Replace(js, []byte(c.from), []byte(c.to), 1))
		out := assembleV3(ed, payload)
		copy(out[16:32], b[16:32])
		_, err := parse("x", bytes.NewReader(out), int64(len(out)), false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// An artifact written before the id was recorded still opens; nothing
	// covers its id.
	ed := bytes.Replace(js, []byte(`"artifact_id":"`+id+`",`), nil, 1)
	ed = reseal(append(ed, bytes.Repeat([]byte(" "), len(js)-len(ed))...))
	out := assembleV3(ed, payload)
	f, err := parse("old", bytes.NewReader(out), int64(len(out)), false)
	if err != nil || f.ArtifactIDChecked || f.DirectorySHA256 == "" {
		t.Fatalf("artifact without metadata.artifact_id: %v (checked %v)", err, f != nil && f.ArtifactIDChecked)
	}
}

// WriteSparse records the id too.
func TestWriteSparseRecordsArtifactID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sparse.ninfer")
	if err := WriteSparse(path, newPlan(t, testMeta(), testEntries)); err != nil {
		t.Fatal(err)
	}
	f, err := open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.ArtifactIDChecked {
		t.Fatal("sparse artifact: id not recorded")
	}
	b, _ := os.ReadFile(path)
	b[20] ^= 0x40
	if _, err := parse(path, bytes.NewReader(b), int64(len(b)), false); err == nil {
		t.Fatal("flipped id byte accepted")
	}
}
