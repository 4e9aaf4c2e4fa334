package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
)

// overflowArtifact copies the fp32 fixture with every element of object id
// set to a huge finite value (3e38), and records the new payload hash and
// directory digest as a writer would: the file passes --verify (payloads
// intact, values finite), yet the op that applies the weight overflows.
func overflowArtifact(t *testing.T, id string) string {
	t.Helper()
	src := testfixture.Artifact(t, "fp32", nil)
	f, err := artifact.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Object(id)
	if !ok || o.Format != "fp32" {
		t.Fatalf("object %s: %v %v", id, ok, o)
	}
	start, n, oldHash := f.PayloadStart+o.Offset, o.Bytes, o.SHA256
	f.Close()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < n; i += 4 {
		binary.LittleEndian.PutUint32(data[start+i:], math.Float32bits(3e38))
	}
	sum := sha256.Sum256(data[start : start+n])
	js := data[artifact.HeaderSize : artifact.HeaderSize+int(binary.LittleEndian.Uint64(data[8:16]))]
	if bytes.Count(js, []byte(oldHash)) != 1 {
		t.Fatalf("hash %s occurs %d times", oldHash, bytes.Count(js, []byte(oldHash)))
	}
	copy(js[bytes.Index(js, []byte(oldHash)):], hex.EncodeToString(sum[:]))
	// Reseal the directory digest (docs/FORMAT.md §2.5).
	key := []byte(`"directory_sha256":"`)
	slot := bytes.Index(js, key) + len(key)
	copy(js[slot:slot+64], strings.Repeat("0", 64))
	d := sha256.Sum256(js)
	copy(js[slot:slot+64], hex.EncodeToString(d[:]))
	dst := filepath.Join(t.TempDir(), "overflow.ninfer")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A model whose logits are all NaN used to be benchmarked as if it were
// sound; now the first measured rep of each test checks its logits and
// the run fails, naming the test and the first op that is not finite.
func TestNonFiniteLogitsFailTheRun(t *testing.T) {
	const obj = "text/layers/3/attention/o_proj" // layer 3: the fixture's full-attention layer
	model := overflowArtifact(t, obj)
	_, corpusPath := fixture(t)
	base := []string{"--weights", model, "--corpus", corpusPath, "--backend", "cpu", "--threads", "2", "-p", "8", "-n", "2", "-r", "2", "--warmup", "0"}
	code, stdout, stderr := runCmd(t, context.Background(), base...)
	where := "layer 3 (full attention): attention/o_proj output is not finite"
	// The run line is streamed before the tests; no rep of the broken test is.
	if code != 1 || strings.Contains(stdout, `"type":"rep"`) || !strings.HasPrefix(stderr, "ninfer-bench: pp8: the logits are not finite (") ||
		!strings.Contains(stderr, where) || !strings.Contains(stderr, "weight "+obj) ||
		!strings.Contains(stderr, "weights may be corrupt: run ninfer-inspect --verify "+model+"; if it passes, the payload is intact, so the weights are numerically broken (e.g. values overflow fp32 in layer 3 (full attention): attention/o_proj)") ||
		strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// --verify passes (the payload is as written) and the message says
	// what that means instead of sending the user back to --verify.
	code, _, stderr = runCmd(t, context.Background(), append(base, "--verify", "-q")...)
	if code != 1 || !strings.Contains(stderr, where) ||
		!strings.Contains(stderr, "the artifact passed --verify: the payload is intact, so the weights are numerically broken (e.g. values overflow fp32 in layer 3 (full attention): attention/o_proj)") ||
		strings.Contains(stderr, "run ninfer-inspect --verify") {
		t.Fatalf("--verify: exit %d, stderr %q", code, stderr)
	}
}
