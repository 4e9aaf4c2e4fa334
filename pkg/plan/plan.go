package plan

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Refusal errors: errors.Is(err, ErrWeightsDoNotFit) and
// errors.Is(err, ErrReservationTooLarge) identify New's refusals.
var (
	ErrWeightsDoNotFit     = errors.New("weights do not fit")
	ErrReservationTooLarge = errors.New("runtime reservation does not fit")
)

// ReservationError is the refusal of resolve_kv_capacity; its text is the
// reference's, followed (in auto mode) by where the available figure comes
// from and which --headroom would fit. It never prints a negative size: a
// headroom larger than A leaves no bytes, and the text says so.
type ReservationError struct {
	// Required is the runtime reservation asked for; Available is the
	// budget for it, never negative: A in explicit mode, max(0, A −
	// headroom) in auto mode.
	Required, Available int64
	// AfterWeights is A; Headroom is the auto-mode headroom (0 in
	// explicit mode or with none): Available = max(0, A − Headroom).
	AfterWeights, Headroom int64
}

func newReservationError(required, A, headroom int64) *ReservationError {
	return &ReservationError{Required: required, Available: max(0, A-headroom), AfterWeights: A, Headroom: headroom}
}

func (e *ReservationError) Error() string {
	const prefix = "requested Engine runtime reservation requires %d bytes, "
	if e.Headroom <= 0 {
		return fmt.Sprintf(prefix+"but only %d bytes are available for runtime capacity", e.Required, e.Available)
	}
	fit := fmt.Sprintf("even --headroom 0 leaves it %d bytes short", e.Required-e.AfterWeights)
	if e.Required <= e.AfterWeights {
		fit = fmt.Sprintf("--headroom %d or less would fit it", e.AfterWeights-e.Required)
	}
	if e.Headroom >= e.AfterWeights {
		return fmt.Sprintf(prefix+"but no bytes are available for runtime capacity (the %d-byte auto-capacity headroom is not less than the %d bytes available after the weights; %s)",
			e.Required, e.Headroom, e.AfterWeights, fit)
	}
	return fmt.Sprintf(prefix+"but only %d bytes are available for runtime capacity (%d bytes after the weights minus the %d-byte auto-capacity headroom; %s)",
		e.Required, e.Available, e.AfterWeights, e.Headroom, fit)
}

// Is makes errors.Is(err, ErrReservationTooLarge) true.
func (e *ReservationError) Is(target error) bool { return target == ErrReservationTooLarge }

// Resolution is the KV capacity resolution (resolve_kv_capacity).
type Resolution struct {
	Mode                       string // "explicit" or "auto"
	MinPages, MaxPages, Pages  int64  // page groups
	MinimumReservationBytes    int64  // plan(min pages) device reservation
	IncrementBytes             int64  // plan(min+1) − plan(min); 0 when min = max
	ReservationBytes           int64  // min_res + (pages−min)·stride
	HeadroomBytes              int64  // auto headroom taken out of A (0 when explicit or none)
	AvailableAfterWeightsBytes int64  // A
	PlannedSlackBytes          int64  // A − reservation
}

// Plan is a complete memory plan; see the package doc.
type Plan struct {
	Config  qwen35.Config
	Options Options // with defaults filled and MaxContext resolved (HeadroomBytes as given; the headroom taken is Resolution.HeadroomBytes)

	KVCacheName string
	KV          KVGeometry
	GDN         GDNGeometry

	// Weights, Sequence and Workspace are what the memory object reports:
	// the target's arenas plus, with MTP, the MTP head's (MTP). Weights and
	// Sequence list the target's terms, then the MTP arena's terms (offsets
	// continue after the target's capacity); capacities are the sums. The
	// workspace is one arena shared by the target and MTP steps.
	Weights  Arena   // device objects as the engine binds them (layout.Weights + layout.MTPWeights)
	Sequence Arena   // per-sequence arenas (layout.Sequence + layout.MTPSequence)
	Phases   []Arena // the workspace phases (layout.Workspace, with MTP then layout.MTPWorkspace), each from offset 0
	// OpScratch is the workspace's op-scratch term on cuda
	// (layout.CUDAOpScratch, after the largest phase; Bytes 0 on cpu).
	OpScratch      Term
	OpScratchNeeds []Term // each op's need (the term is the largest)
	Workspace      int64  // largest phase plus the op scratch, or the override

	// MTP are the MTP head's own arenas as the engine allocates them (zero
	// without MTP); they are included in Weights and Sequence. The MTP
	// step's workspace is part of the engine's workspace arena (its phases
	// are in Phases).
	MTP MTPArenas

	// ScratchBytes is the backend's memory outside the arenas
	// (Options.BackendScratchBytes): reported, not reserved.
	ScratchBytes int64

	GraphAllowanceBytes int64
	RuntimeOverhead     int64 // subtracted from the device total (offline)
	Resolution          Resolution
	Memory              Memory
}

