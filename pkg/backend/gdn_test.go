package backend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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

// TestDeltaRecurrentInPlaceSlot: a recurrent step whose output slot is its
// input slot (a decode step) gives the bits of the same step written to
// another slot, against the oracle's bound, and touches no other slot.
func TestDeltaRecurrentInPlaceSlot(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name())
		for _, T := range []int{1, 3} {
			c := newGDNCase(r, T, 2, 4, 16, 24)
			ssz, slots, in, other := c.nv*c.dk*c.dv, 3, 1, 2
			st := make([]float32, slots*ssz)
			copy(st, randn(r, ssz, 5))
			copy(st[in*ssz:], randn(r, ssz, 0.3))
			copy(st[other*ssz:], randn(r, ssz, 5))
			oo, so := c.run(t, b, false, st, slots, in, other)
			oi, si := c.run(t, b, false, st, slots, in, in)
			wo, wst, bo, bst := c.refBounded(st[in*ssz : (in+1)*ssz])
			name := fmt.Sprintf("%s/T=%d", b.Name(), T)
			numtest.CheckBound(t, name+"/inplace_o", oi, wo, bo)
			numtest.CheckBound(t, name+"/inplace_state", si[in*ssz:(in+1)*ssz], wst[T-1], bst[T-1])
			check(t, name+"/inplace_o_equals_copy", oi, f64(oo), tolExact)
			check(t, name+"/inplace_state_equals_copy", si[in*ssz:(in+1)*ssz], f64(so[other*ssz:(other+1)*ssz]), tolExact)
			check(t, name+"/slot0_untouched", si[:ssz], f64(st[:ssz]), tolExact)
			check(t, name+"/slot2_untouched", si[other*ssz:], f64(st[other*ssz:]), tolExact)
		}
	}
}

// ftzSlack is the absolute error that flushing subnormals to zero may add
// to a delta-rule output or state element (the CPU kernels run with FTZ and
// DAZ, kernels/cpu ni_ftz_begin): below 2⁻¹²⁶ per operation, at most
// T·(dk + dv + 2·chunk) operations on a value's path, each scaled by a
// coefficient of magnitude ≤ 16 — far below the fp32 rounding bounds.
func ftzSlack(c gdnCase, chunk int, bound []float64) []float64 {
	abs := 0x1p-126 * float64(c.T*(c.dk+c.dv+2*chunk)) * 16
	out := make([]float64, len(bound))
	for i := range bound {
		out[i] = bound[i] + abs
	}
	return out
}

func TestDeltaChunkedMatchesOracleAndRecurrent(t *testing.T) {
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name()) // one stream per backend: inputs independent of the others
		for _, tc := range []struct {
			T     int
			decay float32 // g scale: 7 draws g ∈ [−3.5, 0], whose decays within a chunk pass through the subnormal range
		}{{1, 1}, {63, 1}, {64, 1}, {65, 1}, {130, 1}, {64, 7}, {130, 7}} {
			T := tc.T
			c := newGDNCase(r, T, 2, 4, 16, 24)
			for i := range c.g {
				c.g[i] *= tc.decay
			}
			ssz, slots, in, out := c.nv*c.dk*c.dv, 3, 1, 2
			st := make([]float32, slots*ssz)
			copy(st[in*ssz:], randn(r, ssz, 0.3))
			copy(st[out*ssz:], randn(r, ssz, 5)) // overwritten
			oc, sc := c.run(t, b, true, st, slots, in, out)
			orr, sr := c.run(t, b, false, st, slots, in, out)
			wo, wst, bro, brst := c.refBounded(st[in*ssz : (in+1)*ssz])
			_, bco, _, bcst := c.refChunkedBounded(st[in*ssz:(in+1)*ssz], GDNChunkForTest)
			name := fmt.Sprintf("%s/T=%d/decay=%g", b.Name(), T, tc.decay)
			ftz := func(bound []float64) []float64 { return ftzSlack(c, GDNChunkForTest, bound) }
			// The independent recurrent oracle is the reference; the chunked
			// form's own derived bound applies (plus FP64 slack between the
			// two exact forms, and the flush of subnormals).
			numtest.CheckBound(t, name+"/chunked_o", oc, wo, ftz(plusSlack(bco, wo)))
			numtest.CheckBound(t, name+"/chunked_state", sc[out*ssz:(out+1)*ssz], wst[T-1], ftz(plusSlack(bcst, wst[T-1])))
			check(t, name+"/other_slots_untouched", sc[:out*ssz], f64(st[:out*ssz]), tolExact)
			// Both forms against each other: within the sum of their bounds.
			numtest.CheckBound(t, name+"/forms_agree_o", oc, f64(orr), ftz(ftz(addBounds(bco, bro[:len(bco)]))))
			numtest.CheckBound(t, name+"/forms_agree_state", sc[out*ssz:(out+1)*ssz], f64(sr[out*ssz:(out+1)*ssz]), ftz(ftz(addBounds(bcst, brst[T-1]))))
		}
	}
}

