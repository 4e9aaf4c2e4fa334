package backend

import (
	"fmt"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// shapeFor returns an [N,K] test shape valid for f: K not a multiple of 128
// for the row-split formats, N not a multiple of the 8-row tile.
func shapeFor(f format.Format) (int, int) {
	switch f {
	case format.NVFP4:
		return 128, 192
	case format.Q8G32:
		return 37, 200
	default:
		return 37, 330
	}
}

func TestMatMulAllFormatsAndRegimes(t *testing.T) {
	r := seeded(t)
	// T = 1 (GEMV), small-T boundary 16 (±1), a large T with a tail.
	ts := []int{1, 2, SmallTForTest - 1, SmallTForTest, SmallTForTest + 1, 67}
	for _, b := range isas(t) {
		for _, f := range allFormats {
			n, k := shapeFor(f)
			p := randPacked(r, f, n, k)
			w := prep(t, b, p)
			for _, T := range ts {
				for _, acc := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/T=%d/acc=%v", b.Name(), f, T, acc)
					x := randn(r, T*k, 1)
					y0 := randn(r, T*n, 1)
					xv, yv := put(t, b, x), put(t, b, y0)
					b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, acc)
					got := get(t, b, yv, T*n)
					want := make([]float64, T*n)
					for tt := 0; tt < T; tt++ {
						for nn := 0; nn < n; nn++ {
							s := 0.0
							if acc {
								s = float64(y0[tt*n+nn])
							}
							for kk := 0; kk < k; kk++ {
								s += float64(x[tt*k+kk]) * p.w[nn*k+kk]
							}
							want[tt*n+nn] = s
						}
					}
					check(t, name, got, want, tolLinear)
				}
			}
		}
	}
}

func TestMatMulStridedRowsAndShapeErrors(t *testing.T) {
	r := seeded(t)
	b := isas(t)[0]
	p := randPacked(r, format.BF16, 24, 40)
	w := prep(t, b, p)
	// x is columns [8,48) of a [5,64] buffer; y columns [3,27) of a [5,32] one.
	x := randn(r, 5*64, 1)
	xv, yv := put(t, b, x), put(t, b, make([]float32, 5*32))
	b.MatMul(Dense(yv, 5, 32).Cols(3, 24), Dense(xv, 5, 64).Cols(8, 40), w, false)
	got := get(t, b, yv, 5*32)
	for tt := 0; tt < 5; tt++ {
		for c := 0; c < 32; c++ {
			want := 0.0
			if c >= 3 && c < 27 {
				for kk := 0; kk < 40; kk++ {
					want += float64(x[tt*64+8+kk]) * p.w[(c-3)*40+kk]
				}
			}
			check(t, fmt.Sprintf("y[%d,%d]", tt, c), got[tt*32+c:tt*32+c+1], []float64{want}, tolLinear)
		}
	}
	b.MatMul(Dense(yv, 5, 23), Dense(xv, 5, 40), w, false)
	if err := b.Sync(); err == nil {
		t.Fatal("shape mismatch was not reported")
	}
	b.MatMul(Dense(yv, 50, 24), Dense(xv, 50, 40), w, false)
	if err := b.Sync(); err == nil {
		t.Fatal("out-of-range view was not reported")
	}
}

func TestEmbedAllFormats(t *testing.T) {
	r := seeded(t)
	for _, b := range isas(t) {
		for _, f := range allFormats {
			n, k := shapeFor(f)
			p := randPacked(r, f, n, k)
			w := prep(t, b, p)
			ids := []int32{0, int32(n - 1), 5, 5, int32(r.IntN(n))}
			out := put(t, b, make([]float32, len(ids)*k))
			b.Embed(Dense(out, len(ids), k), w, putI32(t, b, ids))
			got := get(t, b, out, len(ids)*k)
			want := make([]float64, len(ids)*k)
			for i, id := range ids {
				copy(want[i*k:(i+1)*k], p.w[int(id)*k:int(id+1)*k])
			}
			check(t, fmt.Sprintf("%s/%s", b.Name(), f), got, want, tolDecodeRow)
			b.Embed(Dense(out, 1, k), w, putI32(t, b, []int32{int32(n)}))
			if err := b.Sync(); err == nil {
				t.Fatalf("%s: out-of-range id was not reported", f)
			}
		}
	}
}

func TestPrepareWeightRejectsWrongSize(t *testing.T) {
	b := isas(t)[0]
	buf, _ := b.Alloc("w", 4096)
	if _, err := b.PrepareWeight("w", format.Q4G64, 2, 130, View{buf, 0}, 100); err == nil {
		t.Fatal("wrong payload size accepted")
	}
	if _, err := b.PrepareWeight("w", format.NVFP4, 100, 64, View{buf, 0}, 4096); err == nil {
		t.Fatal("nvfp4 with N%128 != 0 accepted")
	}
	if _, err := b.PrepareWeight("w", format.Int32, 2, 2, View{buf, 0}, 16); err == nil {
		t.Fatal("int32 accepted as a matrix")
	}
}

// TestMatMulLargeTiles covers tasks spanning several decoded tiles (large
// K and N) in the large-T regime, with a partial last tile.
func TestMatMulLargeTiles(t *testing.T) {
	r := seeded(t)
	for _, b := range isas(t) {
		for _, f := range []format.Format{format.BF16, format.Q4G64} {
			n, k, T := 600, 2100, SmallTForTest+1
			p := randPacked(r, f, n, k)
			w := prep(t, b, p)
			x := randn(r, T*k, 1)
			yv := put(t, b, make([]float32, T*n))
			b.MatMul(Dense(yv, T, n), Dense(put(t, b, x), T, k), w, false)
			want := make([]float64, T*n)
			for tt := 0; tt < T; tt++ {
				for nn := 0; nn < n; nn++ {
					s := 0.0
					for kk := 0; kk < k; kk++ {
						s += float64(x[tt*k+kk]) * p.w[nn*k+kk]
					}
					want[tt*n+nn] = s
				}
			}
			check(t, fmt.Sprintf("%s/%s", b.Name(), f), get(t, b, yv, T*n), want, tolLinear)
		}
	}
}
