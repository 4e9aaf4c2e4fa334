// Package plan computes ninfer's device memory plan: one function, New,
// shared by ninfer-plan, ninfer-bench and the engine. "Plan = reality": the
// engine allocates exactly the arenas and named buffers of a Plan, and the
// runtime memory object is the plan's Memory with only the measured fields
// (available_after_weights_bytes, available_after_startup_bytes) replaced.
//
// Inputs:
//   - a qwen35.Config (the model geometry);
//   - the artifact's objects as []Object (id, component, bytes, host);
//     SelectDevice picks those placed on the device (text always; mtp/* only
//     with Spec mtp; the proposal head only with a spec and LMHeadDraft);
//   - Options: context, KV capacity (explicit tokens or auto), KV dtype,
//     prefill chunk, speculation, CUDA graphs, backend, and the memory
//     budget (device total for offline planning, or the measured free
//     memory after weights).
//
// Outputs (Plan):
//   - Weights: the weights arena, one Term per device object at a 256-byte
//     aligned offset (capacity = Σ align_up(bytes, 256)).
//   - Sequence: the persistent per-sequence arena, a list of named Terms at
//     256-byte aligned offsets: "kv.text", "kv.mtp", "gdn.ssm_state",
//     "gdn.conv_state", then the other sequence buffers ("seq.*").
//   - Workspace: per-phase lists of named Terms ("prefill", "decode",
//     "mtp_verify", "mtp_prefill", "mtp_draft"), each laid out from offset 0;
//     the workspace arena capacity is the largest phase.
//   - GraphAllowanceBytes, the KV capacity resolution (Resolution) and the
//     schema-15 memory object (Memory), encoded by Memory.JSON.
//
// The KV and GDN formulas and resolve_kv_capacity follow
// shared/reference/ninfer-bench.md §4. The "seq.*" buffers and the workspace
// phases are ninfer's own layout, not upstream's; docs/PLAN.md lists them.
// GDN state slots: 1 without speculation; k+1 with MTP k (the verify pass
// writes the state after column t into slot t; after acceptance of a drafts
// the next round reads slot a). Options.GDNStateSlots overrides this (the
// seed reconciliation uses 1, matching upstream's replay-record design).
package plan
