package testmodel

import (
	"math"
	"testing"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// A naive float64 Qwen3.5 forward (shared/reference/qwen35.md §3), used only
// to check that the generated weights keep activations O(1) through the
// layers and give non-degenerate logits.

type fwdModel struct {
	c qwen35.Config
	w map[string][]float64 // by text-only HF name
}

func newFwdModel(o Options) *fwdModel {
	m := &fwdModel{c: o.Config(), w: map[string][]float64{}}
	for _, w := range o.weights() {
		v := make([]float64, len(w.values))
		for i, x := range w.values {
			v[i] = float64(x)
		}
		m.w[w.hfName] = v
	}
	return m
}

func (m *fwdModel) get(name string) []float64 { return m.w[name] }

// matvec computes W·x for W [rows, len(x)].
func matvec(w, x []float64) []float64 {
	n := len(x)
	out := make([]float64, len(w)/n)
	for r := range out {
		var s float64
		row := w[r*n : (r+1)*n]
		for i, v := range row {
			s += v * x[i]
		}
		out[r] = s
	}
	return out
}

func rmsScale(x []float64, eps float64) float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	return 1 / math.Sqrt(ss/float64(len(x))+eps)
}

// norm1p is the zero-centred RMSNorm y = x·rsqrt(mean x²+eps)·(1+w).
func norm1p(x, w []float64, eps float64) []float64 {
	r := rmsScale(x, eps)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = x[i] * r * (1 + w[i])
	}
	return out
}

func silu(x float64) float64    { return x / (1 + math.Exp(-x)) }
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

type layerState struct {
	keys, vals [][]float64   // full attention cache, per position [nkv*hd]
	convHist   [][]float64   // GDN pre-conv inputs per position
	S          [][][]float64 // GDN state per v-head [dk][dv]
}

