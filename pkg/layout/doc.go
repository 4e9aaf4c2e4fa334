// Package layout is the engine's buffer layout as named, 256-byte-aligned
// terms: the weights arena, the per-sequence arena and the per-step
// workspace. It is pure Go and the single definition that both the engine
// (pkg/engine sizes AND carves its arenas from these terms) and the memory
// planner (pkg/plan) use, so that "plan = reality" holds by construction.
//
// Arenas are laid out back to back: term i starts at align_up(end of term
// i−1, 256) and the arena capacity is Σ align_up(bytes, 256).
//
// Weights (Weights): one term per bound tensor, named by its object id.
// Matrices keep their encoded payload; norm, conv and control vectors are
// widened to fp32 at bind time (BoundBytes).
//
// Sequence (Sequence), in this order:
//
//	block_table     int32 [pages]                          logical → physical page
//	kv.text         [full layer][K | V | K scale | V scale] pages·64·kv_heads vectors per plane
//	gdn.ssm_state   fp32 [GDN layer][slot][nv·dk·dv]
//	gdn.conv_state  [GDN layer][slot][conv_dim·(K−1)] of ConvStateElemBytes
//	ctl.ids         int32 [step tokens]
//	ctl.pos         int32 [step tokens]
//	ctl.in_slot     int32 [1]
//	ctl.sampler     CUDA only: SamplerBytes(vocab) — device sampling's
//	                counts, seen mask, RNG position and drawn id
//
// Workspace (Workspace): the forward pass allocates a stack per step: the
// residual stream "x" and the normed input "x_norm" for the whole step, then
// one of the phases "attention", "gdn", "mlp" or "logits" on top (each
// released before the next). Each phase is laid out from offset 0 including
// x and x_norm; the workspace capacity is the largest phase. Step tokens
// are min(prefill chunk, max context): no step can process more.
//
// Op scratch (opscratch.go): on the CUDA backend the workspace ends with one
// more term, "op_scratch" at AlignUp(largest phase), of CUDAOpScratch bytes
// (the largest device scratch one op of a step asks for: split-KV
// attention partials, chunked-GDN records, conv halos, sampling buffers).
// The engine binds it to the backend (backend.OpScratchUser), so no op
// allocates; the CPU backend keeps its per-thread scratch outside the
// arenas (reported, not reserved) and has no such term.
//
// MTP (mtp.go): with speculation the MTP head (pkg/engine/mtp.go) keeps
// two arenas of its own, each laid out here, and runs its step in the
// target's workspace arena:
//
//   - MTPWeights ("mtp.weights"): the mtp/* tensors in inventory order
//     (BoundBytes), then with the proposal head text/draft_head and
//     text/draft_head_token_ids.
//   - MTPSequence ("mtp.sequence", one per sequence): kv.mtp (one layer over
//     the target's pages, MTPGeometry), mtp.block_table, mtp.ids, mtp.pos
//     (int32 [rows]), mtp.hidden (fp32 [rows, H]), mtp.last_hidden
//     (fp32 [H]); rows = MTPRows(step tokens, state slots).
//   - MTPWorkspace: the MTP step's phases "mtp.input", "mtp.attention",
//     "mtp.mlp" and "mtp.logits" in the target's workspace arena (the MTP
//     step runs after the target step, on the same stream). Each starts with
//     the target step's residual x (kept live), then mtp.x and mtp.x_norm;
//     WorkspaceWithMTP is the capacity: the largest target or MTP phase.
//
// pkg/plan reports the MTP weights and sequence arenas inside the
// weights and sequence memory-object fields (sums), and the MTP phases
// among the workspace phases.
package layout
