package hfdir_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/safetensors"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

func gen(t testing.TB, mut func(*testmodel.Options)) string {
	t.Helper()
	o := testmodel.DefaultOptions()
	o.Hidden, o.Intermediate, o.Vocab = 64, 96, 300
	if mut != nil {
		mut(&o)
	}
	dir := t.TempDir()
	if _, err := testmodel.Generate(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

func open(t testing.TB, dir string) *hfdir.Dir {
	t.Helper()
	d, err := hfdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func readAll(t testing.TB, d *hfdir.Dir) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for _, spec := range d.Config.Tensors() {
		tt, err := d.Tensor(spec)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tt.ReadAllF32()
		if err != nil {
			t.Fatal(err)
		}
		out[spec.Name] = v
	}
	return out
}

func TestOpenLayouts(t *testing.T) {
	cases := []struct {
		name    string
		mut     func(*testmodel.Options)
		layout  qwen35.Layout
		visual  int
		shards  int
		tied    bool
		tensors int
	}{
		{"text_bf16", nil, qwen35.LayoutCausalLM, 0, 1, false, 71},
		{"multimodal_sharded", func(o *testmodel.Options) { o.Multimodal, o.Shards = true, 3 }, qwen35.LayoutMultimodal, 3, 3, false, 71},
		{"tied_f16_8layers", func(o *testmodel.Options) { o.Tied, o.DType, o.Layers = true, "f16", 8 }, qwen35.LayoutCausalLM, 0, 1, true, 123},
		{"no_mtp", func(o *testmodel.Options) { o.MTPLayers = 0 }, qwen35.LayoutCausalLM, 0, 1, false, 56},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := open(t, gen(t, c.mut))
			if d.Layout != c.layout || d.SkippedVisual != c.visual || len(d.Shards) != c.shards || d.Config.TieWordEmbeddings != c.tied {
				t.Errorf("layout %v visual %d shards %v tied %v", d.Layout, d.SkippedVisual, d.Shards, d.Config.TieWordEmbeddings)
			}
			if n := len(d.Config.Tensors()); n != c.tensors {
				t.Errorf("%d inventory tensors, want %d", n, c.tensors)
			}
			if len(d.Ignored) != 0 {
				t.Errorf("ignored %v", d.Ignored)
			}
			for _, spec := range d.Config.Tensors() {
				tt, err := d.Tensor(spec)
				if err != nil {
					t.Fatal(err)
				}
				if tt.NumElements() != safetensors.NumElements(spec.Shape) {
					t.Errorf("%s: %d elements, want %v", spec.Name, tt.NumElements(), spec.Shape)
				}
				if err := tt.CheckFinite(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// The same seed gives the same text weights whatever the layout or sharding,
// and BF16/F16 files hold the correctly rounded F32 values.
func TestValuesAcrossLayoutsAndDTypes(t *testing.T) {
	ref := readAll(t, open(t, gen(t, func(o *testmodel.Options) { o.DType = "f32" })))
	mm := readAll(t, open(t, gen(t, func(o *testmodel.Options) { o.DType, o.Multimodal, o.Shards = "f32", true, 4 })))
	if !reflect.DeepEqual(ref, mm) {
		t.Error("multimodal sharded f32 values differ from text-only f32")
	}
	for _, dt := range []string{"bf16", "f16"} {
		got := readAll(t, open(t, gen(t, func(o *testmodel.Options) { o.DType = dt })))
		for name, want := range ref {
			g := got[name]
			for i := range want {
				var exp float32
				if dt == "bf16" {
					exp = safetensors.BF16ToF32(safetensors.F32ToBF16(want[i]))
				} else {
					exp = safetensors.F16ToF32(safetensors.F32ToF16(want[i]))
				}
				if g[i] != exp {
					t.Fatalf("%s %s[%d] = %g, want %g (from f32 %g)", dt, name, i, g[i], exp, want[i])
				}
				// Independent tolerance check in float64: half an ulp.
				rel := math.Abs(float64(g[i])-float64(want[i])) / math.Max(math.Abs(float64(want[i])), 1e-4)
				if tol := map[string]float64{"bf16": 1.0 / 256, "f16": 1.0 / 2048}[dt]; rel > tol {
					t.Fatalf("%s %s[%d] = %g vs %g: relative error %g > %g", dt, name, i, g[i], want[i], rel, tol)
				}
			}
		}
	}
}

func TestReadRows(t *testing.T) {
	r := numtest.Seeded(t)
	d := open(t, gen(t, func(o *testmodel.Options) { o.DType = "f32" }))
	for _, spec := range d.Config.Tensors() {
		if spec.Name != qwen35.NameEmbedding && spec.Class != qwen35.ClassConv {
			continue
		}
		tt, err := d.Tensor(spec)
		if err != nil {
			t.Fatal(err)
		}
		all, _ := tt.ReadAllF32()
		r0 := r.Int64N(tt.Rows())
		r1 := r0 + r.Int64N(tt.Rows()-r0+1)
		part := make([]float32, (r1-r0)*tt.Cols())
		if err := tt.ReadRowsF32(r0, r1, part); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(part, all[r0*tt.Cols():r1*tt.Cols()]) {
			t.Errorf("%s rows [%d,%d) differ from the full read", spec.Name, r0, r1)
		}
		if spec.Class == qwen35.ClassConv && tt.Cols() != int64(d.Config.LinearConvKernelDim) {
			t.Errorf("conv cols %d, want K=%d", tt.Cols(), d.Config.LinearConvKernelDim)
		}
		if err := tt.ReadRowsF32(0, tt.Rows()+1, make([]float32, (tt.Rows()+1)*tt.Cols())); err == nil {
			t.Error("reading past the last row succeeded")
		}
		if err := tt.ReadRowsF32(0, 1, make([]float32, 1)); err == nil {
			t.Error("short dst accepted")
		}
	}
}

func TestEOSAndResources(t *testing.T) {
	dir := gen(t, nil)
	d := open(t, dir)
	tok, err := testmodel.TrainTokenizer(testmodel.Corpus, 300-256-len(testmodel.SpecialTokens))
	if err != nil {
		t.Fatal(err)
	}
	eot, end := tok.ID(testmodel.TokEndOfText), tok.ID(testmodel.TokIMEnd)
	if eot < 256 || end != eot+2 {
		t.Fatalf("special ids %d %d", eot, end)
	}
	if !reflect.DeepEqual(d.Config.EOSTokenIDs, []int{eot}) || !reflect.DeepEqual(d.GenerationEOS, []int{end, eot}) {
		t.Errorf("eos config %v generation %v", d.Config.EOSTokenIDs, d.GenerationEOS)
	}
	if !reflect.DeepEqual(d.EOSTokenIDs(), []int{eot}) {
		t.Errorf("EOSTokenIDs %v, want config's", d.EOSTokenIDs())
	}
	want := []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"}
	if !reflect.DeepEqual(d.Resources(), want) {
		t.Errorf("resources %v, want %v", d.Resources(), want)
	}
	b, err := d.Resource("chat_template.jinja")
	if err != nil || string(b) != testmodel.ChatTemplateText {
		t.Errorf("chat template %q %v", b, err)
	}
	if _, err := d.Resource("preprocessor_config.json"); err == nil {
		t.Error("missing resource read without error")
	}
	if _, err := d.Resource("../config.json"); err == nil {
		t.Error("unknown resource name accepted")
	}

	// Without eos in config.json the generation config's ids are used.
	cfgPath := filepath.Join(dir, "config.json")
	editJSON(t, cfgPath, func(m map[string]any) { delete(m, "eos_token_id") })
	d2 := open(t, dir)
	if d2.Config.EOSTokenIDs != nil || !reflect.DeepEqual(d2.EOSTokenIDs(), []int{end, eot}) {
		t.Errorf("fallback eos: config %v effective %v", d2.Config.EOSTokenIDs, d2.EOSTokenIDs())
	}
}

func editJSON(t *testing.T, path string, f func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rewrite replaces dir/file (a safetensors file) after f edits its tensors.
func rewrite(t *testing.T, path string, f func([]safetensors.NamedTensor) []safetensors.NamedTensor) {
	t.Helper()
	sf, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.NamedTensor
	for _, ti := range sf.Tensors() {
		ts = append(ts, safetensors.NamedTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape,
			Data: append([]byte(nil), sf.Data(ti.Name)...)})
	}
	sf.Close()
	if err := safetensors.Write(path, f(ts), nil); err != nil {
		t.Fatal(err)
	}
}

func edit(name string, f func(*safetensors.NamedTensor)) func([]safetensors.NamedTensor) []safetensors.NamedTensor {
	return func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
		for i := range ts {
			if ts[i].Name == name {
				f(&ts[i])
			}
		}
		return ts
	}
}

func TestOpenErrors(t *testing.T) {
	const qName = "model.layers.3.self_attn.q_proj.weight"
	cases := []struct {
		name string
		mut  func(*testmodel.Options)
		edit func(t *testing.T, dir string)
		want []string
	}{
		{"missing_config", nil, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "config.json")) },
			[]string{"no config.json"}},
		{"bad_arch", nil, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["architectures"] = []string{"LlamaForCausalLM"} })
		}, []string{"unsupported architecture", "LlamaForCausalLM"}},
		{"no_weights", nil, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) },
			[]string{"neither model.safetensors nor model.safetensors.index.json"}},
		{"missing_tensor", nil, func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "model.safetensors"), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
				var out []safetensors.NamedTensor
				for _, x := range ts {
					if x.Name != "mtp.fc.weight" {
						out = append(out, x)
					}
				}
				return out
			})
		}, []string{"mtp/fc", "mtp.fc.weight", "missing"}},
		{"wrong_shape", nil, func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "model.safetensors"), edit(qName, func(x *safetensors.NamedTensor) { x.Shape = []int64{x.Shape[1], x.Shape[0]} }))
		}, []string{qName, "shape [64 512]", "expected [512 64]"}},
		{"conv_squeezed", nil, func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "model.safetensors"), edit("model.layers.0.linear_attn.conv1d.weight", func(x *safetensors.NamedTensor) { x.Shape = []int64{x.Shape[0], x.Shape[2]} }))
		}, []string{"conv1d.weight", "expected [256 1 4]"}},
		{"bad_dtype", nil, func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "model.safetensors"), edit("model.norm.weight", func(x *safetensors.NamedTensor) { x.DType = safetensors.I16 }))
		}, []string{"model.norm.weight", "unsupported dtype I16"}},
		{"unknown_tensor", nil, func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "model.safetensors"), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
				for _, n := range []string{"model.layers.0.linear_attn.in_proj_qkvz.weight", "model.layers.0.mlp.experts.0.weight", "model.layers.0.z", "model.layers.1.z", "model.layers.2.z", "model.layers.3.z"} {
					ts = append(ts, safetensors.NamedTensor{Name: n, DType: safetensors.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
				}
				return ts
			})
		}, []string{"6 unknown checkpoint tensors", "in_proj_qkvz", "and 1 more"}},
		{"bad_index", func(o *testmodel.Options) { o.Shards = 2 }, func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map": [1]}`), 0o644)
		}, []string{"unparseable index"}},
		{"index_traversal", func(o *testmodel.Options) { o.Shards = 2 }, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "model.safetensors.index.json"), func(m map[string]any) {
				m["weight_map"].(map[string]any)["model.norm.weight"] = "../x.safetensors"
			})
		}, []string{"invalid shard file name"}},
		{"missing_shard", func(o *testmodel.Options) { o.Shards = 2 }, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		}, []string{`shard "model-00002-of-00002.safetensors"`, "missing"}},
		{"index_wrong_shard", func(o *testmodel.Options) { o.Shards = 2 }, func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "model.safetensors.index.json"), func(m map[string]any) {
				m["weight_map"].(map[string]any)["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors"
			})
		}, []string{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"}},
		{"corrupt_shard", nil, func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("garbage!garbage!"), 0o644)
		}, []string{"model.safetensors", "header length"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := gen(t, func(o *testmodel.Options) {
				o.Hidden, o.Intermediate, o.Vocab = 64, 96, 300
				if c.mut != nil {
					c.mut(o)
				}
			})
			c.edit(t, dir)
			d, err := hfdir.Open(dir)
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestIgnoredTensors(t *testing.T) {
	// A tied model that still ships lm_head.weight, and mtp.* with no MTP
	// layers configured: both are ignored and listed, not errors.
	dir := gen(t, func(o *testmodel.Options) { o.Tied = true })
	rewrite(t, filepath.Join(dir, "model.safetensors"), func(ts []safetensors.NamedTensor) []safetensors.NamedTensor {
		return append(ts, safetensors.NamedTensor{Name: "lm_head.weight", DType: safetensors.BF16, Shape: []int64{1}, Data: []byte{0, 0}})
	})
	editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["mtp_num_hidden_layers"] = 0 })
	d := open(t, dir)
	if len(d.Ignored) != 16 || d.Ignored[0] != "lm_head.weight" || !strings.HasPrefix(d.Ignored[1], "mtp.") {
		t.Errorf("ignored %d: %v", len(d.Ignored), d.Ignored)
	}
}

