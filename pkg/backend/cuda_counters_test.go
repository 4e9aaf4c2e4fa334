package backend

import (
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

// TestCUDAOpCounts: the CUDA backend counts one launch per queued op
// (kernels, memsets, device copies) and each matmul's weight bytes; ops
// recorded by a capture count only when a graph launch runs them, once per
// launch, as the same ops run eagerly. The CPU backend counts nothing.
func TestCUDAOpCounts(t *testing.T) {
	cpu, err := NewCPU(CPUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, counts := OpCountsOf(cpu)
	cpu.Close()
	if counts {
		t.Error("the CPU backend implements OpCounter")
	}
	be, gc := newGraphCUDA(t)
	g := newGraphRig(t, be, numtest.Seed(t))
	want := OpCounts{Launches: 9, WeightBytes: 2 * g.w.Bytes} // the rig's 9 ops, two matmuls over g.w
	read := func() OpCounts {
		c, ok := OpCountsOf(be)
		if !ok {
			t.Fatal("the CUDA backend does not implement OpCounter")
		}
		return c
	}
	c0 := read()
	g.upload(t, make([]int32, g.T), make([]int32, g.T), 0)
	if d := read().Sub(c0); d != (OpCounts{}) {
		t.Errorf("uploads counted %+v", d)
	}
	g.queue()
	if d := read().Sub(c0); d != want {
		t.Errorf("eager ops counted %+v, want %+v", d, want)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	c1 := read()
	if err := gc.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	g.queue()
	var gr Graph
	gr, err = gc.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	if d := read().Sub(c1); d != (OpCounts{}) {
		t.Errorf("capture counted %+v", d)
	}
	for i := 1; i <= 2; i++ {
		if err := gr.Launch(); err != nil {
			t.Fatal(err)
		}
		if d := read().Sub(c1); d != (OpCounts{Launches: int64(i) * want.Launches, WeightBytes: int64(i) * want.WeightBytes}) {
			t.Errorf("%d graph launches counted %+v, want %d× %+v", i, d, i, want)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ops captured in %d graph nodes", want.Launches, gr.Nodes())
}