// forward runs ids through the model and returns logits per position and
// the residual RMS after every layer.
func (m *fwdModel) forward(ids []int) (logits [][]float64, resRMS [][]float64) {
	c := m.c
	H, eps := c.HiddenSize, c.RMSNormEps
	states := make([]layerState, c.NumHiddenLayers)
	emb := m.get("model.embed_tokens.weight")
	head := m.get("lm_head.weight")
	if c.TieWordEmbeddings {
		head = emb
	}
	for t, id := range ids {
		x := append([]float64(nil), emb[id*H:(id+1)*H]...)
		var rms []float64
		for l := 0; l < c.NumHiddenLayers; l++ {
			p := "model.layers." + itoa(l) + "."
			h := norm1p(x, m.get(p+"input_layernorm.weight"), eps)
			var out []float64
			if c.IsFull(l) {
				out = m.attention(p, h, t, &states[l])
			} else {
				out = m.gdn(p, h, &states[l])
			}
			for i := range x {
				x[i] += out[i]
			}
			h2 := norm1p(x, m.get(p+"post_attention_layernorm.weight"), eps)
			g, u := matvec(m.get(p+"mlp.gate_proj.weight"), h2), matvec(m.get(p+"mlp.up_proj.weight"), h2)
			for i := range g {
				g[i] = silu(g[i]) * u[i]
			}
			d := matvec(m.get(p+"mlp.down_proj.weight"), g)
			for i := range x {
				x[i] += d[i]
			}
			rms = append(rms, 1/rmsScale(x, 0))
		}
		logits = append(logits, matvec(head, norm1p(x, m.get("model.norm.weight"), eps)))
		resRMS = append(resRMS, rms)
	}
	return logits, resRMS
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func (m *fwdModel) attention(p string, h []float64, pos int, st *layerState) []float64 {
	c := m.c
	nh, nkv, hd, rd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RotaryDim()
	qg := matvec(m.get(p+"self_attn.q_proj.weight"), h)
	k := matvec(m.get(p+"self_attn.k_proj.weight"), h)
	v := matvec(m.get(p+"self_attn.v_proj.weight"), h)
	qn, kn := m.get(p+"self_attn.q_norm.weight"), m.get(p+"self_attn.k_norm.weight")
	rope := func(x []float64) {
		half := rd / 2
		for j := 0; j < half; j++ {
			f := float64(pos) * math.Pow(c.RopeTheta, -2*float64(j)/float64(rd))
			cs, sn := math.Cos(f), math.Sin(f)
			a, b := x[j], x[j+half]
			x[j], x[j+half] = a*cs-b*sn, b*cs+a*sn
		}
	}
	q := make([]float64, nh*hd)
	gate := make([]float64, nh*hd)
	for i := 0; i < nh; i++ {
		copy(q[i*hd:], norm1p(qg[i*2*hd:i*2*hd+hd], qn, c.RMSNormEps))
		copy(gate[i*hd:], qg[i*2*hd+hd:(i+1)*2*hd])
		rope(q[i*hd : (i+1)*hd])
	}
	for j := 0; j < nkv; j++ {
		copy(k[j*hd:], norm1p(k[j*hd:(j+1)*hd], kn, c.RMSNormEps))
		rope(k[j*hd : (j+1)*hd])
	}
	st.keys, st.vals = append(st.keys, k), append(st.vals, v)
	o := make([]float64, nh*hd)
	for i := 0; i < nh; i++ {
		j := i / (nh / nkv)
		scores := make([]float64, len(st.keys))
		mx := math.Inf(-1)
		for s := range st.keys {
			var d float64
			for e := 0; e < hd; e++ {
				d += q[i*hd+e] * st.keys[s][j*hd+e]
			}
			scores[s] = d / math.Sqrt(float64(hd))
			mx = math.Max(mx, scores[s])
		}
		var z float64
		for s := range scores {
			scores[s] = math.Exp(scores[s] - mx)
			z += scores[s]
		}
		for s := range scores {
			for e := 0; e < hd; e++ {
				o[i*hd+e] += scores[s] / z * st.vals[s][j*hd+e]
			}
		}
	}
	for i := range o {
		o[i] *= sigmoid(gate[i])
	}
	return matvec(m.get(p+"self_attn.o_proj.weight"), o)
}

func (m *fwdModel) gdn(p string, h []float64, st *layerState) []float64 {
	c := m.c
	nk, nv, dk, dv, K := c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim, c.LinearConvKernelDim
	g := p + "linear_attn."
	qkv := matvec(m.get(g+"in_proj_qkv.weight"), h)
	z := matvec(m.get(g+"in_proj_z.weight"), h)
	b := matvec(m.get(g+"in_proj_b.weight"), h)
	a := matvec(m.get(g+"in_proj_a.weight"), h)
	st.convHist = append(st.convHist, qkv)
	conv := m.get(g + "conv1d.weight")
	C := len(qkv)
	u := make([]float64, C)
	T := len(st.convHist)
	for ch := 0; ch < C; ch++ {
		var s float64
		for i := 0; i < K; i++ {
			if t := T - K + i; t >= 0 {
				s += conv[ch*K+i] * st.convHist[t][ch]
			}
		}
		u[ch] = silu(s)
	}
	kd := nk * dk
	q, k, v := u[:kd], u[kd:2*kd], u[2*kd:]
	l2 := func(x []float64, scale float64) {
		var ss float64
		for _, e := range x {
			ss += e * e
		}
		r := scale / math.Sqrt(ss+1e-6)
		for i := range x {
			x[i] *= r
		}
	}
	for i := 0; i < nk; i++ {
		l2(q[i*dk:(i+1)*dk], 1/math.Sqrt(float64(dk)))
		l2(k[i*dk:(i+1)*dk], 1)
	}
	if st.S == nil {
		st.S = make([][][]float64, nv)
		for j := range st.S {
			st.S[j] = make([][]float64, dk)
			for r := range st.S[j] {
				st.S[j][r] = make([]float64, dv)
			}
		}
	}
	alog, dtb, nw := m.get(g+"A_log"), m.get(g+"dt_bias"), m.get(g+"norm.weight")
	y := make([]float64, nv*dv)
	for j := 0; j < nv; j++ {
		kh := j / (nv / nk)
		beta := sigmoid(b[j])
		decay := math.Exp(-math.Exp(alog[j]) * softplus(a[j]+dtb[j]))
		S := st.S[j]
		kk, qq, vv := k[kh*dk:(kh+1)*dk], q[kh*dk:(kh+1)*dk], v[j*dv:(j+1)*dv]
		for r := range S {
			for e := range S[r] {
				S[r][e] *= decay
			}
		}
		for e := 0; e < dv; e++ {
			var sk float64
			for r := 0; r < dk; r++ {
				sk += S[r][e] * kk[r]
			}
			delta := beta * (vv[e] - sk)
			for r := 0; r < dk; r++ {
				S[r][e] += kk[r] * delta
			}
		}
		o := make([]float64, dv)
		for e := 0; e < dv; e++ {
			for r := 0; r < dk; r++ {
				o[e] += S[r][e] * qq[r]
			}
		}
		rs := rmsScale(o, c.RMSNormEps)
		for e := 0; e < dv; e++ {
			y[j*dv+e] = o[e] * rs * nw[e] * silu(z[j*dv+e])
		}
	}
	return matvec(m.get(g+"out_proj.weight"), y)
}

func TestForwardActivationsStayOrderOne(t *testing.T) {
	for _, layers := range []int{4, 8} {
		o := DefaultOptions()
		o.Layers = layers
		m := newFwdModel(o)
		ids := []int{1, 100, 200, 300, 42, 7, 456, 3}
		logits, rms := m.forward(ids)
		argmax := map[int]bool{}
		for tpos, lg := range logits {
			mean, std := 0.0, 0.0
			best := 0
			for i, v := range lg {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("layers=%d pos %d: logit %d is %v", layers, tpos, i, v)
				}
				mean += v
				if v > lg[best] {
					best = i
				}
			}
			mean /= float64(len(lg))
			for _, v := range lg {
				std += (v - mean) * (v - mean)
			}
			std = math.Sqrt(std / float64(len(lg)))
			if std < 0.1 || std > 20 {
				t.Errorf("layers=%d pos %d: logits std %g outside [0.1, 20]", layers, tpos, std)
			}
			argmax[best] = true
			for l, r := range rms[tpos] {
				if r < 0.05 || r > 20 {
					t.Errorf("layers=%d pos %d: residual RMS after layer %d is %g", layers, tpos, l, r)
				}
			}
		}
		if len(argmax) < 3 {
			t.Errorf("layers=%d: only %d distinct argmax tokens over %d positions", layers, len(argmax), len(ids))
		}
		t.Logf("layers=%d: residual RMS at last position %v", layers, rms[len(rms)-1])
	}
}
