// Package engine runs the Qwen3.5 dense text model (hybrid Gated DeltaNet +
// gated full attention, SwiGLU MLP) on a backend.Backend: weight binding,
// layer topology, paged KV cache, GDN state slots, chunked prefill and
// one-token decode. Math: shared/reference/qwen35.md §3.
package engine

import (
	"fmt"
	"io"
	"math"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/layout"
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
	// CUDAGraph replays decode steps (Decode, Verify and the MTP head's
	// steps) as backend graphs, each shape captured on its second use
	// (graph.go); the results are identical to eager runs. It needs a
	// backend.GraphCapturer (CUDA) and is ignored on others (CPU).
	CUDAGraph bool
	// Progress, when set, receives an upload progress bar of the weights
	// (drawn only on a terminal; pkg/progress).
	Progress io.Writer
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
	// opScratch is the workspace's op-scratch term bound to the backend
	// (layout.CUDAOpScratch; 0 without one).
	opScratch int64
	layers    []layer
	embed     *backend.Weight
	head      *backend.Weight
	final     backend.View
	nFull     int
	nLinear   int
	// residualT is the row count of the last target step's residual x
	// (workspace offset 0): the MTP step allocates after it (mtp.go).
	residualT int
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
	arena, bd, err := bindWeights(be, w, cfg, o.Progress)
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
	// The output head follows the backend's activation mode like every
	// other matmul (auto: int8 for a q4–q6 head): measured on the default
	// model, an int8 head adds 0.15 % to groupwise-int's KL and leaves MTP
	// acceptance unchanged (docs/ACCURACY.md, "int8 activations").
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
	e.ws, err = e.newWorkspace(WorkspaceBytes(cfg, e.stepTokens(), o.LogitsRows), e.stepTokens())
	if err != nil {
		e.be.Free(e.weights.Buffer())
		return nil, fmt.Errorf("engine: %w", err)
	}
	return e, nil
}

// stepTokens is the most tokens one step processes: min(prefill chunk,
// max context).
func (e *Engine) stepTokens() int { return layout.StepTokens(e.opts.MaxContext, e.opts.PrefillChunk) }

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

// OpScratchBytes is the workspace's op-scratch term (layout.CUDAOpScratch;
// 0 on a backend without op scratch).
func (e *Engine) OpScratchBytes() int64 { return e.opScratch }

// ResetMemoryPeaks restarts the workspace high-water mark (ninfer-bench
// calls it before each test's warmups). Nothing in the workspace lives
// across steps (each step starts with a reset), so the mark restarts at 0;
// the bytes themselves are untouched.
func (e *Engine) ResetMemoryPeaks() {
	e.ws.Reset()
	e.ws.ResetPeak()
}

// WorkspacePeakBytes is the workspace arena's high-water mark since the
// last ResetMemoryPeaks: the bytes the largest step really used (the
// phases; the op-scratch term is reserved, not counted).
func (e *Engine) WorkspacePeakBytes() int64 { return e.ws.Peak() }

// workspaceLayout is the workspace arena's capacity for phases of
// phaseCap bytes (the stack each step allocates from) and, on a backend
// whose ops need device scratch (backend.OpScratchUser: CUDA), the
// op-scratch term after them (layout.CUDAOpScratch for attention calls of
// up to attnRows rows; Bytes 0 on other backends). pkg/plan lays out the
// same terms.
func (e *Engine) workspaceLayout(phaseCap int64, attnRows int) (layout.Term, int64) {
	if _, ok := e.be.(backend.OpScratchUser); !ok {
		return layout.Term{}, phaseCap
	}
	_, need := layout.CUDAOpScratch(e.cfg, e.stepTokens(), attnRows)
	return layout.WithOpScratch(phaseCap, need)
}

// newWorkspace allocates the workspace arena of workspaceLayout and binds
// its op-scratch term to the backend.
func (e *Engine) newWorkspace(phaseCap int64, attnRows int) (*backend.Arena, error) {
	term, capacity := e.workspaceLayout(phaseCap, attnRows)
	ws, err := backend.NewArena(e.be, "workspace", capacity)
	if err != nil || term.Bytes == 0 {
		return ws, err
	}
	v, err := ws.ReserveTail(term.Offset)
	if err == nil {
		err = e.be.(backend.OpScratchUser).BindOpScratch(v, term.Bytes)
	}
	if err != nil {
		e.be.Free(ws.Buffer())
		return nil, err
	}
	e.opScratch = term.Bytes
	return ws, nil
}

// growWorkspace replaces the workspace arena by one whose phases hold
// phaseCap bytes and whose op scratch covers attention calls of attnRows
// rows (LoadMTP: the MTP step runs in the target's workspace), when that is
// larger. Nothing lives in the workspace between steps except the last
// step's residual, which only the MTP head reads right after the step; call
// it between steps.
func (e *Engine) growWorkspace(phaseCap int64, attnRows int) error {
	if _, capacity := e.workspaceLayout(phaseCap, attnRows); capacity <= e.ws.Cap() {
		return nil
	}
	ws, err := e.newWorkspace(phaseCap, attnRows)
	if err != nil {
		return err
	}
	e.be.Free(e.ws.Buffer())
	e.ws, e.residualT = ws, 0
	return nil
}

// Close frees the engine's arenas (sequences must be closed first).
func (e *Engine) Close() {
	e.be.Free(e.weights.Buffer())
	e.be.Free(e.ws.Buffer())
}

// WorkspaceBytes is the size of the per-step workspace arena for steps of
// T tokens and logitRows rows of logits: the largest phase of
// layout.Workspace (the forward pass allocates exactly those terms).
func WorkspaceBytes(c qwen35.Config, T, logitRows int) int64 {
	_, capacity := layout.Workspace(c, T, logitRows)
	return capacity
}

// MTPWorkspaceBytes is the workspace the MTP step of up to rows rows needs
// after a target step of T tokens: the largest phase of layout.MTPWorkspace
// (MTPSequence.step allocates exactly those terms, in the target's arena).
func MTPWorkspaceBytes(c qwen35.Config, T, rows, logitRows int) int64 {
	_, capacity := layout.MTPWorkspace(c, T, rows, logitRows)
	return capacity
}

// deviceSampling reports whether sequences on be carry the ctl.sampler term
// (layout.SequenceOptions.DeviceSampler): backends with their own device
// memory (CUDA) sample there; the CPU samples on the host.
func deviceSampling(be backend.Backend) bool {
	_, ok := be.(backend.Device)
	return ok
}

// seqOptions are the layout inputs of a sequence arena on backend be.
func seqOptions(o Options, kf backend.KVFormat, be backend.Backend) layout.SequenceOptions {
	return layout.SequenceOptions{MaxContext: o.MaxContext, StepTokens: layout.StepTokens(o.MaxContext, o.PrefillChunk),
		KVDtype: kf.String(), StateSlots: o.StateSlots, DeviceSampler: deviceSampling(be)}
}

func pagesFor(maxCtx int) int { return layout.Pages(maxCtx) }

func invSqrt(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
