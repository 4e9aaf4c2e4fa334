package artifact

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// testConfig is a tiny but valid Qwen3.5 config: 2 layers (GDN, full).
func testConfig() qwen35.Config {
	return qwen35.Config{
		VocabSize: 256, HiddenSize: 64, NumHiddenLayers: 2, IntermediateSize: 128,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 32,
		LinearConvKernelDim: 4, LinearKeyHeadDim: 16, LinearValueHeadDim: 16,
		LinearNumKeyHeads: 2, LinearNumValueHeads: 2,
		LayerTypes: []string{qwen35.LinearAttention, qwen35.FullAttention},
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25,
		MaxPositionEmbeddings: 4096, AttnOutputGate: true, MTPNumHiddenLayers: 1,
		EOSTokenIDs: []int{1, 2},
	}
}

type planEntry struct {
	id, component string
	f             format.Format // "" for a resource
	shape         []int64
	size          int64 // resources only
}

// testEntries covers every format, a scalar, resources, mtp and a proposal
// head. Object 1 is the q8 [4,200] tensor used in the error-message tests.
var testEntries = []planEntry{
	{id: "frontend/tokenizer.json", component: ComponentFrontend, size: 301},
	{id: "text/layers/0/attention/q_proj", component: ComponentText, f: format.Q8G32, shape: []int64{4, 200}},
	{id: "frontend/chat_template.jinja", component: ComponentFrontend, size: 77},
	{id: "text/token_embedding", component: ComponentText, f: format.Q6G64, shape: []int64{256, 64}},
	{id: "text/layers/0/input_norm", component: ComponentText, f: format.BF16, shape: []int64{64}},
	{id: "text/layers/0/gdn/a_log", component: ComponentText, f: format.FP32, shape: []int64{2}},
	{id: "text/layers/0/gdn/in_proj_qkv", component: ComponentText, f: format.Q5G64, shape: []int64{2, 130}},
	{id: "text/layers/1/mlp/gate_proj", component: ComponentText, f: format.Q4G64, shape: []int64{128, 64}},
	{id: "text/layers/1/mlp/down_proj", component: ComponentText, f: format.NVFP4, shape: []int64{128, 64}},
	{id: "text/layers/1/mlp/down_proj/input_scale_divisor", component: ComponentText, f: format.FP32, shape: []int64{}},
	{id: "text/output_head", component: ComponentText, f: format.FP8Row, shape: []int64{6, 40}},
	{id: "text/draft_head", component: ComponentProposal, f: format.Q4G64, shape: []int64{16, 64}},
	{id: "text/draft_head_token_ids", component: ComponentProposal, f: format.Int32, shape: []int64{16}},
	{id: "mtp/fc", component: ComponentMTP, f: format.Q8G32, shape: []int64{64, 128}},
	{id: "mtp/norm", component: ComponentMTP, f: format.BF16, shape: []int64{64}},
}

func testMeta() Meta {
	return Meta{
		Name: "tiny-qwen3.5", Config: testConfig(), ProposalSource: "test-frequency",
		Metadata:   map[string]any{"recipe": "test", "converter": "ninfer-convert test"},
		Provenance: map[string]any{"source": "unit test"},
	}
}

// newPlan plans entries as a container-only fixture: the entries are a
// partial inventory whose shapes do not follow the config, so the model
// binding is skipped (open(path, false) reads such files back).
func newPlan(t testing.TB, meta Meta, entries []planEntry) *Plan {
	t.Helper()
	p := NewPlan(meta)
	p.unbound = true
	for _, e := range entries {
		var err error
		if e.f == "" {
			err = p.AddResource(e.id, e.component, e.size)
		} else {
			err = p.AddTensor(e.id, e.component, e.f, e.shape)
		}
		if err != nil {
			t.Fatalf("plan %s: %v", e.id, err)
		}
	}
	return p
}

// newRand returns test t's random stream, seeded from its name (numtest);
// a failure logs the command that replays it.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	return numtest.Seeded(t)
}

// randomPayloads returns random (never all-zero) bytes for every object.
func randomPayloads(r *rand.Rand, p *Plan) map[string][]byte {
	out := map[string][]byte{}
	for _, o := range p.Objects() {
		b := make([]byte, o.Bytes)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		b[0] |= 1
		out[o.ID] = b
	}
	return out
}

// writeArtifact writes plan with payloads sequentially and returns its path.
func writeArtifact(t testing.TB, dir string, p *Plan, payloads map[string][]byte) string {
	t.Helper()
	path := filepath.Join(dir, "model.ninfer")
	w, err := Create(path, p)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer w.Abort()
	for _, o := range p.Objects() {
		if err := w.WriteObject(o.ID, payloads[o.ID]); err != nil {
			t.Fatalf("WriteObject: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return path
}

// validFile returns the bytes of a valid small artifact.
func validFile(t testing.TB) []byte {
	t.Helper()
	p := newPlan(t, testMeta(), testEntries)
	path := writeArtifact(t, t.TempDir(), p, randomPayloads(rand.New(rand.NewPCG(1, 2)), p))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitFile returns the directory JSON and payload of a v3 file.
func splitFile(t testing.TB, b []byte) (js, payload []byte) {
	t.Helper()
	n := int64(binary.LittleEndian.Uint64(b[8:16]))
	start := format.AlignUp(HeaderSize+n, PayloadAlignment)
	return b[HeaderSize : HeaderSize+n], b[start:]
}

// assembleV3 builds a v3 file from a directory and a payload.
func assembleV3(js, payload []byte) []byte {
	start := format.AlignUp(HeaderSize+int64(len(js)), PayloadAlignment)
	out := make([]byte, start, start+int64(len(payload)))
	copy(out, "NINFER\x00\x03")
	binary.LittleEndian.PutUint64(out[8:], uint64(len(js)))
	for i := 16; i < 32; i++ {
		out[i] = byte(i * 7)
	}
	// A directory that records metadata.artifact_id gets that id, so the
	// header agrees with it.
	if _, rest, ok := bytes.Cut(js, []byte(`"`+MetaArtifactID+`":"`)); ok && len(rest) >= 32 {
		if id, err := hex.DecodeString(string(rest[:32])); err == nil {
			copy(out[16:32], id)
		}
	}
	copy(out[HeaderSize:], js)
	return append(out, payload...)
}

// assembleV2 builds a v2 file from a directory and a payload.
func assembleV2(js, payload []byte) []byte {
	start := format.AlignUp(V2PrefixSize+int64(len(js)), PayloadAlignment)
	out := make([]byte, start, start+int64(len(payload)))
	copy(out, "NINFER\x00\x02")
	binary.LittleEndian.PutUint64(out[8:], uint64(len(js)))
	copy(out[V2PrefixSize:], js)
	return append(out, payload...)
}

// decodeDir decodes a directory into generic values (numbers kept exact).
func decodeDir(t testing.TB, js []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func encodeDir(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func objectsOf(m map[string]any) []any { return m["objects"].([]any) }

func objectAt(m map[string]any, i int) map[string]any { return objectsOf(m)[i].(map[string]any) }

// openMapped is OpenMapped; bind=false reads container-only fixtures.
func openMapped(path string, bind bool) (*File, error) {
	f, err := open(path, bind)
	if err != nil {
		return nil, err
	}
	if err := f.Map(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reseal recomputes the directory digest of an edited directory, as a tool
// that rewrites the directory must; a directory without a digest slot (or
// one too broken to find it) is returned unchanged.
func reseal(js []byte) []byte {
	out := append([]byte(nil), js...)
	if sealDirectory(out) != nil {
		return js
	}
	return out
}
