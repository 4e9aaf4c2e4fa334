/*
 * delta.cu — launchers and entry points of the gated delta rule family:
 * ni_cuda_gdn_recurrent, ni_cuda_gdn_chunked (formulas: ../ninfer_ops.h;
 * behavioural reference: kernels/cpu/delta.c; device code: delta.cuh). The
 * routes are not tuned yet (a later issue measures them).
 */
#include "ctx.cuh"
#include "delta.cuh"

/* Test knob of the context: when n > 0, the chunked form processes at most
 * n chunks per segment (exercises the segment hand-over without a huge T).
 * 0: the segment size comes from the scratch budget. */
void ni_cuda_set_gdn_segment(ni_cuda_ctx *c, int n) { c->gdn_seg_chunks = n > 0 ? n : 0; }

/* Scratch budget of the chunked form: chunks are processed in segments whose
 * records (gdn_ck_rec floats per chunk and v-head) fit in this many bytes. */
#define NI_GDN_SCRATCH_BUDGET ((int64_t)128 << 20)

static bool al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Every row start (t, h) of r is 16-byte aligned and rows hold a multiple
 * of 4 floats: float4 staging. */
static int rows_vec4(const ni_rows &r) {
    return al16(r.p) && (r.t <= 1 || r.ld % 4 == 0) && (r.h <= 1 || r.hs % 4 == 0) && r.d % 4 == 0;
}

/* Shape and slot checks shared by both forms; false: nothing to launch
 * (an error is recorded where the call is malformed). */
static bool gdn_check(ni_cuda_ctx *c, const char *op, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta,
                      int32_t slots, int out_slot, ni_rows o) {
    if (v.h <= 0 || v.d <= 0) return false; /* no heads: nothing to do */
    if (k.h <= 0 || v.h % k.h != 0 || q.h != k.h || q.d != k.d || q.t != v.t || k.t != v.t || o.t != v.t ||
        o.h != v.h || o.d != v.d || g.t < v.t || beta.t < v.t || g.h < v.h || beta.h < v.h) {
        ni_cuda_record(c, 1, "%s: shapes q %dx%dx%d k %dx%dx%d v %dx%dx%d o %dx%dx%d", op, q.t, q.h, q.d, k.t, k.h,
                       k.d, v.t, v.h, v.d, o.t, o.h, o.d);
        return false;
    }
    if (out_slot != NI_PER_TOKEN && (out_slot < 0 || out_slot >= slots)) {
        ni_cuda_record(c, 1, "%s: output slot %d outside [0,%d)", op, out_slot, slots);
        return false;
    }
    if (out_slot == NI_PER_TOKEN && v.t > slots) {
        ni_cuda_record(c, 1, "%s: %d per-token states, %d slots", op, v.t, slots);
        return false;
    }
    return true;
}

/* ---- recurrent ---- */

template <int R, int WR>
static void launch_gdn_recurrent_rw(ni_cuda_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta,
                                    float *state, int64_t slot_stride, int32_t slots, const int32_t *in_slot,
                                    int out_slot, ni_rows o) {
    const int dk = k.d;
    /* q and k of tb tokens staged per barrier pair: 2·tb·dk floats ≤ 16 KiB */
    int tb = 2048 / (dk > 0 ? dk : 1);
    tb = tb < 1 ? 1 : tb > 16 ? 16 : tb;
    if (v.t >= 1 && tb > v.t) tb = v.t;
    const size_t smem = (size_t)4 * (2 * (size_t)tb * dk + 2 * WR * gdn_rec_cols(WR));
    const dim3 grid((unsigned)ni_div_up(v.d, gdn_rec_cols(WR)), (unsigned)v.h), block(gdn_rec_threads(WR));
    ni_launch(c, "gdn_recurrent", gdn_recurrent_kernel<R, WR>, grid, block, smem, q, k, v, g, beta, state,
              slot_stride, slots, in_slot, out_slot, o, tb, rows_vec4(q), rows_vec4(k), c->d_err);
}

/* Route ladder by dk (rows per thread R, row-splitting warps WR):
 *   dk ≤ 16 / 32 / 64: R = 4 / 8 / 16, WR = 1 — each warp reduces over its
 *     own 4 row groups by 2 shuffles, no barrier per token; 128-thread blocks
 *     of 32 columns.
 *   dk ≤ 128 (the model: 128): R = 16, WR = 2, WC = 2 — 16 state floats per
 *     thread, 16 columns per 128-thread block, so dk = dv = 128 with 48
 *     v-heads gives 384 blocks (decode is latency-bound: more blocks, fewer
 *     registers); 2 barriers per token for the cross-warp sums.
 *   dk ≤ 256 / 512 / 1024: R = 16, WR = 4 / 8 / 16 (128 / 256 / 512 threads).
 * T = 0 still runs: like the CPU it copies the input slot to out_slot. */
