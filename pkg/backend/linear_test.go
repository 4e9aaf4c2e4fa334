package backend

import (
	"fmt"
	"math"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// mtTokens is the token block of the fused small-T GEMV (NI_MT_TOKENS in
// kernels/cpu/ni_cpu.h): a route boundary the regime tests straddle.
const mtTokens = 4

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
	// T = 1 (GEMV); the fused small-T token blocks of mtTokens (±1,
	// and a full block plus a partial one); the small-T bound 16 (±1); a
	// large T with a tail.
	ts := []int{1, 2, mtTokens - 1, mtTokens, mtTokens + 1, 2*mtTokens + 2,
		SmallTForTest - 1, SmallTForTest, SmallTForTest + 1, 67}
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
// K and N) in the large-T regime, with a partial last tile, and the fused
// small-T route at a large K with a partial group over two token blocks.
// (q8 is left out at this K: its weights reach ±2, so fp32 rounding of the
// 2100-term sums exceeds the fixed linear_fp32 atol on small outputs; q8's
// fused route at a large K is checked bit for bit against its T = 1 GEMV in
// TestMatMulSmallTMatchesGEMV, and against the FP64 oracle at K = 200.)
func TestMatMulLargeTiles(t *testing.T) {
	r := seeded(t)
	for _, b := range isas(t) {
		for _, c := range []struct {
			f format.Format
			T int
		}{{format.BF16, SmallTForTest + 1}, {format.Q4G64, SmallTForTest + 1}, {format.Q4G64, mtTokens + 2},
			{format.Q5G64, mtTokens + 2}, {format.BF16, mtTokens + 2}} {
			f, n, k, T := c.f, 600, 2100, c.T
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
			check(t, fmt.Sprintf("%s/%s/T=%d", b.Name(), f, T), get(t, b, yv, T*n), want, tolLinear)
		}
	}
}

// smallTShapes is every format at its test shape plus, for the row-split
// formats, a large K of 2270 (35 or 70 whole groups and a partial one)
// over 19 rows (a partial 8-row task granule).
type fmtShape struct {
	f    format.Format
	n, k int
}

func smallTShapes() []fmtShape {
	var out []fmtShape
	for _, f := range allFormats {
		n, k := shapeFor(f)
		out = append(out, fmtShape{f, n, k})
		if _, ok := f.Group(); ok {
			out = append(out, fmtShape{f, 19, 2270})
		}
	}
	return out
}

// TestMatMulSmallTMatchesGEMV checks that every small-T route computes each
// token exactly as the T = 1 GEMV does (bit for bit), so a (k+1)-token
// speculative verify reproduces the one-token decode logits. x and y are
// strided column windows so the token stride differs from K.
func TestMatMulSmallTMatchesGEMV(t *testing.T) {
	r := seeded(t)
	for _, b := range isas(t) {
		for _, c := range smallTShapes() {
			f, n, k := c.f, c.n, c.k
			w := prep(t, b, randPacked(r, f, n, k))
			const T = SmallTForTest
			x := randn(r, T*(k+5), 1)
			xv := put(t, b, x)
			one := put(t, b, make([]float32, n))
			want := make([]float32, T*n)
			for tt := 0; tt < T; tt++ {
				b.MatMul(Dense(one, 1, n), Dense(View{xv.Buf, xv.Off + int64(4*tt*(k+5))}, 1, k+5).Cols(3, k), w, false)
				copy(want[tt*n:], get(t, b, one, n))
			}
			for _, nt := range []int{2, mtTokens - 1, mtTokens, mtTokens + 1, 2*mtTokens + 2, T} {
				for _, acc := range []bool{false, true} {
					y0 := randn(r, nt*(n+2), 1)
					yv := put(t, b, y0)
					b.MatMul(Dense(yv, nt, n+2).Cols(1, n), Dense(xv, nt, k+5).Cols(3, k), w, acc)
					got := get(t, b, yv, nt*(n+2))
					for tt := 0; tt < nt; tt++ {
						for nn := 0; nn < n; nn++ {
							g, wv := got[tt*(n+2)+1+nn], want[tt*n+nn]
							if acc {
								wv += y0[tt*(n+2)+1+nn]
							}
							if g != wv || math.IsNaN(float64(g)) {
								t.Fatalf("%s/%s/T=%d/acc=%v: y[%d,%d] = %v, T=1 GEMV gives %v", b.Name(), f, nt, acc, tt, nn, g, wv)
							}
						}
						if g, u := got[tt*(n+2)], y0[tt*(n+2)]; g != u {
							t.Fatalf("%s/%s/T=%d: column outside the y window changed: %v → %v", b.Name(), f, nt, u, g)
						}
					}
				}
			}
		}
	}
}
