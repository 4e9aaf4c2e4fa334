package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// This file is the diagnosis of a step whose logits are not finite: the
// tokens are run again eagerly, one op at a time, reading every op's output
// back, to name the first op whose output holds a NaN or an infinity. It is
// slow by design and runs only after such a failure, never in the hot path.

// NonFinite is the first op output that is not finite.
type NonFinite struct {
	// Layer is the decoder layer, -1 for the embedding, the final norm and
	// the output head.
	Layer int
	// Mixer is the layer's kind: "full attention" or "linear attention
	// (Gated DeltaNet)"; "" outside the layers.
	Mixer string
	// Op names the op within the layer, after the weight it applies where
	// it has one: "attention/o_proj", "gdn/conv1d", "input_norm",
	// "mlp/swiglu", "attention/sdpa"; "token_embedding", "final_norm",
	// "output_head" outside the layers.
	Op string
	// Weight is the artifact object of the op's weight
	// ("text/layers/3/attention/o_proj"); "" for an op without one.
	Weight string
	// Position is the sequence position (token index) of the first row
	// that is not finite; Value is its first non-finite element.
	Position int
	Value    float32
}

// Where is the op's location: "layer 3 (full attention): attention/o_proj"
// or "output_head".
func (n *NonFinite) Where() string {
	if n.Layer < 0 {
		return n.Op
	}
	return fmt.Sprintf("layer %d (%s): %s", n.Layer, n.Mixer, n.Op)
}

// String is "layer 3 (full attention): attention/o_proj output is not
// finite (NaN at position 0; weight text/layers/3/attention/o_proj)".
func (n *NonFinite) String() string {
	detail := fmt.Sprintf("%v at position %d", n.Value, n.Position)
	if n.Weight != "" {
		detail += "; weight " + n.Weight
	}
	return fmt.Sprintf("%s output is not finite (%s)", n.Where(), detail)
}

// Mixer names (NonFinite.Mixer).
const (
	MixerFullAttention = "full attention"
	MixerGDN           = "linear attention (Gated DeltaNet)"
)

// DiagnoseNonFinite runs ids from position 0 through s again, eagerly (no
// graphs) and one op at a time: after every op it syncs, reads the op's
// output back and checks it, up to the last position's logits. It returns
// the first output that holds a NaN or an infinity, or nil when every
// output is finite. s is reset first and holds ids afterwards (Reset it
// before generating again); ids must fit the context.
func (s *Sequence) DiagnoseNonFinite(ids []int32) (*NonFinite, error) {
	if err := s.Reset(); err != nil {
		return nil, err
	}
	if err := s.fits(len(ids)); err != nil {
		return nil, err
	}
	e := s.e
	ck := newFiniteChecker(e)
	e.be = ck
	defer func() { e.be = ck.Backend }()
	c := e.cfg
	chunk := e.opts.PrefillChunk
	for done := 0; done < len(ids) && ck.found == nil; {
		T := min(chunk, len(ids)-done)
		copy(s.hostIDs, ids[done:done+T])
		for i := 0; i < T; i++ {
			s.hostPos[i] = int32(s.n + i)
		}
		if err := ck.UploadI32(s.ids, s.hostIDs[:T]); err != nil {
			return nil, fmt.Errorf("engine: ids: %w", err)
		}
		if err := ck.UploadI32(s.pos, s.hostPos[:T]); err != nil {
			return nil, fmt.Errorf("engine: positions: %w", err)
		}
		ck.base = s.n
		p, x, xn := s.body(T, int(s.slot))
		if done+T == len(ids) {
			ck.base = s.n + T - 1 // the head's rows: the last position
			ck.RMSNorm(xn.Rows(T-1, 1), x.Rows(T-1, 1), e.final, float32(c.RMSNormEps), true)
			lg := p.dense(e.opts.LogitsRows, c.VocabSize)
			ck.MatMul(lg.Rows(0, 1), xn.Rows(T-1, 1), e.head, false)
		}
		if p.err != nil {
			return nil, fmt.Errorf("engine: workspace: %w", p.err)
		}
		if ck.err != nil {
			return nil, ck.err
		}
		s.n += T
		done += T
	}
	s.verifyAt = -1
	return ck.found, nil
}