static void launch_gdn_recurrent(ni_cuda_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta,
                                 float *state, int64_t slot_stride, int32_t slots, const int32_t *in_slot,
                                 int out_slot, ni_rows o) {
    const int dk = k.d;
#define GDN_REC(R, WR) \
    launch_gdn_recurrent_rw<R, WR>(c, q, k, v, g, beta, state, slot_stride, slots, in_slot, out_slot, o)
    if (dk <= 16) GDN_REC(4, 1);
    else if (dk <= 32) GDN_REC(8, 1);
    else if (dk <= 64) GDN_REC(16, 1);
    else if (dk <= 128) GDN_REC(16, 2);
    else if (dk <= 256) GDN_REC(16, 4);
    else if (dk <= 512) GDN_REC(16, 8);
    else if (dk <= 1024) GDN_REC(16, 16);
    else ni_cuda_record(c, 1, "gdn_recurrent: dk %d > 1024", dk);
#undef GDN_REC
}

extern "C" void ni_cuda_gdn_recurrent(ni_cuda_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta,
                                      float *state, int64_t slot_stride, int32_t slots, const int32_t *in_slot,
                                      int out_slot, ni_rows o) {
    if (!gdn_check(c, "gdn_recurrent", q, k, v, g, beta, slots, out_slot, o)) return;
    launch_gdn_recurrent(c, q, k, v, g, beta, state, slot_stride, slots, in_slot, out_slot, o);
}

/* ---- chunked ---- */

/* Routes:
 *   dk ≤ 128 and both kernels' shared memory within the opt-in limit (dk =
 *     dv = 128: 84 KiB prep, 75 KiB state pass): the WY form in segments of
 *     chunks whose records fit the scratch budget — per segment
 *     gdn_chunk_prep_kernel over (chunks × v-heads) in parallel, then
 *     gdn_chunk_state_kernel over (32-column tiles × v-heads) walking the
 *     chunks; the first segment reads *in_slot, later ones continue from
 *     out_slot. T = 0: the state pass alone copies the input slot to
 *     out_slot (as the CPU).
 *   otherwise (dk > 128, or dv too wide for the prep kernel's U columns):
 *     the recurrent kernel, which computes the same result up to rounding. */
extern "C" void ni_cuda_gdn_chunked(ni_cuda_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta,
                                    float *state, int64_t slot_stride, int32_t slots, const int32_t *in_slot,
                                    int out_slot, ni_rows o) {
    if (out_slot < 0) {
        ni_cuda_record(c, 1, "gdn_chunked: output slot %d: per-token states need the recurrent form", out_slot);
        return;
    }
    if (!gdn_check(c, "gdn_chunked", q, k, v, g, beta, slots, out_slot, o)) return;
    const int dk = k.d, dv = v.d, nv = v.h, T = v.t;
    const size_t sp = gdn_ck_prep_smem(dk, dv), ss = gdn_ck_state_smem(dk);
    const int64_t optin = c->info.max_smem_optin > 0 ? c->info.max_smem_optin : NI_SMEM_DEFAULT;
    if (dk > NI_GDN_CK_DK_MAX || (int64_t)sp > optin || (int64_t)ss > optin) {
        launch_gdn_recurrent(c, q, k, v, g, beta, state, slot_stride, slots, in_slot, out_slot, o);
        return;
    }
    const int nchunks = (int)ni_div_up(T, NI_GDN_CHUNK);
    const int64_t chunk_bytes = 4 * gdn_ck_rec(dk, dv) * nv; /* one chunk, all v-heads */
    int64_t seg = NI_GDN_SCRATCH_BUDGET / chunk_bytes;
    if (c->gdn_seg_chunks > 0 && seg > c->gdn_seg_chunks) seg = c->gdn_seg_chunks;
    if (seg < 1) seg = 1;
    if (seg > nchunks) seg = nchunks;
    float *scratch = NULL;
    if (nchunks > 0) {
        /* once, at the largest segment: a later, larger request would free
         * a buffer that launched kernels may still read */
        scratch = (float *)ni_cuda_scratch(c, seg * chunk_bytes);
        if (!scratch) return;
    }
    const int qv = rows_vec4(q), kv = rows_vec4(k), wv = dk % 4 == 0;
    const dim3 block(NI_GDN_CK_THREADS), sgrid((unsigned)ni_div_up(dv, NI_GDN_CK_BV), (unsigned)nv);
    if (nchunks == 0) {
        ni_launch(c, "gdn_chunk_state", gdn_chunk_state_kernel, sgrid, block, ss, q, k, o, (const float *)NULL, 0, 0,
                  nv, state, slot_stride, slots, in_slot, out_slot, 1, 1, c->d_err, qv, kv, wv);
        return;
    }
    for (int c0 = 0; c0 < nchunks; c0 += (int)seg) {
        const int nch = nchunks - c0 < seg ? nchunks - c0 : (int)seg;
        ni_launch(c, "gdn_chunk_prep", gdn_chunk_prep_kernel, dim3((unsigned)nch, (unsigned)nv), block, sp, q, k, v,
                  g, beta, scratch, c0, slots, in_slot, c->d_err, qv, kv);
        ni_launch(c, "gdn_chunk_state", gdn_chunk_state_kernel, sgrid, block, ss, q, k, o, (const float *)scratch, c0,
                  nch, nv, state, slot_stride, slots, in_slot, out_slot, c0 == 0, c0 == 0, c->d_err, qv, kv, wv);
    }
}
