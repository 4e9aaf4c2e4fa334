package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
)

// reseal recomputes metadata.directory_sha256 of the artifact bytes b in
// place (docs/FORMAT.md §2.5), as a tool that rewrites a directory must.
func reseal(t *testing.T, b []byte, jsonBytes int64) {
	t.Helper()
	js := b[artifact.HeaderSize : artifact.HeaderSize+jsonBytes]
	key := []byte(`"directory_sha256":"`)
	i := bytes.Index(js, key)
	if i < 0 {
		t.Fatal("no directory_sha256")
	}
	slot := i + len(key)
	copy(js[slot:slot+64], strings.Repeat("0", 64))
	d := sha256.Sum256(js)
	copy(js[slot:slot+64], hex.EncodeToString(d[:]))
}

// replaceResource overwrites resource id with content padded by spaces to
// its length and records the new sha256 and directory digest: a file as
// another writer (or ninfer-convert before it parsed the tokenizer) would
// have written it.
func replaceResource(t *testing.T, path, id, content string) {
	t.Helper()
	editObject(t, path, id, func(p []byte) {
		if len(content) > len(p) {
			t.Fatalf("content longer than %d bytes", len(p))
		}
		copy(p, content+strings.Repeat(" ", len(p)-len(content)))
	})
}

// editObject changes object id's payload in place with edit and records
// its new sha256 and the directory digest, so that the file passes every
// hash check.
func editObject(t *testing.T, path, id string, edit func(payload []byte)) {
	t.Helper()
	f, err := artifact.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Object(id)
	if !ok {
		t.Fatalf("no %s", id)
	}
	start, n, old, jb := f.PayloadStart+o.Offset, o.Bytes, o.SHA256, f.JSONBytes
	f.Close()
	b, _ := os.ReadFile(path)
	edit(b[start : start+n])
	sum := sha256.Sum256(b[start : start+n])
	i := bytes.Index(b[:artifact.HeaderSize+jb], []byte(old))
	copy(b[i:], hex.EncodeToString(sum[:]))
	reseal(t, b, jb)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// --verify used to pass a proposal head whose row ids lie outside the
// vocabulary (run and bench with --lm-head-draft refuse it).
func TestVerifyChecksDraftIDs(t *testing.T) {
	path := copyArtifact(t, testfixture.Build(t, testfixture.Spec{Recipe: "q8", Draft: []int32{1, 2, 3, 4}}))
	if code, _, errs := runInspect("--verify", "--summary", path); code != 0 {
		t.Fatalf("sound draft head: exit %d %q", code, errs)
	}
	editObject(t, path, "text/draft_head_token_ids", func(p []byte) { binary.LittleEndian.PutUint32(p[4:], 100000) })
	code, _, errs := runInspect("--verify", "--summary", path)
	if code != 1 || !strings.Contains(errs, `object "text/draft_head_token_ids": id 100000 at row 1 is outside the vocabulary`) {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
}

// --verify used to pass an artifact whose tokenizer.json is not JSON (its
// hash matches what was written), which ninfer-run then refused. Now
// --verify parses the frontend resources as run does.
func TestVerifyParsesTheTokenizer(t *testing.T) {
	path := copyArtifact(t, testfixture.Artifact(t, "q8", nil))
	replaceResource(t, path, "frontend/tokenizer.json", "this is not json")
	if code, _, errs := runInspect("--summary", path); code != 0 {
		t.Fatalf("plain inspect (header only): exit %d %q", code, errs)
	}
	code, _, errs := runInspect("--verify", "--summary", path)
	if code != 1 || !strings.HasPrefix(errs, "ninfer-inspect: "+path+": resource tokenizer.json: ") ||
		!strings.Contains(errs, "(ninfer-run refuses it)") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
}

// The artifact id in the header is covered: flipping any of its bits
// makes inspect fail instead of printing another id.
func TestArtifactIDIsCovered(t *testing.T) {
	src := testfixture.Artifact(t, "q8", nil)
	orig, _ := os.ReadFile(src)
	path := copyArtifact(t, src)
	for i := 16; i < artifact.HeaderSize; i++ {
		b := append([]byte(nil), orig...)
		b[i] ^= 0x10
		os.WriteFile(path, b, 0o644)
		code, out, errs := runInspect("--summary", path)
		if code != 1 || out != "" || !strings.Contains(errs, "does not match metadata.artifact_id") {
			t.Fatalf("header byte %d flipped: exit %d stderr %q", i, code, errs)
		}
	}
	// An artifact written before the id was recorded: --verify says the id
	// is not covered.
	b := append([]byte(nil), orig...)
	f, err := artifact.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	jb := f.JSONBytes
	id := hex.EncodeToString(f.ID[:])
	f.Close()
	rec := []byte(`"artifact_id":"` + id + `",`)
	i := bytes.Index(b[:artifact.HeaderSize+jb], rec)
	if i < 0 {
		t.Fatal("no metadata.artifact_id")
	}
	copy(b[i:], bytes.Repeat([]byte(" "), len(rec)))
	reseal(t, b, jb)
	os.WriteFile(path, b, 0o644)
	code, _, errs := runInspect("--verify", "--summary", path)
	if code != 0 || !strings.Contains(errs, "the header's artifact_id is NOT covered") {
		t.Fatalf("legacy id: exit %d stderr %q", code, errs)
	}
}
