package engine

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// stepper allocates workspace views for one step and remembers the first
// allocation error.
type stepper struct {
	ws  *backend.Arena
	err error
}

func (p *stepper) dense(t, cols int) backend.Tensor {
	v, err := p.ws.Alloc(4 * int64(t) * int64(cols))
	if err != nil && p.err == nil {
		p.err = err
	}
	return backend.Dense(v, t, cols)
}

// step runs T tokens (s.hostIDs[:T]) at positions s.n.. through the model.
// When dst is non-nil it receives the logits of rows [from, from+len(dst)/V).
// outSlot is the GDN output slot (backend.PerToken for verify). With graph
// (Decode, Verify) and the sequence's graph cache on, the step's ops run as
// a backend graph when its logits fit one pass of the head (graph.go).
func (s *Sequence) step(T, from int, dst []float32, outSlot int, graph bool) error {
	return s.stepRows(T, from, len(dst)/s.e.cfg.VocabSize, dst, outSlot, graph)
}

// stepRows is step computing n logits rows from row from. With dst nil and
// n > 0 the rows stay on the device (s.lastRow is the last one, valid until
// the next step) and the step does not sync: the caller queues its ops on
// the logits and syncs (devsample.go).
func (s *Sequence) stepRows(T, from, n int, dst []float32, outSlot int, graph bool) error {
	e, be, c := s.e, s.e.be, s.e.cfg
	for i := 0; i < T; i++ {
		s.hostPos[i] = int32(s.n + i)
	}
	if err := be.UploadI32(s.ids, s.hostIDs[:T]); err != nil {
		return fmt.Errorf("engine: ids: %w", err)
	}
	if err := be.UploadI32(s.pos, s.hostPos[:T]); err != nil {
		return fmt.Errorf("engine: positions: %w", err)
	}
	V, LR := c.VocabSize, e.opts.LogitsRows
	keep := dst == nil && n > 0 // logits stay on the device, the caller syncs
	if graph && s.graphs != nil && n <= LR {
		return s.graphStep(T, from, dst, outSlot, n)
	}
	eps := float32(c.RMSNormEps)
	p, x, xn := s.body(T, outSlot)
	if n > 0 {
		be.RMSNorm(xn.Rows(from, n), x.Rows(from, n), e.final, eps, true)
		lg := p.dense(LR, V)
		for r := 0; r < n; r += LR {
			k := min(LR, n-r)
			be.MatMul(lg.Rows(0, k), xn.Rows(from+r, k), e.head, false)
			s.lastRow = lg.Rows(k-1, 1)
			if keep {
				continue
			}
			if err := be.Sync(); err != nil {
				return fmt.Errorf("engine: step at position %d: %w", s.n, err)
			}
			if err := be.DownloadF32(dst[r*V:(r+k)*V], lg.View); err != nil {
				return fmt.Errorf("engine: logits: %w", err)
			}
		}
	}
	if p.err != nil {
		return fmt.Errorf("engine: workspace: %w", p.err)
	}
	if !keep {
		if err := be.Sync(); err != nil {
			return fmt.Errorf("engine: step at position %d: %w", s.n, err)
		}
	}
	s.n += T
	return nil
}

// graphStep is step's graph path: the same ops as the eager path with n ≤
// LogitsRows logits rows (one pass of the head), queued by the graph cache,
// then one sync and the logits download (neither with dst nil and n > 0).
func (s *Sequence) graphStep(T, from int, dst []float32, outSlot, n int) error {
	e, be, c := s.e, s.e.be, s.e.cfg
	key := graphKey{kind: graphTarget, T: T, outSlot: outSlot, from: from, rows: n}
	lg, err := s.graphs.run(key, e.ws, func() (backend.Tensor, error) {
		p, x, xn := s.body(T, outSlot)
		var lg backend.Tensor
		if n > 0 {
			be.RMSNorm(xn.Rows(from, n), x.Rows(from, n), e.final, float32(c.RMSNormEps), true)
			lg = p.dense(e.opts.LogitsRows, c.VocabSize)
			be.MatMul(lg.Rows(0, n), xn.Rows(from, n), e.head, false)
		}
		if p.err != nil {
			return backend.Tensor{}, fmt.Errorf("engine: workspace: %w", p.err)
		}
		return lg, nil
	})
	e.residualT = T // x stays at offset 0 until the next step (mtp.go)
	if err != nil {
		return err
	}
	if n > 0 {
		s.lastRow = lg.Rows(n-1, 1)
		if dst == nil {
			s.n += T // the caller queues its ops on the logits and syncs
			return nil
		}
	}
	if err := be.Sync(); err != nil {
		return fmt.Errorf("engine: step at position %d: %w", s.n, err)
	}
	if n > 0 {
		if err := be.DownloadF32(dst[:n*c.VocabSize], lg.View); err != nil {
			return fmt.Errorf("engine: logits: %w", err)
		}
	}
	s.n += T
	return nil
}

// body resets the workspace and queues the embedding and every decoder
// layer of a T-token step. It returns the stepper (for the head's
// allocations), the residual x (workspace offset 0) and its norm buffer xn.
func (s *Sequence) body(T, outSlot int) (p stepper, x, xn backend.Tensor) {
	e, be, c := s.e, s.e.be, s.e.cfg
	eps := float32(c.RMSNormEps)
	e.ws.Reset()
	p = stepper{ws: e.ws}
	x, xn = p.dense(T, c.HiddenSize), p.dense(T, c.HiddenSize)
	e.residualT = T // x stays at offset 0 until the next step (mtp.go)
	be.Embed(x, e.embed, s.ids)
	for i := range e.layers {
		ly := &e.layers[i]
		be.RMSNorm(xn, x, ly.inNorm, eps, true)
		m := e.ws.Mark()
		if ly.full {
			s.attention(&p, ly, x, xn, T)
		} else {
			s.gdn(&p, ly, x, xn, T, outSlot)
		}
		e.ws.Release(m)
		be.RMSNorm(xn, x, ly.postNorm, eps, true)
		swigluMLP(be, ly, x, xn, p.dense(T, c.IntermediateSize), p.dense(T, c.IntermediateSize))
		e.ws.Release(m)
	}
	return p, x, xn
}

