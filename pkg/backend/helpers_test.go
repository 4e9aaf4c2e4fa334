package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/format"
)

// tol is a named tolerance preset (see numtest.Tolerance): a result passes
// when every element is within Atol + Rtol·|want| or all tail caps hold;
// non-finite values always fail.
type tol = numtest.Tolerance

// Presets (frozen; fix the kernel, not the tolerance).
var (
	tolExact     = tol{Name: "exact"}
	tolElem      = tol{Name: "elementwise_fp32", Atol: 1e-5, Rtol: 1e-5}
	tolGDNCtl    = tol{Name: "gdn_control_fp32", Atol: 1e-6, Rtol: 1e-5}
	tolDecodeRow = tol{Name: "decode_row", Rtol: 1e-6}
)

// check fails the test when got is not within tl of the reference want.
var check = numtest.Check

// linearCase is the FP64 reference of y = [y0 +] x·Wᵀ for T tokens of a
// matmul with weights in format f, with the magnitudes its derived error
// bound needs (numtest.Dots).
type linearCase struct {
	f    format.Format
	T    int
	dots *numtest.Dots
}

// linearRef builds the linearCase of the weights p: token t's activations
// are x[t·xStride+xOff:][:K], its accumulated outputs (y0 non-nil)
// y0[t·yStride+yOff:][:N].
func linearRef(p packed, T int, x []float32, xStride, xOff int, y0 []float32, yStride, yOff int) linearCase {
	ref := numtest.NewDots(p.k)
	for tt := 0; tt < T; tt++ {
		xt := x[tt*xStride+xOff:][:p.k]
		for nn := 0; nn < p.n; nn++ {
			c := 0.0
			if y0 != nil {
				c = float64(y0[tt*yStride+yOff+nn])
			}
			ref.Add(c, xt, p.w[nn*p.k:][:p.k])
		}
	}
	return linearCase{f: p.f, T: T, dots: ref}
}

// accumulation is the arithmetic backend b uses for a matmul of T tokens
// with weights in format f: the CUDA mma.sync GEMM (T > the small-T bound,
// every format but fp32) sums bf16-split products on tensor cores; every
// other path is an fp32 round-to-nearest chain.
func accumulation(b Backend, f format.Format, T int) numtest.Accumulation {
	if strings.HasPrefix(b.Name(), "cuda") && T > SmallTForTest && f != format.FP32 {
		return numtest.TensorCoreBF16x3
	}
	return numtest.FP32Chain
}

// checkLinear fails the test when a matmul result is outside the error
// bounds derived from its backend's accumulation (numtest.CheckDots).
func checkLinear(t *testing.T, b Backend, name string, got []float32, ref linearCase) {
	t.Helper()
	acc := accumulation(b, ref.f, ref.T)
	checkDots(t, name, got, ref.dots, acc)
}

// checkDots is numtest.CheckDots that logs, with -v, how close the result
// came to its bounds.
func checkDots(t *testing.T, name string, got []float32, ref *numtest.Dots, acc numtest.Accumulation) {
	t.Helper()
	st, err := numtest.DotsError(name, got, ref, acc)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("%s: rms normalised error %.3g (%s, ZMax %g), worst error %.3g of its bound", name, st.RMSZ, acc.Name, numtest.ZMax, st.WorstOfBound)
	}
}

// seeded returns the test's random stream, derived from the base seed and
// the test's name (numtest.Source); tests that loop over backends take one
// stream per backend (and case) from a numtest.Source instead.
var seeded = numtest.Seeded

