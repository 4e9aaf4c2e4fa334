package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

func silu64(x float64) float64    { return x / (1 + math.Exp(-x)) }
func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestRMSNormPlainZeroCentredAndStridedHeads(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, zc := range []bool{false, true} {
			// q_norm layout: T=3 tokens of nh=4 heads with [q(40)|gate(40)] per head.
			T, H, D := 3, 4, 40
			x := randn(r, T*H*2*D, 2)
			w := randn(r, D, 0.5)
			xv, wv := put(t, b, x), put(t, b, w)
			yv := put(t, b, make([]float32, T*H*D))
			src := Tensor{xv, T, H, D, H * 2 * D, 2 * D}
			b.RMSNorm(Heads(yv, T, H, D), src, wv, 1e-6, zc)
			got := get(t, b, yv, T*H*D)
			want := make([]float64, T*H*D)
			for tt := 0; tt < T; tt++ {
				for h := 0; h < H; h++ {
					row := x[tt*H*2*D+h*2*D:][:D]
					ss := 0.0
					for _, v := range row {
						ss += float64(v) * float64(v)
					}
					rs := 1 / math.Sqrt(ss/float64(D)+1e-6)
					for d := 0; d < D; d++ {
						ww := float64(w[d])
						if zc {
							ww += 1
						}
						want[(tt*H+h)*D+d] = float64(row[d]) * rs * ww
					}
				}
			}
			check(t, fmt.Sprintf("%s/zero_centred=%v", b.Name(), zc), got, want, tolElem)
		}
	}
}

func TestGatedRMSNormL2NormAndElementwise(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		T, H, D := 5, 3, 24
		n := T * H * D
		o, z, w := randn(r, n, 1), randn(r, n, 2), randn(r, D, 1)
		ov, zv, wv, yv := put(t, b, o), put(t, b, z), put(t, b, w), put(t, b, make([]float32, n))
		b.GatedRMSNorm(Heads(yv, T, H, D), Heads(ov, T, H, D), Heads(zv, T, H, D), wv, 1e-6)
		want := make([]float64, n)
		for row := 0; row < T*H; row++ {
			ss := 0.0
			for d := 0; d < D; d++ {
				ss += float64(o[row*D+d]) * float64(o[row*D+d])
			}
			rs := 1 / math.Sqrt(ss/float64(D)+1e-6)
			for d := 0; d < D; d++ {
				i := row*D + d
				want[i] = float64(w[d]) * float64(o[i]) * rs * silu64(float64(z[i]))
			}
		}
		check(t, b.Name()+"/gated_rmsnorm", get(t, b, yv, n), want, tolElem)

		b.L2Norm(Heads(yv, T, H, D), Heads(ov, T, H, D), 0.25)
		for row := 0; row < T*H; row++ {
			ss := 0.0
			for d := 0; d < D; d++ {
				ss += float64(o[row*D+d]) * float64(o[row*D+d])
			}
			for d := 0; d < D; d++ {
				want[row*D+d] = float64(o[row*D+d]) / math.Sqrt(ss+1e-6) * 0.25
			}
		}
		check(t, b.Name()+"/l2norm", get(t, b, yv, n), want, tolElem)

		for _, op := range []string{"sigmoid_mul", "swiglu", "add"} {
			switch op {
			case "sigmoid_mul":
				b.SigmoidMul(Heads(yv, T, H, D), Heads(ov, T, H, D), Heads(zv, T, H, D))
			case "swiglu":
				b.SwiGLU(Heads(yv, T, H, D), Heads(ov, T, H, D), Heads(zv, T, H, D))
			case "add":
				b.Add(Heads(yv, T, H, D), Heads(ov, T, H, D), Heads(zv, T, H, D))
			}
			for i := range want {
				a, c := float64(o[i]), float64(z[i])
				switch op {
				case "sigmoid_mul":
					want[i] = a * sigmoid64(c)
				case "swiglu":
					want[i] = silu64(a) * c
				case "add":
					want[i] = a + c
				}
			}
			check(t, b.Name()+"/"+op, get(t, b, yv, n), want, tolElem)
		}
	}
}

