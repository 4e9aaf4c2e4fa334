package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// testWeights is an in-memory Weights with random tiny tensors; vals holds
// the represented (decoded) values for the FP64 reference.
type testWeights struct {
	cfg  qwen35.Config
	fmts map[string]format.Format
	data map[string][]byte
	vals map[string][]float64
}

func (w *testWeights) Config() qwen35.Config { return w.cfg }

func (w *testWeights) Tensor(id string) (format.Format, []int64, []byte, error) {
	for _, t := range w.cfg.Tensors() {
		if t.Name == id {
			d, ok := w.data[id]
			if !ok {
				return "", nil, nil, fmt.Errorf("missing")
			}
			return w.fmts[id], t.Shape, d, nil
		}
	}
	return "", nil, nil, fmt.Errorf("unknown tensor %s", id)
}

func tinyConfig(tied bool) qwen35.Config {
	c := qwen35.Config{VocabSize: 97, HiddenSize: 64, NumHiddenLayers: 4, IntermediateSize: 96,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 16, LinearValueHeadDim: 24, LinearNumKeyHeads: 2, LinearNumValueHeads: 4,
		LayerTypes: []string{qwen35.LinearAttention, qwen35.FullAttention, qwen35.LinearAttention, qwen35.FullAttention},
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, TieWordEmbeddings: tied,
		MaxPositionEmbeddings: 4096, AttnOutputGate: true, EOSTokenIDs: []int{96}}
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

func bf16Round(f float32) (uint16, float64) {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	h := uint16(u >> 16)
	return h, float64(math.Float32frombits(uint32(h) << 16))
}

// newTestWeights draws random weights: matrices in matFmt (bf16 or fp32),
// norms and conv in bf16, control in fp32.
func newTestWeights(r *rand.Rand, cfg qwen35.Config, matFmt format.Format) *testWeights {
	return newTestWeightsRecipe(r, cfg, func(qwen35.Tensor) format.Format { return matFmt })
}

// newTestWeightsRecipe is newTestWeights with a per-matrix format; quantised
// matrices are encoded with pkg/format and the reference sees their decoded
// values.
func newTestWeightsRecipe(r *rand.Rand, cfg qwen35.Config, recipe func(qwen35.Tensor) format.Format) *testWeights {
	w := &testWeights{cfg: cfg, fmts: map[string]format.Format{}, data: map[string][]byte{}, vals: map[string][]float64{}}
	for _, t := range cfg.Tensors() {
		if t.Component != qwen35.ComponentText {
			continue
		}
		n := 1
		for _, d := range t.Shape {
			n *= int(d)
		}
		f := recipe(t)
		gen := func() float64 { return r.NormFloat64() / math.Sqrt(float64(t.Shape[len(t.Shape)-1])) }
		switch t.Class {
		case qwen35.ClassNorm:
			f = format.BF16
			gen = func() float64 { return r.NormFloat64() * 0.2 }
			if t.Name[len(t.Name)-len("gdn/norm"):] == "gdn/norm" {
				gen = func() float64 { return 1 + r.NormFloat64()*0.2 }
			}
		case qwen35.ClassConv:
			f = format.BF16
			gen = func() float64 { return r.NormFloat64() * 0.5 }
		case qwen35.ClassControl:
			f = format.FP32
			gen = func() float64 { return r.NormFloat64() * 0.5 }
		case qwen35.ClassEmbedding:
			gen = func() float64 { return r.NormFloat64() }
		}
		vals := make([]float64, n)
		var data []byte
		if f.IsQuantized() {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(gen())
			}
			var err error
			if data, err = format.Encode(f, t.Shape, src); err != nil {
				panic(fmt.Sprintf("%s: %v", t.Name, err))
			}
			dec, err := format.Decode(f, t.Shape, data)
			if err != nil {
				panic(fmt.Sprintf("%s: %v", t.Name, err))
			}
			for i, v := range dec {
				vals[i] = float64(v)
			}
		} else if f == format.BF16 {
			data = make([]byte, 2*n)
			for i := range vals {
				h, v := bf16Round(float32(gen()))
				binary.LittleEndian.PutUint16(data[2*i:], h)
				vals[i] = v
			}
		} else {
			data = make([]byte, 4*n)
			for i := range vals {
				v := float32(gen())
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
				vals[i] = float64(v)
			}
		}
		w.fmts[t.Name], w.data[t.Name], w.vals[t.Name] = f, data, vals
	}
	return w
}

