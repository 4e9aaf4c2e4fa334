package testfixture

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/artifact"
)

// PatchedArtifact copies the fixture artifact of the given recipe with the
// payload of object id changed in place by patch, and returns its path. With
// reseal, the object's recorded SHA-256 and the directory digest are
// recomputed as a writer would (docs/FORMAT.md §2.5), so the file passes
// --verify; without, only a payload check sees the change (the directory
// digest covers the recorded hashes, not the payloads).
func PatchedArtifact(t testing.TB, recipeName, id string, reseal bool, patch func(payload []byte)) string {
	t.Helper()
	src := Artifact(t, recipeName, nil)
	f, err := artifact.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Object(id)
	if !ok {
		f.Close()
		t.Fatalf("%s: no object %s", src, id)
	}
	start, n, oldHash := f.PayloadStart+o.Offset, o.Bytes, o.SHA256
	f.Close()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	patch(data[start : start+n])
	if reseal {
		sum := sha256.Sum256(data[start : start+n])
		js := data[artifact.HeaderSize : artifact.HeaderSize+int(binary.LittleEndian.Uint64(data[8:16]))]
		if c := bytes.Count(js, []byte(oldHash)); c != 1 {
			t.Fatalf("hash %s occurs %d times in the directory", oldHash, c)
		}
		copy(js[bytes.Index(js, []byte(oldHash)):], hex.EncodeToString(sum[:]))
		key := []byte(`"directory_sha256":"`)
		slot := bytes.Index(js, key) + len(key)
		copy(js[slot:slot+64], strings.Repeat("0", 64))
		d := sha256.Sum256(js)
		copy(js[slot:slot+64], hex.EncodeToString(d[:]))
	}
	dst := filepath.Join(t.TempDir(), "patched.ninfer")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