func TestRoPEPartialNeoX(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		T, H, D, rot := 4, 3, 32, 8
		theta := 1e7
		x := randn(r, T*H*D, 1)
		pos := []int32{0, 1, 77, 100000}
		xv := put(t, b, x)
		b.RoPE(Heads(xv, T, H, D), putI32(t, b, pos), rot, theta)
		want := make([]float64, T*H*D)
		for tt := 0; tt < T; tt++ {
			for h := 0; h < H; h++ {
				base := (tt*H + h) * D
				for d := 0; d < D; d++ {
					want[base+d] = float64(x[base+d])
				}
				for j := 0; j < rot/2; j++ {
					ang := float64(pos[tt]) * math.Pow(theta, -2*float64(j)/float64(rot))
					a, c := float64(x[base+j]), float64(x[base+j+rot/2])
					want[base+j] = a*math.Cos(ang) - c*math.Sin(ang)
					want[base+j+rot/2] = c*math.Cos(ang) + a*math.Sin(ang)
				}
			}
		}
		check(t, b.Name()+"/rope", get(t, b, xv, T*H*D), want, tolElem)
	}
}

func TestArgmaxTiesAndNaN(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		V := 1000
		x := randn(r, 3*V, 1)
		x[0*V+10], x[0*V+500] = 9, 9 // tie: lowest id wins
		x[1*V+3] = float32(math.NaN())
		x[1*V+999] = 50
		x[2*V+0] = 100
		out := putI32(t, b, make([]int32, 3))
		b.Argmax(out, Dense(put(t, b, x), 3, V))
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		got := make([]int32, 3)
		if err := b.DownloadI32(got, out); err != nil {
			t.Fatal(err)
		}
		if got[0] != 10 || got[1] != 999 || got[2] != 0 {
			t.Fatalf("%s: argmax %v, want [10 999 0]", b.Name(), got)
		}
	}
}

func TestGDNGate(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		T, nv := 6, 5
		a, bb := randn(r, T*nv, 3), randn(r, T*nv, 3)
		a[0] = 30 // softplus threshold branch
		aLog, dt := randn(r, nv, 1), randn(r, nv, 1)
		gv, betav := put(t, b, make([]float32, T*nv)), put(t, b, make([]float32, T*nv))
		b.GDNGate(Heads(gv, T, nv, 1), Heads(betav, T, nv, 1), Heads(put(t, b, a), T, nv, 1), Heads(put(t, b, bb), T, nv, 1),
			put(t, b, aLog), put(t, b, dt))
		wg, wb := make([]float64, T*nv), make([]float64, T*nv)
		for i := range wg {
			j := i % nv
			x := float64(a[i]) + float64(dt[j])
			sp := math.Log1p(math.Exp(x))
			if x > 20 {
				sp = x
			}
			wg[i] = -math.Exp(float64(aLog[j])) * sp
			wb[i] = sigmoid64(float64(bb[i]))
		}
		check(t, b.Name()+"/g", get(t, b, gv, T*nv), wg, tolGDNCtl)
		check(t, b.Name()+"/beta", get(t, b, betav, T*nv), wb, tolGDNCtl)
	}
}

// convRef runs the conv oracle and returns outputs and the window after
// each token. With bf16 every input enters the window rounded to bf16.
func convRef(x []float32, T, C, kw int, w, win0 []float32, bf16 bool) ([]float64, [][]float64) {
	y := make([]float64, T*C)
	wins := make([][]float64, T)
	win := f64(win0)
	for tt := 0; tt < T; tt++ {
		next := make([]float64, len(win))
		for c := 0; c < C; c++ {
			s := float64(w[c*kw+kw-1]) * float64(x[tt*C+c])
			for i := 0; i < kw-1; i++ {
				s += float64(w[c*kw+i]) * win[c*(kw-1)+i]
			}
			y[tt*C+c] = silu64(s)
			for i := 0; i < kw-2; i++ {
				next[c*(kw-1)+i] = win[c*(kw-1)+i+1]
			}
			in := float64(x[tt*C+c])
			if bf16 {
				in = numtest.BF16ToF64(bf16Bits(x[tt*C+c]))
			}
			next[c*(kw-1)+kw-2] = in
		}
		win = next
		wins[tt] = win
	}
	return y, wins
}

