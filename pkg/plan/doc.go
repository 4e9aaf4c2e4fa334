// Package plan computes ninfer's device memory plan: one function, New,
// shared by ninfer-plan, ninfer-bench and the engine. "Plan = reality": the
// engine's buffers are defined once, in pkg/layout; the engine sizes and
// carves its weights, sequence and workspace arenas from those terms and
// New builds its arenas from the same functions, so the capacities agree
// exactly. The runtime memory object is the plan's Memory with the measured
// fields (available_after_weights_bytes, available_after_startup_bytes) as
// inputs.
//
// Inputs:
//   - a qwen35.Config (the model geometry);
//   - the artifact's objects as []Object (id, component, bytes, host);
//     SelectDevice picks those placed on the device (text always; mtp/* only
//     with Spec mtp; the proposal head only with a spec and LMHeadDraft);
//   - Options: context, KV capacity (explicit tokens or auto), KV dtype,
//     prefill chunk, logits rows, speculation, CUDA graphs, backend, and the
//     memory budget (device total for offline planning, or the measured free
//     memory after weights).
//
// Outputs (Plan):
//   - Weights: layout.Weights: one Term per device object in the engine's
//     binding order, norm/conv/control vectors widened to fp32; with MTP
//     followed by the terms of the MTP head's own arena
//     (layout.MTPWeights: mtp/*, the proposal head and its ids).
//   - Sequence: layout.Sequence ("kv.text", "gdn.ssm_state",
//     "gdn.conv_state", "block_table", "ctl.*"), with MTP followed by the
//     MTP head's layout.MTPSequence ("kv.mtp", "mtp.block_table",
//     "mtp.ids", "mtp.pos", "mtp.hidden", "mtp.last_hidden").
//   - Phases: layout.Workspace ("attention", "gdn", "mlp", "logits"), with
//     MTP followed by the MTP step's layout.MTPWorkspace ("mtp.input",
//     "mtp.attention", "mtp.mlp", "mtp.logits": the MTP step runs in the
//     target's workspace arena, keeping the target's residual rows live),
//     each laid out from offset 0; the workspace capacity is the largest
//     phase (layout.WorkspaceWithMTP).
//   - MTP: the MTP head's own arenas alone (mtp.weights, mtp.sequence). The
//     engine allocates them separately; the weights and sequence
//     memory-object fields are the sums of the target's and the MTP arena.
//   - GraphAllowanceBytes, the KV capacity resolution (Resolution), the
//     backend scratch outside the arenas (ScratchBytes, reported only) and
//     the schema-15 memory object (Memory), encoded by Memory.JSON.
//
// The KV sizes, the graph allowance and resolve_kv_capacity follow
// shared/reference/ninfer-bench.md §4. The weights widening, the non-state
// sequence buffers, the workspace phases, the GDN slot count (1; k+1 with
// MTP k) and the fp32 conv state are ninfer's own (docs/PLAN.md);
// Options.GDNStateSlots, ConvStateBytes and the measured overrides reproduce
// upstream's figures (the seed reconciliation), as does
// Options.ReferenceMTPKV for the reference's MTP KV formula (the engine's
// MTP cache is one layer over the main pages; docs/PLAN.md §2.3).
package plan
