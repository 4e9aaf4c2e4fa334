package convert_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/inspect"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/safetensors"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// convertMapped converts src with opt into a fresh temporary directory and
// opens the result mapped; it is closed when the test ends.
func convertMapped(t *testing.T, src string, opt convert.Options) (*artifact.File, convert.Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "m.ninfer")
	res, err := convert.Convert(context.Background(), src, out, opt)
	if err != nil {
		t.Fatal(err)
	}
	f, err := artifact.OpenMapped(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, res
}

// groupBound is the largest decode error allowed for element i of a row,
// from the max |x| of its quantization group (or block, or row).
func groupBound(f format.Format, row []float32, i int) float64 {
	amax := func(g int) float64 {
		m := 0.0
		start := i / g * g
		for j := start; j < start+g && j < len(row); j++ {
			m = math.Max(m, math.Abs(float64(row[j])))
		}
		return m
	}
	x := math.Abs(float64(row[i]))
	switch f {
	case format.BF16:
		return x * math.Ldexp(1, -8)
	case format.FP32:
		return 0
	case format.Q8G32:
		return amax(32)*(0.5/127)*1.001 + 1e-12
	case format.Q6G64:
		return amax(64)*(0.5/31)*1.001 + 1e-12
	case format.Q5G64:
		return amax(64)*(0.5/15)*1.001 + 1e-12
	case format.Q4G64:
		return amax(64)*(0.5/7)*1.001 + 1e-12
	case format.NVFP4:
		// half of the widest E2M1 step (2 at magnitude 4..6) over the block
		// scale, which is rounded up by at most one E4M3 step (1/8).
		return amax(16)*(1.0/6)*(1+1.0/8) + 1e-9
	case format.FP8Row:
		return x/16 + amax(len(row))*math.Ldexp(1, -9)/448*8 + 1e-12
	}
	return 0
}

// TestConvertPresets converts the tiny model with every preset, inspects the
// result, and checks every tensor decodes to the checkpoint values within
// its format's bound.
func TestConvertPresets(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	dir, err := hfdir.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, name := range recipe.Names() {
		t.Run(name, func(t *testing.T) {
			f, res := convertMapped(t, src, convert.Options{Recipe: testfixture.Recipe(t, name), Workers: 2})
			if res.Objects != len(f.Objects) {
				t.Errorf("Result.Objects = %d, file has %d", res.Objects, len(f.Objects))
			}
			s, err := inspect.Summarize(f)
			if err != nil {
				t.Fatal(err)
			}
			if s.Recipe != name || s.Architecture != qwen35.Architecture || len(s.PrefillSignature) != 64 {
				t.Errorf("summary recipe %q arch %q signature %q", s.Recipe, s.Architecture, s.PrefillSignature)
			}
			if _, err := inspect.Verify(f); err != nil {
				t.Fatalf("verify: %v", err)
			}
			for _, r := range []string{"frontend/tokenizer.json", "frontend/config.json"} {
				_, ok := f.Object(r)
				if want := r == "frontend/tokenizer.json"; ok != want {
					t.Errorf("resource %s present = %t, want %t", r, ok, want)
				}
			}
			checked := 0
			for _, spec := range dir.Config.Tensors() {
				o, ok := f.Object(spec.Name)
				if !ok {
					t.Fatalf("object %s missing", spec.Name)
				}
				ht, err := dir.Tensor(spec)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ht.ReadAllF32()
				if err != nil {
					t.Fatal(err)
				}
				got, err := format.Decode(o.Format, o.Shape, f.Bytes(o))
				if err != nil {
					t.Fatalf("%s: %v", spec.Name, err)
				}
				cols := int(ht.Cols())
				for i := range want {
					row := want[i/cols*cols : i/cols*cols+cols]
					d := math.Abs(float64(got[i]) - float64(want[i]))
					if !(d <= groupBound(o.Format, row, i%cols)) {
						t.Fatalf("%s (%s) element %d: got %g, want %g (|Δ| %g > bound %g)", spec.Name, o.Format, i, got[i], want[i], d, groupBound(o.Format, row, i%cols))
					}
				}
				checked++
			}
			if checked != len(dir.Config.Tensors()) {
				t.Fatalf("checked %d tensors", checked)
			}
		})
	}
}

func TestConvertLayoutsAgree(t *testing.T) {
	// The multimodal, sharded layout must give the same tensors as the
	// text-only single-file one (same seed).
	a := testfixture.HFDir(t, nil)
	b := testfixture.HFDir(t, func(o *testmodel.Options) { o.Multimodal = true; o.Shards = 3 })
	r := testfixture.Recipe(t, "q8")
	var objs [2][]artifact.Object
	for i, src := range []string{a, b} {
		f, _ := convertMapped(t, src, convert.Options{Recipe: r})
		objs[i] = f.Objects
	}
	if len(objs[0]) != len(objs[1]) {
		t.Fatalf("object counts differ: %d vs %d", len(objs[0]), len(objs[1]))
	}
	for i := range objs[0] {
		x, y := objs[0][i], objs[1][i]
		if x.ID != y.ID || (x.IsTensor() && x.SHA256 != y.SHA256) {
			t.Errorf("object %d: %s %s vs %s %s", i, x.ID, x.SHA256, y.ID, y.SHA256)
		}
	}
}