// putState uploads conv state values as fp32 or bf16 elements.
func putState(t *testing.T, b Backend, x []float32, bf16 bool) View {
	t.Helper()
	if !bf16 {
		return put(t, b, x)
	}
	raw := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(raw[2*i:], bf16Bits(v))
	}
	buf, err := b.Alloc("test-bf16", int64(len(raw)+4))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upload(View{buf, 0}, raw); err != nil {
		t.Fatal(err)
	}
	return View{buf, 0}
}

// getState downloads n conv state elements.
func getState(t *testing.T, b Backend, v View, n int, bf16 bool) []float32 {
	t.Helper()
	if !bf16 {
		return get(t, b, v, n)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 2*n)
	if err := b.Download(raw, v); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(numtest.BF16ToF64(binary.LittleEndian.Uint16(raw[2*i:])))
	}
	return out
}

// TestConv1DSiLUSlots checks the conv against the FP64 oracle with fp32
// and bf16 window state: outputs, the written slots (exact: the window
// holds the inputs, bf16-rounded with bf16 state) and untouched slots.
func TestConv1DSiLUSlots(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		C, kw, slots := 70, 4, 6
		sw := C * (kw - 1)
		for _, bf := range []bool{false, true} {
			for _, T := range []int{1, 5} {
				for _, mode := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					// inPlace: y is x's buffer (the CPU kernel's token rows
					// may alias: kernels/cpu conv_step3).
					perToken, inPlace := mode[0], mode[1]
					x, w := randn(r, T*C, 1), randn(r, C*kw, 0.5)
					state := make([]float32, slots*sw)
					for i := range state {
						state[i] = 17 // sentinel
					}
					in := 2
					init := randn(r, sw, 1)
					if bf {
						for i, v := range init {
							init[i] = float32(numtest.BF16ToF64(bf16Bits(v))) // a stored bf16 window
						}
					}
					copy(state[in*sw:], init)
					sv := putState(t, b, state, bf)
					xv := put(t, b, x)
					yv := xv
					if !inPlace {
						yv = put(t, b, make([]float32, T*C))
					}
					out := 4
					if perToken {
						out = PerToken
					}
					elem := int64(4)
					if bf {
						elem = 2
					}
					st := StateSlots{View: sv, Slots: slots, SlotBytes: elem * int64(sw), BF16: bf}
					b.Conv1DSiLU(Dense(yv, T, C), Dense(xv, T, C), put(t, b, w), kw, st, putI32(t, b, []int32{int32(in)}), out)
					wy, wins := convRef(x, T, C, kw, w, state[in*sw:(in+1)*sw], bf)
					name := fmt.Sprintf("%s/bf16=%v/T=%d/per_token=%v/in_place=%v", b.Name(), bf, T, perToken, inPlace)
					check(t, name+"/y", get(t, b, yv, T*C), wy, tolElem)
					gs := getState(t, b, sv, slots*sw, bf)
					for s := 0; s < slots; s++ {
						want := f64(state[s*sw : (s+1)*sw]) // untouched
						switch {
						case perToken && s < T:
							want = wins[s]
						case !perToken && s == out:
							want = wins[T-1]
						}
						check(t, fmt.Sprintf("%s/slot%d", name, s), gs[s*sw:(s+1)*sw], want, tolExact)
					}
				}
			}
		}
		// A bf16 slot narrower than the window is refused.
		st := StateSlots{View: putState(t, b, make([]float32, 8), true), Slots: 1, SlotBytes: 2 * int64(sw-1), BF16: true}
		b.Conv1DSiLU(Dense(put(t, b, make([]float32, C)), 1, C), Dense(put(t, b, make([]float32, C)), 1, C), put(t, b, make([]float32, C*kw)),
			kw, st, putI32(t, b, []int32{0}), 0)
		if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "conv1d") {
			t.Errorf("%s: short bf16 slot: %v", b.Name(), err)
		}
	}
}
