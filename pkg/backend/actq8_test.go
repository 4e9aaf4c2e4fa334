package backend

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/kernels/cpu"
	"github.com/ninfer/ninfer/pkg/format"
)

var q8Formats = []format.Format{format.Q4G64, format.Q5G64, format.Q6G64, format.Q8G32}

// q8Quantize quantizes one token row as the NI_ACT_Q8 contract says
// (kernels/ninfer_ops.h): per block of blk values (the weight group: 64 for
// q4–q6, 32 for q8) s = fl(max|x|/127), q = clamp(rne(fl(x·fl(1/s))), ±127);
// blocks past K are zero. s holds one scale per 32 values (a 64-value
// block's twice), as q8Ref indexes it.
func q8Quantize(x []float32, blk int) (q []int8, s []float32) {
	nb := (len(x) + blk - 1) / blk
	q, s = make([]int8, blk*nb), make([]float32, blk/32*nb)
	for b := range nb {
		var amax float32
		for i := blk * b; i < min(blk*b+blk, len(x)); i++ {
			amax = max(amax, float32(math.Abs(float64(x[i]))))
		}
		d := amax / 127
		var id float32
		if d > 0 {
			id = 1 / d
		}
		for j := range blk / 32 {
			s[blk/32*b+j] = d
		}
		for i := blk * b; i < min(blk*b+blk, len(x)); i++ {
			v := math.RoundToEven(float64(x[i] * id))
			q[i] = int8(max(-127, min(127, v)))
		}
	}
	return q, s
}

// actBlock is the activation block of NI_ACT_Q8 for weights of format f:
// its group (64 values for q4–q6, 32 for q8).
func actBlock(f format.Format) int {
	if f == format.Q8G32 {
		return 32
	}
	return 64
}

// q8Ref is the FP64 value of one NI_ACT_Q8 output (weights w, exact decoded
// codes·scales), the sum of its terms' magnitudes, and the activation
// quantization error bound Σ_k |w_k|·s_x[b(k)]/2 against the fp32 row x.
func q8Ref(w []float64, q []int8, s []float32) (y, abs, qerr float64) {
	for k, wk := range w {
		t := wk * float64(s[k/32]) * float64(q[k])
		y += t
		abs += math.Abs(t)
		qerr += math.Abs(wk) * float64(s[k/32]) / 2
	}
	return
}

// q8Bound bounds the fp32 accumulation error of a length-k NI_ACT_Q8
// output: the inner block sums are exact, the block terms s_w·s_x·isum are
// formed with one rounding and summed in fp32 in some order, so
// γ_{k+2} = (k+2)·u/(1−(k+2)·u), u = 2^-24, times Σ|terms| (plus |y0| when
// accumulating) covers every ISA's order.
func q8Bound(k int, abs float64) float64 {
	g := float64(k+2) * 0x1p-24
	return g / (1 - g) * abs
}

// checkQ8Oracle checks the [T,n] int8-activation matmul output got of
// weights w ([n,k], decoded FP64 values) on activations x (+ y0 when acc)
// against q8Ref on the contract's quantized activations, within q8Bound.
func checkQ8Oracle(t *testing.T, name string, f format.Format, w []float64, x, y0, got []float32, T, n, k int, acc bool) {
	t.Helper()
	for tt := range T {
		q, s := q8Quantize(x[tt*k:(tt+1)*k], actBlock(f))
		for i := range n {
			ref, abs, _ := q8Ref(w[i*k:(i+1)*k], q, s)
			if acc {
				ref += float64(y0[tt*n+i])
				abs += math.Abs(float64(y0[tt*n+i]))
			}
			g := float64(got[tt*n+i])
			if bd := q8Bound(k, abs); !(math.Abs(g-ref) <= bd) {
				t.Fatalf("%s: y[%d,%d] = %g, oracle %g (|err| %.3g > bound %.3g)", name, tt, i, g, ref, math.Abs(g-ref), bd)
			}
		}
	}
}

func cpuBackends(t *testing.T) []*CPU {
	var out []*CPU
	for _, b := range backends(t) {
		if c, ok := b.(*CPU); ok {
			out = append(out, c)
		}
	}
	return out
}

// vnniModes runs f with the AVX-512 VNNI bodies and, where this CPU has
// them, once more with the non-VNNI AVX-512 bodies (and, with VBMI, once
// with the BMI2 high-bit decode); at the avx2 level with the offset-binary
// q4–q6 bodies (on AVX-VNNI where the CPU has it, then without) and once
// more with the sign-trick ones.
func vnniModes(t *testing.T, b *CPU, f func(mode string)) {
	if b.ISA() == "avx2" {
		f("")
		if AVXVNNI() { // the AVX2-only route of a CPU without AVX-VNNI
			t.Setenv("NINFER_CPU_AVXVNNI", "0")
			f("-noavxvnni")
			t.Setenv("NINFER_CPU_AVXVNNI", "")
		}
		t.Setenv("NINFER_CPU_AVX2Q", "signed")
		f("-signed")
		t.Setenv("NINFER_CPU_AVX2Q", "")
		return
	}
	if b.ISA() != "avx512" || !VNNI() {
		f("")
		return
	}
	f("vnni")
	t.Setenv("NINFER_CPU_Q8W", "legacy") // q8 weights on the sign-trick VNNI body
	f("vnni-q8legacy")
	t.Setenv("NINFER_CPU_Q8W", "")
	if VBMI() { // the q5/q6 high bits by BMI2 pext instead of VBMI
		t.Setenv("NINFER_CPU_VBMI", "0")
		f("vnni-pext")
		t.Setenv("NINFER_CPU_VBMI", "")
	}
	old := cpu.SetVNNI(false)
	defer cpu.SetVNNI(old)
	f("novnni")
}

