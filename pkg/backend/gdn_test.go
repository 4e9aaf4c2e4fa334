package backend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

type gdnCase struct {
	T, nk, nv, dk, dv int
	q, k, v, g, beta  []float32 // q, k L2-normalised (q scaled by dk^-1/2)
}

func newGDNCase(r *rand.Rand, T, nk, nv, dk, dv int) gdnCase {
	c := gdnCase{T: T, nk: nk, nv: nv, dk: dk, dv: dv}
	c.q, c.k, c.v = randn(r, T*nk*dk, 1), randn(r, T*nk*dk, 1), randn(r, T*nv*dv, 1)
	for _, x := range []([]float32){c.q, c.k} {
		for row := 0; row < T*nk; row++ {
			ss := 0.0
			for d := 0; d < dk; d++ {
				ss += float64(x[row*dk+d]) * float64(x[row*dk+d])
			}
			for d := 0; d < dk; d++ {
				x[row*dk+d] = float32(float64(x[row*dk+d]) / math.Sqrt(ss+1e-6))
			}
		}
	}
	for i := range c.q {
		c.q[i] *= float32(1 / math.Sqrt(float64(dk)))
	}
	c.g, c.beta = make([]float32, T*nv), make([]float32, T*nv)
	for i := range c.g {
		c.g[i] = float32(-r.Float64() * 0.5)
		c.beta[i] = float32(r.Float64())
	}
	return c
}

// ref runs the FP64 recurrent oracle from state s0 ([nv][dk][dv]); returns
// outputs and the state after every token.
func (c gdnCase) ref(s0 []float32) ([]float64, [][]float64) {
	o, states, _, _ := c.refBounded(s0)
	return o, states
}

// refBounded is ref with, for every output and state element, a bound on
// the error of an fp32 evaluation of the same recurrence, derived by running
// error analysis alongside the FP64 values (first order in u = 2⁻²⁴, any
// summation order):
//
//	decay   Ŝ ← Ŝ·fl(exp g):   E ← d·E + d·|S|·(2⁻²² + u)        (expf within 2 ulp)
//	s = Ŝᵀk:                   e_s = Σ|k|·E + γ_(dk+2)·Σ|S·k|
//	kv = β(v − s):             e_kv = |β|·(e_s + u(|v|+|s|)) + 2u·|kv|
//	S ← S + k ⊗ kv:            E ← E + |k|·e_kv + 2u·(|S| + |k·kv|)
//	o = Sᵀq:                   e_o = Σ|q|·E + γ_(dk+2)·Σ|S·q|
//
// The inputs (q, k, v, g, β, the initial state) are fp32 values, exact.
func (c gdnCase) refBounded(s0 []float32) (o []float64, states [][]float64, oBound []float64, stateBounds [][]float64) {
	const u = 0x1p-24
	gamma := func(m int) float64 { return float64(m) * u / (1 - float64(m)*u) }
	gdk := gamma(c.dk + 2)
	S := f64(s0)
	E := make([]float64, len(S))
	o = make([]float64, c.T*c.nv*c.dv)
	oBound = make([]float64, len(o))
	states = make([][]float64, c.T)
	stateBounds = make([][]float64, c.T)
	kv, ekv := make([]float64, c.dv), make([]float64, c.dv)
	for t := 0; t < c.T; t++ {
		for j := 0; j < c.nv; j++ {
			kh := j / (c.nv / c.nk)
			Sj, Ej := S[j*c.dk*c.dv:][:c.dk*c.dv], E[j*c.dk*c.dv:][:c.dk*c.dv]
			q, k := c.q[(t*c.nk+kh)*c.dk:][:c.dk], c.k[(t*c.nk+kh)*c.dk:][:c.dk]
			v := c.v[(t*c.nv+j)*c.dv:][:c.dv]
			dec, b := math.Exp(float64(c.g[t*c.nv+j])), float64(c.beta[t*c.nv+j])
			for i := range Sj {
				Ej[i] = dec*Ej[i] + dec*math.Abs(Sj[i])*(0x1p-22+u)
				Sj[i] *= dec
			}
			for d := 0; d < c.dv; d++ {
				s, es, abs := 0.0, 0.0, 0.0
				for i := 0; i < c.dk; i++ {
					s += Sj[i*c.dv+d] * float64(k[i])
					es += math.Abs(float64(k[i])) * Ej[i*c.dv+d]
					abs += math.Abs(Sj[i*c.dv+d] * float64(k[i]))
				}
				es += gdk * abs
				kv[d] = b * (float64(v[d]) - s)
				ekv[d] = math.Abs(b)*(es+u*(math.Abs(float64(v[d]))+math.Abs(s))) + 2*u*math.Abs(kv[d])
			}
			for i := 0; i < c.dk; i++ {
				ki := float64(k[i])
				for d := 0; d < c.dv; d++ {
					x := i*c.dv + d
					Ej[x] += math.Abs(ki)*ekv[d] + 2*u*(math.Abs(Sj[x])+math.Abs(ki*kv[d]))
					Sj[x] += ki * kv[d]
				}
			}
			for d := 0; d < c.dv; d++ {
				s, eo, abs := 0.0, 0.0, 0.0
				for i := 0; i < c.dk; i++ {
					s += Sj[i*c.dv+d] * float64(q[i])
					eo += math.Abs(float64(q[i])) * Ej[i*c.dv+d]
					abs += math.Abs(Sj[i*c.dv+d] * float64(q[i]))
				}
				o[(t*c.nv+j)*c.dv+d] = s
				oBound[(t*c.nv+j)*c.dv+d] = eo + gdk*abs
			}
		}
		states[t] = append([]float64(nil), S...)
		stateBounds[t] = append([]float64(nil), E...)
	}
	return o, states, oBound, stateBounds
}

