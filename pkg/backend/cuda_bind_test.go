//go:build cuda || cudasim

package backend

import (
	"math"
	"strings"
	"testing"
)

// TestCUDABoundOpScratch: with the op scratch bound to a region
// (BindOpScratch, as the engine binds its workspace term), an op that fits
// gives bit-identical results to the context's own scratch and nothing
// grows; a region too small fails the op with an error naming both sizes;
// misplaced regions are refused; freeing the buffer that holds the region
// unbinds it.
func TestCUDABoundOpScratch(t *testing.T) {
	b, err := NewCUDA(CUDAOptions{})
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	defer b.Close()
	r := seeded(t)
	// Split-KV decode: 1 row, 4 heads over 2 kv heads, hd 64, 4 pages
	// (256 positions, 200 filled).
	const nh, kvh, hd, pages, n = 4, 2, 64, 4, 200
	code, _ := KVPlaneBytes(KVBF16, hd)
	nvec := int64(pages * kvh * KVPage)
	alloc := func(name string, bytes int64) *Buffer {
		buf, err := b.Alloc(name, bytes)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	kv := KVLayer{Format: KVBF16, KVHeads: kvh, HeadDim: hd, Pages: pages, K: View{alloc("k", nvec*code), 0},
		V: View{alloc("v", nvec*code), 0}, BlockTable: putI32(t, b, []int32{0, 1, 2, 3}), TableLen: pages}
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	b.KVAppend(kv, Heads(put(t, b, randn(r, n*kvh*hd, 1)), n, kvh, hd), Heads(put(t, b, randn(r, n*kvh*hd, 1)), n, kvh, hd), putI32(t, b, pos))
	q := Heads(put(t, b, randn(r, nh*hd, 1)), 1, nh, hd)
	last := putI32(t, b, []int32{n - 1})
	scale := float32(1 / math.Sqrt(hd))
	attend := func() ([]float32, error) {
		o := put(t, b, make([]float32, nh*hd))
		defer b.Free(o.Buf)
		b.Attention(Heads(o, 1, nh, hd), q, kv, last, scale)
		if err := b.Sync(); err != nil {
			return nil, err
		}
		return get(t, b, o, nh*hd), nil
	}
	own, err := attend()
	if err != nil {
		t.Fatal(err)
	}
	need := b.ScratchBytes()
	if need == 0 {
		t.Fatal("the decode attention used no op scratch: this test needs the split-KV route")
	}

	ws := alloc("workspace", 1<<20)
	const off, region = 1 << 19, 1 << 19
	if err := b.BindOpScratch(View{ws, off}, region); err != nil {
		t.Fatal(err)
	}
	got, err := attend()
	if err != nil {
		t.Fatal(err)
	}
	for i := range own {
		if math.Float32bits(got[i]) != math.Float32bits(own[i]) || math.IsNaN(float64(got[i])) {
			t.Fatalf("element %d: %v with the bound scratch, %v with the context's own", i, got[i], own[i])
		}
	}
	if b.ScratchBytes() != region {
		t.Errorf("bound scratch reports %d bytes after the op, want the region's %d (nothing grown)", b.ScratchBytes(), region)
	}

	if err := b.BindOpScratch(View{ws, off}, 256); err != nil {
		t.Fatal(err)
	}
	if _, err := attend(); err == nil || !strings.Contains(err.Error(), "op scratch") || !strings.Contains(err.Error(), "holds 256") {
		t.Errorf("a 256-byte bound region: error %v, want one naming the op scratch and both sizes", err)
	}

	for _, bad := range []struct{ off, bytes int64 }{{off, 1 << 20}, {100, 256}, {0, 0}, {-256, 256}} {
		if err := b.BindOpScratch(View{ws, bad.off}, bad.bytes); err == nil {
			t.Errorf("BindOpScratch(offset %d, %d bytes) of a 1 MiB buffer accepted", bad.off, bad.bytes)
		}
	}
	other, err := NewCUDA(CUDAOptions{})
	if err == nil {
		if err := other.BindOpScratch(View{ws, 0}, 256); err == nil {
			t.Error("a buffer of another backend accepted as op scratch")
		}
		other.Close()
	}

	if err := b.BindOpScratch(View{ws, off}, region); err != nil {
		t.Fatal(err)
	}
	b.Free(ws)
	if b.ScratchBytes() != 0 {
		t.Errorf("after freeing the bound buffer the scratch reports %d bytes, want 0 (unbound)", b.ScratchBytes())
	}
	again, err := attend()
	if err != nil {
		t.Fatal(err)
	}
	if b.ScratchBytes() < need || math.Float32bits(again[0]) != math.Float32bits(own[0]) {
		t.Errorf("after unbinding: scratch %d (want ≥ %d), first element %v (want %v)", b.ScratchBytes(), need, again[0], own[0])
	}
}