// TestMatMulInt8ActOracle checks the int8-activation matmul of every
// grouped-integer format at each ISA level against the FP64 value of the
// contract's formula on the contract's quantized activations, so the
// comparison isolates the fp32 accumulation error.
func TestMatMulInt8ActOracle(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		if err := b.SetActivations(ActInt8); err != nil {
			t.Fatal(err)
		}
		for _, f := range q8Formats {
			for _, k := range []int{256, 200, 1000} { // whole groups; a partial group and block; both
				r := streams.Stream(b.Name(), string(f), fmt.Sprint(k))
				n := 21
				p := randPacked(r, f, n, k)
				w := prep(t, b, p)
				for _, T := range []int{1, 2, 3, 5, 16} {
					for _, acc := range []bool{false, true} {
						x := randn(r, T*k, 1)
						if T > 1 {
							x[k+3] = 0 // a block with a zero and
							for i := 2 * k; i < 2*k+32 && i < 3*k && T > 2; i++ {
								x[i] = 0 // an all-zero block (s_x = 0)
							}
						}
						y0 := randn(r, T*n, 1)
						xv, yv := put(t, b, x), put(t, b, y0)
						vnniModes(t, b, func(mode string) {
							if err := b.UploadF32(yv, y0); err != nil {
								t.Fatal(err)
							}
							b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, acc)
							got := get(t, b, yv, T*n)
							name := fmt.Sprintf("%s%s/%s/K=%d/T=%d/acc=%v", b.Name(), mode, f, k, T, acc)
							checkQ8Oracle(t, name, f, p.w, x, y0, got, T, n, k, acc)
						})
					}
				}
			}
		}
	}
}

// TestMatMulInt8PrefillGEMM checks the int8 prefill GEMM (T > 16: AVX-512
// VNNI; at the avx2 level AVX-VNNI and, with NINFER_CPU_AVXVNNI=0, AVX2
// maddubs for q4–q6) against the same FP64 oracle: every grouped-integer
// format the route takes, whole and partial groups, token counts that leave
// partial token tiles, a row count that leaves a partial 32-row panel of
// more than 16 rows, with and without accumulation.
func TestMatMulInt8PrefillGEMM(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		modes := []string{""}
		if b.ISA() == "avx2" && AVXVNNI() {
			modes = append(modes, "0") // NINFER_CPU_AVXVNNI=0: the AVX2-only route
		}
		if err := b.SetActivations(ActInt8); err != nil {
			t.Fatal(err)
		}
		for _, mode := range modes {
			t.Setenv("NINFER_CPU_AVXVNNI", mode)
			for _, f := range q8Formats {
				for _, k := range []int{256, 200, 1000} {
					r := streams.Stream(b.Name(), mode, string(f), fmt.Sprint(k))
					n := 57 // a whole 32-row panel and one of 25 rows
					p := randPacked(r, f, n, k)
					w := prep(t, b, p)
					if !b.Int8PrefillGEMM(w) {
						t.Logf("%s (NINFER_CPU_AVXVNNI=%q) %s: no int8 prefill GEMM here: not run", b.Name(), mode, f)
						continue
					}
					for _, T := range []int{17, 23, 40} {
						for _, acc := range []bool{false, true} {
							x := randn(r, T*k, 1)
							x[k+3] = 0
							for i := 2 * k; i < 2*k+32; i++ {
								x[i] = 0 // an all-zero block (s_x = 0)
							}
							y0 := randn(r, T*n, 1)
							xv, yv := put(t, b, x), put(t, b, y0)
							b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, acc)
							got := get(t, b, yv, T*n)
							name := fmt.Sprintf("%s/avxvnni=%q/%s/K=%d/T=%d/acc=%v", b.Name(), mode, f, k, T, acc)
							checkQ8Oracle(t, name, f, p.w, x, y0, got, T, n, k, acc)
						}
					}
				}
			}
			t.Setenv("NINFER_CPU_AVXVNNI", "")
		}
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInt8ActAutoPrefillQ8 checks auto's choice for q8 weights: int8
// activations (bit for bit int8 mode) at T > 16 where the int8 prefill
// GEMM runs, else as int8Act says (autoQ8Int8).
func TestInt8ActAutoPrefillQ8(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		r := streams.Stream(b.Name())
		n, k := 40, 256
		p := randPacked(r, format.Q8G32, n, k)
		w := prep(t, b, p)
		for _, T := range []int{4, 17} {
			x := randn(r, T*k, 1)
			xv, yv := put(t, b, x), put(t, b, make([]float32, T*n))
			run := func(mode string) []float32 {
				if err := b.SetActivations(mode); err != nil {
					t.Fatal(err)
				}
				b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
				return get(t, b, yv, T*n)
			}
			auto, i8, f32 := run(ActAuto), run(ActInt8), run(ActFP32)
			want, wantName := f32, "fp32"
			if int8Act(ActAuto, autoQ8Int8(b.ISA()), format.Q8G32) || (T > SmallTForTest && b.Int8PrefillGEMM(w)) {
				want, wantName = i8, "int8"
			}
			for i := range auto {
				if math.Float32bits(auto[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s/T=%d: y[%d] auto %g, %s mode %g", b.Name(), T, i, auto[i], wantName, want[i])
				}
			}
		}
	}
}