func (c gdnCase) run(t *testing.T, b Backend, chunked bool, st []float32, slots, in, out int) ([]float32, []float32) {
	t.Helper()
	ssz := c.nv * c.dk * c.dv
	sv := put(t, b, st)
	ov := put(t, b, make([]float32, c.T*c.nv*c.dv))
	ss := StateSlots{View: sv, Slots: slots, SlotBytes: int64(4 * ssz)}
	q := Heads(put(t, b, c.q), c.T, c.nk, c.dk)
	k := Heads(put(t, b, c.k), c.T, c.nk, c.dk)
	v := Heads(put(t, b, c.v), c.T, c.nv, c.dv)
	g := Heads(put(t, b, c.g), c.T, c.nv, 1)
	be := Heads(put(t, b, c.beta), c.T, c.nv, 1)
	o := Heads(ov, c.T, c.nv, c.dv)
	inV := putI32(t, b, []int32{int32(in)})
	if chunked {
		b.DeltaChunked(o, q, k, v, g, be, ss, inV, out)
	} else {
		b.DeltaRecurrent(o, q, k, v, g, be, ss, inV, out)
	}
	return get(t, b, ov, c.T*c.nv*c.dv), get(t, b, sv, slots*ssz)
}

func TestDeltaRecurrentPerTokenSlots(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, T := range []int{1, 4} {
			c := newGDNCase(r, T, 2, 4, 16, 24)
			ssz, slots, in := c.nv*c.dk*c.dv, 6, 5
			st := make([]float32, slots*ssz)
			for i := range st {
				st[i] = 17 // sentinel for unwritten slots
			}
			copy(st[in*ssz:], randn(r, ssz, 0.3))
			o, gs := c.run(t, b, false, st, slots, in, PerToken)
			wo, wst, bo, bst := c.refBounded(st[in*ssz : (in+1)*ssz])
			name := fmt.Sprintf("%s/T=%d", b.Name(), T)
			numtest.CheckBound(t, name+"/o", o, wo, bo)
			for s := 0; s < slots; s++ {
				if s < T {
					numtest.CheckBound(t, fmt.Sprintf("%s/slot%d", name, s), gs[s*ssz:(s+1)*ssz], wst[s], bst[s])
				} else {
					check(t, fmt.Sprintf("%s/slot%d", name, s), gs[s*ssz:(s+1)*ssz], f64(st[s*ssz:(s+1)*ssz]), tolExact)
				}
			}
		}
	}
}

func TestDeltaChunkedMatchesOracleAndRecurrent(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, T := range []int{1, 63, 64, 65, 130} {
			c := newGDNCase(r, T, 2, 4, 16, 24)
			ssz, slots, in, out := c.nv*c.dk*c.dv, 3, 1, 2
			st := make([]float32, slots*ssz)
			copy(st[in*ssz:], randn(r, ssz, 0.3))
			copy(st[out*ssz:], randn(r, ssz, 5)) // overwritten
			oc, sc := c.run(t, b, true, st, slots, in, out)
			orr, sr := c.run(t, b, false, st, slots, in, out)
			wo, wst := c.ref(st[in*ssz : (in+1)*ssz])
			name := fmt.Sprintf("%s/T=%d", b.Name(), T)
			check(t, name+"/chunked_o", oc, wo, tolGDNState)
			check(t, name+"/chunked_state", sc[out*ssz:(out+1)*ssz], wst[T-1], tolGDNState)
			check(t, name+"/slot0_untouched", sc[:ssz], f64(st[:ssz]), tolExact)
			check(t, name+"/forms_agree_o", oc, f64(orr), tolFormsGDN)
			check(t, name+"/forms_agree_state", sc, f64(sr), tolFormsGDN)
		}
	}
}
