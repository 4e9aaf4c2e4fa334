package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// BenchmarkDecodeStepTiny measures one decode step of the tiny test model
// (bf16 weights, bf16 KV) at a short context.
// Run: go test -run - -bench DecodeStep ./pkg/engine/
func BenchmarkDecodeStepTiny(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	w := newTestWeights(r, tinyConfig(false), format.BF16)
	_, s := newEngine(b, w, "auto", Options{MaxContext: 1 << 16, PrefillChunk: 128})
	if _, err := s.Prefill(randIDs(r, 64, w.cfg.VocabSize), false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Decode(int32(i % w.cfg.VocabSize)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
