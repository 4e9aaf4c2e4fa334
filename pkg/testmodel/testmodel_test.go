package testmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/safetensors"
)

func generate(t *testing.T, o Options) (string, *Manifest) {
	t.Helper()
	dir := t.TempDir()
	m, err := Generate(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestDefaultsMatchBrief(t *testing.T) {
	o := DefaultOptions()
	c := o.Config()
	if c.VocabSize != 512 || c.HiddenSize != 128 || c.IntermediateSize != 256 || c.NumAttentionHeads != 4 ||
		c.NumKeyValueHeads != 2 || c.HeadDim != 64 || c.RotaryDim() != 16 || c.LinearNumKeyHeads != 2 ||
		c.LinearNumValueHeads != 4 || c.LinearKeyHeadDim != 32 || c.LinearValueHeadDim != 32 ||
		c.LinearConvKernelDim != 4 || c.RopeTheta != 1e7 || c.RMSNormEps != 1e-6 || c.TieWordEmbeddings ||
		c.MTPNumHiddenLayers != 1 || o.Seed != 1 || o.DType != "bf16" {
		t.Errorf("defaults %+v", c)
	}
	if want := []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"}; !reflect.DeepEqual(c.LayerTypes, want) {
		t.Errorf("layer types %v", c.LayerTypes)
	}
	o.Layers = 8
	if full := o.Config().FullLayers(); !reflect.DeepEqual(full, []int{3, 7}) {
		t.Errorf("8 layers: full %v", full)
	}
	if got := mropeSection(64); !reflect.DeepEqual(got, []int{11, 11, 10}) {
		t.Errorf("mrope section for rotary 64 = %v", got)
	}
	if got := mropeSection(16); got[0]+got[1]+got[2] != 8 {
		t.Errorf("mrope section for rotary 16 = %v", got)
	}
}

// Generated config.json parses back to exactly the options' config.
func TestConfigRoundTrip(t *testing.T) {
	for _, mm := range []bool{false, true} {
		for _, tied := range []bool{false, true} {
			o := DefaultOptions()
			o.Multimodal, o.Tied, o.Layers = mm, tied, 8
			b, err := o.ConfigJSON(7)
			if err != nil {
				t.Fatal(err)
			}
			c, layout, err := qwen35.ParseHFConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			want := o.Config()
			want.EOSTokenIDs = []int{7}
			want.MRopeSection, want.MRopeInterleaved = mropeSection(16), true
			if !reflect.DeepEqual(c, want) {
				t.Errorf("multimodal=%v tied=%v: parsed\n%+v\nwant\n%+v", mm, tied, c, want)
			}
			if (layout == qwen35.LayoutMultimodal) != mm {
				t.Errorf("layout %v for multimodal=%v", layout, mm)
			}
		}
	}
}

func TestDeterminism(t *testing.T) {
	o := DefaultOptions()
	o.Shards = 2
	d1, _ := generate(t, o)
	d2, _ := generate(t, o)
	a, b := readDir(t, d1), readDir(t, d2)
	if len(a) != 8 {
		t.Errorf("%d files: %v", len(a), keys(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed gave different bytes")
	}
	o.Seed = 2
	d3, _ := generate(t, o)
	c := readDir(t, d3)
	if bytes.Equal(a["model-00001-of-00002.safetensors"], c["model-00001-of-00002.safetensors"]) {
		t.Error("different seeds gave identical weights")
	}
	if !bytes.Equal(a["tokenizer.json"], c["tokenizer.json"]) {
		t.Error("tokenizer depends on the seed")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Every inventory tensor reads back through hfdir with the generated values
// (rounded to the file dtype), and the distributions are as documented.
func TestRoundTripAndDistributions(t *testing.T) {
	for _, dt := range []string{"bf16", "f32"} {
		o := DefaultOptions()
		o.DType = dt
		dir, m := generate(t, o)
		d, err := hfdir.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ws := map[string][]float32{}
		for _, w := range o.weights() {
			ws[w.hfName] = w.values
		}
		if len(ws) != m.Tensors || m.Tensors != 71 {
			t.Errorf("%d tensors, manifest %d", len(ws), m.Tensors)
		}
		sdt, _, _ := o.dtype()
		for _, spec := range d.Config.Tensors() {
			tt, err := d.Tensor(spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.ReadAllF32()
			if err != nil {
				t.Fatal(err)
			}
			want := ws[spec.HFName]
			enc, _ := safetensors.EncodeF32(sdt, want, nil)
			rounded := make([]float32, len(want))
			safetensors.DecodeF32(sdt, enc, rounded)
			if !reflect.DeepEqual(got, rounded) {
				t.Fatalf("%s %s: values differ", dt, spec.Name)
			}
			checkDistribution(t, spec, got)
		}
	}
}

func meanStd(v []float32) (float64, float64) {
	var s, s2 float64
	for _, x := range v {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	n := float64(len(v))
	m := s / n
	return m, math.Sqrt(math.Max(s2/n-m*m, 0))
}

func checkDistribution(t *testing.T, spec qwen35.Tensor, v []float32) {
	t.Helper()
	mean, std := meanStd(v)
	in := float64(spec.Shape[len(spec.Shape)-1])
	near := func(wantMean, wantStd, tol float64) {
		t.Helper()
		if math.Abs(mean-wantMean) > tol*math.Max(wantStd, 0.05) || math.Abs(std-wantStd) > tol*wantStd {
			t.Errorf("%s: mean %.4f std %.4f, want ≈ %.4f ± %.4f", spec.Name, mean, std, wantMean, wantStd)
		}
	}
	n := len(v)
	tol := 0.2 + 4/math.Sqrt(float64(n)) // sampling slack for small vectors
	switch {
	case spec.Class == qwen35.ClassEmbedding:
		near(0, 0.1, tol)
	case strings.HasSuffix(spec.Name, "gdn/norm"):
		near(1, 0.05, tol)
	case spec.Class == qwen35.ClassNorm:
		near(0, 0.05, tol)
	case spec.Class == qwen35.ClassConv:
		near(0, 0.3, tol)
	case strings.HasSuffix(spec.Name, "a_log"):
		for _, x := range v {
			if !(x >= 0 && x <= float32(math.Log(16))+1e-3) {
				t.Errorf("%s: %g outside log U(1,16)", spec.Name, x)
			}
		}
	case strings.HasSuffix(spec.Name, "dt_bias"):
		if std > 0.5 || std == 0 {
			t.Errorf("%s: std %g not small", spec.Name, std)
		}
	case strings.HasSuffix(spec.Name, "o_proj") || strings.HasSuffix(spec.Name, "out_proj") || strings.HasSuffix(spec.Name, "down_proj"):
		near(0, 1/math.Sqrt(in)/math.Sqrt(8), tol)
	default:
		near(0, 1/math.Sqrt(in), tol)
	}
}

// The output head must give non-degenerate logits: embed a token, apply the
// final (1+w) RMSNorm and the head; logits spread (std > 0.1) and are not
// uniform across tokens.
func TestLogitsNonTrivial(t *testing.T) {
	for _, tied := range []bool{false, true} {
		o := DefaultOptions()
		o.Tied = tied
		ws := map[string][]float32{}
		for _, w := range o.weights() {
			ws[w.hfName] = w.values
		}
		H, V := o.Hidden, o.Vocab
		emb, fn := ws["model.embed_tokens.weight"], ws["model.norm.weight"]
		head := ws["lm_head.weight"]
		if tied {
			head = emb
		}
		for _, tok := range []int{0, 100, 300} {
			x := emb[tok*H : (tok+1)*H]
			var ss float64
			for _, v := range x {
				ss += float64(v) * float64(v)
			}
			r := 1 / math.Sqrt(ss/float64(H)+o.RMSNormEps)
			logits := make([]float32, V)
			for j := 0; j < V; j++ {
				var dot float64
				for i := 0; i < H; i++ {
					dot += float64(x[i]) * r * (1 + float64(fn[i])) * float64(head[j*H+i])
				}
				logits[j] = float32(dot)
			}
			if _, std := meanStd(logits); std < 0.1 || std > 10 {
				t.Errorf("tied=%v token %d: logits std %g", tied, tok, std)
			}
		}
	}
}

func TestShardsAndIndex(t *testing.T) {
	o := DefaultOptions()
	o.Shards, o.Multimodal = 3, true
	dir, m := generate(t, o)
	var idx struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.Metadata.TotalSize != m.WeightBytes || len(idx.WeightMap) != m.Tensors || m.Tensors != 74 {
		t.Errorf("total %d vs %d, weight map %d vs %d tensors", idx.Metadata.TotalSize, m.WeightBytes, len(idx.WeightMap), m.Tensors)
	}
	var sum int64
	for i := 1; i <= 3; i++ {
		f, err := safetensors.Open(filepath.Join(dir, "model-0000"+string(rune('0'+i))+"-of-00003.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Tensors()) == 0 {
			t.Errorf("shard %d is empty", i)
		}
		sum += f.DataSize()
		f.Close()
	}
	if sum != m.WeightBytes {
		t.Errorf("shards hold %d bytes, want %d", sum, m.WeightBytes)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		t.Error("sharded output also wrote model.safetensors")
	}
	d, err := hfdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.SkippedVisual != 3 || d.Layout != qwen35.LayoutMultimodal {
		t.Errorf("visual %d layout %v", d.SkippedVisual, d.Layout)
	}
	if !d.Has("model.language_model.layers.0.linear_attn.in_proj_qkv.weight") || d.Has("model.layers.0.linear_attn.in_proj_qkv.weight") {
		t.Error("multimodal names not used")
	}
}

func TestSplitShards(t *testing.T) {
	mk := func(sizes ...int) []safetensors.NamedTensor {
		var out []safetensors.NamedTensor
		for i, s := range sizes {
			out = append(out, safetensors.NamedTensor{Name: string(rune('a' + i)), Data: make([]byte, s)})
		}
		return out
	}
	cases := []struct {
		sizes []int
		n     int
		want  []int // tensors per shard
	}{
		{[]int{10, 10, 10, 10}, 2, []int{2, 2}},
		{[]int{100, 1, 1, 1}, 3, []int{1, 2, 1}},
		{[]int{1, 1, 1, 100}, 4, []int{1, 1, 1, 1}},
		{[]int{1, 1, 1, 100}, 2, []int{3, 1}},
	}
	for _, c := range cases {
		var got []int
		for _, s := range splitShards(mk(c.sizes...), c.n) {
			got = append(got, len(s))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("split %v into %d: %v, want %v", c.sizes, c.n, got, c.want)
		}
	}
}

func TestTokenizerTraining(t *testing.T) {
	tok, err := TrainTokenizer(Corpus, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.Merges) != 200 || tok.Size() > 512 || tok.Size() < 256+100 {
		t.Fatalf("%d merges, size %d", len(tok.Merges), tok.Size())
	}
	seen := map[string]bool{}
	for _, v := range tok.Vocab {
		if seen[v] {
			t.Fatalf("duplicate vocab entry %q", v)
		}
		seen[v] = true
	}
	for _, m := range tok.Merges {
		if !seen[m[0]] || !seen[m[1]] || !seen[m[0]+m[1]] {
			t.Fatalf("merge %q has parts or result outside the vocabulary", m)
		}
	}
	// The byte alphabet is a bijection onto 256 distinct runes.
	b2u, order := ByteToUnicode()
	runes := map[rune]bool{}
	for _, r := range b2u {
		runes[r] = true
	}
	if len(runes) != 256 || b2u[' '] != 'Ġ' || b2u['\n'] != 'Ċ' || order[0] != '!' {
		t.Errorf("byte alphabet: %d runes, space→%q newline→%q", len(runes), b2u[' '], b2u['\n'])
	}
	// Reference encoding covers the corpus with fewer ids than bytes.
	ids, err := tok.Encode(Corpus)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) >= len(Corpus)*2/3 {
		t.Errorf("corpus encodes to %d ids for %d bytes: merges barely compress", len(ids), len(Corpus))
	}
	pieces, _ := PreTokenize("Hello world's 12345  café\n\n  x")
	want := []string{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " ", " café", "\n\n", " ", " x"}
	if !reflect.DeepEqual(pieces, want) {
		t.Errorf("pre-tokenize: %q, want %q", pieces, want)
	}
}

// HF tokenizers (Python) loads the generated tokenizer.json and agrees with
// the reference encoder. Skips without python3 + tokenizers (CI).
func TestHFTokenizersLoads(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	if err := exec.Command(py, "-c", "import tokenizers").Run(); err != nil {
		t.Skip("python package tokenizers not installed")
	}
	dir, m := generate(t, DefaultOptions())
	texts := []string{
		"Hello world, it's 2026!",
		"The quick brown fox — Größe, café, 你好世界, こんにちは, Привет 🙂",
		"e\u0301cole  x\n\n  y\t\tz",
		"def f(x):\n    return x * 2\n",
	}
	in, _ := json.Marshal(texts)
	script := `
import json, sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
texts = json.loads(sys.argv[2])
out = {"size": t.get_vocab_size(), "plain": [], "decoded": [], "chat": None}
for s in texts:
    ids = t.encode(s, add_special_tokens=False).ids
    out["plain"].append(ids)
    out["decoded"].append(t.decode(ids, skip_special_tokens=False))
out["chat"] = t.encode("<|im_start|>user\nhi<|im_end|>\n<think>\n</think>", add_special_tokens=False).ids
print(json.dumps(out))
`
	cmd := exec.Command(py, "-c", script, filepath.Join(dir, "tokenizer.json"), string(in))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var got struct {
		Size    int      `json:"size"`
		Plain   [][]int  `json:"plain"`
		Decoded []string `json:"decoded"`
		Chat    []int    `json:"chat"`
	}
	if err := json.Unmarshal(outb, &got); err != nil {
		t.Fatalf("python output %q: %v", outb, err)
	}
	if got.Size != m.TokenizerSize {
		t.Errorf("HF vocab size %d, want %d", got.Size, m.TokenizerSize)
	}
	for i, s := range texts {
		want, err := m.Tokenizer.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Plain[i], want) {
			t.Errorf("text %q: HF ids %v, reference %v", s, got.Plain[i], want)
		}
		if nfc := strings.ReplaceAll(s, "e\u0301", "é"); got.Decoded[i] != nfc {
			t.Errorf("decode %q, want %q", got.Decoded[i], nfc)
		}
	}
	tk := m.Tokenizer
	nl, _ := tk.Encode("\n")
	user, _ := tk.Encode("user\nhi")
	want := append([]int{tk.ID(TokIMStart)}, user...)
	want = append(want, tk.ID(TokIMEnd))
	want = append(want, nl...)
	want = append(want, tk.ID(TokThink))
	want = append(want, nl...)
	want = append(want, tk.ID(TokThinkEnd))
	if !reflect.DeepEqual(got.Chat, want) {
		t.Errorf("chat ids %v, want %v", got.Chat, want)
	}
}

func TestWriteDir(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "model")
	o := DefaultOptions()
	o.Hidden, o.Intermediate = 32, 64
	o.HeadDim = 16
	if _, err := WriteDir(out, o, false); err != nil {
		t.Fatal(err)
	}
	first := readDir(t, out)
	if _, err := WriteDir(out, o, false); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("non-empty dir without force: %v", err)
	}
	o.Seed = 9
	if _, err := WriteDir(out, o, true); err != nil {
		t.Fatal(err)
	}
	second := readDir(t, out)
	if bytes.Equal(first["model.safetensors"], second["model.safetensors"]) {
		t.Error("--force did not replace the weights")
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 {
		t.Errorf("leftovers next to the output: %d entries", len(ents))
	}
	// An existing empty directory is filled.
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	if _, err := WriteDir(empty, o, false); err != nil {
		t.Fatal(err)
	}
	// Invalid options leave nothing behind.
	o.DType = "int8"
	if _, err := WriteDir(filepath.Join(root, "bad"), o, false); err == nil {
		t.Fatal("bad dtype accepted")
	}
	if ents, _ := os.ReadDir(root); len(ents) != 2 {
		t.Errorf("failed generation left %d entries", len(ents))
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.Vocab = 200 }, "below the tokenizer minimum"},
		{func(o *Options) { o.DType = "q4" }, "dtype"},
		{func(o *Options) { o.Heads = 3 }, "multiple"},
		{func(o *Options) { o.Shards = 0 }, "shards"},
		{func(o *Options) { o.Shards = 1000 }, "1000 shards"},
		{func(o *Options) { o.Layers = 0 }, "num_hidden_layers"},
	}
	for _, c := range cases {
		o := DefaultOptions()
		c.mut(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate = %v, want %q", err, c.want)
		}
	}
}

// TestWriteDirForceReplacesOnlyModelDirs: WriteDir checks OUT_DIR first
// (CheckOutDir): with force it replaces a model directory but refuses a
// directory of other files, a file and the working directory.
func TestWriteDirForceReplacesOnlyModelDirs(t *testing.T) {
	root := t.TempDir()
	other := filepath.Join(root, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "config.json"), []byte("{}"), 0o644) // a config alone is not a model
	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	o := DefaultOptions()
	o.Hidden, o.Intermediate, o.HeadDim = 32, 64, 16
	t.Chdir(root)
	for _, c := range []struct {
		out  string
		want error
	}{{other, ErrNotModelDir}, {file, ErrNotDir}, {".", ErrHoldsCwd}, {root, ErrHoldsCwd}, {"/", ErrHoldsCwd}} {
		if _, err := WriteDir(c.out, o, true); !errors.Is(err, c.want) {
			t.Errorf("WriteDir(%s, force): %v, want %v", c.out, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "config.json")); err != nil {
		t.Error(err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 2 {
		t.Errorf("%d entries in the root, want 2", len(ents))
	}
}