// attention is the gated full-attention mixer; it adds o_proj(...) into x.
func (s *Sequence) attention(p *stepper, ly *layer, x, xn backend.Tensor, T int) {
	c := s.e.cfg
	nh, nkv, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	b := attnBuffers{qg: p.dense(T, 2*nh*hd), q: p.dense(T, nh*hd), k: p.dense(T, nkv*hd), v: p.dense(T, nkv*hd), att: p.dense(T, nh*hd)}
	gatedAttention(s.e.be, c, ly, x, xn, T, b, s.kv[ly.index], s.pos)
}

// swigluMLP adds down(SiLU(gate(xn)) ⊙ up(xn)) into x, using g and u
// ([T, intermediate]) as scratch.
func swigluMLP(be backend.Backend, ly *layer, x, xn, g, u backend.Tensor) {
	be.MatMul(g, xn, ly.gate, false)
	be.MatMul(u, xn, ly.up, false)
	be.SwiGLU(g, g, u)
	be.MatMul(x, g, ly.down, true)
}

// attnBuffers are the step activations of one gated attention layer:
// qg [T, 2·nh·hd], q and att [T, nh·hd], k and v [T, nkv·hd].
type attnBuffers struct{ qg, q, k, v, att backend.Tensor }

// gatedAttention is qwen35.md §3.2 over the paged cache kv at positions pos:
// q_proj → (q | gate) per head, q_norm, k_norm, partial RoPE, KV append,
// causal GQA attention (scale hd^−½), ⊙ σ(gate), and x += o_proj(·).
func gatedAttention(be backend.Backend, c qwen35.Config, ly *layer, x, xn backend.Tensor, T int, b attnBuffers, kv backend.KVLayer, pos backend.View) {
	nh, nkv, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	eps := float32(c.RMSNormEps)
	be.MatMul(b.qg, xn, ly.q, false)
	be.MatMul(b.k, xn, ly.k, false)
	be.MatMul(b.v, xn, ly.v, false)
	qh := backend.Heads(b.q.View, T, nh, hd)
	kh := backend.Heads(b.k.View, T, nkv, hd)
	vh := backend.Heads(b.v.View, T, nkv, hd)
	ah := backend.Heads(b.att.View, T, nh, hd)
	// q_proj rows are head-interleaved [query(hd) | gate(hd)].
	be.RMSNorm(qh, b.qg.Split(0, nh, hd, 2*hd), ly.qNorm, eps, true)
	be.RMSNorm(kh, kh, ly.kNorm, eps, true)
	be.RoPE(qh, pos, c.RotaryDim(), c.RopeTheta)
	be.RoPE(kh, pos, c.RotaryDim(), c.RopeTheta)
	be.KVAppend(kv, kh, vh, pos)
	be.Attention(ah, qh, kv, pos, invSqrt(hd))
	be.SigmoidMul(ah, ah, b.qg.Split(hd, nh, hd, 2*hd))
	be.MatMul(x, b.att, ly.o, true)
}

// gdn is the Gated DeltaNet mixer; it adds out_proj(...) into x.
func (s *Sequence) gdn(p *stepper, ly *layer, x, xn backend.Tensor, T, outSlot int) {
	be, c := s.e.be, s.e.cfg
	nk, nv, dk, dv := c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	kd, vd, cd := c.KeyDim(), c.ValueDim(), c.ConvDim()
	qkv, u, z := p.dense(T, cd), p.dense(T, cd), p.dense(T, vd)
	a, b, g, beta := p.dense(T, nv), p.dense(T, nv), p.dense(T, nv), p.dense(T, nv)
	o, on := p.dense(T, vd), p.dense(T, vd)
	be.MatMul(qkv, xn, ly.qkv, false)
	be.MatMul(z, xn, ly.z, false)
	be.MatMul(a, xn, ly.a, false)
	be.MatMul(b, xn, ly.b, false)
	heads := func(t backend.Tensor) backend.Tensor { return backend.Heads(t.View, T, nv, 1) }
	gh, bh := heads(g), heads(beta)
	be.GDNGate(gh, bh, heads(a), heads(b), ly.aLog, ly.dtBias)
	i := ly.index
	be.Conv1DSiLU(u, qkv, ly.conv, c.LinearConvKernelDim, s.conv[i], s.inSlot, outSlot)
	q := u.Split(0, nk, dk, dk)
	k := u.Split(kd, nk, dk, dk)
	v := u.Split(2*kd, nv, dv, dv)
	be.L2Norm(q, q, invSqrt(dk))
	be.L2Norm(k, k, 1)
	oh := backend.Heads(o.View, T, nv, dv)
	if T >= backend.DeltaChunk && outSlot != backend.PerToken {
		be.DeltaChunked(oh, q, k, v, gh, bh, s.ssm[i], s.inSlot, outSlot)
	} else {
		be.DeltaRecurrent(oh, q, k, v, gh, bh, s.ssm[i], s.inSlot, outSlot)
	}
	onh := backend.Heads(on.View, T, nv, dv)
	be.GatedRMSNorm(onh, oh, backend.Heads(z.View, T, nv, dv), ly.gdnNorm, float32(c.RMSNormEps))
	be.MatMul(x, on, ly.out, true)
}
