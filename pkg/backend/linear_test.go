package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
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
	streams := numtest.NewSource(t)
	// T = 1 (GEMV); the fused small-T token blocks of mtTokens (±1,
	// and a full block plus a partial one); the small-T bound 16 (±1); a
	// large T with a tail.
	ts := []int{1, 2, mtTokens - 1, mtTokens, mtTokens + 1, 2*mtTokens + 2,
		SmallTForTest - 1, SmallTForTest, SmallTForTest + 1, 67}
	for _, b := range backends(t) {
		for _, f := range allFormats {
			r := streams.Stream(b.Name(), string(f)) // per backend and format: independent of the other cases
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
					var y0acc []float32
					if acc {
						y0acc = y0
					}
					checkLinear(t, b, name, get(t, b, yv, T*n), linearRef(p, T, x, k, 0, y0acc, n, 0))
				}
			}
		}
	}
}

func TestMatMulStridedRowsAndShapeErrors(t *testing.T) {
	r := seeded(t)
	b := backends(t)[0]
	p := randPacked(r, format.BF16, 24, 40)
	w := prep(t, b, p)
	// x is columns [8,48) of a [5,64] buffer; y columns [3,27) of a [5,32] one.
	x := randn(r, 5*64, 1)
	xv, yv := put(t, b, x), put(t, b, make([]float32, 5*32))
	b.MatMul(Dense(yv, 5, 32).Cols(3, 24), Dense(xv, 5, 64).Cols(8, 40), w, false)
	got := get(t, b, yv, 5*32)
	inside := make([]float32, 0, 5*24)
	for tt := 0; tt < 5; tt++ {
		for c := 0; c < 32; c++ {
			if c < 3 || c >= 27 {
				if got[tt*32+c] != 0 {
					t.Fatalf("y[%d,%d] = %v outside the y window, want 0 (untouched)", tt, c, got[tt*32+c])
				}
				continue
			}
			inside = append(inside, got[tt*32+c])
		}
	}
	checkLinear(t, b, "strided", inside, linearRef(p, 5, x, 64, 8, nil, 0, 0))
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
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
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
	b := backends(t)[0]
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
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
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
			checkLinear(t, b, fmt.Sprintf("%s/%s/T=%d", b.Name(), f, T), get(t, b, yv, T*n), linearRef(p, T, x, k, 0, nil, 0, 0))
		}
	}
}