// MTPArenas are the MTP head's arenas (pkg/engine/mtp.go): mtp.weights
// (layout.MTPWeights) and mtp.sequence (layout.MTPSequence; kv.mtp by the
// reference formula with Options.ReferenceMTPKV, its non-state terms
// dropped with SequenceOtherBytesOverride).
type MTPArenas struct {
	Weights, Sequence Arena
}

// planAt is the device reservation at a page count.
type planAt struct {
	seq, mtpSeq Arena
	kv          KVGeometry
	gdn         GDNGeometry
	phases      []Arena
	opScratch   Term
	opNeeds     []Term
	workspace   int64
	graph       int64
}

func (p planAt) reservation() int64 { return p.seq.Capacity + p.workspace + p.graph }

func at(c qwen35.Config, o Options, maxCtx, pages int64) (planAt, error) {
	seq, mtpSeq, kv, gdn, err := sequenceArena(c, o, maxCtx, pages)
	if err != nil {
		return planAt{}, err
	}
	phases, scratch, needs, workspace := workspacePhases(c, o, maxCtx)
	return planAt{seq: seq, mtpSeq: mtpSeq, kv: kv, gdn: gdn, phases: phases, opScratch: scratch, opNeeds: needs, workspace: workspace,
		graph: graphAllowance(o, maxCtx, pages*PageTokens)}, nil
}

// reservationAt is at(...).reservation().
func reservationAt(c qwen35.Config, o Options, maxCtx, pages int64) (int64, error) {
	p, err := at(c, o, maxCtx, pages)
	return p.reservation(), err
}

// New computes the memory plan of model c with the given artifact objects.
func New(c qwen35.Config, objects []Object, opts Options) (*Plan, error) {
	if err := checkConfig(c); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Spec == SpecMTP && c.MTPNumHiddenLayers == 0 {
		return nil, fmt.Errorf("--spec mtp needs an MTP head, but the model has mtp_num_hidden_layers 0")
	}
	dev, err := SelectDevice(objects, o.Spec, o.LMHeadDraft)
	if err != nil {
		return nil, err
	}
	p := &Plan{Config: c, KVCacheName: o.KVDtype.CacheName(), ScratchBytes: o.BackendScratchBytes}
	if p.Weights, p.MTP.Weights, err = weightsArena(c, dev); err != nil {
		return nil, err
	}

	// A: the memory available after the weights.
	A := o.AvailableAfterWeightsBytes
	if o.DeviceTotalBytes > 0 {
		p.RuntimeOverhead = o.RuntimeOverheadBytes
		A = o.DeviceTotalBytes - p.Weights.Capacity - o.RuntimeOverheadBytes
		if A <= 0 {
			if o.RuntimeOverheadBytes == 0 {
				return nil, fmt.Errorf("%w: %d device objects need %d bytes, but the device has %d bytes",
					ErrWeightsDoNotFit, len(dev), p.Weights.Capacity, o.DeviceTotalBytes)
			}
			return nil, fmt.Errorf("%w: %d device objects need %d bytes and the runtime overhead %d bytes, %d bytes together, but the device has %d bytes",
				ErrWeightsDoNotFit, len(dev), p.Weights.Capacity, o.RuntimeOverheadBytes, p.Weights.Capacity+o.RuntimeOverheadBytes, o.DeviceTotalBytes)
		}
	}

	limit := int64(c.MaxPositionEmbeddings)
	if o.MaxContext == 0 {
		if limit <= 0 {
			limit = defaultMaxContextCap
		}
		ctx, err := largestContext(c, o, A, limit)
		if err != nil {
			return nil, err
		}
		o.MaxContext = ctx
	} else if limit > 0 && o.MaxContext > limit {
		return nil, fmt.Errorf("max context %d exceeds the model's max_position_embeddings %d", o.MaxContext, limit)
	}

	res, err := resolve(c, o, A)
	if err != nil {
		return nil, err
	}
	pa, err := at(c, o, o.MaxContext, res.Pages)
	if err != nil {
		return nil, err
	}
	if got := pa.reservation(); got != res.ReservationBytes {
		return nil, fmt.Errorf("internal: plan is not affine in pages: reservation %d at %d pages, resolved %d", got, res.Pages, res.ReservationBytes)
	}
	p.Options = o
	p.KV, p.GDN = pa.kv, pa.gdn
	p.Sequence, p.Phases, p.OpScratch, p.OpScratchNeeds, p.Workspace = pa.seq, pa.phases, pa.opScratch, pa.opNeeds, pa.workspace
	p.MTP.Sequence = pa.mtpSeq
	p.GraphAllowanceBytes = pa.graph
	p.Resolution = res
	p.Memory = p.memory()
	return p, nil
}