func TestCheckFiniteNamesElement(t *testing.T) {
	for _, dt := range []string{"bf16", "f16", "f32"} {
		dir := gen(t, func(o *testmodel.Options) { o.DType = dt })
		const name = "model.layers.1.mlp.up_proj.weight"
		at := int64(5*64 + 7) // row 5, col 7 of [96, 64]
		rewrite(t, filepath.Join(dir, "model.safetensors"), edit(name, func(x *safetensors.NamedTensor) {
			w := int64(len(x.Data)) / safetensors.NumElements(x.Shape)
			enc, _ := safetensors.EncodeF32(x.DType, []float32{float32(math.NaN())}, nil)
			copy(x.Data[at*w:], enc)
		}))
		d := open(t, dir)
		for _, spec := range d.Config.Tensors() {
			tt, err := d.Tensor(spec)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.CheckFinite()
			if tt.HFName != name {
				if err != nil {
					t.Errorf("%s: %v", spec.Name, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "element 327 (row 5, col 7) is NaN") {
				t.Errorf("%s: CheckFinite = %v", dt, err)
			}
			v, _ := tt.ReadAllF32()
			if err := hfdir.CheckFiniteF32(spec.Name, 0, v); err == nil || !strings.Contains(err.Error(), "element 327") {
				t.Errorf("CheckFiniteF32 = %v", err)
			}
		}
	}
}

func BenchmarkReadRowsBF16(b *testing.B) {
	dir := gen(b, func(o *testmodel.Options) { o.Vocab, o.Hidden = 8192, 256 })
	d := open(b, dir)
	tt, err := d.Tensor(d.Config.Tensors()[0])
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, tt.NumElements())
	b.SetBytes(int64(len(tt.Raw())))
	for b.Loop() {
		if err := tt.ReadRowsF32(0, tt.Rows(), dst); err != nil {
			b.Fatal(err)
		}
	}
}

// Fields config.json leaves out take the transformers Qwen3_5TextConfig
// defaults and are listed in Dir.Defaults; head_dim defaults to 256, not
// hidden_size / num_attention_heads, so a checkpoint built with another
// head_dim no longer matches.
func TestOpenReportsConfigDefaults(t *testing.T) {
	dir := gen(t, nil)
	if d := open(t, dir); len(d.Defaults) != 0 {
		t.Fatalf("complete config defaulted %v", d.Defaults)
	}
	editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { delete(m, "rope_parameters") })
	d := open(t, dir)
	want := []qwen35.Default{{Field: "rope_theta", Value: 10000.0}, {Field: "partial_rotary_factor", Value: 0.25}}
	if !reflect.DeepEqual(d.Defaults, want) || d.Config.RopeTheta != 10000 {
		t.Errorf("defaults %v, θ %g; want %v, 10000", d.Defaults, d.Config.RopeTheta, want)
	}
	editJSON(t, filepath.Join(dir, "config.json"), func(m map[string]any) { delete(m, "head_dim") })
	_, err := hfdir.Open(dir)
	if err == nil || !strings.Contains(err.Error(), "model.layers.3.self_attn.q_proj.weight has shape [512 64], expected [2048 64]") {
		t.Errorf("config without head_dim (class default 256) on a head_dim 64 checkpoint: %v", err)
	}
}