// ---- FP64 reference forward, written from qwen35.md §3 ----

type refModel struct {
	w       *testWeights
	c       qwen35.Config
	kvRound bool // store K/V rounded to bf16 (the represented cache values)
	keys    map[int][][]float64
	vals    map[int][][]float64
	ssm     map[int][]float64
	conv    map[int][]float64
	pos     int
}

func newRef(w *testWeights, kvRound bool) *refModel {
	return &refModel{w: w, c: w.cfg, kvRound: kvRound, keys: map[int][][]float64{}, vals: map[int][][]float64{},
		ssm: map[int][]float64{}, conv: map[int][]float64{}}
}

func (m *refModel) get(name string) []float64 { return m.w.vals[name] }

func matvec(w []float64, x []float64) []float64 {
	k := len(x)
	out := make([]float64, len(w)/k)
	for n := range out {
		s := 0.0
		for i, v := range x {
			s += w[n*k+i] * v
		}
		out[n] = s
	}
	return out
}

func rms(x, w []float64, eps float64, zeroCentred bool) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	r := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		if zeroCentred {
			out[i] = v * r * (1 + w[i])
		} else {
			out[i] = v * r * w[i]
		}
	}
	return out
}

func silu(x float64) float64    { return x / (1 + math.Exp(-x)) }
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func (m *refModel) rope(x []float64, pos int) {
	r := m.c.RotaryDim()
	for j := 0; j < r/2; j++ {
		ang := float64(pos) * math.Pow(m.c.RopeTheta, -2*float64(j)/float64(r))
		a, b := x[j], x[j+r/2]
		x[j] = a*math.Cos(ang) - b*math.Sin(ang)
		x[j+r/2] = b*math.Cos(ang) + a*math.Sin(ang)
	}
}

// step runs one token and returns its logits.
func (m *refModel) step(id int32) []float64 {
	c := m.c
	H, eps := c.HiddenSize, c.RMSNormEps
	x := append([]float64(nil), m.get(qwen35.NameEmbedding)[int(id)*H:int(id+1)*H]...)
	for l := 0; l < c.NumHiddenLayers; l++ {
		n := func(s string) string { return qwen35.LayerName(l, s) }
		h := rms(x, m.get(n("input_norm")), eps, true)
		var mix []float64
		if c.IsFull(l) {
			mix = m.attn(l, h)
		} else {
			mix = m.gdn(l, h)
		}
		for i := range x {
			x[i] += mix[i]
		}
		h = rms(x, m.get(n("post_attention_norm")), eps, true)
		g, u := matvec(m.get(n("mlp/gate_proj")), h), matvec(m.get(n("mlp/up_proj")), h)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		d := matvec(m.get(n("mlp/down_proj")), g)
		for i := range x {
			x[i] += d[i]
		}
	}
	head := qwen35.NameOutputHead
	if c.TieWordEmbeddings {
		head = qwen35.NameEmbedding
	}
	out := matvec(m.get(head), rms(x, m.get(qwen35.NameFinalNorm), eps, true))
	m.pos++
	return out
}

func (m *refModel) attn(l int, h []float64) []float64 {
	c := m.c
	nh, nkv, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	n := func(s string) string { return qwen35.LayerName(l, s) }
	qg := matvec(m.get(n("attention/q_proj")), h)
	kall, vall := matvec(m.get(n("attention/k_proj")), h), matvec(m.get(n("attention/v_proj")), h)
	k := make([]float64, nkv*hd)
	for j := 0; j < nkv; j++ {
		kj := rms(kall[j*hd:(j+1)*hd], m.get(n("attention/k_norm")), c.RMSNormEps, true)
		m.rope(kj, m.pos)
		copy(k[j*hd:], kj)
	}
	v := append([]float64(nil), vall...)
	if m.kvRound {
		for i := range k {
			_, k[i] = bf16Round(float32(k[i]))
			_, v[i] = bf16Round(float32(v[i]))
		}
	}
	m.keys[l] = append(m.keys[l], k)
	m.vals[l] = append(m.vals[l], v)
	out := make([]float64, nh*hd)
	for hh := 0; hh < nh; hh++ {
		q := rms(qg[hh*2*hd:hh*2*hd+hd], m.get(n("attention/q_norm")), c.RMSNormEps, true)
		gate := qg[hh*2*hd+hd : (hh+1)*2*hd]
		m.rope(q, m.pos)
		g := hh / (nh / nkv)
		S := len(m.keys[l])
		sc := make([]float64, S)
		mx := math.Inf(-1)
		for s := 0; s < S; s++ {
			d := 0.0
			for i := 0; i < hd; i++ {
				d += q[i] * m.keys[l][s][g*hd+i]
			}
			sc[s] = d / math.Sqrt(float64(hd))
			mx = math.Max(mx, sc[s])
		}
		den := 0.0
		for s := range sc {
			sc[s] = math.Exp(sc[s] - mx)
			den += sc[s]
		}
		for i := 0; i < hd; i++ {
			a := 0.0
			for s := 0; s < S; s++ {
				a += sc[s] * m.vals[l][s][g*hd+i]
			}
			out[hh*hd+i] = a / den * sigmoid(gate[i])
		}
	}
	return matvec(m.get(n("attention/o_proj")), out)
}