// opName is where an op's weight lives: its layer (-1 outside the layers)
// and its name within it.
type opName struct {
	layer int
	name  string
}

// finiteChecker is the backend of DiagnoseNonFinite: every op runs on the
// wrapped backend, then is synced and its output read back and checked.
// After the first non-finite output (or error) the remaining ops are
// skipped.
type finiteChecker struct {
	backend.Backend
	e       *Engine
	mats    map[*backend.Weight]opName
	vecs    map[backend.View]opName
	layer   int // the layer of the last op with a weight
	base    int // the sequence position of row 0 of the ops' outputs
	found   *NonFinite
	err     error
	scratch []float32
}

func newFiniteChecker(e *Engine) *finiteChecker {
	ck := &finiteChecker{Backend: e.be, e: e, layer: -1,
		mats: map[*backend.Weight]opName{}, vecs: map[backend.View]opName{}}
	mat := func(w *backend.Weight, l int, n string) {
		if w != nil {
			if _, ok := ck.mats[w]; !ok {
				ck.mats[w] = opName{l, n}
			}
		}
	}
	vec := func(v backend.View, l int, n string) {
		if v.Buf != nil {
			ck.vecs[v] = opName{l, n}
		}
	}
	mat(e.embed, -1, "token_embedding")
	if e.head != e.embed {
		mat(e.head, -1, "output_head")
	}
	vec(e.final, -1, "final_norm")
	for l := range e.layers {
		ly := &e.layers[l]
		vec(ly.inNorm, l, "input_norm")
		vec(ly.postNorm, l, "post_attention_norm")
		mat(ly.gate, l, "mlp/gate_proj")
		mat(ly.up, l, "mlp/up_proj")
		mat(ly.down, l, "mlp/down_proj")
		if ly.full {
			mat(ly.q, l, "attention/q_proj")
			mat(ly.k, l, "attention/k_proj")
			mat(ly.v, l, "attention/v_proj")
			mat(ly.o, l, "attention/o_proj")
			vec(ly.qNorm, l, "attention/q_norm")
			vec(ly.kNorm, l, "attention/k_norm")
			continue
		}
		mat(ly.qkv, l, "gdn/in_proj_qkv")
		mat(ly.z, l, "gdn/in_proj_z")
		mat(ly.a, l, "gdn/in_proj_a")
		mat(ly.b, l, "gdn/in_proj_b")
		mat(ly.out, l, "gdn/out_proj")
		vec(ly.conv, l, "gdn/conv1d")
		vec(ly.aLog, l, "gdn/a_log")
		vec(ly.gdnNorm, l, "gdn/norm")
	}
	return ck
}

// skip reports whether the ops are done: a finding or an error is in.
func (ck *finiteChecker) skip() bool { return ck.found != nil || ck.err != nil }

// weightOp names an op by its weight; the weight's layer becomes the
// current one (every layer starts with its input norm).
func (ck *finiteChecker) weightOp(n opName, ok bool, fallback string) opName {
	if !ok {
		return opName{ck.layer, fallback}
	}
	ck.layer = n.layer
	return n
}

func (ck *finiteChecker) matName(w *backend.Weight, fallback string) opName {
	if w == ck.e.head && ck.e.head == ck.e.embed {
		// A matmul by the embedding matrix is the tied output head.
		ck.layer = -1
		return opName{-1, "output_head (tied to token_embedding)"}
	}
	n, ok := ck.mats[w]
	return ck.weightOp(n, ok, fallback)
}

func (ck *finiteChecker) vecName(v backend.View, fallback string) opName {
	n, ok := ck.vecs[v]
	return ck.weightOp(n, ok, fallback)
}

