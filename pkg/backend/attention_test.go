package backend

import (
	"fmt"
	"math"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

func TestAttentionPagedKVFormats(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, kf := range []KVFormat{KVBF16, KVInt8G64, KVFP8Row, KVF32} {
			nh, kvh, hd, pages := 4, 2, 128, 4
			table := []int32{2, 0, 3, 1} // logical → physical
			code, scale := KVPlaneBytes(kf, hd)
			nvec := int64(pages * kvh * KVPage)
			alloc := func(n int64) View {
				if n == 0 {
					return View{}
				}
				buf, err := b.Alloc("kv", n)
				if err != nil {
					t.Fatal(err)
				}
				return View{buf, 0}
			}
			kv := KVLayer{Format: kf, KVHeads: kvh, HeadDim: hd, Pages: pages, K: alloc(nvec * code), V: alloc(nvec * code),
				KS: alloc(nvec * scale), VS: alloc(nvec * scale), BlockTable: putI32(t, b, table), TableLen: len(table)}
			var keys, vals [][]float32 // per position: [kvh*hd]
			qscale := float32(1 / math.Sqrt(float64(hd)))
			pos0 := 0
			for _, T := range []int{70, 1, 3} { // prefill across a page boundary, decode, small T
				k, v, q := randn(r, T*kvh*hd, 1), randn(r, T*kvh*hd, 1), randn(r, T*nh*hd, 1)
				pos := make([]int32, T)
				for i := range pos {
					pos[i] = int32(pos0 + i)
				}
				pv := putI32(t, b, pos)
				b.KVAppend(kv, Heads(put(t, b, k), T, kvh, hd), Heads(put(t, b, v), T, kvh, hd), pv)
				for i := 0; i < T; i++ {
					kk, vv := k[i*kvh*hd:(i+1)*kvh*hd], v[i*kvh*hd:(i+1)*kvh*hd]
					// the oracle sees the represented (stored) values
					kk, vv = represent(kf, kk, kvh, hd), represent(kf, vv, kvh, hd)
					keys, vals = append(keys, kk), append(vals, vv)
				}
				ov := put(t, b, make([]float32, T*nh*hd))
				b.Attention(Heads(ov, T, nh, hd), Heads(put(t, b, q), T, nh, hd), kv, pv, qscale)
				got := get(t, b, ov, T*nh*hd)
				ref := numtest.NewDots(pos0 + T)
				for i := 0; i < T; i++ {
					for h := 0; h < nh; h++ {
						g := h / (nh / kvh)
						attentionRef(ref, q[(i*nh+h)*hd:][:hd], keys[:pos0+i+1], vals[:pos0+i+1], g*hd, float64(qscale))
					}
				}
				checkDots(t, fmt.Sprintf("%s/%s/pos0=%d/T=%d", b.Name(), kf, pos0, T), got, ref, numtest.FP32Chain)
				pos0 += T
			}
			// Positions beyond the block table are reported.
			b.KVAppend(kv, Heads(put(t, b, make([]float32, kvh*hd)), 1, kvh, hd), Heads(put(t, b, make([]float32, kvh*hd)), 1, kvh, hd),
				putI32(t, b, []int32{int32(len(table) * KVPage)}))
			if err := b.Sync(); err == nil {
				t.Fatalf("%s: append past the block table was not reported", kf)
			}
		}
	}
}