// refChunkedBounded runs the chunked (WY) form of the delta rule the way the
// kernels do (kernels/cpu/delta.c gdn_chunk_task; the CUDA chunk kernels
// follow the same steps), in FP64, and alongside a running error analysis
// of an fp32 evaluation of those steps: every value x carries a bound e_x on
// |fp32 result − exact|, first order in u = 2⁻²⁴, with the rules
//
//	z = Σ aᵢbᵢ (any order):  e_z = Σ(|aᵢ|e_bᵢ + |bᵢ|e_aᵢ) + γ_(n+2)·Σ|aᵢbᵢ|
//	z = a·b:                  e_z = |a|e_b + |b|e_a + u|z|
//	z = expf(a):              e_z = z·(e_a + 2⁻²²)                 (2 ulp)
//	y += α·x (axpy, no FMA):  e_y += |α|e_x + |x|e_α + 2u(|y| + |αx|)
//	y = y₀ + Σ αᵢxᵢ (a matrix product's element, m terms, any order):
//	                          e_y = e_y₀ + Σ(|αᵢ|e_xᵢ + |xᵢ|e_αᵢ) + γ_(m+2)·(|y₀| + Σ|αᵢxᵢ|)
//
// applied to each step: cumulative log-decays Γ, the decays e^(Γᵢ−Γₛ), the
// masked (Q Kᵀ) and β(K Kᵀ) products, the forward substitutions U = L⁻¹βV and
// W = L⁻¹(βK ⊙ e^Γ) (row recurrences of axpys), and the matrix products
// V' = U − W S, O = (Q ⊙ e^Γ) S + QK V' (one sum of dk + n terms: the kernels
// may add zero terms above the diagonal) and the state update
// S ← e^(Γₙ) S + (K ⊙ e^(Γₙ−Γ))ᵀ V'. It returns the outputs and the final
// state with their bounds.
func (c gdnCase) refChunkedBounded(s0 []float32, chunk int) (o, oBound, state, stateBound []float64) {
	const u = 0x1p-24
	const uexp = 0x1p-22
	gamma := func(m int) float64 { return float64(m) * u / (1 - float64(m)*u) }
	abs := math.Abs
	dk, dv := c.dk, c.dv
	o, oBound = make([]float64, c.T*c.nv*dv), make([]float64, c.T*c.nv*dv)
	state, stateBound = f64(s0), make([]float64, len(s0))
	// dot of two fp32 input rows (exact inputs): value and bound
	dot := func(a, b []float32) (float64, float64) {
		s, sa := 0.0, 0.0
		for i := range a {
			p := float64(a[i]) * float64(b[i])
			s, sa = s+p, sa+abs(p)
		}
		return s, gamma(len(a)+2) * sa
	}
	// axpy y += α·x with bounds
	axpy := func(y, ey []float64, alpha, ealpha float64, x, ex []float64) {
		for d := range y {
			ax := alpha * x[d]
			ey[d] += abs(alpha)*ex[d] + abs(x[d])*ealpha + 2*u*(abs(y[d])+abs(ax))
			y[d] += ax
		}
	}
	// prodTerm is one term αx of a matrix product's output row, with bounds
	type prodTerm struct {
		alpha, ealpha float64
		x, ex         []float64
	}
	// prod sets y = y + Σ terms (y, ey hold y₀ and its bound on entry),
	// evaluated as one sum of m terms in any order
	prod := func(y, ey []float64, m int, terms []prodTerm) {
		g := gamma(m + 2)
		for d := range y {
			sum, mag, prop := y[d], abs(y[d]), ey[d]
			for _, t := range terms {
				p := t.alpha * t.x[d]
				sum, mag = sum+p, mag+abs(p)
				prop += abs(t.alpha)*t.ex[d] + abs(t.x[d])*t.ealpha
			}
			y[d], ey[d] = sum, prop+g*mag
		}
	}
	for j := 0; j < c.nv; j++ {
		kh := j / (c.nv / c.nk)
		S, ES := state[j*dk*dv:][:dk*dv], stateBound[j*dk*dv:][:dk*dv]
		qrow := func(t int) []float32 { return c.q[(t*c.nk+kh)*dk:][:dk] }
		krow := func(t int) []float32 { return c.k[(t*c.nk+kh)*dk:][:dk] }
		vrow := func(t int) []float32 { return c.v[(t*c.nv+j)*dv:][:dv] }
		for t0 := 0; t0 < c.T; t0 += chunk {
			n := min(chunk, c.T-t0)
			G, EGam := make([]float64, n), make([]float64, n) // Γ and its bound
			EG, EEG := make([]float64, n), make([]float64, n) // e^Γ
			B := make([]float64, n)
			acc, eacc := 0.0, 0.0
			for i := 0; i < n; i++ {
				acc += float64(c.g[(t0+i)*c.nv+j])
				eacc += u * abs(acc)
				G[i], EGam[i] = acc, eacc
				EG[i] = math.Exp(acc)
				EEG[i] = EG[i] * (eacc + uexp)
				B[i] = float64(c.beta[(t0+i)*c.nv+j])
			}
			QK, EQK := make([]float64, n*n), make([]float64, n*n)
			A, EA := make([]float64, n*n), make([]float64, n*n)
			for i := 0; i < n; i++ {
				for s := 0; s <= i; s++ {
					dec := math.Exp(G[i] - G[s])
					edec := dec * (EGam[i] + EGam[s] + u*abs(G[i]-G[s]) + uexp)
					qk, eqk := dot(qrow(t0+i), krow(t0+s))
					QK[i*n+s] = qk * dec
					EQK[i*n+s] = abs(qk)*edec + dec*eqk + u*abs(QK[i*n+s])
					if s < i {
						kk, ekk := dot(krow(t0+i), krow(t0+s))
						A[i*n+s] = B[i] * kk * dec
						EA[i*n+s] = abs(B[i])*(abs(kk)*edec+dec*ekk) + 2*u*abs(A[i*n+s])
					}
				}
			}
			U, EU := make([][]float64, n), make([][]float64, n)
			W, EW := make([][]float64, n), make([][]float64, n)
			for i := 0; i < n; i++ {
				U[i], EU[i] = make([]float64, dv), make([]float64, dv)
				W[i], EW[i] = make([]float64, dk), make([]float64, dk)
				for d, x := range vrow(t0 + i) {
					U[i][d] = B[i] * float64(x)
					EU[i][d] = u * abs(U[i][d])
				}
				for d, x := range krow(t0 + i) {
					W[i][d] = B[i] * EG[i] * float64(x)
					EW[i][d] = abs(B[i]*float64(x))*EEG[i] + 2*u*abs(W[i][d])
				}
				for s := 0; s < i; s++ {
					axpy(U[i], EU[i], -A[i*n+s], EA[i*n+s], U[s], EU[s])
					axpy(W[i], EW[i], -A[i*n+s], EA[i*n+s], W[s], EW[s])
				}
			}
			VP, EVP := make([][]float64, n), make([][]float64, n)
			ws := make([]prodTerm, 0, dk+n) // the terms of one output row
			for i := 0; i < n; i++ {
				VP[i], EVP[i] = append([]float64(nil), U[i]...), append([]float64(nil), EU[i]...)
				ws = ws[:0]
				for r := 0; r < dk; r++ {
					ws = append(ws, prodTerm{-W[i][r], EW[i][r], S[r*dv:][:dv], ES[r*dv:][:dv]})
				}
				prod(VP[i], EVP[i], dk, ws)
			}
			for i := 0; i < n; i++ {
				ot, eot := o[((t0+i)*c.nv+j)*dv:][:dv], oBound[((t0+i)*c.nv+j)*dv:][:dv]
				q := qrow(t0 + i)
				ws = ws[:0]
				for r := 0; r < dk; r++ {
					cq := float64(q[r]) * EG[i]
					ecq := abs(float64(q[r]))*EEG[i] + u*abs(cq)
					ws = append(ws, prodTerm{cq, ecq, S[r*dv:][:dv], ES[r*dv:][:dv]})
				}
				for s := 0; s <= i; s++ {
					ws = append(ws, prodTerm{QK[i*n+s], EQK[i*n+s], VP[s], EVP[s]})
				}
				prod(ot, eot, dk+n, ws)
			}
			gl, egl := G[n-1], EGam[n-1]
			eg := math.Exp(gl)
			eeg := eg * (egl + uexp)
			for x := range S {
				ES[x] = eg*ES[x] + abs(S[x])*eeg + u*eg*abs(S[x])
				S[x] *= eg
			}
			for r := 0; r < dk; r++ {
				ws = ws[:0]
				for i := 0; i < n; i++ {
					e := math.Exp(gl - G[i])
					ee := e * (egl + EGam[i] + u*abs(gl-G[i]) + uexp)
					kr := float64(krow(t0 + i)[r])
					cr := kr * e
					ecr := abs(kr)*ee + u*abs(cr)
					ws = append(ws, prodTerm{cr, ecr, VP[i], EVP[i]})
				}
				prod(S[r*dv:][:dv], ES[r*dv:][:dv], n, ws)
			}
		}
	}
	return o, oBound, state, stateBound
}

