package backend

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/format"
)

// Graph tests of the CUDA backend: on a GPU with -tags cuda, and under the
// host SIMT harness with -tags cudasim; they skip in a binary without CUDA.

func newGraphCUDA(t *testing.T) (Backend, GraphCapturer) {
	t.Helper()
	if !CUDABuilt {
		t.Skip("this test binary has no CUDA backend (go test -tags cudasim, or -tags cuda on a GPU machine)")
	}
	b, err := NewCUDA(CUDAOptions{})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	gc, ok := any(b).(GraphCapturer)
	if !ok {
		t.Fatal("the CUDA backend does not implement GraphCapturer")
	}
	if !CapturesGraphs(b) {
		t.Fatal("CapturesGraphs(cuda) = false")
	}
	return b, gc
}

// graphRig is a small step of ops whose every varying input (token ids,
// positions, the state input slot) lives in device memory: embed → rmsnorm
// → rope → conv1d (state slots) → matmul (+ accumulate) → argmax, a device
// copy and a memset.
type graphRig struct {
	be              Backend
	ids, pos, slot  View
	x, xn, c, y, cp Tensor
	am              View
	emb, w          *Weight
	normW, convW    View
	st              StateSlots
	T, D, V, N, kw  int
	stateFloats     int
	outSlot         int
	normEps         float32
	ropeDim         int
	ropeTheta       float64
	headsH, headsD  int
}

func newGraphRig(t *testing.T, be Backend, seed uint64) *graphRig {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	g := &graphRig{be: be, T: 3, D: 64, V: 50, N: 48, kw: 4, outSlot: 1, normEps: 1e-6, ropeDim: 16, ropeTheta: 1e4,
		headsH: 2, headsD: 32}
	g.stateFloats = (g.kw - 1) * g.D
	g.emb = prep(t, be, randPacked(r, format.BF16, g.V, g.D))
	g.w = prep(t, be, randPacked(r, format.Q8G32, g.N, g.D))
	g.normW = put(t, be, randn(r, g.D, 0.5))
	g.convW = put(t, be, randn(r, g.D*g.kw, 0.5))
	g.ids = putI32(t, be, make([]int32, g.T))
	g.pos = putI32(t, be, make([]int32, g.T))
	g.slot = putI32(t, be, []int32{0})
	g.st = StateSlots{View: put(t, be, randn(r, 2*g.stateFloats, 1)), Slots: 2, SlotBytes: 4 * int64(g.stateFloats)}
	dense := func(cols int) Tensor { return Dense(put(t, be, randn(r, g.T*cols, 1)), g.T, cols) }
	g.x, g.xn, g.c, g.y, g.cp = dense(g.D), dense(g.D), dense(g.D), dense(g.N), dense(g.N)
	g.am = putI32(t, be, make([]int32, g.T))
	return g
}

// queue issues the rig's ops (no sync); it returns how many it queued.
func (g *graphRig) queue() int {
	be := g.be
	be.Embed(g.x, g.emb, g.ids)
	be.RMSNorm(g.xn, g.x, g.normW, g.normEps, true)
	be.RoPE(Heads(g.xn.View, g.T, g.headsH, g.headsD), g.pos, g.ropeDim, g.ropeTheta)
	be.Conv1DSiLU(g.c, g.xn, g.convW, g.kw, g.st, g.slot, g.outSlot)
	be.MatMul(g.y, g.c, g.w, false)
	be.MatMul(g.y, g.xn, g.w, true)
	be.Argmax(g.am, g.y)
	be.Copy(g.cp.View, g.y.View, 4*int64(g.T*g.N))
	be.Zero(g.x.View, 4*int64(g.T*g.D))
	return 9
}