// resolve is resolve_kv_capacity (shared/reference/ninfer-bench.md §4).
func resolve(c qwen35.Config, o Options, A int64) (Resolution, error) {
	C := int64(o.MaxConcurrency)
	logical := ceilDiv(o.MaxContext, PageTokens)
	r := Resolution{Mode: o.KVCapacityMode(), MinPages: max(logical, C), MaxPages: C * logical, AvailableAfterWeightsBytes: A}
	var err error
	if r.MinimumReservationBytes, err = reservationAt(c, o, o.MaxContext, r.MinPages); err != nil {
		return r, err
	}
	if r.MinPages < r.MaxPages {
		next, err := reservationAt(c, o, o.MaxContext, r.MinPages+1)
		if err != nil {
			return r, err
		}
		r.IncrementBytes = next - r.MinimumReservationBytes
	}
	budget := A
	if r.Mode == "explicit" {
		if o.KVCapacity < o.MaxContext {
			return r, fmt.Errorf("kv capacity %d tokens is below the max context %d", o.KVCapacity, o.MaxContext)
		}
		r.Pages = ceilDiv(o.KVCapacity, PageTokens)
		if r.Pages < r.MinPages || r.Pages > r.MaxPages {
			return r, fmt.Errorf("kv capacity %d tokens (%d page groups) must be within [%d, %d] page groups for max context %d",
				o.KVCapacity, r.Pages, r.MinPages, r.MaxPages, o.MaxContext)
		}
	} else {
		r.HeadroomBytes = o.headroom(A)
		budget = A - r.HeadroomBytes
		if budget < r.MinimumReservationBytes {
			return r, newReservationError(r.MinimumReservationBytes, A, r.HeadroomBytes)
		}
		r.Pages = r.MinPages
		if r.IncrementBytes > 0 {
			r.Pages = min(r.MaxPages, r.MinPages+(budget-r.MinimumReservationBytes)/r.IncrementBytes)
		}
	}
	r.ReservationBytes = r.MinimumReservationBytes + (r.Pages-r.MinPages)*r.IncrementBytes
	if r.ReservationBytes > budget {
		return r, newReservationError(r.ReservationBytes, A, r.HeadroomBytes)
	}
	r.PlannedSlackBytes = A - r.ReservationBytes
	return r, nil
}

// largestContext is the largest max context (a multiple of 64, at most
// limit) whose auto-mode reservation fits A − headroom.
func largestContext(c qwen35.Config, o Options, A, limit int64) (int64, error) {
	budget := A - o.headroom(A)
	if _, err := at(c, o, PageTokens, 1); err != nil {
		return 0, err
	}
	fits := func(pages int64) bool {
		r, _ := reservationAt(c, o, pages*PageTokens, pages) // errors depend on the options only, checked above
		return r <= budget
	}
	if !fits(1) {
		need, _ := reservationAt(c, o, PageTokens, 1)
		return 0, newReservationError(need, A, o.headroom(A))
	}
	lo, hi := int64(1), limit/PageTokens // fits(lo) holds
	if hi < 1 {
		return min(limit, PageTokens), nil
	}
	if fits(hi) {
		return min(limit, hi*PageTokens), nil
	}
	for hi-lo > 1 { // invariant: fits(lo), !fits(hi)
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo * PageTokens, nil
}

// Phase returns the workspace phase of the given name (layout.PhaseAttention,
// PhaseGDN, PhaseMLP, PhaseLogits, and with MTP layout.PhaseMTPInput,
// PhaseMTPAttention, PhaseMTPMLP, PhaseMTPLogits), or ok=false.
func (p *Plan) Phase(name string) (Arena, bool) {
	for _, a := range p.Phases {
		if a.Name == name {
			return a, true
		}
	}
	return Arena{}, false
}