func randn(r *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

// f64 widens float32 values to float64.
var f64 = numtest.F64

// backends returns one CPU backend per instruction set this machine can
// run, each running every op on its 2-thread pool, plus the CUDA backend
// when this test binary has it (-tags cuda with a usable device, or
// -tags cudasim: the kernels under the host SIMT harness). Every op test
// runs on each against the same FP64 oracles and tolerances.
func backends(t *testing.T) []Backend {
	t.Helper()
	var out []Backend
	for _, isa := range []string{"scalar", "avx2", "avx512"} {
		b, err := NewCPU(CPUOptions{Threads: 2, ISA: isa, AlwaysParallel: true})
		if err != nil {
			t.Logf("skipping isa %s: %v", isa, err)
			continue
		}
		t.Cleanup(func() { b.Close() })
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatal("no backend")
	}
	if CUDABuilt {
		b, err := NewCUDA(CUDAOptions{})
		if err != nil {
			t.Logf("skipping the CUDA backend: %v", err)
		} else {
			t.Cleanup(func() { b.Close() })
			out = append(out, b)
		}
	}
	return out
}

// put uploads float32 values into a fresh buffer and returns its view.
func put(t *testing.T, b Backend, x []float32) View {
	t.Helper()
	buf, err := b.Alloc("test", int64(4*len(x)+4))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UploadF32(View{buf, 0}, x); err != nil {
		t.Fatal(err)
	}
	return View{buf, 0}
}

func putI32(t *testing.T, b Backend, x []int32) View {
	t.Helper()
	buf, err := b.Alloc("test-i32", int64(4*len(x)+4))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UploadI32(View{buf, 0}, x); err != nil {
		t.Fatal(err)
	}
	return View{buf, 0}
}

func get(t *testing.T, b Backend, v View, n int) []float32 {
	t.Helper()
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	if err := b.DownloadF32(out, v); err != nil {
		t.Fatal(err)
	}
	return out
}

// ---- independent reference codecs (from docs/FORMAT.md byte layouts; the
// decoders are numtest.F16ToF64, E4M3ToF64 and BF16ToF64) ----

func bf16Bits(f float32) uint16 { // RNE
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// packed is a weight encoded in some format plus its exact decoded values.
type packed struct {
	f     format.Format
	n, k  int
	bytes []byte
	w     []float64 // [n*k] exact decoded weights
}

// randPacked builds a random [n,k] weight directly in the packed layout
// (random codes and scales), so decoding is checked independently of any
// encoder.
func randPacked(r *rand.Rand, f format.Format, n, k int) packed {
	p := packed{f: f, n: n, k: k, w: make([]float64, n*k)}
	switch f {
	case format.FP32:
		p.bytes = make([]byte, 4*n*k)
		for i := range p.w {
			v := float32(r.NormFloat64() * 0.1)
			binary.LittleEndian.PutUint32(p.bytes[4*i:], math.Float32bits(v))
			p.w[i] = float64(v)
		}
	case format.BF16:
		p.bytes = make([]byte, 2*n*k)
		for i := range p.w {
			h := bf16Bits(float32(r.NormFloat64() * 0.1))
			binary.LittleEndian.PutUint16(p.bytes[2*i:], h)
			p.w[i] = numtest.BF16ToF64(h)
		}
	case format.Q4G64, format.Q5G64, format.Q6G64, format.Q8G32:
		gp, _ := f.Group()
		g, err := format.RowSplitLayout(f, int64(n), int64(k))
		if err != nil {
			panic(err)
		}
		p.bytes = make([]byte, g.Bytes)
		for row := 0; row < n; row++ {
			for gi := 0; gi < int(g.GroupsPerRow); gi++ {
				idx := int64(row)*g.GroupsPerRow + int64(gi)
				c0 := gi * gp.Group
				if c0 >= k {
					continue // wholly padded group: scale 0, codes 0
				}
				s := uint16(0x2000 + r.IntN(0x1000)) // fp16 in [2^-7, 2^-6)
				binary.LittleEndian.PutUint16(p.bytes[g.ScaleOff+2*idx:], s)
				sv := numtest.F16ToF64(s)
				for lane := 0; lane < gp.Group && c0+lane < k; lane++ {
					q := r.IntN(2*gp.QMax+1) - gp.QMax
					if gp.Bits < 8 && r.IntN(16) == 0 {
						q = -gp.QMax - 1 // most negative code
					}
					u := q & (1<<gp.Bits - 1)
					if gp.Bits == 8 {
						p.bytes[idx*32+int64(lane)] = byte(int8(q))
					} else {
						p.bytes[idx*32+int64(lane/2)] |= byte(u&15) << (4 * (lane & 1))
						hb := gp.Bits - 4
						for b := 0; b < hb; b++ {
							bit := lane*hb + b
							p.bytes[g.HighOff+idx*int64(gp.HighBytes)+int64(bit/8)] |= byte((u>>(4+b))&1) << (bit % 8)
						}
					}
					p.w[row*k+c0+lane] = sv * float64(q)
				}
			}
		}
	case format.NVFP4:
		g, err := format.NVFP4Layout(int64(n), int64(k))
		if err != nil {
			panic(err)
		}
		p.bytes = make([]byte, g.Bytes)
		div := float32(0.5 + r.Float64()*4)
		binary.LittleEndian.PutUint32(p.bytes[g.DivisorOff:], math.Float32bits(div))
		e2m1 := []float64{0, .5, 1, 1.5, 2, 3, 4, 6}
		kt := k / 64
		for row := 0; row < n; row++ {
			for blk := 0; blk < k/16; blk++ {
				sb := uint8(0x30 + r.IntN(0x20)) // e4m3 in [2^-1, 2^3)
				rt, ri := row/128, row%128
				off := (rt*kt+blk/4)*512 + (ri%32)*16 + (ri/32)*4 + blk%4
				p.bytes[g.ScaleOff+int64(off)] = sb
				for i := 0; i < 16; i++ {
					col := blk*16 + i
					c := uint8(r.IntN(16))
					p.bytes[row*k/2+col/2] |= c << (4 * (col & 1))
					v := e2m1[c&7]
					if c&8 != 0 {
						v = -v
					}
					p.w[row*k+col] = v * numtest.E4M3ToF64(sb) / float64(div)
				}
			}
		}
	case format.FP8Row:
		g, err := format.FP8RowLayout(int64(n), int64(k))
		if err != nil {
			panic(err)
		}
		p.bytes = make([]byte, g.Bytes)
		for row := 0; row < n; row++ {
			s := bf16Bits(float32(0.001 + r.Float64()*0.01))
			binary.LittleEndian.PutUint16(p.bytes[g.ScaleOff+int64(2*row):], s)
			for col := 0; col < k; col++ {
				c := uint8(r.IntN(256))
				for c&0x7f == 0x7f {
					c = uint8(r.IntN(256))
				}
				p.bytes[row*k+col] = c
				p.w[row*k+col] = numtest.E4M3ToF64(c) * numtest.BF16ToF64(s)
			}
		}
	default:
		panic(fmt.Sprintf("randPacked: %s", f))
	}
	return p
}

func prep(t *testing.T, b Backend, p packed) *Weight {
	t.Helper()
	buf, err := b.Alloc("weight", int64(len(p.bytes)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(View{buf, 0}, p.bytes); err != nil {
		t.Fatal(err)
	}
	w, err := b.PrepareWeight(string(p.f), p.f, p.n, p.k, View{buf, 0}, int64(len(p.bytes)))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var allFormats = []format.Format{format.FP32, format.BF16, format.Q4G64, format.Q5G64, format.Q6G64, format.Q8G32, format.NVFP4, format.FP8Row}
