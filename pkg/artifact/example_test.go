package artifact_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Example writes a tiny artifact (a resource and two tensors) and reads it
// back: plan every object first, stream payloads in plan order, Close
// commits atomically; Open reads only the directory, Map gives zero-copy
// payload views.
func Example() {
	dir, _ := os.MkdirTemp("", "ninfer-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.ninfer")

	cfg := qwen35.Config{
		VocabSize: 256, HiddenSize: 64, NumHiddenLayers: 1, IntermediateSize: 128,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 32, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 16, LinearValueHeadDim: 16, LinearNumKeyHeads: 2, LinearNumValueHeads: 2,
		LayerTypes: []string{qwen35.FullAttention}, RMSNormEps: 1e-6, RopeTheta: 1e7,
		PartialRotaryFactor: 0.25, AttnOutputGate: true,
	}
	plan := artifact.NewPlan(artifact.Meta{Name: "tiny", Config: cfg, Metadata: map[string]any{"recipe": "example"}})
	tok := []byte(`{"model":{}}`)
	check(plan.AddResource("frontend/tokenizer.json", artifact.ComponentFrontend, int64(len(tok))))
	check(plan.AddTensor("text/final_norm", artifact.ComponentText, format.BF16, []int64{64}))
	check(plan.AddTensor("text/layers/0/attention/q_proj", artifact.ComponentText, format.Q8G32, []int64{4, 200}))

	w, err := artifact.Create(path, plan)
	check(err)
	defer w.Abort() // no-op after a successful Close
	check(w.WriteObject("frontend/tokenizer.json", tok))
	check(w.WriteObject("text/final_norm", make([]byte, 128)))
	ow, err := w.Begin("text/layers/0/attention/q_proj") // chunked streaming
	check(err)
	for range 4 {
		_, err = ow.Write(make([]byte, 272))
		check(err)
	}
	check(ow.Close())
	check(w.Close())

	f, err := artifact.Open(path)
	check(err)
	defer f.Close()
	check(f.Map())
	o, _ := f.Object("text/layers/0/attention/q_proj")
	fmt.Println(f.Name, f.Formats(), len(f.Objects), o.Offset, o.Bytes, len(f.Bytes(o)))
	n, err := f.VerifyAll()
	fmt.Println("verified", n, err)
	// Output:
	// tiny [bf16 q8_g32_fp16] 3 512 1088 1088
	// verified 3 <nil>
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
