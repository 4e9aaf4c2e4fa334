package backend

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkMatMul measures Y = X·Wᵀ for a [4096,4096] weight per format at
// T=1 (GEMV, bandwidth-bound) and T=64 (blocked GEMM), reporting weight
// GB/s and GFLOP/s. Run: go test -run - -bench MatMul ./pkg/backend/
func BenchmarkMatMul(b *testing.B) {
	const n, k = 4096, 4096
	r := rand.New(rand.NewPCG(1, 2))
	be, err := NewCPU(CPUOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	for _, f := range allFormats {
		p := randPacked(r, f, n, k)
		buf, _ := be.Alloc("w", int64(len(p.bytes)))
		if err := be.Upload(View{buf, 0}, p.bytes); err != nil {
			b.Fatal(err)
		}
		w, err := be.PrepareWeight("w", f, n, k, View{buf, 0}, int64(len(p.bytes)))
		if err != nil {
			b.Fatal(err)
		}
		for _, T := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/T=%d", f, T), func(b *testing.B) {
				xb, _ := be.Alloc("x", int64(4*T*k))
				yb, _ := be.Alloc("y", int64(4*T*n))
				_ = be.UploadF32(View{xb, 0}, randn(r, T*k, 1))
				x, y := Dense(View{xb, 0}, T, k), Dense(View{yb, 0}, T, n)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					be.MatMul(y, x, w, false)
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
				s := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(len(p.bytes))/s/1e9, "GB/s")
				b.ReportMetric(2*float64(T)*n*k/s/1e9, "GFLOP/s")
				be.Free(xb)
				be.Free(yb)
			})
		}
		be.Free(buf)
	}
}
