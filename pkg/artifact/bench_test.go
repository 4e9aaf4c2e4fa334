package artifact

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// bigConfig is a 64-layer Qwen3.5-shaped config whose q4 artifact is ~8.6 GB
// with 870 objects.
func bigConfig() qwen35.Config {
	c := qwen35.Config{
		VocabSize: 248320, HiddenSize: 4096, NumHiddenLayers: 64, IntermediateSize: 12288,
		NumAttentionHeads: 16, NumKeyValueHeads: 4, HeadDim: 256,
		LinearConvKernelDim: 4, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
		LinearNumKeyHeads: 16, LinearNumValueHeads: 32,
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, MTPNumHiddenLayers: 1,
		MaxPositionEmbeddings: 262144, AttnOutputGate: true,
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		t := qwen35.LinearAttention
		if l%4 == 3 {
			t = qwen35.FullAttention
		}
		c.LayerTypes = append(c.LayerTypes, t)
	}
	return c
}

// writeBigSparse writes a sparse multi-GB artifact with the full tensor
// inventory of bigConfig and returns its path.
func writeBigSparse(tb testing.TB) string {
	tb.Helper()
	cfg := bigConfig()
	p := NewPlan(Meta{Name: "big-sparse", Config: cfg, Metadata: map[string]any{"recipe": "q4"}})
	for _, id := range []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"} {
		if err := p.AddResource("frontend/"+id, ComponentFrontend, 1<<20+17); err != nil {
			tb.Fatal(err)
		}
	}
	for _, t := range cfg.Tensors() {
		f := format.Q4G64
		switch {
		case t.Class == qwen35.ClassControl:
			f = format.FP32
		case len(t.Shape) == 1 || t.Class == qwen35.ClassConv:
			f = format.BF16
		}
		if err := p.AddTensor(t.Name, t.Component, f, t.Shape); err != nil {
			tb.Fatal(err)
		}
	}
	path := filepath.Join(tb.TempDir(), "big.ninfer")
	if err := WriteSparse(path, p); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestOpenHugeSparseFast(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a multi-GB sparse file")
	}
	path := writeBigSparse(t)
	best, n := time.Hour, 0
	for range 3 {
		start := time.Now()
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
		if f.Size < 4<<30 || len(f.Objects) < 850 {
			t.Fatalf("sparse artifact is %d bytes with %d objects; want ≥ 4 GiB and ≥ 850", f.Size, len(f.Objects))
		}
		n = len(f.Objects)
		f.Close()
	}
	t.Logf("header-only Open of a %d-object artifact: %v", n, best)
	if best > 200*time.Millisecond {
		t.Fatalf("header-only Open took %v, limit 200ms", best)
	}
}

func BenchmarkOpenHeader(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a multi-GB sparse file")
	}
	path := writeBigSparse(b)
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
