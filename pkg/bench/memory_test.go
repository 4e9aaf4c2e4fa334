package bench

import (
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/plan"
)

// TestMemoryFromPlan: the memory object is the plan's, and engine arenas
// that differ from the plan are an error, without speculation and with
// --spec mtp (whose plan includes the MTP head's arenas).
func TestMemoryFromPlan(t *testing.T) {
	w, err := loader.OpenWeights(draftModel(t))
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
	var base plan.Memory
	for _, tc := range []struct {
		name string
		spec string
		k    int
		prop bool
	}{{"none", "", 0, false}, {"mtp k=2", SpecMTP, 2, false}, {"mtp k=3 proposal", SpecMTP, 3, true}} {
		p.Spec, p.DraftTokens, p.LMHeadDraft = tc.spec, tc.k, tc.prop
		pl, err := plan.New(cfg, objs, PlanOptions(p, f.backend, false, f.maxCtx, f.afterWeights, f.afterStartup))
		if err != nil {
			t.Fatal(err)
		}
		pm := pl.Memory
		real := arenas{weights: pm.Weights.CapacityBytes, workspace: pm.Workspace.CapacityBytes, sequence: pm.Sequence.CapacityBytes}
		m, err := memory(p, cfg, objs, f, real)
		if err != nil {
			t.Fatalf("%s: memory: %v", tc.name, err)
		}
		if m.Sequence.CapacityBytes != pm.Sequence.CapacityBytes || m.Sequence.UsedBytes != pm.Sequence.CapacityBytes ||
			m.Weights.CapacityBytes != pm.Weights.CapacityBytes || m.KVPayloadBytes != pm.KVPayloadBytes ||
			m.Workspace.CapacityBytes != pm.Workspace.CapacityBytes || m.Workspace.UsedBytes != 0 || m.KVCache != "int8-group64" ||
			m.AvailableAfterStartupBytes != 1<<30-12345 || m.KVCapacity != 128 || m.MaxContext != 100 {
			t.Errorf("%s: memory %+v, plan %+v", tc.name, m, pm)
		}
		if tc.spec == "" {
			base = pm
		} else {
			// The MTP step's phases share the target's workspace: the
			// capacity is the largest target or MTP phase.
			mtpWS, largest := int64(0), int64(0)
			for _, ph := range pl.Phases {
				largest = max(largest, ph.Capacity)
				if strings.HasPrefix(ph.Name, "mtp.") {
					mtpWS = max(mtpWS, ph.Capacity)
				}
			}
			if pm.Weights.CapacityBytes <= base.Weights.CapacityBytes || pm.Sequence.CapacityBytes <= base.Sequence.CapacityBytes ||
				pl.MTP.Weights.Capacity == 0 || pl.MTP.Sequence.Capacity == 0 || mtpWS == 0 ||
				pm.Workspace.CapacityBytes != largest || pm.Workspace.CapacityBytes < base.Workspace.CapacityBytes {
				t.Errorf("%s: the plan lacks the MTP arenas: weights/sequence/workspace %d/%d/%d (largest mtp phase %d), without spec %d/%d/%d",
					tc.name, pm.Weights.CapacityBytes, pm.Sequence.CapacityBytes, pm.Workspace.CapacityBytes, mtpWS,
					base.Weights.CapacityBytes, base.Sequence.CapacityBytes, base.Workspace.CapacityBytes)
			}
		}
		for i, bad := range []arenas{{real.weights + 256, real.workspace, real.sequence},
			{real.weights, real.workspace - 256, real.sequence}, {real.weights, real.workspace, real.sequence + 256}} {
			if _, err := memory(p, cfg, objs, f, bad); err == nil || !strings.Contains(err.Error(), "differ from the memory plan") ||
				!strings.Contains(err.Error(), "m.ninfer") {
				t.Errorf("%s: mismatch %d: %v", tc.name, i, err)
			}
		}
	}
}