// mixerOp names a weightless op of the current layer's mixer.
func (ck *finiteChecker) mixerOp(attention, gdn string) opName {
	if ck.layer >= 0 && ck.layer < len(ck.e.layers) && ck.e.layers[ck.layer].full {
		return opName{ck.layer, attention}
	}
	return opName{ck.layer, gdn}
}

// check syncs and reads the outputs of the op just queued, recording the
// first non-finite element.
func (ck *finiteChecker) check(n opName, outs ...backend.Tensor) {
	if err := ck.Backend.Sync(); err != nil {
		ck.err = fmt.Errorf("engine: diagnosis: %s: %w", n.name, err)
		return
	}
	for _, t := range outs {
		if t.T <= 0 || t.H <= 0 || t.D <= 0 {
			continue
		}
		extent := (t.T-1)*t.LD + (t.H-1)*t.HS + t.D
		if cap(ck.scratch) < extent {
			ck.scratch = make([]float32, extent)
		}
		buf := ck.scratch[:extent]
		if err := ck.Backend.DownloadF32(buf, t.View); err != nil {
			ck.err = fmt.Errorf("engine: diagnosis: %s: %w", n.name, err)
			return
		}
		for r := 0; r < t.T; r++ {
			for h := 0; h < t.H; h++ {
				row := buf[r*t.LD+h*t.HS:][:t.D]
				for _, v := range row {
					if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
						ck.record(n, ck.base+r, v)
						return
					}
				}
			}
		}
	}
}

func (ck *finiteChecker) record(n opName, pos int, v float32) {
	nf := &NonFinite{Layer: n.layer, Op: n.name, Position: pos, Value: v}
	if n.layer >= 0 {
		nf.Mixer = MixerGDN
		if ck.e.layers[n.layer].full {
			nf.Mixer = MixerFullAttention
		}
	}
	nf.Weight = weightObject(n)
	ck.found = nf
}

// weightObject is the artifact object of a named op's weight, "" for the
// weightless ops.
func weightObject(n opName) string {
	name := n.name
	if n.layer < 0 {
		switch {
		case name == "token_embedding", strings.HasPrefix(name, "output_head (tied"):
			return qwen35.NameEmbedding
		case name == "output_head":
			return qwen35.NameOutputHead
		case name == "final_norm":
			return qwen35.NameFinalNorm
		}
		return ""
	}
	if !knownWeight[name] {
		return ""
	}
	return qwen35.LayerName(n.layer, name)
}

// knownWeight: the layer op names that are the names of their weights.
var knownWeight = map[string]bool{
	"input_norm": true, "post_attention_norm": true,
	"mlp/gate_proj": true, "mlp/up_proj": true, "mlp/down_proj": true,
	"attention/q_proj": true, "attention/k_proj": true, "attention/v_proj": true, "attention/o_proj": true,
	"attention/q_norm": true, "attention/k_norm": true,
	"gdn/in_proj_qkv": true, "gdn/in_proj_z": true, "gdn/in_proj_a": true, "gdn/in_proj_b": true,
	"gdn/out_proj": true, "gdn/conv1d": true, "gdn/a_log": true, "gdn/norm": true,
}

// The ops of the forward pass, each run, synced and checked.

func (ck *finiteChecker) Embed(out backend.Tensor, w *backend.Weight, ids backend.View) {
	if ck.skip() {
		return
	}
	ck.Backend.Embed(out, w, ids)
	ck.layer = -1
	ck.check(opName{-1, "token_embedding"}, out)
}

func (ck *finiteChecker) MatMul(y, x backend.Tensor, w *backend.Weight, accumulate bool) {
	if ck.skip() {
		return
	}
	ck.Backend.MatMul(y, x, w, accumulate)
	ck.check(ck.matName(w, "matmul"), y)
}

func (ck *finiteChecker) RMSNorm(y, x backend.Tensor, w backend.View, eps float32, zeroCentred bool) {
	if ck.skip() {
		return
	}
	ck.Backend.RMSNorm(y, x, w, eps, zeroCentred)
	ck.check(ck.vecName(w, "rmsnorm"), y)
}

