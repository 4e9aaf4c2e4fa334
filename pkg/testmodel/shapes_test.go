package testmodel

import (
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// TestShapes checks every preset against the published Qwen3.5 sizes
// (shared/reference/qwen35.md §1.2): dimensions, head counts, the GDN /
// full-attention pattern, the tie, and the text parameter count where one is
// known exactly (9B: 8,953,803,264 = the checkpoint's total minus
// model.visual.*).
func TestShapes(t *testing.T) {
	cases := []struct {
		name                        string
		hidden, layers, full, inter int
		nh, nkv, nk, nv             int
		tied                        bool
		textParams                  int64 // 0: not checked exactly
		approxB                     float64
	}{
		{"qwen3.5-0.8b", 1024, 24, 6, 3584, 8, 2, 16, 16, true, 0, 0.75},
		{"qwen3.5-2b", 2048, 24, 6, 6144, 8, 2, 16, 16, true, 0, 1.88},
		{"qwen3.5-9b", 4096, 32, 8, 12288, 16, 4, 16, 32, false, 8953803264, 8.95},
		{"qwen3.5-27b", 5120, 64, 16, 17408, 24, 4, 16, 48, false, 0, 26.90},
	}
	if len(cases) != len(Shapes) {
		t.Fatalf("%d presets, %d cases", len(Shapes), len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LookupShape(strings.ToUpper(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			o := s.Apply(DefaultOptions())
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			c := o.Config()
			if c.HiddenSize != tc.hidden || c.NumHiddenLayers != tc.layers || c.IntermediateSize != tc.inter ||
				c.NumAttentionHeads != tc.nh || c.NumKeyValueHeads != tc.nkv || c.LinearNumKeyHeads != tc.nk ||
				c.LinearNumValueHeads != tc.nv || c.TieWordEmbeddings != tc.tied || c.VocabSize != 248320 ||
				c.HeadDim != 256 || c.LinearKeyHeadDim != 128 || c.LinearValueHeadDim != 128 ||
				c.RotaryDim() != 64 || c.LinearConvKernelDim != 4 || c.RopeTheta != 1e7 || c.MTPNumHiddenLayers != 1 {
				t.Errorf("config %+v", c)
			}
			full := 0
			for i, lt := range c.LayerTypes {
				if want := (i+1)%4 == 0; (lt == qwen35.FullAttention) != want {
					t.Errorf("layer %d is %s", i, lt)
				}
				if lt == qwen35.FullAttention {
					full++
				}
			}
			if full != tc.full {
				t.Errorf("%d full-attention layers, want %d", full, tc.full)
			}
			var n int64
			for _, x := range c.Tensors() {
				if x.Component != qwen35.ComponentText {
					continue
				}
				p := int64(1)
				for _, d := range x.HFShape {
					p *= d
				}
				n += p
			}
			if tc.textParams != 0 && n != tc.textParams {
				t.Errorf("text params %d, want %d", n, tc.textParams)
			}
			if b := float64(n) / 1e9; b < tc.approxB-0.01 || b > tc.approxB+0.01 {
				t.Errorf("text params %.3f B, want about %.2f B", b, tc.approxB)
			}
			// The seed, dtype and layout options are kept.
			base := DefaultOptions()
			base.Seed, base.DType, base.Shards, base.Multimodal = 9, "f16", 3, true
			if a := s.Apply(base); a.Seed != 9 || a.DType != "f16" || a.Shards != 3 || !a.Multimodal {
				t.Errorf("Apply dropped options: %+v", a)
			}
		})
	}
	if _, err := LookupShape("qwen3.5-1t"); err == nil || !strings.Contains(err.Error(), "qwen3.5-0.8b") {
		t.Errorf("unknown shape: %v", err)
	}
	if got := ShapeNames(); len(got) != 4 || got[0] != "qwen3.5-0.8b" || got[3] != "qwen3.5-27b" {
		t.Errorf("names %v", got)
	}
}