func (g *graphRig) upload(t *testing.T, ids, pos []int32, slot int32) {
	t.Helper()
	for _, u := range []struct {
		v View
		x []int32
	}{{g.ids, ids}, {g.pos, pos}, {g.slot, []int32{slot}}} {
		if err := g.be.UploadI32(u.v, u.x); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot downloads every output and the state slots as raw bits.
func (g *graphRig) snapshot(t *testing.T) map[string][]uint32 {
	t.Helper()
	if err := g.be.Sync(); err != nil {
		t.Fatal(err)
	}
	out := map[string][]uint32{}
	f32 := func(name string, v View, n int) {
		x := make([]float32, n)
		if err := g.be.DownloadF32(x, v); err != nil {
			t.Fatal(err)
		}
		b := make([]uint32, n)
		for i, f := range x {
			if math.IsNaN(float64(f)) {
				t.Fatalf("%s[%d] is NaN", name, i)
			}
			b[i] = math.Float32bits(f)
		}
		out[name] = b
	}
	f32("x", g.x.View, g.T*g.D)
	f32("xn", g.xn.View, g.T*g.D)
	f32("conv", g.c.View, g.T*g.D)
	f32("y", g.y.View, g.T*g.N)
	f32("copy", g.cp.View, g.T*g.N)
	f32("state", g.st.View, 2*g.stateFloats)
	am := make([]int32, g.T)
	if err := g.be.DownloadI32(am, g.am); err != nil {
		t.Fatal(err)
	}
	for _, v := range am {
		out["argmax"] = append(out["argmax"], uint32(v))
	}
	return out
}

func diffSnap(a, b map[string][]uint32) string {
	for k, av := range a {
		bv := b[k]
		if len(av) != len(bv) {
			return fmt.Sprintf("%s: %d vs %d values", k, len(av), len(bv))
		}
		for i := range av {
			if av[i] != bv[i] {
				return fmt.Sprintf("%s[%d]: %#08x vs %#08x", k, i, av[i], bv[i])
			}
		}
	}
	return ""
}

// TestCUDAGraphReplayMatchesEager: a captured graph replayed with new
// control values (ids, positions, state input slot) uploaded before each
// launch gives bit-for-bit the results of the same ops run eagerly on an
// identical set of buffers, round after round (the conv state carries over);
// capturing runs nothing.
func TestCUDAGraphReplayMatchesEager(t *testing.T) {
	be, gc := newGraphCUDA(t)
	seed := numtest.Seed(t)
	eager, graphed := newGraphRig(t, be, seed), newGraphRig(t, be, seed)
	if d := diffSnap(eager.snapshot(t), graphed.snapshot(t)); d != "" {
		t.Fatalf("rigs differ before any op: %s", d)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	control := func() ([]int32, []int32, int32) {
		ids, pos := make([]int32, eager.T), make([]int32, eager.T)
		p0 := r.Int32N(1000)
		for i := range ids {
			ids[i], pos[i] = r.Int32N(int32(eager.V)), p0+int32(i)
		}
		return ids, pos, r.Int32N(2)
	}
	// Round 0 (the prime) runs eagerly on both.
	ids, pos, slot := control()
	for _, g := range []*graphRig{eager, graphed} {
		g.upload(t, ids, pos, slot)
		g.queue()
	}
	before := graphed.snapshot(t)
	if d := diffSnap(eager.snapshot(t), before); d != "" {
		t.Fatalf("eager round 0 differs between identical rigs: %s", d)
	}
	if err := gc.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	queued := graphed.queue()
	g, err := gc.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Nodes() < queued {
		t.Errorf("graph holds %d nodes, want ≥ %d (one per queued op at least)", g.Nodes(), queued)
	}
	if d := diffSnap(before, graphed.snapshot(t)); d != "" {
		t.Fatalf("capturing ran ops: %s", d)
	}
	prev := before
	changed := 0
	for round := 1; round <= 6; round++ {
		ids, pos, slot := control()
		eager.upload(t, ids, pos, slot)
		eager.queue()
		graphed.upload(t, ids, pos, slot)
		if err := g.Launch(); err != nil {
			t.Fatalf("round %d: launch: %v", round, err)
		}
		want, got := eager.snapshot(t), graphed.snapshot(t)
		if d := diffSnap(want, got); d != "" {
			t.Fatalf("round %d (ids %v pos %v slot %d): graph replay differs from eager: %s", round, ids, pos, slot, d)
		}
		if diffSnap(prev, got) != "" {
			changed++
		}
		prev = got
	}
	if changed < 6 {
		t.Errorf("only %d of 6 replays changed the outputs: the control values do not reach the graph", changed)
	}
}

// TestCUDAGraphCaptureRejects: what cannot be part of a graph (control
// uploads, downloads, a sync, an allocation) fails the call and the
// capture with a reason; the ops queued in the failed capture never run and
// the backend keeps working (no error leaks into the next Sync).
func TestCUDAGraphCaptureRejects(t *testing.T) {
	be, gc := newGraphCUDA(t)
	ones := []float32{1, 2, 3, 4}
	buf := put(t, be, ones)
	for _, c := range []struct {
		name, reason string
		call         func() error
	}{
		{"upload_i32", "host-to-device copy", func() error { return be.UploadI32(buf, []int32{5}) }},
		{"upload_staged", "host-to-device copy", func() error { return be.Upload(buf, []byte{1, 2, 3, 4}) }},
		{"download", "device-to-host copy", func() error { return be.DownloadF32(make([]float32, 1), buf) }},
		{"sync", "ni_cuda_sync", be.Sync},
		{"alloc", "device allocation", func() error { _, err := be.Alloc("during capture", 256); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := gc.BeginCapture(); err != nil {
				t.Fatal(err)
			}
			be.Zero(buf, 16) // recorded, and dropped with the failed capture
			callErr := c.call()
			g, err := gc.EndCapture()
			if g != nil {
				g.Close()
			}
			if callErr == nil {
				t.Errorf("%s during capture succeeded", c.name)
			}
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("EndCapture = %v, want a capture failure naming %q", err, c.reason)
			}
			if err := be.Sync(); err != nil {
				t.Fatalf("Sync after the failed capture: %v", err)
			}
			got := get(t, be, buf, 4)
			for i := range ones {
				if got[i] != ones[i] {
					t.Fatalf("buffer[%d] = %g after the failed capture, want %g (its ops ran)", i, got[i], ones[i])
				}
			}
		})
	}
	if _, err := gc.EndCapture(); err == nil {
		t.Error("EndCapture without BeginCapture succeeded")
	}
	if err := gc.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := gc.BeginCapture(); err == nil {
		t.Error("a second BeginCapture during a capture succeeded")
	}
	g, err := gc.EndCapture()
	if err != nil {
		t.Fatalf("an empty capture: %v", err)
	}
	if g.Nodes() != 0 {
		t.Errorf("empty graph has %d nodes", g.Nodes())
	}
	if err := g.Launch(); err != nil {
		t.Errorf("launching an empty graph: %v", err)
	}
	g.Close()
}

// TestCUDAGraphScratchInvalidation: a kernel that would grow the op scratch
// during a capture fails it; once the scratch grows (or any device memory is
// freed) after a capture, the graph is stale (Launch runs nothing and says
// so) until it is captured again. A graph outliving its backend is closed
// safely.
func TestCUDAGraphScratchInvalidation(t *testing.T) {
	be, gc := newGraphCUDA(t) // a fresh context: no op scratch yet
	r := seeded(t)
	const T, C, kw = 130, 64, 4 // T > 64: the chunked conv route snapshots its halo in scratch
	x := Dense(put(t, be, randn(r, T*C, 1)), T, C)
	y := Dense(put(t, be, make([]float32, T*C)), T, C)
	w := put(t, be, randn(r, C*kw, 0.5))
	st := StateSlots{View: put(t, be, make([]float32, (kw-1)*C)), Slots: 1, SlotBytes: 4 * int64((kw-1)*C)}
	slot := putI32(t, be, []int32{0})
	conv := func() { be.Conv1DSiLU(y, x, w, kw, st, slot, 0) }

	if err := gc.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	conv()
	if g, err := gc.EndCapture(); err == nil || !strings.Contains(err.Error(), "op scratch would grow") {
		if g != nil {
			g.Close()
		}
		t.Fatalf("capturing a first use that grows the scratch: EndCapture = %v, want a scratch-growth failure", err)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}

	small := put(t, be, []float32{1, 2})
	capture := func() Graph {
		t.Helper()
		if err := gc.BeginCapture(); err != nil {
			t.Fatal(err)
		}
		be.Zero(small, 8)
		g, err := gc.EndCapture()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := capture()
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	conv() // eager: grows the scratch
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := be.UploadF32(small, []float32{3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(); !errors.Is(err, ErrGraphStale) {
		t.Fatalf("launch after scratch growth = %v, want ErrGraphStale", err)
	}
	if got := get(t, be, small, 2); got[0] != 3 || got[1] != 4 {
		t.Fatalf("a stale launch ran: %v", got)
	}
	g.Close()
	g = capture()
	// With the scratch grown, the same first-use shape now captures.
	if err := gc.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	conv()
	gc2, err := gc.EndCapture()
	if err != nil {
		t.Fatalf("capture after the scratch grew: %v", err)
	}
	if err := gc2.Launch(); err != nil {
		t.Fatal(err)
	}
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, be, small, 2); got[0] != 0 || got[1] != 0 {
		t.Fatalf("the recaptured graph did not run: %v", got)
	}
	// Freeing any device memory makes every graph stale.
	spare, err := be.Alloc("spare", 256)
	if err != nil {
		t.Fatal(err)
	}
	be.Free(spare)
	for _, gg := range []Graph{g, gc2} {
		if err := gg.Launch(); !errors.Is(err, ErrGraphStale) {
			t.Errorf("launch after a free = %v, want ErrGraphStale", err)
		}
	}
	gc2.Close()
	// A graph that outlives its backend: Launch fails, Close is safe.
	be.Close()
	if err := g.Launch(); err == nil {
		t.Error("launch after the backend closed succeeded")
	}
	g.Close()
	g.Close()
}