// plusSlack adds to each bound the FP64 rounding by which two exact forms of
// the same computation may differ (2⁻⁴⁰ relative: far below fp32 errors).
func plusSlack(bound, want []float64) []float64 {
	out := make([]float64, len(bound))
	for i := range bound {
		out[i] = bound[i] + 0x1p-40*(1+math.Abs(want[i]))
	}
	return out
}

// addBounds is the elementwise sum of two error bounds.
func addBounds(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// TestDeltaFlushRestoresCallerMode: the delta-rule kernels flush subnormals
// only inside their tasks; the calling thread (which runs tasks too) gets
// its floating-point mode back, so Go code after the op still produces
// subnormals.
func TestDeltaFlushRestoresCallerMode(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	streams := numtest.NewSource(t)
	for _, b := range backends(t) {
		r := streams.Stream(b.Name())
		c := newGDNCase(r, 65, 2, 4, 16, 24)
		st := randn(r, c.nv*c.dk*c.dv, 0.3)
		c.run(t, b, true, st, 1, 0, 0)
		c.run(t, b, false, st, 1, 0, 0)
		// compared as bits: under DAZ a subnormal compares equal to 0
		if y := mulF32(0x1p-120, 0x1p-10); math.Float32bits(y) != math.Float32bits(0x1p-130) {
			t.Fatalf("%s: after the delta-rule ops, 2⁻¹²⁰·2⁻¹⁰ = %g in Go on the calling thread, want 2⁻¹³⁰ (subnormal): the flush-to-zero mode leaked", b.Name(), y)
		}
	}
}

// mulF32 multiplies at run time (never constant-folded), under the calling
// thread's floating-point mode.
//
//go:noinline
func mulF32(a, b float32) float32 { return a * b }