func (m *refModel) gdn(l int, h []float64) []float64 {
	c := m.c
	n := func(s string) string { return qwen35.LayerName(l, s) }
	nk, nv, dk, dv, K := c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim, c.LinearConvKernelDim
	kd, cd := c.KeyDim(), c.ConvDim()
	qkv := matvec(m.get(n("gdn/in_proj_qkv")), h)
	z := matvec(m.get(n("gdn/in_proj_z")), h)
	b := matvec(m.get(n("gdn/in_proj_b")), h)
	a := matvec(m.get(n("gdn/in_proj_a")), h)
	if m.conv[l] == nil {
		m.conv[l] = make([]float64, cd*(K-1))
		m.ssm[l] = make([]float64, nv*dk*dv)
	}
	win, cw := m.conv[l], m.get(n("gdn/conv1d"))
	u := make([]float64, cd)
	for ch := 0; ch < cd; ch++ {
		s := cw[ch*K+K-1] * qkv[ch]
		for i := 0; i < K-1; i++ {
			s += cw[ch*K+i] * win[ch*(K-1)+i]
		}
		u[ch] = silu(s)
		copy(win[ch*(K-1):], win[ch*(K-1)+1:(ch+1)*(K-1)])
		win[(ch+1)*(K-1)-1] = qkv[ch]
	}
	norm := func(x []float64, scale float64) []float64 {
		ss := 0.0
		for _, v := range x {
			ss += v * v
		}
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v / math.Sqrt(ss+1e-6) * scale
		}
		return out
	}
	aLog, dt, gw := m.get(n("gdn/a_log")), m.get(n("gdn/dt_bias")), m.get(n("gdn/norm"))
	o := make([]float64, nv*dv)
	for j := 0; j < nv; j++ {
		kh := j / (nv / nk)
		q := norm(u[kh*dk:(kh+1)*dk], 1/math.Sqrt(float64(dk)))
		k := norm(u[kd+kh*dk:kd+(kh+1)*dk], 1)
		v := u[2*kd+j*dv : 2*kd+(j+1)*dv]
		beta := sigmoid(b[j])
		x := a[j] + dt[j]
		sp := math.Log1p(math.Exp(x))
		if x > 20 {
			sp = x
		}
		g := -math.Exp(aLog[j]) * sp
		S := m.ssm[l][j*dk*dv : (j+1)*dk*dv]
		for i := range S {
			S[i] *= math.Exp(g)
		}
		delta := make([]float64, dv)
		for d := 0; d < dv; d++ {
			s := 0.0
			for i := 0; i < dk; i++ {
				s += S[i*dv+d] * k[i]
			}
			delta[d] = beta * (v[d] - s)
		}
		for i := 0; i < dk; i++ {
			for d := 0; d < dv; d++ {
				S[i*dv+d] += k[i] * delta[d]
			}
		}
		oj := make([]float64, dv)
		for d := 0; d < dv; d++ {
			for i := 0; i < dk; i++ {
				oj[d] += S[i*dv+d] * q[i]
			}
		}
		oj = rms(oj, gw, c.RMSNormEps, false)
		for d := 0; d < dv; d++ {
			o[j*dv+d] = oj[d] * silu(z[j*dv+d])
		}
	}
	return matvec(m.get(n("gdn/out_proj")), o)
}