// TestMatMulInt8ActVsFP32 checks that int8 activations move each output
// from the fp32-activation result by no more than the activation
// quantization error Σ_k |w_k|·s_x/2 plus both routes' accumulation bounds.
func TestMatMulInt8ActVsFP32(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		for _, f := range q8Formats {
			r := streams.Stream(b.Name(), string(f))
			n, k := 19, 640
			p := randPacked(r, f, n, k)
			w := prep(t, b, p)
			for _, T := range []int{1, 2, 3, 5, 16} {
				x := randn(r, T*k, 1)
				xv, yv := put(t, b, x), put(t, b, make([]float32, T*n))
				run := func(mode string) []float32 {
					if err := b.SetActivations(mode); err != nil {
						t.Fatal(err)
					}
					b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
					return get(t, b, yv, T*n)
				}
				y32, y8 := run(ActFP32), run(ActInt8)
				for tt := range T {
					xr := x[tt*k : (tt+1)*k]
					q, s := q8Quantize(xr, actBlock(f))
					for i := range n {
						wr := p.w[i*k : (i+1)*k]
						_, abs8, qerr := q8Ref(wr, q, s)
						var abs32 float64
						for j, wk := range wr {
							abs32 += math.Abs(wk * float64(xr[j]))
						}
						bd := qerr + q8Bound(k, abs8) + q8Bound(k, abs32)
						if d := math.Abs(float64(y8[tt*n+i]) - float64(y32[tt*n+i])); !(d <= bd) {
							t.Fatalf("%s/%s/T=%d: y[%d,%d] int8 %g vs fp32 %g (|diff| %.3g > bound %.3g)",
								b.Name(), f, T, tt, i, y8[tt*n+i], y32[tt*n+i], d, bd)
						}
					}
				}
			}
		}
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMatMulInt8ActScope checks what stays on fp32 activations in int8
// mode, bit for bit: other formats, T > 16 where the CPU has no int8
// prefill GEMM (and with NINFER_CPU_PREFILL=fp32), and weights pinned by
// KeepFP32Activations (the output head).
func TestMatMulInt8ActScope(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		for _, f := range []format.Format{format.FP32, format.BF16, format.NVFP4, format.FP8Row, format.Q4G64, format.Q8G32} {
			r := streams.Stream(b.Name(), string(f))
			n, k := 128, 256
			p := randPacked(r, f, n, k)
			w, pinned := prep(t, b, p), prep(t, b, p)
			pinned.KeepFP32Activations()
			for _, tc := range []struct {
				T         int
				prefill32 bool
			}{{1, false}, {4, false}, {17, false}, {17, true}} {
				T := tc.T
				if tc.prefill32 {
					t.Setenv("NINFER_CPU_PREFILL", "fp32")
				}
				gemm := T > SmallTForTest && b.Int8PrefillGEMM(w)
				x := randn(r, T*k, 1)
				xv, yv := put(t, b, x), put(t, b, make([]float32, T*n))
				run := func(mode string, w *Weight) []float32 {
					if err := b.SetActivations(mode); err != nil {
						t.Fatal(err)
					}
					b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
					return get(t, b, yv, T*n)
				}
				y32 := run(ActFP32, w)
				grouped := f != format.FP32 && f != format.BF16 && f != format.NVFP4 && f != format.FP8Row
				for _, c := range []struct {
					w    *Weight
					same bool
				}{{w, !grouped || (T > SmallTForTest && !gemm)}, {pinned, true}} {
					y8 := run(ActInt8, c.w)
					differs := false
					for i := range y8 {
						if math.Float32bits(y8[i]) != math.Float32bits(y32[i]) {
							differs = true
						}
					}
					if differs == c.same {
						t.Errorf("%s/%s/T=%d/prefill32=%v/pinned=%v: int8 mode differs from fp32: %v, want %v", b.Name(), f, T, tc.prefill32, c.w == pinned, differs, !c.same)
					}
				}
				t.Setenv("NINFER_CPU_PREFILL", "")
			}
		}
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMatMulInt8ActNonFinite checks that a non-finite activation poisons
// the outputs it feeds (NaN), as the fp32 route does.
func TestMatMulInt8ActNonFinite(t *testing.T) {
	for _, b := range cpuBackends(t) {
		if err := b.SetActivations(ActInt8); err != nil {
			t.Fatal(err)
		}
		r := numtest.NewSource(t).Stream(b.Name())
		p := randPacked(r, format.Q4G64, 16, 256)
		w := prep(t, b, p)
		for _, T := range []int{2, 17} { // the GEMV passes; the prefill GEMM where it runs
			x := randn(r, T*256, 1)
			x[256+40] = float32(math.Inf(1))
			xv, yv := put(t, b, x), put(t, b, make([]float32, T*16))
			b.MatMul(Dense(yv, T, 16), Dense(xv, T, 256), w, false)
			y := get(t, b, yv, T*16)
			int8 := T <= SmallTForTest || b.Int8PrefillGEMM(w) // else the fp32 GEMM: ±Inf or NaN
			for tt := range T {
				for i := range 16 {
					v := float64(y[tt*16+i])
					bad := math.IsNaN(v) || (!int8 && math.IsInf(v, 0))
					if bad != (tt == 1) {
						t.Fatalf("%s/T=%d: y[%d,%d] = %g (want NaN only in token 1)", b.Name(), T, tt, i, v)
					}
				}
			}
		}
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInt8ActAutoFormats pins what auto picks: int8 for q4/q5/q6, q8 int8
// at avx2 and at avx512 with VNNI on Intel (slower in int8 end to end at
// avx512 on Zen 4), fp32 for the non-grouped formats.
func TestInt8ActAutoFormats(t *testing.T) {
	for _, isa := range []string{"scalar", "avx2", "avx512"} {
		q8 := isa == "avx2" || (isa == "avx512" && VNNI() && cpu.Intel())
		if autoQ8Int8(isa) != q8 {
			t.Errorf("autoQ8Int8(%s) = %v, want %v (VNNI %v, Intel %v)", isa, !q8, q8, VNNI(), cpu.Intel())
		}
		for _, f := range allFormats {
			q46 := f == format.Q4G64 || f == format.Q5G64 || f == format.Q6G64
			want := q46 || (f == format.Q8G32 && q8)
			if got := int8Act(ActAuto, q8, f); got != want {
				t.Errorf("auto/%s/%s: int8 %v, want %v", isa, f, got, want)
			}
			if got, want := int8Act(ActInt8, q8, f), q46 || f == format.Q8G32; got != want {
				t.Errorf("int8/%s/%s: int8 %v, want %v", isa, f, got, want)
			}
			if int8Act(ActFP32, q8, f) {
				t.Errorf("fp32/%s/%s: int8", isa, f)
			}
		}
	}
}

// TestInt8Formats: the formats Int8Formats reports are those the CPU
// backend's kernels run on int8 at decode in each mode, in the given order.
func TestInt8Formats(t *testing.T) {
	names := []string{string(format.BF16), string(format.Q8G32), string(format.Q4G64), string(format.FP32), string(format.Q6G64), string(format.Q5G64)}
	for _, isa := range []string{"scalar", "avx2", "avx512"} {
		b, err := NewCPU(CPUOptions{Threads: 1, ISA: isa})
		if err != nil {
			t.Logf("skipping %s: %v", isa, err)
			continue
		}
		q8 := []string{}
		if autoQ8Int8(isa) {
			q8 = []string{string(format.Q8G32)}
		}
		for _, c := range []struct {
			mode string
			want []string
		}{
			{ActFP32, nil},
			{ActInt8, []string{string(format.Q8G32), string(format.Q4G64), string(format.Q6G64), string(format.Q5G64)}},
			{ActAuto, append(q8, string(format.Q4G64), string(format.Q6G64), string(format.Q5G64))},
		} {
			if err := b.SetActivations(c.mode); err != nil {
				t.Fatal(err)
			}
			if got := Int8Formats(b, names); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("%s/%s: Int8Formats = %v, want %v", isa, c.mode, got, c.want)
			}
		}
		b.Close()
	}
	if got := Int8Formats(nil, names); got != nil {
		t.Errorf("Int8Formats of a non-CPU backend = %v, want none", got)
	}
}

func TestParseActivations(t *testing.T) {
	for in, want := range map[string]string{"": ActFP32, "auto": ActAuto, "int8": ActInt8, "fp32": ActFP32, "int8-all": ActInt8All} {
		if got, err := ParseActivations(in); err != nil || got != want {
			t.Errorf("ParseActivations(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseActivations("int4"); err == nil {
		t.Error("ParseActivations(int4): no error")
	}
	if _, err := NewCPU(CPUOptions{Threads: 1, Activations: "bf16"}); err == nil {
		t.Error("NewCPU with activations bf16: no error")
	}
}

// BenchmarkMatMulInt8Act times one [3072,1024] matmul (a decode-sized MLP
// projection, L2-resident) per grouped format, ISA, T and activation mode
// on one thread: go test ./pkg/backend -run '^$' -bench MatMulInt8Act.
func BenchmarkMatMulInt8Act(b *testing.B) {
	const n, k = 3072, 1024
	forBenchLevels(b, 1, func(isa string, be *CPU) {
		r := numtest.NewSource(b).Stream(isa)
		for _, f := range q8Formats {
			w := prepB(b, be, randPacked(r, f, n, k))
			for _, T := range []int{1, 4} {
				xv, yv := putB(b, be, randn(r, T*k, 1)), putB(b, be, make([]float32, T*n))
				for _, act := range []string{ActFP32, ActInt8} {
					b.Run(fmt.Sprintf("%s/%s/T=%d/%s", isa, f, T, act), func(b *testing.B) {
						if err := be.SetActivations(act); err != nil {
							b.Fatal(err)
						}
						for b.Loop() {
							be.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
						}
						b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/op")
					})
				}
			}
		}
	})
}

func prepB(b *testing.B, be Backend, p packed) *Weight {
	buf, err := be.Alloc("weight", int64(len(p.bytes)))
	if err != nil {
		b.Fatal(err)
	}
	if err := be.Upload(View{buf, 0}, p.bytes); err != nil {
		b.Fatal(err)
	}
	w, err := be.PrepareWeight(string(p.f), p.f, p.n, p.k, View{buf, 0}, int64(len(p.bytes)))
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func putB(b *testing.B, be Backend, x []float32) View {
	buf, err := be.Alloc("x", int64(4*len(x)))
	if err != nil {
		b.Fatal(err)
	}
	if err := be.UploadF32(View{buf, 0}, x); err != nil {
		b.Fatal(err)
	}
	return View{buf, 0}
}

// TestMatMulInt8AllIsPieces checks the accuracy-study mode int8-all: a
// T > 16 matmul equals its 16-token pieces in int8 mode bit for bit where
// there is no int8 prefill GEMM (here forced by NINFER_CPU_PREFILL=fp32),
// and equals int8 mode's GEMM at the whole T where there is one.
func TestMatMulInt8AllIsPieces(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		r := streams.Stream(b.Name())
		n, k, T := 40, 192, 37
		p := randPacked(r, format.Q6G64, n, k)
		w := prep(t, b, p)
		x := randn(r, T*k, 1)
		xv, yv := put(t, b, x), put(t, b, make([]float32, T*n))
		run := func(mode string) []float32 {
			if err := b.SetActivations(mode); err != nil {
				t.Fatal(err)
			}
			b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
			return get(t, b, yv, T*n)
		}
		if b.Int8PrefillGEMM(w) {
			all, whole := run(ActInt8All), run(ActInt8)
			for i := range all {
				if math.Float32bits(all[i]) != math.Float32bits(whole[i]) {
					t.Fatalf("%s: y[%d] int8-all %g, int8 GEMM %g", b.Name(), i, all[i], whole[i])
				}
			}
		}
		t.Setenv("NINFER_CPU_PREFILL", "fp32")
		all := run(ActInt8All)
		if err := b.SetActivations(ActInt8); err != nil {
			t.Fatal(err)
		}
		for t0 := 0; t0 < T; t0 += SmallTForTest {
			m := min(SmallTForTest, T-t0)
			xp, yp := put(t, b, x[t0*k:(t0+m)*k]), put(t, b, make([]float32, m*n))
			b.MatMul(Dense(yp, m, n), Dense(xp, m, k), w, false)
			for i, v := range get(t, b, yp, m*n) {
				if math.Float32bits(v) != math.Float32bits(all[t0*n+i]) {
					t.Fatalf("%s: y[%d] int8-all %g, piece %g", b.Name(), t0*n+i, all[t0*n+i], v)
				}
			}
		}
		t.Setenv("NINFER_CPU_PREFILL", "")
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMatMulInt8ActSmallTMatchesGEMV checks that with int8 activations a
// token's outputs do not depend on T or on its position among the tokens:
// each row of a T ≤ 16 matmul equals the T=1 GEMV of that row bit for bit
// (the AVX-512 VNNI kernels run several weight rows per call; n = 23 leaves
// a partial block of rows).
func TestMatMulInt8ActSmallTMatchesGEMV(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		if err := b.SetActivations(ActInt8); err != nil {
			t.Fatal(err)
		}
		for _, f := range q8Formats {
			r := streams.Stream(b.Name(), string(f))
			n, k, T := 23, 1000, SmallTForTest
			w := prep(t, b, randPacked(r, f, n, k))
			x := randn(r, T*k, 1)
			xv := put(t, b, x)
			vnniModes(t, b, func(mode string) {
				want := make([]float32, T*n)
				for tt := range T {
					one, yv := put(t, b, x[tt*k:(tt+1)*k]), put(t, b, make([]float32, n))
					b.MatMul(Dense(yv, 1, n), Dense(one, 1, k), w, false)
					copy(want[tt*n:], get(t, b, yv, n))
				}
				for _, nt := range []int{2, 3, 4, 5, 9, T} {
					yv := put(t, b, make([]float32, nt*n))
					b.MatMul(Dense(yv, nt, n), Dense(xv, nt, k), w, false)
					for i, v := range get(t, b, yv, nt*n) {
						if math.Float32bits(v) != math.Float32bits(want[i]) {
							t.Fatalf("%s%s/%s/T=%d: y[%d,%d] = %g, T=1 gives %g", b.Name(), mode, f, nt, i/n, i%n, v, want[i])
						}
					}
				}
			})
		}
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMatMulSmallTPassesMatchGEMV: at a K whose per-token activations
// outgrow L1 (6144: the 2B shape's MLP down projection) the small-T routes
// split the tokens into passes over chunks of rows (weights.c
// mm_pass_tokens, mm_pass_rows); every token still equals its T = 1 GEMV
// bit for bit, on fp32 and int8 activations, across several row chunks.
func TestMatMulSmallTPassesMatchGEMV(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range cpuBackends(t) {
		for _, f := range q8Formats {
			r := streams.Stream(b.Name(), string(f))
			const n, k, T = 150, 6144, 9
			w := prep(t, b, randPacked(r, f, n, k))
			x := randn(r, T*k, 1)
			xv := put(t, b, x)
			for _, act := range []string{ActFP32, ActInt8} {
				if err := b.SetActivations(act); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, T*n)
				for tt := range T {
					one, yv := put(t, b, x[tt*k:(tt+1)*k]), put(t, b, make([]float32, n))
					b.MatMul(Dense(yv, 1, n), Dense(one, 1, k), w, false)
					copy(want[tt*n:], get(t, b, yv, n))
				}
				for _, nt := range []int{2, 3, 4, 5, T} {
					yv := put(t, b, make([]float32, nt*n))
					b.MatMul(Dense(yv, nt, n), Dense(xv, nt, k), w, false)
					for i, v := range get(t, b, yv, nt*n) {
						if math.Float32bits(v) != math.Float32bits(want[i]) || math.IsNaN(float64(v)) {
							t.Fatalf("%s/%s/%s/T=%d: y[%d,%d] = %g, T=1 gives %g", b.Name(), f, act, nt, i/n, i%n, v, want[i])
						}
					}
				}
			}
		}
		if err := b.SetActivations(ActFP32); err != nil {
			t.Fatal(err)
		}
	}
}

// forBenchLevels runs f on a CPU backend of each SIMD level this machine
// has (threads threads), skipping the others with a log line.
func forBenchLevels(b *testing.B, threads int, f func(isa string, be *CPU)) {
	for _, isa := range []string{"avx2", "avx512"} {
		be, err := NewCPU(CPUOptions{Threads: threads, ISA: isa})
		if err != nil {
			b.Logf("skipping %s: %v", isa, err)
			continue
		}
		f(isa, be)
		be.Close()
	}
}

// BenchmarkMatMulSmallTWidth is a verify pass's matmul at the 2B shape's
// widest K (the MLP down projection, [2048, 6144]) and its transpose, for
// T = 1..5 tokens, int8 activations, one thread (docs/PERF.md "token passes
// when the activations outgrow L1").
func BenchmarkMatMulSmallTWidth(b *testing.B) {
	forBenchLevels(b, 1, func(isa string, be *CPU) {
		if err := be.SetActivations(ActInt8); err != nil {
			b.Fatal(err)
		}
		r := numtest.NewSource(b).Stream(isa)
		for _, sh := range [][2]int{{2048, 6144}, {6144, 2048}} {
			n, k := sh[0], sh[1]
			for _, f := range []format.Format{format.Q5G64, format.Q6G64} {
				w := prepB(b, be, randPacked(r, f, n, k))
				for T := 1; T <= 5; T++ {
					xv, yv := putB(b, be, randn(r, T*k, 1)), putB(b, be, make([]float32, T*n))
					b.Run(fmt.Sprintf("%s/%dx%d/%s/T=%d", isa, n, k, f, T), func(b *testing.B) {
						for b.Loop() {
							be.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
						}
						b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/op")
					})
				}
			}
		}
	})
}

// BenchmarkMatMulInt8ActStream is the decode GEMV as the model sees it:
// T = 1 (and MTP verify's T = 2, 4: names end in /T=n) over 48 distinct copies of a [3072,1024] matrix (40–120 MB, more
// than the L3 of the machines measured), one after the other, so the
// weights stream from DRAM as in a decode step. Reports the weight bytes
// streamed per second (GB/s) next to µs per matrix.
func BenchmarkMatMulInt8ActStream(b *testing.B) {
	const n, k, copies = 3072, 1024, 48
	for _, isa := range []string{"avx2", "avx512"} {
		for _, threads := range []int{1, 2} {
			be, err := NewCPU(CPUOptions{Threads: threads, ISA: isa})
			if err != nil {
				b.Logf("skipping %s: %v", isa, err)
				continue
			}
			defer be.Close()
			r := numtest.NewSource(b).Stream(isa)
			for _, f := range q8Formats {
				p := randPacked(r, f, n, k)
				ws := make([]*Weight, copies)
				for i := range ws {
					ws[i] = prepB(b, be, p)
				}
				for _, T := range []int{1, 2, 4} { // a decode step; MTP verify passes of 2 and 4 tokens
					xv, yv := putB(b, be, randn(r, T*k, 1)), putB(b, be, make([]float32, T*n))
					for _, act := range []string{ActFP32, ActInt8} {
						name := fmt.Sprintf("%s/t%d/%s/%s", isa, threads, f, act)
						if T > 1 {
							name += fmt.Sprintf("/T=%d", T)
						}
						b.Run(name, func(b *testing.B) {
							if err := be.SetActivations(act); err != nil {
								b.Fatal(err)
							}
							i := 0
							for b.Loop() {
								be.MatMul(Dense(yv, T, n), Dense(xv, T, k), ws[i%copies], false)
								i++
							}
							ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
							b.ReportMetric(ns/1e3, "µs/op")
							b.ReportMetric(float64(len(p.bytes))/ns, "GB/s")
						})
					}
				}
			}
		}
	}
}

// routeCase is a GEMV route that replaces an older body: env=old selects
// the older one (a comparison and test switch), on CPUs where has() holds.
type routeCase struct {
	name, env, old string
	has            func() bool
	formats        []format.Format
	acts           []string
}

// TestAVX512RoutesBitIdentical: the avx512 GEMV routes that replace an
// older body compute the same bits as it, on fp32 and int8 activations at
// every fused token count: the permuted q5/q6 GEMVs with the high bits by
// AVX512_VBMI (the default where the CPU has it) or by BMI2 pext
// (NINFER_CPU_VBMI=0), the q8 int8 VNNI body on offset-binary codes or
// the sign-trick one (NINFER_CPU_Q8W=legacy), and the multi-row VNNI+VBMI,
// fp32 q8 and int8 q8 (VNNI) GEMVs at T = 1 or one row at a time (NINFER_CPU_MULTIROW=0). The oracle tests check the
// default routes' values; this ties the older routes to them.
func TestAVX512RoutesBitIdentical(t *testing.T) {
	checkRoutesBitIdentical(t, "avx512", []routeCase{
		{"vbmi", "NINFER_CPU_VBMI", "0", VBMI, []format.Format{format.Q5G64, format.Q6G64}, []string{ActFP32, ActInt8}},
		{"q8w", "NINFER_CPU_Q8W", "legacy", VNNI, []format.Format{format.Q8G32}, []string{ActInt8}},
		{"multirow-vbmi", "NINFER_CPU_MULTIROW", "0", VBMI, []format.Format{format.Q4G64, format.Q5G64, format.Q6G64}, []string{ActInt8}},
		{"multirow-q8", "NINFER_CPU_MULTIROW", "0", func() bool { return true }, []format.Format{format.Q8G32}, []string{ActFP32, ActInt8}},
		{"rows-per-token", "NINFER_CPU_ROWSMT", "0", VBMI, []format.Format{format.Q4G64, format.Q5G64, format.Q6G64}, []string{ActInt8}},
	})
}

// TestAVX2RoutesBitIdentical: at the avx2 level the int8 q4–q6 GEMVs on
// AVX-VNNI compute the bits of the maddubs ones (NINFER_CPU_AVXVNNI=0),
// and the 4-row int8 q8 and q4–q6 GEMVs the bits of one row at a time. (The q4–q6 offset-binary bodies
// add each group's two blocks in int16, the sign-trick ones
// (NINFER_CPU_AVX2Q=signed) do not: different fp32 roundings, so
// TestMatMulInt8ActOracle bounds both against the oracle.)
func TestAVX2RoutesBitIdentical(t *testing.T) {
	checkRoutesBitIdentical(t, "avx2", []routeCase{
		{"avxvnni", "NINFER_CPU_AVXVNNI", "0", AVXVNNI, []format.Format{format.Q4G64, format.Q5G64, format.Q6G64}, []string{ActInt8}},
		{"multirow-q8", "NINFER_CPU_MULTIROW", "0", func() bool { return true }, []format.Format{format.Q8G32}, []string{ActInt8}},
		{"multirow-q4-q6", "NINFER_CPU_MULTIROW", "0", func() bool { return true }, []format.Format{format.Q4G64, format.Q5G64, format.Q6G64}, []string{ActInt8}},
		{"rows-per-token", "NINFER_CPU_ROWSMT", "0", func() bool { return true }, []format.Format{format.Q4G64, format.Q8G32}, []string{ActInt8}},
	})
}

func checkRoutesBitIdentical(t *testing.T, isa string, cases []routeCase) {
	b, err := NewCPU(CPUOptions{Threads: 2, ISA: isa, AlwaysParallel: true})
	if err != nil {
		t.Skipf("no %s level: %v", isa, err)
	}
	defer b.Close()
	streams := numtest.NewSource(t)
	for _, c := range cases {
		if !c.has() {
			t.Logf("skipping %s: this CPU lacks the instructions of its new route", c.name)
			continue
		}
		for _, f := range c.formats {
			for _, k := range []int{1024, 330, 96, 160, 1216} { // whole groups; a partial group; an odd number of q8 groups; of 64-value groups (3; 19: past a block of 16 scales)
				for _, n := range []int{29, 30, 31} { // 2 threads' tasks of 8 rows: blocks of 8, then 5, 6 or 7
					r := streams.Stream(c.name, string(f), fmt.Sprint(k), fmt.Sprint(n))
					w := prep(t, b, randPacked(r, f, n, k))
					for _, act := range c.acts {
						if err := b.SetActivations(act); err != nil {
							t.Fatal(err)
						}
						for _, T := range []int{1, 2, 4, 5, 8, 12, 13, 16} { // the per-token routes end at 4, 8 and 12 tokens
							x := randn(r, T*k, 1)
							xv, yv := put(t, b, x), put(t, b, make([]float32, T*n))
							run := func(v string) []float32 {
								t.Setenv(c.env, v)
								b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
								return get(t, b, yv, T*n)
							}
							want, got := run(c.old), run("")
							for i := range want {
								if got[i] != want[i] || math.IsNaN(float64(got[i])) {
									t.Fatalf("%s/%s/K=%d/N=%d/%s/T=%d: y[%d] = %v on the new route, %v on %s=%s", c.name, f, k, n, act, T, i, got[i], want[i], c.env, c.old)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestISADetail: the load line's instruction set starts with the level
// and names AVX-VNNI at the avx2 level only where the int8 GEMVs take it.
func TestISADetail(t *testing.T) {
	for _, isa := range []string{"scalar", "avx2", "avx512"} {
		b, err := NewCPU(CPUOptions{Threads: 1, ISA: isa})
		if err != nil {
			t.Logf("skipping %s: %v", isa, err)
			continue
		}
		d := b.ISADetail()
		if d != isa && !strings.HasPrefix(d, isa+"+") {
			t.Errorf("%s: ISADetail %q does not start with the level", isa, d)
		}
		if isa == "avx2" {
			// the suite may run with the switch set (an AVX2-only CPU's route)
			off := os.Getenv("NINFER_CPU_AVXVNNI") == "0"
			if want := AVXVNNI() && !off; strings.Contains(d, "+avxvnni") != want {
				t.Errorf("avx2: ISADetail %q, CPU has AVX-VNNI %v, NINFER_CPU_AVXVNNI=0 %v", d, AVXVNNI(), off)
			}
			t.Setenv("NINFER_CPU_AVXVNNI", "0")
			if d0 := b.ISADetail(); d0 != "avx2" {
				t.Errorf("avx2 with NINFER_CPU_AVXVNNI=0: ISADetail %q, want avx2", d0)
			}
			t.Setenv("NINFER_CPU_AVXVNNI", "")
		}
		b.Close()
	}
}

// TestMatMulPiecesBitIdentical: a decode-sized matmul by a weight larger
// than pieceBytes runs as row pieces (cpuKernels.pieces, cpu.Weight.Rows)
// with the bits of one call, for every format (nvfp4 and fp8-row, without
// row views, run whole) and activation mode, at T = 1 and 4; T = 17 is not
// split.
func TestMatMulPiecesBitIdentical(t *testing.T) {
	for _, isa := range []string{"scalar", "avx2", "avx512"} {
		b, err := NewCPU(CPUOptions{Threads: 2, ISA: isa, AlwaysParallel: true})
		if err != nil {
			t.Logf("skipping %s: %v", isa, err)
			continue
		}
		streams := numtest.NewSource(t)
		const k = 256
		for _, f := range allFormats {
			n := 300 // pieces of 128, 128 and 44 rows
			if f == format.NVFP4 {
				n = 384 // its shape rule
			}
			r := streams.Stream(isa, string(f))
			p := randPacked(r, f, n, k)
			w := prep(t, b, p)
			for _, act := range []string{ActFP32, ActAuto, ActInt8} {
				if err := b.SetActivations(act); err != nil {
					t.Fatal(err)
				}
				for _, T := range []int{1, 4, 17} {
					x := randn(r, T*k, 1)
					xv, yv := put(t, b, x), put(t, b, make([]float32, T*n))
					run := func(pieces int64) []float32 {
						kk := b.ops.k.(cpuKernels)
						kk.pieceBytes = pieces
						b.ops.k = kk
						b.MatMul(Dense(yv, T, n), Dense(xv, T, k), w, false)
						return get(t, b, yv, T*n)
					}
					want, got := run(0), run(1024)
					for i := range want {
						if got[i] != want[i] || math.IsNaN(float64(got[i])) {
							t.Fatalf("%s/%s/%s/T=%d: y[%d] = %v in pieces, %v in one call", isa, f, act, T, i, got[i], want[i])
						}
					}
				}
			}
		}
		b.Close()
	}
}

// BenchmarkMatMulInt8ActSize times one [N,1024] q5 matmul at T = 1 (int8,
// the avx512 level, 2 threads) streamed from DRAM (copies cycled through
// ≥ 256 MB) for N from 1024 to 98304 rows: bandwidth against size gives the
// fixed cost of a decode matmul (docs/PERF.md "Eleventh session"):
// go test ./pkg/backend -run '^$' -bench MatMulInt8ActSize.
func BenchmarkMatMulInt8ActSize(b *testing.B) {
	be, err := NewCPU(CPUOptions{Threads: 2, ISA: "avx512"})
	if err != nil {
		b.Skipf("no avx512 level: %v", err)
	}
	defer be.Close()
	if err := be.SetActivations(ActInt8); err != nil {
		b.Fatal(err)
	}
	r := numtest.NewSource(b).Stream("size")
	const k = 1024
	for _, n := range []int{1024, 2048, 6144, 24576, 98304} {
		p := randPacked(r, format.Q5G64, n, k)
		ws := make([]*Weight, 1+(256<<20)/len(p.bytes))
		for i := range ws {
			ws[i] = prepB(b, be, p)
		}
		xv, yv := putB(b, be, randn(r, k, 1)), putB(b, be, make([]float32, n))
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				be.MatMul(Dense(yv, 1, n), Dense(xv, 1, k), ws[i%len(ws)], false)
				i++
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/1e3, "µs/op")
			b.ReportMetric(float64(len(p.bytes))/ns, "GB/s")
		})
	}
}
