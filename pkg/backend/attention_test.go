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
				want := make([]float64, T*nh*hd)
				for i := 0; i < T; i++ {
					for h := 0; h < nh; h++ {
						g := h / (nh / kvh)
						qq := q[(i*nh+h)*hd:][:hd]
						n := pos0 + i + 1
						sc := make([]float64, n)
						mx := math.Inf(-1)
						for s := 0; s < n; s++ {
							d := 0.0
							for x := 0; x < hd; x++ {
								d += float64(qq[x]) * float64(keys[s][g*hd+x])
							}
							sc[s] = d * float64(qscale)
							mx = math.Max(mx, sc[s])
						}
						den := 0.0
						for s := range sc {
							sc[s] = math.Exp(sc[s] - mx)
							den += sc[s]
						}
						for x := 0; x < hd; x++ {
							acc := 0.0
							for s := 0; s < n; s++ {
								acc += sc[s] * float64(vals[s][g*hd+x])
							}
							want[(i*nh+h)*hd+x] = acc / den
						}
					}
				}
				check(t, fmt.Sprintf("%s/%s/pos0=%d/T=%d", b.Name(), kf, pos0, T), got, want, tolAttnBF16)
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
