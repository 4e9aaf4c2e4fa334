package plan

import "encoding/json"

// ArenaUsage is one arena of the memory object.
type ArenaUsage struct {
	CapacityBytes int64 `json:"capacity_bytes"`
	UsedBytes     int64 `json:"used_bytes"`
	PeakUsedBytes int64 `json:"peak_used_bytes"`
}

// VisionWorkspace is the vision block of the memory object (always null in
// ninfer, which never enables vision).
type VisionWorkspace struct {
	AggregatePromptTokens int64 `json:"aggregate_prompt_tokens"`
	MaxItemTokens         int64 `json:"max_item_tokens"`
	GeneralCapacityBytes  int64 `json:"general_capacity_bytes"`
	EncodePeakBytes       int64 `json:"encode_peak_bytes"`
	HandoffOffsetBytes    int64 `json:"handoff_offset_bytes"`
	HandoffCapacityBytes  int64 `json:"handoff_capacity_bytes"`
	HandoffActiveBytes    int64 `json:"handoff_active_bytes"`
	HandoffPeakBytes      int64 `json:"handoff_peak_bytes"`
}

// Memory is the schema-15 memory object, fields in the report's key order.
type Memory struct {
	Device                         int              `json:"device"`
	MaxContext                     int64            `json:"max_context"`
	KVCapacityMode                 string           `json:"kv_capacity_mode"`
	KVCapacity                     int64            `json:"kv_capacity"`
	KVCapacityPageGroups           int64            `json:"kv_capacity_page_groups"`
	KVCapacityMaxPageGroups        int64            `json:"kv_capacity_max_page_groups"`
	KVCache                        string           `json:"kv_cache"`
	Weights                        ArenaUsage       `json:"weights"`
	Sequence                       ArenaUsage       `json:"sequence"`
	Workspace                      ArenaUsage       `json:"workspace"`
	VisionWorkspace                *VisionWorkspace `json:"vision_workspace"`
	MinimumRuntimeReservationBytes int64            `json:"minimum_runtime_reservation_bytes"`
	KVCapacityIncrementBytes       int64            `json:"kv_capacity_increment_bytes"`
	RuntimeReservationBytes        int64            `json:"runtime_reservation_bytes"`
	AvailableAfterWeightsBytes     int64            `json:"available_after_weights_bytes"`
	AvailableAfterStartupBytes     int64            `json:"available_after_startup_bytes"`
	KVCapacityHeadroomBytes        int64            `json:"kv_capacity_headroom_bytes"`
	PlannedSlackBytes              int64            `json:"planned_slack_bytes"`
	CUDAGraphAllowanceBytes        int64            `json:"cuda_graph_allowance_bytes"`
	KVPayloadBytes                 int64            `json:"kv_payload_bytes"`
}

// JSON encodes m as an indented JSON object (2 spaces) with a final newline.
func (m Memory) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// memory builds the schema-15 memory object of p. The arenas are reported
// as the engine records them right after construction: weights and the
// sequence arena fully used, the workspace unused. available_after_startup
// is the measured override when given, else the planned A − reservation.
func (p *Plan) memory() Memory {
	r := p.Resolution
	w := p.Weights.Capacity
	startup := p.Options.AvailableAfterStartupBytes
	if startup == 0 {
		startup = r.AvailableAfterWeightsBytes - r.ReservationBytes
	}
	return Memory{
		Device:                         p.Options.Device,
		MaxContext:                     p.Options.MaxContext,
		KVCapacityMode:                 r.Mode,
		KVCapacity:                     r.Pages * PageTokens,
		KVCapacityPageGroups:           r.Pages,
		KVCapacityMaxPageGroups:        r.MaxPages,
		KVCache:                        p.KVCacheName,
		Weights:                        ArenaUsage{w, w, w},
		Sequence:                       ArenaUsage{p.Sequence.Capacity, p.Sequence.Capacity, p.Sequence.Capacity},
		Workspace:                      ArenaUsage{p.Workspace, 0, 0},
		MinimumRuntimeReservationBytes: r.MinimumReservationBytes,
		KVCapacityIncrementBytes:       r.IncrementBytes,
		RuntimeReservationBytes:        r.ReservationBytes,
		AvailableAfterWeightsBytes:     r.AvailableAfterWeightsBytes,
		AvailableAfterStartupBytes:     startup,
		KVCapacityHeadroomBytes:        r.HeadroomBytes,
		PlannedSlackBytes:              r.PlannedSlackBytes,
		CUDAGraphAllowanceBytes:        p.GraphAllowanceBytes,
		KVPayloadBytes:                 p.KV.PayloadBytes(),
	}
}
