package engine

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// poison writes a NaN (or, with inf, +Inf) into element i of the test
// weight id.
func poison(t *testing.T, w *testWeights, id string, i int, inf bool) {
	t.Helper()
	d := slices.Clone(w.data[id])
	switch w.fmts[id] {
	case format.FP32:
		bits := uint32(0x7fc00000)
		if inf {
			bits = 0x7f800000
		}
		binary.LittleEndian.PutUint32(d[4*i:], bits)
	case format.BF16:
		bits := uint16(0x7fc0)
		if inf {
			bits = 0x7f80
		}
		binary.LittleEndian.PutUint16(d[2*i:], bits)
	default:
		t.Fatalf("%s: format %s", id, w.fmts[id])
	}
	w.data[id] = d
}

func TestDiagnoseNonFiniteNamesTheFirstOp(t *testing.T) {
	r := seeded(t)
	// tinyConfig: layers 0 and 2 are Gated DeltaNet, 1 and 3 full attention.
	ids := []int32{5, 17, 3, 42, 8, 60, 11}
	H := tinyConfig(false).HiddenSize
	cases := []struct {
		name   string
		tied   bool
		tensor string
		elem   int
		inf    bool
		want   *NonFinite // Value and Position checked separately
		pos    int
	}{
		{name: "healthy"},
		{name: "o_proj", tensor: qwen35.LayerName(1, "attention/o_proj"),
			want: &NonFinite{Layer: 1, Mixer: MixerFullAttention, Op: "attention/o_proj", Weight: qwen35.LayerName(1, "attention/o_proj")}},
		{name: "gdn out_proj", tensor: qwen35.LayerName(2, "gdn/out_proj"),
			want: &NonFinite{Layer: 2, Mixer: MixerGDN, Op: "gdn/out_proj", Weight: qwen35.LayerName(2, "gdn/out_proj")}},
		{name: "conv1d", tensor: qwen35.LayerName(0, "gdn/conv1d"), inf: true,
			want: &NonFinite{Layer: 0, Mixer: MixerGDN, Op: "gdn/conv1d", Weight: qwen35.LayerName(0, "gdn/conv1d")}},
		{name: "mlp down_proj", tensor: qwen35.LayerName(3, "mlp/down_proj"),
			want: &NonFinite{Layer: 3, Mixer: MixerFullAttention, Op: "mlp/down_proj", Weight: qwen35.LayerName(3, "mlp/down_proj")}},
		{name: "input_norm", tensor: qwen35.LayerName(2, "input_norm"),
			want: &NonFinite{Layer: 2, Mixer: MixerGDN, Op: "input_norm", Weight: qwen35.LayerName(2, "input_norm")}},
		{name: "q_norm", tensor: qwen35.LayerName(3, "attention/q_norm"),
			want: &NonFinite{Layer: 3, Mixer: MixerFullAttention, Op: "attention/q_norm", Weight: qwen35.LayerName(3, "attention/q_norm")}},
		// Row 42 of the embedding is the token at position 3.
		{name: "embedding row", tensor: qwen35.NameEmbedding, elem: 42 * H, pos: 3,
			want: &NonFinite{Layer: -1, Op: "token_embedding", Weight: qwen35.NameEmbedding}},
		// An unused embedding row reaches only the head: the last position.
		{name: "output head", tensor: qwen35.NameOutputHead, elem: 90 * H, pos: len(ids) - 1,
			want: &NonFinite{Layer: -1, Op: "output_head", Weight: qwen35.NameOutputHead}},
		{name: "tied head", tied: true, tensor: qwen35.NameEmbedding, elem: 90 * H, pos: len(ids) - 1,
			want: &NonFinite{Layer: -1, Op: "output_head (tied to token_embedding)", Weight: qwen35.NameEmbedding}},
		{name: "final_norm", tensor: qwen35.NameFinalNorm, pos: len(ids) - 1,
			want: &NonFinite{Layer: -1, Op: "final_norm", Weight: qwen35.NameFinalNorm}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newTestWeights(r, tinyConfig(tc.tied), format.FP32)
			if tc.tensor != "" {
				poison(t, w, tc.tensor, tc.elem, tc.inf)
			}
			// Chunk 128 with the prompt spanning two chunks would need 129+
			// tokens; the short prompt keeps the test fast, the chunked case
			// is below.
			_, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128})
			got, err := s.DiagnoseNonFinite(ids)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("healthy model: diagnosis %v, want nil", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no finding, want %v", tc.want)
			}
			if got.Position != tc.pos {
				t.Errorf("position %d, want %d", got.Position, tc.pos)
			}
			if v := float64(got.Value); !(math.IsNaN(v) || math.IsInf(v, 0)) {
				t.Errorf("value %v is finite", got.Value)
			}
			g2, w2 := *got, *tc.want
			g2.Value, w2.Position = 0, got.Position // NaN != NaN; checked above
			if g2 != w2 {
				t.Errorf("diagnosis %+v, want %+v", *got, w2)
			}
		})
	}
}

func TestDiagnoseNonFiniteMessage(t *testing.T) {
	n := &NonFinite{Layer: 3, Mixer: MixerFullAttention, Op: "attention/o_proj", Weight: "text/layers/3/attention/o_proj",
		Position: 7, Value: float32(math.NaN())}
	want := "layer 3 (full attention): attention/o_proj output is not finite (NaN at position 7; weight text/layers/3/attention/o_proj)"
	if got := n.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	head := &NonFinite{Layer: -1, Op: "output_head", Position: 0, Value: float32(math.Inf(1))}
	if got := head.String(); got != "output_head output is not finite (+Inf at position 0)" {
		t.Errorf("String() = %q", got)
	}
}

// The diagnosis finds a NaN in the second prefill chunk at its position,
// and leaves the engine as it was: a normal prefill afterwards gives the
// same logits as before it.
func TestDiagnoseNonFiniteChunksAndRestores(t *testing.T) {
	r := seeded(t)
	w := newTestWeights(r, tinyConfig(false), format.FP32)
	ids := randIDs(r, 200, w.cfg.VocabSize)
	for i := range ids {
		if ids[i] == 7 {
			ids[i] = 8
		}
	}
	ids[150] = 7 // the only token 7: in the second 128-token chunk
	poison(t, w, qwen35.NameEmbedding, 7*w.cfg.HiddenSize+1, false)
	e, s := newEngine(t, w, "avx2", Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128})
	before, err := s.Prefill(ids[:100], false)
	if err != nil {
		t.Fatal(err)
	}
	before = slices.Clone(before)
	got, err := s.DiagnoseNonFinite(ids)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Op != "token_embedding" || got.Position != 150 {
		t.Fatalf("diagnosis %v, want token_embedding at position 150", got)
	}
	if _, ok := e.be.(*finiteChecker); ok {
		t.Fatal("the engine still runs on the checking backend")
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	after, err := s.Prefill(ids[:100], false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Error("logits after the diagnosis differ from before it")
	}
	if !strings.Contains(got.String(), "token_embedding output is not finite (NaN at position 150") {
		t.Errorf("message %q", got.String())
	}
}
