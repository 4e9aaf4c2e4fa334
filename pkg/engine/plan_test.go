package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/plan"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// convertedModels generates the tiny model and converts it with q8 and
// groupwise-int into t.TempDir(); it returns the artifact paths by recipe.
func convertedModels(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "hf")
	if _, err := testmodel.WriteDir(src, testmodel.DefaultOptions(), false); err != nil {
		t.Fatalf("test model: %v", err)
	}
	models := map[string]string{}
	for _, name := range []string{"q8", "groupwise-int"} {
		r, err := recipe.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".ninfer")
		if _, err := convert.Convert(context.Background(), src, out, convert.Options{Recipe: r, Workers: 2}); err != nil {
			t.Fatalf("convert with %s: %v", name, err)
		}
		models[name] = out
	}
	return models
}

func planObjects(w *loader.Weights) []plan.Object {
	f := w.File()
	objs := make([]plan.Object, len(f.Objects))
	for i := range f.Objects {
		o := &f.Objects[i]
		objs[i] = plan.Object{ID: o.ID, Component: o.Component, Bytes: o.Bytes, Host: !o.IsTensor()}
	}
	return objs
}

// TestArenasEqualPlan builds the engine for option sets over KV dtype,
// prefill chunk, max context and recipe and checks "plan = reality": the
// engine's weights, sequence and workspace arena capacities equal the
// fields pkg/plan computes for the same options, term by term for the
// sequence. It also runs a full step and checks that the workspace's
// largest phase is exactly reached (aligned peak = capacity).
func TestArenasEqualPlan(t *testing.T) {
	r := seeded(t)
	for rec, path := range convertedModels(t) {
		w, err := loader.OpenWeights(path)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		cfg := w.Config()
		objs := planObjects(w)
		for _, kv := range []string{"bf16", "int8", "fp8"} {
			for _, chunk := range []int{128, 1024} {
				for _, ctx := range []int{256, 4096} {
					name := rec + "/kv=" + kv
					e, s := newEngine(t, w, "avx2", Options{MaxContext: ctx, PrefillChunk: chunk, KVDtype: kv})
					p, err := plan.New(cfg, objs, plan.Options{MaxContext: int64(ctx), KVCapacity: int64(ctx), KVDtype: plan.KVDtype(kv),
						PrefillChunk: int64(chunk), Backend: plan.BackendCPU, AvailableAfterWeightsBytes: 1 << 30})
					if err != nil {
						t.Fatalf("%s: plan: %v", name, err)
					}
					a, m := e.Arenas(), p.Memory
					if a["weights"] != m.Weights.CapacityBytes || s.Bytes() != m.Sequence.CapacityBytes || a["workspace"] != m.Workspace.CapacityBytes {
						t.Errorf("%s chunk %d ctx %d: engine weights/sequence/workspace %d/%d/%d, plan %d/%d/%d", name, chunk, ctx,
							a["weights"], s.Bytes(), a["workspace"], m.Weights.CapacityBytes, m.Sequence.CapacityBytes, m.Workspace.CapacityBytes)
					}
					if e.weights.Cap() != p.Weights.Capacity || len(p.Weights.Terms) != len(cfg.Tensors())-mtpTensors(cfg) {
						t.Errorf("%s: weights %d (%d terms), plan %d", name, e.weights.Cap(), len(p.Weights.Terms), p.Weights.Capacity)
					}
					// The sequence views sit at the plan's term offsets.
					kvTerm, _ := p.Sequence.Term("kv.text")
					convTerm, _ := p.Sequence.Term("gdn.conv_state")
					idsTerm, _ := p.Sequence.Term("ctl.ids")
					if s.kv[0].K.Off != kvTerm.Offset || s.conv[1].View.Off != convTerm.Offset+int64(p.GDN.Slots)*p.GDN.ConvBytesPerLayer ||
						s.ids.Off != idsTerm.Offset || idsTerm.Bytes != 4*int64(min(chunk, ctx)) {
						t.Errorf("%s: views kv %d conv[1] %d ids %d, plan terms %+v %+v %+v", name, s.kv[0].K.Off, s.conv[1].View.Off, s.ids.Off, kvTerm, convTerm, idsTerm)
					}
					code, scale := backend.KVPlaneBytes(e.kvFmt, cfg.HeadDim)
					if want := int64(len(cfg.FullLayers())) * int64(layout.Pages(ctx)) * 64 * int64(cfg.NumKeyValueHeads) * 2 * (code + scale); m.KVPayloadBytes != want {
						t.Errorf("%s: kv_payload_bytes %d, want %d", name, m.KVPayloadBytes, want)
					}
					// One full step: every phase is allocated; the largest
					// one ends within its last 256 bytes of the capacity.
					T := min(chunk, ctx)
					if _, err := s.Prefill(randIDs(r, T, cfg.VocabSize), false); err != nil {
						t.Fatalf("%s: prefill: %v", name, err)
					}
					if got := layout.AlignUp(e.ws.Peak()); got != e.ws.Cap() {
						t.Errorf("%s chunk %d ctx %d: workspace peak %d (aligned %d), capacity %d", name, chunk, ctx, e.ws.Peak(), got, e.ws.Cap())
					}
					s.Close()
					e.Close()
				}
			}
		}
		// MTP k=2 as ninfer-bench runs it (3 state slots, 3 logits rows):
		// the target's arenas are the plan's without the MTP head's parts
		// (kv.mtp and the mtp/* weights are not engine-backed yet).
		e, s := newEngine(t, w, "avx2", Options{MaxContext: 300, PrefillChunk: 256, KVDtype: "fp8", StateSlots: 3, LogitsRows: 3})
		p, err := plan.New(cfg, objs, plan.Options{MaxContext: 300, KVCapacity: 300, KVDtype: plan.KVFP8, PrefillChunk: 256,
			Spec: plan.SpecMTP, DraftTokens: 2, Backend: plan.BackendCPU, AvailableAfterWeightsBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		mtpKV, _ := p.Sequence.Term("kv.mtp")
		if p.GDN.Slots != 3 || mtpKV.Bytes == 0 || s.Bytes() != p.Sequence.Capacity-layout.AlignUp(mtpKV.Bytes) ||
			e.Arenas()["workspace"] != p.Workspace {
			t.Errorf("%s mtp: engine sequence %d workspace %d; plan sequence %d − kv.mtp %d, workspace %d, slots %d", rec,
				s.Bytes(), e.Arenas()["workspace"], p.Sequence.Capacity, mtpKV.Bytes, p.Workspace, p.GDN.Slots)
		}
		s.Close()
		e.Close()
	}
}

// mtpTensors counts the MTP head's tensors (not in the engine's weights
// arena without speculation).
func mtpTensors(c qwen35.Config) int {
	n := 0
	for _, t := range c.Tensors() {
		if t.Component == qwen35.ComponentMTP {
			n++
		}
	}
	return n
}

// TestKVPlaneBytesAgree: pkg/layout's KV plane sizes are the backend's.
func TestKVPlaneBytesAgree(t *testing.T) {
	for _, f := range []backend.KVFormat{backend.KVBF16, backend.KVInt8G64, backend.KVFP8Row, backend.KVF32} {
		for _, hd := range []int{32, 64, 96, 128, 256, 320} {
			c, s := backend.KVPlaneBytes(f, hd)
			lc, ls, err := layout.KVPlaneBytes(f.String(), hd)
			if err != nil || c != lc || s != ls {
				t.Errorf("%s hd %d: backend %d+%d, layout %d+%d (%v)", f, hd, c, s, lc, ls, err)
			}
		}
	}
	if _, _, err := layout.KVPlaneBytes("nvfp4", 64); err == nil {
		t.Error("layout accepted KV dtype nvfp4")
	}
}
