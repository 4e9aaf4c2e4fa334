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

// withWideGroupScales redraws every group scale of a q4..q8 weight over a
// wide fp16 range, 2^-14 (the smallest normal) to 2^6 (log-uniform, so
// neighbouring groups differ by many binades), and recomputes the exact
// decoded weights from the codes.
func withWideGroupScales(r *rand.Rand, p packed) packed {
	g, err := format.RowSplitLayout(p.f, int64(p.n), int64(p.k))
	if err != nil {
		panic(err)
	}
	gp, _ := p.f.Group()
	for row := 0; row < p.n; row++ {
		for gi := 0; gi < int(g.GroupsPerRow); gi++ {
			idx := int64(row)*g.GroupsPerRow + int64(gi)
			c0 := gi * gp.Group
			if c0 >= p.k {
				continue
			}
			off := g.ScaleOff + 2*idx
			old := numtest.F16ToF64(binary.LittleEndian.Uint16(p.bytes[off:]))
			e := -14 + r.IntN(21)                          // exponent 2^-14 .. 2^6
			s := uint16((e+15)<<10) | uint16(r.IntN(1024)) // normal fp16
			binary.LittleEndian.PutUint16(p.bytes[off:], s)
			sv := numtest.F16ToF64(s)
			for lane := 0; lane < gp.Group && c0+lane < p.k; lane++ {
				i := row*p.k + c0 + lane
				p.w[i] = p.w[i] / old * sv // the code q = w/old exactly
			}
		}
	}
	return p
}

// wideActivations draws n activations with magnitudes log-uniform over
// 2^-12 .. 2^12 and random signs: realistic outliers next to tiny values.
func wideActivations(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		v := math.Ldexp(1+r.Float64(), r.IntN(25)-12)
		if r.IntN(2) == 0 {
			v = -v
		}
		x[i] = float32(v)
	}
	return x
}

// TestMatMulExtremeScales runs every format through every regime (GEMV,
// small T, the large-T GEMM) with weight scales and activations spread over
// many binades — group scales from the smallest fp16 normal up, nvfp4 block
// scales over every E4M3 byte, activations from 2^-12 to 2^13 — and checks
// each output against the bound derived from its kernel's arithmetic: the
// bound scales with Σ|x·w|, so it holds at any magnitude, and a kernel that
// loses a group's or block's scale, or overflows an intermediate, fails.
func TestMatMulExtremeScales(t *testing.T) {
	streams := numtest.NewSource(t)
	formats := []format.Format{format.BF16, format.Q4G64, format.Q5G64, format.Q6G64, format.Q8G32, format.NVFP4, format.FP8Row}
	for _, b := range backends(t) {
		for _, f := range formats {
			r := streams.Stream(b.Name(), string(f))
			n, k := 64, 320
			if f == format.NVFP4 {
				n = 128 // nvfp4 tiles: N % 128, K % 64
			}
			p := randPacked(r, f, n, k)
			switch f {
			case format.Q4G64, format.Q5G64, format.Q6G64, format.Q8G32:
				p = withWideGroupScales(r, p)
			case format.NVFP4:
				p = withFullRangeScales(r, p)
			}
			w := prep(t, b, p)
			for _, T := range []int{1, 5, SmallTForTest + 9} {
				x := wideActivations(r, T*k)
				yv := put(t, b, make([]float32, T*n))
				b.MatMul(Dense(yv, T, n), Dense(put(t, b, x), T, k), w, false)
				checkLinear(t, b, fmt.Sprintf("%s/%s/wide/T=%d", b.Name(), f, T), get(t, b, yv, T*n), linearRef(p, T, x, k, 0, nil, 0, 0))
			}
		}
	}
}
