// Package engine runs the Qwen3.5 dense text model (hybrid Gated DeltaNet +
// gated full attention, SwiGLU MLP) on a backend.Backend: weight binding,
// layer topology, paged KV cache, GDN state slots, chunked prefill and
// one-token decode. Math: shared/reference/qwen35.md §3.
package engine

import (
	"fmt"
	"math"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Options configures an engine.
type Options struct {
	MaxContext   int    // tokens per sequence (KV pages and positions); 0 = min(max_position_embeddings, 4096)
	PrefillChunk int    // tokens per prefill step, a multiple of 128; 0 = 1024
	KVDtype      string // "bf16" (default), "int8" (int8-group64), "fp8" (fp8-e4m3-row) or "fp32" (exact)
	Threads      int    // informational: the backend owns its thread pool
	StateSlots   int    // GDN state slots per layer (≥ 1; >1 for speculative verify); 0 = 1
	LogitsRows   int    // rows of the logits workspace (all-logits prefill runs the head in pieces); 0 = 1
}

// layer is one decoder layer's bound weights.
type layer struct {
	full               bool
	index              int // index among full (KV) or linear (GDN) layers
	inNorm, postNorm   backend.View
	q, k, v, o         *backend.Weight
	qNorm, kNorm       backend.View
	qkv, z, a, b, out  *backend.Weight
	conv, dtBias, aLog backend.View
	gdnNorm            backend.View
	gate, up, down     *backend.Weight
}

// Engine is a loaded model on a backend. Sequences created by NewSequence
// must be run one at a time (they share the workspace).
type Engine struct {
	cfg     qwen35.Config
	be      backend.Backend
	opts    Options
	kvFmt   backend.KVFormat
	weights *backend.Arena
	ws      *backend.Arena
	layers  []layer
	embed   *backend.Weight
	head    *backend.Weight
	final   backend.View
	nFull   int
	nLinear int
}

// New binds the model's weights on be and sizes the workspace.
func New(w Weights, be backend.Backend, o Options) (*Engine, error) {
	cfg := w.Config()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if o.MaxContext == 0 {
		o.MaxContext = 4096
		if cfg.MaxPositionEmbeddings > 0 && cfg.MaxPositionEmbeddings < o.MaxContext {
			o.MaxContext = cfg.MaxPositionEmbeddings
		}
	}
	if o.MaxContext < 1 {
		return nil, fmt.Errorf("engine: max context %d must be positive", o.MaxContext)
	}
	if o.PrefillChunk == 0 {
		o.PrefillChunk = 1024
	}
	if o.PrefillChunk < 128 || o.PrefillChunk%128 != 0 {
		return nil, fmt.Errorf("engine: prefill chunk %d must be a positive multiple of 128", o.PrefillChunk)
	}
	if o.StateSlots == 0 {
		o.StateSlots = 1
	}
	if o.StateSlots < 1 {
		return nil, fmt.Errorf("engine: state slots %d must be ≥ 1", o.StateSlots)
	}
	if o.LogitsRows <= 0 {
		o.LogitsRows = 1
	}
	if o.LogitsRows > o.PrefillChunk {
		o.LogitsRows = o.PrefillChunk
	}
	kf, err := backend.ParseKVFormat(o.KVDtype)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{cfg: cfg, be: be, opts: o, kvFmt: kf}
	arena, bd, err := bindWeights(be, w, cfg)
	if err != nil {
		return nil, err
	}
	e.weights = arena
	mat := func(name string) *backend.Weight { return bd.mats[name] }
	vec := func(name string) backend.View { return bd.vecs[name] }
	e.embed = mat(qwen35.NameEmbedding)
	e.head = e.embed
	if !cfg.TieWordEmbeddings {
		e.head = mat(qwen35.NameOutputHead)
	}
	e.final = vec(qwen35.NameFinalNorm)
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		n := func(s string) string { return qwen35.LayerName(l, s) }
		ly := layer{full: cfg.IsFull(l), inNorm: vec(n("input_norm")), postNorm: vec(n("post_attention_norm")),
			gate: mat(n("mlp/gate_proj")), up: mat(n("mlp/up_proj")), down: mat(n("mlp/down_proj"))}
		if ly.full {
			ly.index = e.nFull
			e.nFull++
			ly.q, ly.k, ly.v, ly.o = mat(n("attention/q_proj")), mat(n("attention/k_proj")), mat(n("attention/v_proj")), mat(n("attention/o_proj"))
			ly.qNorm, ly.kNorm = vec(n("attention/q_norm")), vec(n("attention/k_norm"))
		} else {
			ly.index = e.nLinear
			e.nLinear++
			ly.qkv, ly.z, ly.a, ly.b, ly.out = mat(n("gdn/in_proj_qkv")), mat(n("gdn/in_proj_z")), mat(n("gdn/in_proj_a")),
				mat(n("gdn/in_proj_b")), mat(n("gdn/out_proj"))
			ly.conv, ly.dtBias, ly.aLog, ly.gdnNorm = vec(n("gdn/conv1d")), vec(n("gdn/dt_bias")), vec(n("gdn/a_log")), vec(n("gdn/norm"))
		}
		e.layers = append(e.layers, ly)
	}
	e.ws, err = backend.NewArena(be, "workspace", WorkspaceBytes(cfg, o.PrefillChunk, o.LogitsRows))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return e, nil
}