// attentionRef appends to ref the hd outputs of one query row q over the
// positions' represented keys and values (head columns [off, off+hd)):
// out_x = Σ_s p_s·v_s[x] with p = softmax(scale·q·k_s), as products p_s·v_s[x]
// in FP64, each with the relative error that fp32 softmax weights carry:
//
//	δp ≤ 2·max_s E_s + (n+2)·2⁻²¹ + γ_n,
//	E_s = γ_(hd+2)·scale·Σ|q·k_s| + 3u·(|score_s| + |max score|),
//
// the score's dot-product and scaling error E_s moves p_s by E_s and the
// normaliser by at most max E; expf is within 2 ulp (2⁻²²) and the online
// softmax may rescale the running sums once per position, each rescale one
// expf and one multiply (≤ 2⁻²¹); the denominator is an n-term sum (γ_n) and
// the final division one more rounding. The sum Σ p_s·v_s itself is the
// FP32Chain accumulation of n products.
func attentionRef(ref *numtest.Dots, q []float32, keys, vals [][]float32, off int, scale float64) {
	const u = 0x1p-24
	n, hd := len(keys), len(q)
	gamma := func(m int) float64 { return float64(m) * u / (1 - float64(m)*u) }
	sc := make([]float64, n)
	absDot := make([]float64, n)
	mx := math.Inf(-1)
	for s := 0; s < n; s++ {
		d, a := 0.0, 0.0
		for x := 0; x < hd; x++ {
			p := float64(q[x]) * float64(keys[s][off+x])
			d += p
			a += math.Abs(p)
		}
		sc[s], absDot[s] = d*scale, a*scale
		mx = math.Max(mx, sc[s])
	}
	var maxE float64
	for s := 0; s < n; s++ {
		maxE = math.Max(maxE, gamma(hd+2)*absDot[s]+3*u*(math.Abs(sc[s])+math.Abs(mx)))
	}
	rep := 2*maxE + float64(n+2)*0x1p-21 + gamma(n) + 2*u // + the division and a dequantised value
	den := 0.0
	w := make([]float64, n)
	for s := range sc {
		w[s] = math.Exp(sc[s] - mx)
		den += w[s]
	}
	terms := make([]float64, n)
	for x := 0; x < hd; x++ {
		for s := 0; s < n; s++ {
			terms[s] = w[s] / den * float64(vals[s][off+x])
		}
		ref.AddTerms(terms, rep)
	}
}

func roundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(numtest.BF16ToF64(bf16Bits(v)))
	}
	return out
}

// quantum rounds |x| to the nearest multiple of the float grid with mbits
// mantissa bits and minimum normal exponent emin (ties to even).
func roundGrid(x float64, mbits, emin int) float64 {
	a := math.Abs(x)
	if a == 0 {
		return 0
	}
	_, e := math.Frexp(a)
	E := max(e-1, emin)
	q := math.Ldexp(1, E-mbits)
	return math.Copysign(math.RoundToEven(a/q)*q, x)
}

func roundF16(x float32) float32 { return float32(roundGrid(float64(x), 10, -14)) }
func roundE4M3(x float32) float32 {
	return float32(math.Min(math.Max(roundGrid(float64(x), 3, -6), -448), 448))
}

// represent returns the values a KV cache of format f stores for x
// ([kvh][hd]), computed independently of the kernels.
func represent(f KVFormat, x []float32, kvh, hd int) []float32 {
	out := make([]float32, len(x))
	switch f {
	case KVF32:
		copy(out, x)
	case KVBF16:
		return roundBF16(x)
	case KVInt8G64:
		for g0 := 0; g0 < len(x); g0 += 64 {
			grp := x[g0:min(g0+64, len(x))]
			var am float32
			for _, v := range grp {
				am = max(am, float32(math.Abs(float64(v))))
			}
			s := roundF16(am / 127)
			for i, v := range grp {
				if s == 0 {
					continue
				}
				q := math.RoundToEven(float64(v * (1 / s)))
				out[g0+i] = float32(math.Max(-127, math.Min(127, q))) * s
			}
		}
	case KVFP8Row:
		for h := 0; h < kvh; h++ {
			vec := x[h*hd : (h+1)*hd]
			var am float32
			for _, v := range vec {
				am = max(am, float32(math.Abs(float64(v))))
			}
			s := roundF16(am / 448)
			for i, v := range vec {
				if s != 0 {
					out[h*hd+i] = roundE4M3(v/s) * s
				}
			}
		}
	}
	return out
}