// rewriteTensor edits one tensor of a single-file checkpoint.
func rewriteTensor(t *testing.T, dir, name string, edit func(*safetensors.NamedTensor)) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.NamedTensor
	for _, info := range f.Tensors() {
		nt := safetensors.NamedTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), f.Data(info.Name)...)}
		if info.Name == name {
			edit(&nt)
		}
		if nt.Name != "" {
			ts = append(ts, nt)
		}
	}
	f.Close()
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

func TestConvertRefusesBadInput(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(t *testing.T, dir string)
		wantErr string
	}{
		{"nan weight", func(t *testing.T, dir string) {
			rewriteTensor(t, dir, "model.layers.1.mlp.up_proj.weight", func(nt *safetensors.NamedTensor) {
				nt.Data[2*37], nt.Data[2*37+1] = 0xc0, 0x7f // bf16 NaN at element 37
			})
		}, "text/layers/1/mlp/up_proj"},
		{"inf weight", func(t *testing.T, dir string) {
			rewriteTensor(t, dir, "model.norm.weight", func(nt *safetensors.NamedTensor) {
				nt.Data[0], nt.Data[1] = 0x80, 0x7f // bf16 +Inf
			})
		}, "text/final_norm"},
		{"missing tensor", func(t *testing.T, dir string) {
			rewriteTensor(t, dir, "model.layers.0.linear_attn.A_log", func(nt *safetensors.NamedTensor) { nt.Name = "" })
		}, "A_log"},
		{"unexpected shape", func(t *testing.T, dir string) {
			rewriteTensor(t, dir, "model.layers.2.mlp.down_proj.weight", func(nt *safetensors.NamedTensor) {
				nt.Shape = []int64{nt.Shape[1], nt.Shape[0]}
			})
		}, "down_proj"},
		{"unsupported dtype", func(t *testing.T, dir string) {
			rewriteTensor(t, dir, "model.norm.weight", func(nt *safetensors.NamedTensor) { nt.DType = safetensors.I16 })
		}, "dtype"},
		{"unknown architecture", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "config.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), "Qwen3_5ForCausalLM", "LlamaForCausalLM", 1)), 0o644)
		}, "unsupported architecture"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := testfixture.HFDir(t, nil)
			c.mutate(t, src)
			outDir := t.TempDir()
			out := filepath.Join(outDir, "m.ninfer")
			_, err := convert.Convert(context.Background(), src, out, convert.Options{Recipe: testfixture.Recipe(t, "q8")})
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, c.wantErr)
			}
			if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
				t.Fatalf("failed conversion left files behind: %v", ents)
			}
		})
	}
}

func TestConvertCancelled(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	outDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := convert.Convert(ctx, src, filepath.Join(outDir, "m.ninfer"), convert.Options{Recipe: testfixture.Recipe(t, "q8")})
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("err = %v, want cancellation", err)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Fatalf("cancelled conversion left files behind: %v", ents)
	}
}

func TestDraftHead(t *testing.T) {
	src := testfixture.HFDir(t, nil)
	corpus := []int32{5, 5, 5, 9, 9, 3, 7, 7, 7, 7}
	ids, err := convert.TopTokens(corpus, 512, 4, []int32{500})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{500, 7, 5, 9}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("TopTokens = %v, want %v", ids, want)
		}
	}
	f, _ := convertMapped(t, src, convert.Options{Recipe: testfixture.Recipe(t, "bf16"),
		Draft: &convert.DraftHead{TokenIDs: ids, Source: "test"}})
	head, ok1 := f.Object(qwen35.NameDraftHead)
	idObj, ok2 := f.Object(qwen35.NameDraftIDs)
	full, ok3 := f.Object(qwen35.NameOutputHead)
	if !ok1 || !ok2 || !ok3 || f.Proposal == nil {
		t.Fatalf("draft head objects missing (%t %t %t, proposal %v)", ok1, ok2, ok3, f.Proposal)
	}
	gotIDs, _ := format.Decode(format.Int32, idObj.Shape, f.Bytes(idObj))
	rows, _ := format.Decode(head.Format, head.Shape, f.Bytes(head))
	_ = full
	dir, err := hfdir.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var headSpec qwen35.Tensor
	for _, sp := range dir.Config.Tensors() {
		if sp.Name == qwen35.NameOutputHead {
			headSpec = sp
		}
	}
	ht, err := dir.Tensor(headSpec)
	if err != nil {
		t.Fatal(err)
	}
	h := int(head.Shape[1])
	src32 := make([]float32, h)
	for i, id := range want {
		if int32(gotIDs[i]) != id {
			t.Fatalf("id map[%d] = %v, want %d", i, gotIDs[i], id)
		}
		if err := ht.ReadRowsF32(int64(id), int64(id)+1, src32); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < h; j++ {
			d := math.Abs(float64(rows[i*h+j]) - float64(src32[j]))
			if b := groupBound(head.Format, src32, j); !(d <= b) {
				t.Fatalf("draft row %d col %d = %g, checkpoint lm_head row %d = %g (|Δ| %g > %g, %s)", i, j, rows[i*h+j], id, src32[j], d, b, head.Format)
			}
		}
	}
	if _, err := convert.TopTokens([]int32{600}, 512, 4, nil); err == nil {
		t.Error("TopTokens accepted an id outside the vocabulary")
	}
}
