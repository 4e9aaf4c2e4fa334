package main

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
)

// overflowArtifact copies the fp32 fixture with every element of object id
// set to a huge finite value (3e38), resealed as a writer would: the file
// passes --verify (payloads intact, values finite), yet the op that applies
// the weight overflows.
func overflowArtifact(t *testing.T, id string) string {
	t.Helper()
	return testfixture.PatchedArtifact(t, "fp32", id, true, func(payload []byte) {
		for i := 0; i+4 <= len(payload); i += 4 {
			binary.LittleEndian.PutUint32(payload[i:], math.Float32bits(3e38))
		}
	})
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
