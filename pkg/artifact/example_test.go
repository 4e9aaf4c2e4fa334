package artifact_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Example writes a tiny artifact (a resource and the config's whole tensor
// inventory) and reads it back: plan every object first, stream payloads in
// plan order, Close commits atomically; Open reads only the directory
// (checking its digest and the config against the tensors), Map gives
// zero-copy payload views.
func Example() {
	dir, _ := os.MkdirTemp("", "ninfer-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.ninfer")

	cfg := qwen35.Config{
		VocabSize: 256, HiddenSize: 64, NumHiddenLayers: 1, IntermediateSize: 128,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 32, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 16, LinearValueHeadDim: 16, LinearNumKeyHeads: 2, LinearNumValueHeads: 2,
		LayerTypes: []string{qwen35.FullAttention}, RMSNormEps: 1e-6, RopeTheta: 1e7,
		PartialRotaryFactor: 0.25, AttnOutputGate: true, MaxPositionEmbeddings: 4096,
	}
	plan := artifact.NewPlan(artifact.Meta{Name: "tiny", Config: cfg, Metadata: map[string]any{"recipe": "example"}})
	tok := []byte(`{"model":{}}`)
	check(plan.AddResource("frontend/tokenizer.json", artifact.ComponentFrontend, int64(len(tok))))
	for _, t := range cfg.Tensors() {
		f := format.Q8G32 // matrices
		if len(t.Shape) == 1 {
			f = format.BF16 // norms
		}
		check(plan.AddTensor(t.Name, t.Component, f, t.Shape))
	}

	w, err := artifact.Create(path, plan)
	check(err)
	defer w.Abort() // no-op after a successful Close
	for _, o := range plan.Objects() {
		switch {
		case o.ID == "frontend/tokenizer.json":
			check(w.WriteObject(o.ID, tok))
		case o.ID == "text/layers/0/attention/q_proj": // chunked streaming
			ow, err := w.Begin(o.ID)
			check(err)
			for range 4 {
				_, err = ow.Write(make([]byte, o.Bytes/4))
				check(err)
			}
			check(ow.Close())
		default:
			check(w.WriteObject(o.ID, make([]byte, o.Bytes)))
		}
	}
	check(w.Close())

	f, err := artifact.Open(path)
	check(err)
	defer f.Close()
	check(f.Map())
	o, _ := f.Object("text/layers/0/attention/q_proj")
	fmt.Println(f.Name, f.Formats(), len(f.Objects), o.Offset, o.Bytes, len(f.Bytes(o)), len(f.DirectorySHA256))
	n, err := f.VerifyAll()
	fmt.Println("verified", n, err)
	// Output:
	// tiny [bf16 q8_g32_fp16] 15 35328 17408 17408 64
	// verified 15 <nil>
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