// Config is the model config.
func (e *Engine) Config() qwen35.Config { return e.cfg }

// Options are the effective options (defaults filled in).
func (e *Engine) Options() Options { return e.opts }

// Backend is the backend the engine runs on.
func (e *Engine) Backend() backend.Backend { return e.be }

// Arenas reports the engine-owned allocations (name → bytes).
func (e *Engine) Arenas() map[string]int64 {
	return map[string]int64{"weights": e.weights.Cap(), "workspace": e.ws.Cap()}
}

// Close frees the engine's arenas (sequences must be closed first).
func (e *Engine) Close() {
	e.be.Free(e.weights.Buffer())
	e.be.Free(e.ws.Buffer())
}

// wsPlan lists the workspace allocations of one step of T tokens, in the
// order forward makes them: the residual stream and normed input live for
// the whole step; mixer and MLP buffers are released after each use.
func wsPlan(c qwen35.Config, T, logitRows int) (base []int64, sets [][]int64) {
	f := func(cols int) int64 { return 4 * int64(T) * int64(cols) }
	H, hd, nh, nkv := c.HiddenSize, c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads
	nv := c.LinearNumValueHeads
	base = []int64{f(H), f(H)}
	attn := []int64{f(2 * nh * hd), f(nh * hd), f(nkv * hd), f(nkv * hd), f(nh * hd)}
	gdn := []int64{f(c.ConvDim()), f(c.ConvDim()), f(c.ValueDim()), f(nv), f(nv), f(nv), f(nv), f(c.ValueDim()), f(c.ValueDim())}
	mlp := []int64{f(c.IntermediateSize), f(c.IntermediateSize)}
	logits := []int64{4 * int64(logitRows) * int64(c.VocabSize), 4 * int64(logitRows)}
	return base, [][]int64{attn, gdn, mlp, logits}
}

// WorkspaceBytes is the size of the per-step workspace arena for prefill
// chunks of T tokens and logitRows rows of logits (a dry run of the step's
// allocations).
func WorkspaceBytes(c qwen35.Config, T, logitRows int) int64 {
	base, sets := wsPlan(c, T, logitRows)
	var best int64
	for _, s := range sets {
		var sz backend.Sizer
		for _, n := range base {
			sz.Add(n)
		}
		for _, n := range s {
			sz.Add(n)
		}
		best = max(best, sz.Bytes())
	}
	return best
}

// SequenceBytes is the size of one sequence's state arena: the paged KV
// cache (all full-attention layers share page ids), the block table, GDN
// recurrent and conv state slots, and the control buffers.
func SequenceBytes(c qwen35.Config, o Options, kf backend.KVFormat) int64 {
	var sz backend.Sizer
	for _, n := range seqPlan(c, o, kf) {
		sz.Add(n.bytes)
	}
	return sz.Bytes()
}

type named struct {
	name  string
	bytes int64
}

func pagesFor(maxCtx int) int { return (maxCtx + backend.KVPage - 1) / backend.KVPage }

func seqPlan(c qwen35.Config, o Options, kf backend.KVFormat) []named {
	pages := pagesFor(o.MaxContext)
	code, scale := backend.KVPlaneBytes(kf, c.HeadDim)
	nvec := int64(pages) * int64(c.NumKeyValueHeads) * backend.KVPage
	var out []named
	out = append(out, named{"block_table", 4 * int64(pages)})
	for range c.FullLayers() {
		out = append(out, named{"kv.k", nvec * code}, named{"kv.v", nvec * code})
		if scale > 0 {
			out = append(out, named{"kv.k_scale", nvec * scale}, named{"kv.v_scale", nvec * scale})
		}
	}
	ssm := 4 * int64(c.LinearNumValueHeads) * int64(c.LinearKeyHeadDim) * int64(c.LinearValueHeadDim)
	conv := 4 * int64(c.ConvDim()) * int64(c.LinearConvKernelDim-1)
	for range c.LinearLayers() {
		out = append(out, named{"gdn.ssm", ssm * int64(o.StateSlots)}, named{"gdn.conv", conv * int64(o.StateSlots)})
	}
	T := int64(o.PrefillChunk)
	out = append(out, named{"ctl.ids", 4 * T}, named{"ctl.pos", 4 * T}, named{"ctl.in_slot", 4})
	return out
}

func invSqrt(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
