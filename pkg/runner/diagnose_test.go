package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nartifact "github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/engine"
)

// corruptArtifact copies the recipe's fixture and overwrites the first
// element of object id (an fp32 payload) with a NaN: the directory still
// opens (its digest covers the recorded hashes, not the payloads), only a
// payload hash check sees it.
func corruptArtifact(t *testing.T, recipe, id string) string {
	t.Helper()
	src := artifact(t, recipe)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := nartifact.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Object(id)
	if !ok {
		t.Fatalf("no object %s", id)
	}
	if o.Format != "fp32" {
		t.Fatalf("%s is %s, want fp32", id, o.Format)
	}
	binary.LittleEndian.PutUint32(data[f.PayloadStart+o.Offset:], 0x7fc00000)
	f.Close()
	dst := filepath.Join(t.TempDir(), "corrupt.ninfer")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestNonFiniteLogitsNameTheLayer(t *testing.T) {
	const obj = "text/layers/3/attention/o_proj" // layer 3 is the fixture's full-attention layer
	path := corruptArtifact(t, "fp32", obj)
	for spec, head := range map[string]string{"none": "decode: position 5: no finite logit to sample from: ",
		"mtp": "decode: spec: no valid token at position 5 (all logits NaN or -Inf): "} {
		t.Run(spec, func(t *testing.T) {
			o := Options{Weights: path, Backend: "cpu", Threads: 2, MaxNew: 4, MaxContext: 512, PrefillChunk: 128, KVDtype: "fp32", Spec: spec}
			r, err := Open(o)
			if err != nil {
				t.Fatalf("open (no --verify: the payloads are not read): %v", err)
			}
			defer r.Close()
			_, err = r.Run(context.Background(), Input{IDs: []int32{1, 2, 3, 4, 5}}, nil)
			var nf *NonFiniteError
			if !errors.As(err, &nf) {
				t.Fatalf("error %v (%T), want a NonFiniteError", err, err)
			}
			want := engine.NonFinite{Layer: 3, Mixer: engine.MixerFullAttention, Op: "attention/o_proj", Weight: obj}
			if d := nf.Diagnosis; d == nil || d.Layer != want.Layer || d.Mixer != want.Mixer || d.Op != want.Op || d.Weight != want.Weight || d.Position != 0 {
				t.Fatalf("diagnosis %+v, want %+v at position 0", d, want)
			}
			msg := err.Error()
			for _, s := range []string{head + "layer 3 (full attention): attention/o_proj output is not finite",
				"weights may be corrupt: run ninfer-inspect --verify " + path,
				// A passing --verify is not a dead end: the hint says what it means.
				"; if it passes, the payload is intact, so the weights are numerically broken (e.g. values overflow fp32 in layer 3 (full attention): attention/o_proj)"} {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q lacks %q", msg, s)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			// The runner still works after the diagnosis (its backend is
			// restored): the next prompt fails the same way, not worse.
			if _, err := r.Run(context.Background(), Input{IDs: []int32{1, 2, 3}}, nil); !errors.As(err, &nf) {
				t.Fatalf("second run: %v", err)
			}
		})
	}
}

func TestVerifyOption(t *testing.T) {
	corrupt := corruptArtifact(t, "fp32", "text/layers/1/mlp/down_proj")
	o := Options{Weights: corrupt, Backend: "cpu", Threads: 2, MaxNew: 4, MaxContext: 512, PrefillChunk: 128, KVDtype: "fp32", Verify: true}
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "--verify: ") ||
		!strings.Contains(err.Error(), `"text/layers/1/mlp/down_proj"`) || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("Open --verify of a corrupted artifact: %v", err)
	}
	var log bytes.Buffer
	o.Weights, o.Log = artifact(t, "fp32"), &log
	r, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !strings.Contains(log.String(), "verified "+o.Weights+": directory sha256, ") {
		t.Errorf("log lacks the verified line:\n%s", log.String())
	}
}
