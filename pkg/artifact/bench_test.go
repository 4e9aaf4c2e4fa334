package artifact

import (
	"io"
	"os"
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

// countingReaderAt records every ReadAt of Parse: how many bytes and the
// furthest offset touched.
type countingReaderAt struct {
	r          io.ReaderAt
	bytes, end int64
	calls      int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.calls++
	c.bytes += int64(n)
	c.end = max(c.end, off+int64(n))
	return n, err
}

// TestOpenReadsOnlyTheHeader: opening a multi-GB artifact (850+ objects)
// reads the header and directory only — never a payload byte — so its cost
// does not grow with the payload. A structural check (the bytes read), not a
// wall-clock limit, so it holds under -race and on a loaded machine; the
// speed itself is BenchmarkOpenHeader (docs/PERF.md).
func TestOpenReadsOnlyTheHeader(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a multi-GB sparse file")
	}
	path := writeBigSparse(t)
	osf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	st, err := osf.Stat()
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReaderAt{r: osf}
	start := time.Now()
	f, err := Parse(path, cr, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if f.Size < 4<<30 || len(f.Objects) < 850 {
		t.Fatalf("sparse artifact is %d bytes with %d objects; want ≥ 4 GiB and ≥ 850", f.Size, len(f.Objects))
	}
	payload := f.PayloadStart
	if payload <= 0 || payload >= f.Size {
		t.Fatalf("payload start %d outside the %d-byte file", payload, f.Size)
	}
	t.Logf("Parse of a %d-object, %d-byte artifact: %d reads, %d bytes, up to offset %d (payload starts at %d), %v",
		len(f.Objects), f.Size, cr.calls, cr.bytes, cr.end, payload, elapsed)
	if cr.end > payload {
		t.Errorf("Parse read up to offset %d, past the first payload at %d", cr.end, payload)
	}
	if cr.bytes > 2*payload {
		t.Errorf("Parse read %d bytes for a %d-byte header region (re-reads?)", cr.bytes, payload)
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
