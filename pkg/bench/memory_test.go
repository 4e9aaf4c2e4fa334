package bench

import (
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/plan"
)

// TestMemoryFromPlan: the memory object is the plan's; without speculation
// engine arenas that differ from the plan are an error; with MTP (not yet
// in pkg/layout) the arenas are the engine's and a note gives both.
func TestMemoryFromPlan(t *testing.T) {
	w, err := loader.OpenWeights(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cfg, af := w.Config(), w.File()
	objs := make([]plan.Object, len(af.Objects))
	for i := range af.Objects {
		o := &af.Objects[i]
		objs[i] = plan.Object{ID: o.ID, Component: o.Component, Bytes: o.Bytes, Host: !o.IsTensor()}
	}
	p := testParams("m.ninfer", "c.ids")
	p.PrefillChunk, p.KVDtype = 128, "int8"
	f := runFacts{backend: "cpu", maxCtx: 100, afterWeights: 1 << 30, afterStartup: 1<<30 - 12345}
	pl, err := plan.New(cfg, objs, PlanOptions(p, f.backend, false, f.maxCtx, f.afterWeights, f.afterStartup))
	if err != nil {
		t.Fatal(err)
	}
	pm := pl.Memory
	real := arenas{weights: pm.Weights.CapacityBytes, workspace: pm.Workspace.CapacityBytes, sequence: pm.Sequence.CapacityBytes}
	m, notes, err := memory(p, cfg, objs, f, real)
	if err != nil || len(notes) != 0 {
		t.Fatalf("memory: %v %q", err, notes)
	}
	if m.Sequence.CapacityBytes != pm.Sequence.CapacityBytes || m.Sequence.UsedBytes != pm.Sequence.CapacityBytes ||
		m.Workspace.CapacityBytes != pm.Workspace.CapacityBytes || m.Workspace.UsedBytes != 0 || m.KVCache != "int8-group64" ||
		m.AvailableAfterStartupBytes != 1<<30-12345 || m.KVCapacity != 128 || m.MaxContext != 100 {
		t.Errorf("memory %+v, plan %+v", m, pm)
	}
	bad := real
	bad.sequence += 256
	if _, _, err := memory(p, cfg, objs, f, bad); err == nil || !strings.Contains(err.Error(), "differ from the memory plan") ||
		!strings.Contains(err.Error(), "m.ninfer") {
		t.Errorf("mismatch without speculation: %v", err)
	}
	p.Spec, p.DraftTokens = SpecMTP, 2
	mtpReal := arenas{weights: real.weights + 4096, workspace: real.workspace + 512, sequence: real.sequence + 1024}
	m, notes, err = memory(p, cfg, objs, f, mtpReal)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "MTP head's arenas are not yet in the memory plan") {
		t.Fatalf("mtp: %v %q", err, notes)
	}
	if m.Weights.CapacityBytes != mtpReal.weights || m.Sequence.CapacityBytes != mtpReal.sequence || m.Workspace.CapacityBytes != mtpReal.workspace {
		t.Errorf("mtp arenas %+v %+v %+v, want the engine's %+v", m.Weights, m.Sequence, m.Workspace, mtpReal)
	}
}
