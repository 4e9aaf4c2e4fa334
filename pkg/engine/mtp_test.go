package engine_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/golden"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// mtpGoldenTol is the bar for MTP logits on the fp32 path against the HF
// float32 reference (scripts/golden/README.md suggests 2e-3).
const mtpGoldenTol = 2e-3

func convertDir(t *testing.T, src, rec string, draft []int32) string {
	t.Helper()
	r, err := recipe.Lookup(rec)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "model.ninfer")
	o := convert.Options{Recipe: r, Workers: 2}
	if draft != nil {
		o.Draft = &convert.DraftHead{TokenIDs: draft}
	}
	if _, err := convert.Convert(context.Background(), src, dst, o); err != nil {
		t.Fatalf("convert %s: %v", src, err)
	}
	return dst
}

func openMTP(t *testing.T, path string, o engine.Options, mo engine.MTPOptions) *engine.MTPSequence {
	t.Helper()
	w, err := loader.OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	be, err := backend.NewCPU(backend.CPUOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	e, err := engine.New(w, be, o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.LoadMTP(w, mo)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := m.NewMTPSequence()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close(); m.Close(); e.Close() })
	return ms
}

// TestMTPLogitsMatchGolden runs the MTP head over every golden case (fp32
// weights, fp32 KV) with a prefill chunk smaller than the prompt, so the MTP
// rows also cross a chunk boundary, and compares each MTP row with the HF
// reference: row t uses embed(ids[t+1]) and the target hidden at t.
func TestMTPLogitsMatchGolden(t *testing.T) {
	root, err := golden.Root()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := golden.Cases(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no golden cases")
	}
	for _, dir := range dirs {
		c, err := golden.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			path := convertDir(t, c.HFDir, "fp32", nil)
			ms := openMTP(t, path, engine.Options{KVDtype: "fp32", MaxContext: 256, PrefillChunk: 128, LogitsRows: 16}, engine.MTPOptions{})
			ms.Logits = true
			ids := make([]int32, len(c.Manifest.IDs))
			for i, id := range c.Manifest.IDs {
				ids[i] = int32(id)
			}
			if _, err := ms.Prefill(ids); err != nil {
				t.Fatal(err)
			}
			V := ms.VocabSize()
			if got, want := len(ms.RowLogits), (len(ids)-1)*V; got != want {
				t.Fatalf("MTP produced %d logits, want %d (T−1 rows)", got, want)
			}
			worst, mism, rows := 0.0, 0, 0
			for tpos := 0; tpos < len(ids)-1; tpos++ {
				ref, ok := c.MTPLogitsAt(tpos)
				if !ok {
					continue
				}
				rows++
				d, same := golden.Compare(ms.RowLogits[tpos*V:(tpos+1)*V], ref)
				if math.IsNaN(d) || math.IsInf(d, 0) {
					t.Fatalf("row %d: non-finite difference", tpos)
				}
				worst = math.Max(worst, d)
				if !same {
					mism++
				}
			}
			if rows == 0 {
				t.Fatal("no reference MTP rows compared")
			}
			t.Logf("%d MTP rows: max |Δ| %.3g, argmax mismatches %d", rows, worst, mism)
			if worst > mtpGoldenTol || mism > 0 {
				// The MTP reads the target's residual stream at workspace offset 0
				// (Sequence.residual); if the target's own logits are right but
				// these are not, check that the step layout still matches.
				t.Fatalf("MTP logits: max |Δ| %.3g (bar %g), %d argmax mismatches over %d rows", worst, mtpGoldenTol, mism, rows)
			}
		})
	}
}