// TestMatMulPrefillGEMM covers the large-T GEMM route (AVX2, every format:
// 6-token × 16-column micro-tiles, K slices of 256, 128-row weight blocks,
// 96-token blocks) and the old row-tile route (NINFER_CPU_LARGET=tile)
// against the FP64 oracle: token counts with partial 6-token tiles and
// partial token blocks, N with partial 16-column panels and partial weight
// blocks, K with several slices and a partial last group, strided x and y
// windows, and accumulation. Columns outside the y window must not change.
func TestMatMulPrefillGEMM(t *testing.T) {
	streams := numtest.NewSource(t)
	cases := []struct {
		f       format.Format
		n, k, T int
	}{
		{format.FP32, 150, 600, 100}, {format.BF16, 37, 330, 193}, {format.Q4G64, 150, 700, 23},
		{format.Q5G64, 64, 520, 97}, {format.Q6G64, 150, 330, 67}, {format.Q8G32, 150, 300, 100},
		{format.NVFP4, 256, 320, 100}, {format.FP8Row, 150, 330, 67},
	}
	for _, b := range backends(t) {
		for _, c := range cases {
			f, n, k, T := c.f, c.n, c.k, c.T
			r := streams.Stream(b.Name(), fmt.Sprintf("%s/N=%d/K=%d/T=%d", f, n, k, T)) // per backend and case
			p := randPacked(r, f, n, k)
			w := prep(t, b, p)
			x := randn(r, T*(k+5), 1)
			xv := put(t, b, x)
			for _, route := range []string{"gemm", "tile"} {
				for _, acc := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/N=%d/K=%d/T=%d/route=%s/acc=%v", b.Name(), f, n, k, T, route, acc)
					if route == "tile" {
						t.Setenv("NINFER_CPU_LARGET", "tile")
					} else {
						t.Setenv("NINFER_CPU_LARGET", "")
					}
					y0 := randn(r, T*(n+3), 1)
					yv := put(t, b, y0)
					b.MatMul(Dense(yv, T, n+3).Cols(1, n), Dense(xv, T, k+5).Cols(2, k), w, acc)
					all := get(t, b, yv, T*(n+3))
					got := make([]float32, 0, T*n)
					for tt := 0; tt < T; tt++ {
						row := all[tt*(n+3) : (tt+1)*(n+3)]
						if row[0] != y0[tt*(n+3)] || row[n+1] != y0[tt*(n+3)+n+1] || row[n+2] != y0[tt*(n+3)+n+2] {
							t.Fatalf("%s: token %d: a column outside the y window changed", name, tt)
						}
						got = append(got, row[1:n+1]...)
					}
					var y0acc []float32
					if acc {
						y0acc = y0
					}
					checkLinear(t, b, name, got, linearRef(p, T, x, k+5, 2, y0acc, n+3, 1))
				}
			}
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
		switch f { // nvfp4: two scale tiles, 16 groups; fp8: chunks, blocks and a tail
		case format.NVFP4:
			out = append(out, fmtShape{f, 256, 1024})
		case format.FP8Row:
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
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
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

// fpShapes are the nvfp4 and fp8-row shapes of the fused GEMV tests: two
// 128-row nvfp4 tiles (the scale swizzle across tiles) and fp8 rows whose K
// ends in whole 64-lane chunks, a partial chunk of 16-lane blocks plus a
// scalar tail (1000 = 15·64 + 2·16 + 8), or a short tail only.
var fpShapes = []fmtShape{{format.NVFP4, 256, 1024}, {format.FP8Row, 40, 1000}, {format.FP8Row, 24, 330}}

// withFullRangeScales redraws every nvfp4 block scale over all valid E4M3
// bytes 0x00..0x7E (subnormal, zero and the largest scales included) and
// recomputes the exact decoded weights from the codes.
func withFullRangeScales(r *rand.Rand, p packed) packed {
	g, err := format.NVFP4Layout(int64(p.n), int64(p.k))
	if err != nil {
		panic(err)
	}
	div := float64(math.Float32frombits(binary.LittleEndian.Uint32(p.bytes[g.DivisorOff:])))
	e2m1 := []float64{0, .5, 1, 1.5, 2, 3, 4, 6}
	kt := p.k / 64
	for row := 0; row < p.n; row++ {
		for blk := 0; blk < p.k/16; blk++ {
			sb := uint8(r.IntN(0x7f))
			rt, ri := row/128, row%128
			p.bytes[g.ScaleOff+int64((rt*kt+blk/4)*512+(ri%32)*16+(ri/32)*4+blk%4)] = sb
			for col := blk * 16; col < blk*16+16; col++ {
				c := p.bytes[row*p.k/2+col/2] >> (4 * (col & 1)) & 15
				v := e2m1[c&7] * numtest.E4M3ToF64(sb) / div
				if c&8 != 0 {
					v = -v
				}
				p.w[row*p.k+col] = v
			}
		}
	}
	return p
}

// fpRoutes runs f once per nvfp4/fp8 matmul route of this ISA: the fused
// AVX2 GEMV (default) and the old table-decode route (NINFER_CPU_FPGEMV=decode;
// the scalar ISA has only the latter).
func fpRoutes(t *testing.T, b Backend, f func(route string)) {
	f("fused")
	if b.Name() == "cpu-avx2" {
		t.Setenv("NINFER_CPU_FPGEMV", "decode")
		f("decode")
		t.Setenv("NINFER_CPU_FPGEMV", "")
	}
}

// TestMatMulFPDecodeOneHot multiplies one-hot token rows (x = e_c) so that
// y[t, n] is the decoded weight W[n, c] itself: every element, every E2M1
// code, every block scale byte (nvfp4) and every E4M3 code (fp8) goes
// through the matmul at T = 16 (four fused 4-token blocks) and T = 1. The
// fused AVX2 GEMV forms e2m1·e4m3 and e4m3 exactly and rounds once
// (f32(e2m1·e4m3 / d_w), f32(e4m3·s)), so it must equal the exact value
// rounded to fp32 bit for bit; the table route is held to decode_row.
func TestMatMulFPDecodeOneHot(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, c := range fpShapes {
			p := randPacked(r, c.f, c.n, c.k)
			if c.f == format.NVFP4 {
				p = withFullRangeScales(r, p)
			}
			w := prep(t, b, p)
			fpRoutes(t, b, func(route string) {
				for _, T := range []int{1, SmallTForTest} {
					xv, yv := put(t, b, make([]float32, T*c.k)), put(t, b, make([]float32, T*c.n))
					for c0 := 0; c0 < c.k; c0 += T {
						x := make([]float32, T*c.k)
						cols := make([]int, T)
						for tt := range cols {
							cols[tt] = (c0 + tt) % c.k
							x[tt*c.k+cols[tt]] = 1
						}
						if err := b.UploadF32(xv, x); err != nil {
							t.Fatal(err)
						}
						b.MatMul(Dense(yv, T, c.n), Dense(xv, T, c.k), w, false)
						got := get(t, b, yv, T*c.n)
						want := make([]float64, T*c.n)
						for tt, col := range cols {
							for nn := 0; nn < c.n; nn++ {
								want[tt*c.n+nn] = p.w[nn*c.k+col]
							}
						}
						name := fmt.Sprintf("%s/%s[%d,%d]/%s/T=%d/cols=%d..", b.Name(), c.f, c.n, c.k, route, T, c0)
						if b.Name() == "cpu-avx2" && route == "fused" {
							for i, g := range got {
								if g != float32(want[i]) || math.IsNaN(float64(g)) {
									t.Fatalf("%s: y[%d,%d] = %v, exact decode %v", name, i/c.n, i%c.n, g, float32(want[i]))
								}
							}
						} else {
							check(t, name, got, want, tolDecodeRow)
						}
					}
				}
			})
		}
	}
}

// TestMatMulFPOracle checks the nvfp4 and fp8-row matmul of both ISAs and
// both routes against the FP64 oracle at T = 1 and across the fused token
// blocks up to the small-T bound, with accumulate on and off. randPacked's
// nvfp4/fp8 weights are large (rms ≈ 1–4, up to ~100; real checkpoints are
// ~0.02), so x is drawn with σ = 1/32 to keep the products at the magnitude
// the fixed linear_fp32 atol is meant for (with σ = 1 the fp32 rounding of
// the 1024-term sums alone exceeds atol on the few near-zero outputs, on
// every route, the old scalar one included).
func TestMatMulFPOracle(t *testing.T) {
	const xScale = 1.0 / 32
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, c := range fpShapes {
			p := randPacked(r, c.f, c.n, c.k)
			w := prep(t, b, p)
			fpRoutes(t, b, func(route string) {
				for _, T := range []int{1, 2, mtTokens - 1, mtTokens, mtTokens + 1, 2 * mtTokens, SmallTForTest - 1, SmallTForTest} {
					acc := T%2 == 1
					x, y0 := randn(r, T*c.k, xScale), randn(r, T*c.n, 1)
					xv, yv := put(t, b, x), put(t, b, y0)
					b.MatMul(Dense(yv, T, c.n), Dense(xv, T, c.k), w, acc)
					var y0acc []float32
					if acc {
						y0acc = y0
					}
					checkLinear(t, b, fmt.Sprintf("%s/%s[%d,%d]/%s/T=%d/acc=%v", b.Name(), c.f, c.n, c.k, route, T, acc),
						get(t, b, yv, T*c.n), linearRef(p, T, x, c.k, 0, y0acc, c.n, 0))
				}
			})
		}
	}
}

// TestMatMulFPNaNCodes: the invalid NaN encodings (nvfp4 block scale 0x7F,
// fp8 codes 0x7F/0xFF; rejected by format.Validate) must surface as NaN in
// exactly the affected output row, on every route and T, never as a number.
func TestMatMulFPNaNCodes(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, c := range fpShapes[:2] {
			p := randPacked(r, c.f, c.n, c.k)
			const bad = 5
			if c.f == format.NVFP4 {
				g, _ := format.NVFP4Layout(int64(c.n), int64(c.k))
				// row 5, block 6 (group 1, slot 2)
				p.bytes[g.ScaleOff+int64((c.k/64)*0+1*512+(bad%32)*16+(bad/32)*4+2)] = 0x7f
			} else {
				p.bytes[bad*c.k+c.k-3] = 0xff // in the scalar tail
				p.bytes[(bad+1)*c.k+17] = 0x7f
			}
			w := prep(t, b, p)
			fpRoutes(t, b, func(route string) {
				for _, T := range []int{1, 3, mtTokens + 2} {
					yv := put(t, b, make([]float32, T*c.n))
					b.MatMul(Dense(yv, T, c.n), Dense(put(t, b, randn(r, T*c.k, 1)), T, c.k), w, false)
					got := get(t, b, yv, T*c.n)
					for tt := 0; tt < T; tt++ {
						for nn := 0; nn < c.n; nn++ {
							isBad := nn == bad || (c.f == format.FP8Row && nn == bad+1)
							if v := got[tt*c.n+nn]; math.IsNaN(float64(v)) != isBad {
								t.Fatalf("%s/%s/%s/T=%d: y[%d,%d] = %v (NaN expected: %v)", b.Name(), c.f, route, T, tt, nn, v, isBad)
							}
						}
					}
				}
			})
		}
	}
}
