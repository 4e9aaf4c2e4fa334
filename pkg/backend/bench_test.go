package backend

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/pkg/format"
)

// BenchmarkMatMul measures Y = X·Wᵀ for a [4096,4096] weight per format at
// T=1 (GEMV, bandwidth-bound), the small-T sizes of speculative verify and
// short prefills (2, 3, 4, 8, 16) and the prefill sizes 64, 256, 1024
// (large-T GEMM), reporting weight GB/s and GFLOP/s. Small T runs twice,
// side by side: route=fused (the default kernels) and route=decode (the old
// decode-row-then-dot route, NINFER_CPU_SMALLT=decode); large T likewise:
// route=gemm (the packed-panel GEMM) and route=tile (the old row-tile route,
// NINFER_CPU_LARGET=tile). nvfp4 and fp8-row run T=1 side by side too
// (route=decode sets NINFER_CPU_FPGEMV=decode: the old table decode). Run: go test -run - -bench MatMul ./pkg/backend/
// (one format: -bench 'MatMul/q8_g32_fp16/'; prefill only:
// -bench 'MatMul/.*/T=(64|256|1024)/' -benchtime 3x).
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
		type run struct {
			T     int
			route string
		}
		var runs []run
		for _, T := range []int{1, 2, 3, 4, 8, 16, 64, 256, 1024} {
			fpFused := (f == format.NVFP4 || f == format.FP8Row) && T == 1 // fused GEMV vs NINFER_CPU_FPGEMV=decode
			if (T > 1 && T <= SmallTForTest) || fpFused {
				runs = append(runs, run{T, "fused"}, run{T, "decode"})
			} else if T > SmallTForTest {
				runs = append(runs, run{T, "gemm"}, run{T, "tile"})
			} else {
				runs = append(runs, run{T, ""})
			}
		}
		for _, rn := range runs {
			T, name := rn.T, fmt.Sprintf("%s/T=%d", f, rn.T)
			if rn.route != "" {
				name += "/route=" + rn.route
			}
			b.Run(name, func(b *testing.B) {
				switch rn.route {
				case "decode":
					b.Setenv("NINFER_CPU_SMALLT", "decode")
					b.Setenv("NINFER_CPU_FPGEMV", "decode")
				case "tile":
					b.Setenv("NINFER_CPU_LARGET", "tile")
				}
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
