package engine

import (
	"math"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// decodeLogits prefills ids[:8] and decodes the rest on a CPU backend with
// activation mode act, returning every decode step's logits.
func decodeLogits(t *testing.T, w Weights, isa, act string, ids []int32) []float32 {
	t.Helper()
	be := newBackend(t, isa)
	if err := be.SetActivations(act); err != nil {
		t.Fatal(err)
	}
	e, err := New(w, be, Options{KVDtype: "fp32", MaxContext: 64, PrefillChunk: 128})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill(ids[:8], false); err != nil {
		t.Fatal(err)
	}
	var out []float32
	for _, id := range ids[8:] {
		step, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, step...)
	}
	return out
}

// TestInt8ActivationsHead checks that the output head follows the
// activation mode: with only the head in a grouped-integer format, auto
// decodes differently from fp32 (the head's int8 GEMV runs) and with a
// bf16 head and grouped layers too; with every matmul in bf16, auto equals
// fp32 bit for bit (nothing grouped to quantize for). Logits stay finite.
func TestInt8ActivationsHead(t *testing.T) {
	r := seeded(t)
	headOnly := func(tn qwen35.Tensor) format.Format {
		if tn.Class == qwen35.ClassOutputHead {
			return format.Q4G64
		}
		return format.BF16
	}
	layers := func(tn qwen35.Tensor) format.Format {
		switch tn.Class {
		case qwen35.ClassOutputHead, qwen35.ClassEmbedding:
			return format.BF16
		}
		return format.Q4G64
	}
	none := func(qwen35.Tensor) format.Format { return format.BF16 }
	for _, c := range []struct {
		name   string
		recipe func(qwen35.Tensor) format.Format
		same   bool
	}{{"head_only", headOnly, false}, {"layers", layers, false}, {"bf16", none, true}} {
		w := newTestWeightsRecipe(r, tinyConfig(false), c.recipe)
		ids := randIDs(r, 12, w.cfg.VocabSize)
		for _, isa := range testISAs(t) {
			y32 := decodeLogits(t, w, isa, backend.ActFP32, ids)
			y8 := decodeLogits(t, w, isa, backend.ActAuto, ids)
			same := true
			for i := range y8 {
				if math.IsNaN(float64(y8[i])) || math.IsInf(float64(y8[i]), 0) {
					t.Fatalf("%s/%s: logit %d = %g", c.name, isa, i, y8[i])
				}
				if math.Float32bits(y8[i]) != math.Float32bits(y32[i]) {
					same = false
				}
			}
			if same != c.same {
				t.Errorf("%s/%s: int8 logits identical to fp32: %v, want %v", c.name, isa, same, c.same)
			}
		}
	}
}