func (ck *finiteChecker) GatedRMSNorm(y, o, z backend.Tensor, w backend.View, eps float32) {
	if ck.skip() {
		return
	}
	ck.Backend.GatedRMSNorm(y, o, z, w, eps)
	ck.check(ck.vecName(w, "gdn/norm"), y)
}

func (ck *finiteChecker) L2Norm(y, x backend.Tensor, scale float32) {
	if ck.skip() {
		return
	}
	ck.Backend.L2Norm(y, x, scale)
	ck.check(ck.mixerOp("l2norm", "gdn/q_k_l2norm"), y)
}

func (ck *finiteChecker) RoPE(x backend.Tensor, pos backend.View, rotaryDim int, theta float64) {
	if ck.skip() {
		return
	}
	ck.Backend.RoPE(x, pos, rotaryDim, theta)
	ck.check(ck.mixerOp("attention/rope", "rope"), x)
}

func (ck *finiteChecker) SigmoidMul(y, x, g backend.Tensor) {
	if ck.skip() {
		return
	}
	ck.Backend.SigmoidMul(y, x, g)
	ck.check(ck.mixerOp("attention/output_gate", "sigmoid_mul"), y)
}

func (ck *finiteChecker) SwiGLU(y, g, u backend.Tensor) {
	if ck.skip() {
		return
	}
	ck.Backend.SwiGLU(y, g, u)
	ck.check(opName{ck.layer, "mlp/swiglu"}, y)
}

func (ck *finiteChecker) Add(y, a, b backend.Tensor) {
	if ck.skip() {
		return
	}
	ck.Backend.Add(y, a, b)
	ck.check(opName{ck.layer, "add"}, y)
}

func (ck *finiteChecker) GDNGate(g, beta, a, b backend.Tensor, aLog, dtBias backend.View) {
	if ck.skip() {
		return
	}
	ck.Backend.GDNGate(g, beta, a, b, aLog, dtBias)
	n := ck.vecName(aLog, "gdn/gate")
	n.name = "gdn/gate (a_log, dt_bias)"
	ck.check(n, g, beta)
}

func (ck *finiteChecker) Conv1DSiLU(y, x backend.Tensor, w backend.View, kw int, st backend.StateSlots, inSlot backend.View, outSlot int) {
	if ck.skip() {
		return
	}
	ck.Backend.Conv1DSiLU(y, x, w, kw, st, inSlot, outSlot)
	ck.check(ck.vecName(w, "gdn/conv1d"), y)
}

func (ck *finiteChecker) DeltaRecurrent(o, q, k, v, g, beta backend.Tensor, st backend.StateSlots, inSlot backend.View, outSlot int) {
	if ck.skip() {
		return
	}
	ck.Backend.DeltaRecurrent(o, q, k, v, g, beta, st, inSlot, outSlot)
	ck.check(opName{ck.layer, "gdn/delta_rule"}, o)
}

func (ck *finiteChecker) DeltaChunked(o, q, k, v, g, beta backend.Tensor, st backend.StateSlots, inSlot backend.View, outSlot int) {
	if ck.skip() {
		return
	}
	ck.Backend.DeltaChunked(o, q, k, v, g, beta, st, inSlot, outSlot)
	ck.check(opName{ck.layer, "gdn/delta_rule"}, o)
}

func (ck *finiteChecker) KVAppend(kv backend.KVLayer, k, v backend.Tensor, pos backend.View) {
	if ck.skip() {
		return
	}
	// The cache may be quantized: attention, which reads it, is checked.
	ck.Backend.KVAppend(kv, k, v, pos)
}

func (ck *finiteChecker) Attention(out, q backend.Tensor, kv backend.KVLayer, pos backend.View, scale float32) {
	if ck.skip() {
		return
	}
	ck.Backend.Attention(out, q, kv, pos, scale)
	ck.check(opName{ck.layer, "attention/sdpa"}, out)
}
