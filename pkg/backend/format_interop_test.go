package backend

import (
	"fmt"
	"math"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/format"
)

// TestKernelsDecodeLikeFormatPackage checks the kernels against the
// canonical encoder and reference decoder of pkg/format: embedding rows must
// equal format.Decode exactly (up to the NVFP4 divisor applied as a
// reciprocal), and matmul must match the FP64 product with those values.
func TestKernelsDecodeLikeFormatPackage(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, f := range allFormats {
			n, k := shapeFor(f)
			src := randn(r, n*k, 0.2)
			shape := []int64{int64(n), int64(k)}
			data, err := format.Encode(f, shape, src)
			if err != nil {
				t.Fatalf("format.Encode %s: %v", f, err)
			}
			ref, err := format.Decode(f, shape, data)
			if err != nil {
				t.Fatalf("format.Decode %s: %v", f, err)
			}
			p := packed{f: f, n: n, k: k, bytes: data, w: f64(ref)}
			w := prep(t, b, p)
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(i)
			}
			out := put(t, b, make([]float32, n*k))
			b.Embed(Dense(out, n, k), w, putI32(t, b, ids))
			check(t, fmt.Sprintf("%s/%s/rows", b.Name(), f), get(t, b, out, n*k), p.w, tolDecodeRow)
			for _, T := range []int{1, 20} {
				x := randn(r, T*k, 1)
				yv := put(t, b, make([]float32, T*n))
				b.MatMul(Dense(yv, T, n), Dense(put(t, b, x), T, k), w, false)
				checkLinear(t, b, fmt.Sprintf("%s/%s/T=%d", b.Name(), f, T), get(t, b, yv, T*n), linearRef(p, T, x, k, 0, nil, 0, 0))
			}
			// The quantised formats must stay close to the source values.
			if f.IsQuantized() {
				var num, den float64
				for i, v := range src {
					num += (float64(v) - p.w[i]) * (float64(v) - p.w[i])
					den += float64(v) * float64(v)
				}
				if rel := math.Sqrt(num / den); rel > 0.2 {
					t.Fatalf("%s: round-trip rel-L2 %.3g", f, rel)
				}
			}
		}
	}
}
