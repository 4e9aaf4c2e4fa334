/*
 * attention.cu — launchers and entry points of the paged KV cache and causal
 * GQA attention (ni_cuda_kv_append, ni_cuda_attention). Device code:
 * attention.cuh; contract: ../ninfer_ops.h; reference: ../cpu/attention.c.
 */
#include "ctx.cuh"
#include "attention.cuh"

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Rows of fp32 whose every (t, h) vector starts 16-byte aligned. */
static inline bool rows_vec4(const ni_rows &r) {
    return aligned16(r.p) && (r.d % 4) == 0 && (r.ld % 4) == 0 && (r.hs % 4) == 0;
}

/* ---- kv append ---------------------------------------------------------------- */

template <int FMT>
static void launch_kv_append_fmt(ni_cuda_ctx *c, const ni_kv &kv, const ni_rows &k, const ni_rows &v,
                                 const int32_t *pos, bool vec) {
    /* One warp per (token, kv head), 4 per block; y = plane (K, V). */
    const int64_t warps = (int64_t)k.t * kv.kvh;
    dim3 grid((unsigned)ni_div_up(warps, 4), 2), block(128);
    int32_t *err = c->d_err + NI_CUDA_ERR_KV_POS;
    if (vec) ni_launch(c, "kv_append_vec4", kv_append_kernel<FMT, true>, grid, block, 0, kv, k, v, pos, err);
    else ni_launch(c, "kv_append_scalar", kv_append_kernel<FMT, false>, grid, block, 0, kv, k, v, pos, err);
}

extern "C" void ni_cuda_kv_append(ni_cuda_ctx *c, ni_kv kv, ni_rows k, ni_rows v, const int32_t *pos) {
    if (k.t <= 0 || kv.kvh <= 0 || kv.hd <= 0) return;
    /* Route: vec4 when hd % 4 == 0 and every input row and both planes are
     * 16-byte aligned (float4 loads, packed 4/8/16-byte code stores); else
     * scalar loads and element stores. */
    const bool vec = kv.hd % 4 == 0 && rows_vec4(k) && rows_vec4(v) && aligned16(kv.k) && aligned16(kv.v);
    switch (kv.fmt) {
    case NI_KV_BF16: launch_kv_append_fmt<NI_KV_BF16>(c, kv, k, v, pos, vec); break;
    case NI_KV_I8G64: launch_kv_append_fmt<NI_KV_I8G64>(c, kv, k, v, pos, vec); break;
    case NI_KV_FP8ROW: launch_kv_append_fmt<NI_KV_FP8ROW>(c, kv, k, v, pos, vec); break;
    case NI_KV_F32: launch_kv_append_fmt<NI_KV_F32>(c, kv, k, v, pos, vec); break;
    default: ni_cuda_record(c, 1, "kv_append: unknown KV format %d", kv.fmt);
    }
}

/* ---- attention ------------------------------------------------------------------ */

/* Largest query chunk for the prefill route (pairs of (token, group head)). */
#define ATT_BQ_PREFILL 64
/* Shared memory per block the routes aim below (two blocks per SM on sm_90,
 * still inside the 99 KiB opt-in of sm_89/sm_120). */
#define ATT_SMEM_TARGET (100 * 1024)

static int64_t att_smem_bytes(int hd, int bq) { return att_make_plan(hd, bq).floats * 4; }

template <int FMT, bool VEC>
static void launch_attention_fmt(ni_cuda_ctx *c, const ni_rows &q, const ni_kv &kv, const int32_t *pos, float scale,
                                 const ni_rows &out, int bq, int nsplit, float *pacc, float *pml) {
    const int64_t npairs = (int64_t)q.t * (q.h / kv.kvh);
    dim3 grid((unsigned)ni_div_up(npairs, bq), (unsigned)kv.kvh, (unsigned)nsplit), block(ATT_NT);
    const size_t smem = (size_t)att_smem_bytes(kv.hd, bq);
    int32_t *err = c->d_err + NI_CUDA_ERR_ATTN_POS;
    if (nsplit > 1) {
        ni_launch(c, VEC ? "attention_split_vec" : "attention_split_scalar", attention_tile_kernel<FMT, VEC, true>, grid,
                  block, smem, q, kv, pos, scale, out, err, bq, pacc, pml, nsplit);
        const int64_t rows = (int64_t)q.t * q.h;
        const bool mvec = kv.hd % 4 == 0 && rows_vec4(out);
        dim3 mgrid((unsigned)ni_div_up(rows, 4)), mblock(128);
        if (mvec) ni_launch(c, "attention_merge_vec4", attention_merge_kernel<true>, mgrid, mblock, 0, pacc, pml, nsplit, out, kv.hd);
        else ni_launch(c, "attention_merge_scalar", attention_merge_kernel<false>, mgrid, mblock, 0, pacc, pml, nsplit, out, kv.hd);
    } else {
        ni_launch(c, VEC ? "attention_tile_vec" : "attention_tile_scalar", attention_tile_kernel<FMT, VEC, false>, grid,
                  block, smem, q, kv, pos, scale, out, err, bq, pacc, pml, 1);
    }
}

template <int FMT>
static void launch_attention_vec(ni_cuda_ctx *c, const ni_rows &q, const ni_kv &kv, const int32_t *pos, float scale,
                                 const ni_rows &out, int bq, int nsplit, float *pacc, float *pml) {
    /* vec: hd a multiple of the 16-byte code chunk, planes and q/out rows
     * 16-byte aligned (uint4 code loads, float4 q/out); else scalar. */
    const bool vec = kv.hd % att_chunk_elems(FMT) == 0 && aligned16(kv.k) && aligned16(kv.v) && rows_vec4(q) &&
                     rows_vec4(out);
    if (vec) launch_attention_fmt<FMT, true>(c, q, kv, pos, scale, out, bq, nsplit, pacc, pml);
    else launch_attention_fmt<FMT, false>(c, q, kv, pos, scale, out, bq, nsplit, pacc, pml);
}

extern "C" void ni_cuda_attention(ni_cuda_ctx *c, ni_rows q, ni_kv kv, const int32_t *pos, float scale, ni_rows out) {
    if (q.t <= 0 || q.h <= 0 || kv.kvh <= 0 || kv.hd <= 0) return;
    if (q.h % kv.kvh != 0) {
        ni_cuda_record(c, 1, "attention: %d query heads are not a multiple of %d kv heads", q.h, kv.kvh);
        return;
    }
    const int grp = q.h / kv.kvh, hd = kv.hd;
    const int64_t npairs = (int64_t)q.t * grp;

    /* Query chunk size: the largest bq whose shared-memory plan fits the
     * target (or the device limit when even one query does not fit it). */
    int64_t limit = c->info.max_smem_optin > 0 ? c->info.max_smem_optin : NI_SMEM_DEFAULT;
    const int64_t target = limit < ATT_SMEM_TARGET ? limit : ATT_SMEM_TARGET;
    int bq_max = ATT_BQ_PREFILL;
    while (bq_max > 1 && att_smem_bytes(hd, bq_max) > target) bq_max--;
    if (att_smem_bytes(hd, bq_max) > limit) {
        ni_cuda_record(c, 1, "attention: head dim %d needs %lld bytes of shared memory (device limit %lld)", hd,
                       (long long)att_smem_bytes(hd, 1), (long long)limit);
        return;
    }
    if (bq_max >= 8) bq_max &= ~3; /* whole PV quads */

    int bq = (int)(npairs < bq_max ? npairs : bq_max), nsplit = 1;
    const int64_t qchunks = ni_div_up(npairs, bq);
    if (q.t <= ATT_SPLIT_MAX_T) {
        /* Route (a), split-KV decode: T ≤ 4, grid (query chunk, kv head,
         * split). The context length is on the device (pos), so the grid is
         * sized from the table capacity (table_len·64 positions, ≥
         * ATT_SPLIT_MIN per split) and about two blocks per SM; each block
         * derives its key range from the actual length, so short contexts
         * leave the trailing splits empty (they write l = 0). */
        const int64_t cap = (int64_t)kv.table_len * NI_KV_PAGE;
        int64_t ns = ni_div_up(cap, ATT_SPLIT_MIN);
        const int64_t want = ni_div_up(2 * (int64_t)(c->info.sm_count > 0 ? c->info.sm_count : 1), kv.kvh * qchunks);
        if (ns > want) ns = want;
        if (ns > ATT_SPLIT_MAX) ns = ATT_SPLIT_MAX;
        nsplit = ns < 1 ? 1 : (int)ns;
    }
    /* Route (b), query-block tiles (T > 4, or one split): grid (query chunk
     * of ≤ 64 pairs, kv head), whole causal range per block. */
    float *pacc = NULL, *pml = NULL;
    if (nsplit > 1) {
        const int64_t rows = (int64_t)q.t * q.h;
        const int64_t acc_floats = ni_round_up((int64_t)nsplit * rows * hd, 64);
        float *sc = (float *)ni_cuda_scratch(c, (acc_floats + 2 * (int64_t)nsplit * rows) * 4);
        if (!sc) return; /* error recorded */
        pacc = sc;
        pml = sc + acc_floats;
    }
    switch (kv.fmt) {
    case NI_KV_BF16: launch_attention_vec<NI_KV_BF16>(c, q, kv, pos, scale, out, bq, nsplit, pacc, pml); break;
    case NI_KV_I8G64: launch_attention_vec<NI_KV_I8G64>(c, q, kv, pos, scale, out, bq, nsplit, pacc, pml); break;
    case NI_KV_FP8ROW: launch_attention_vec<NI_KV_FP8ROW>(c, q, kv, pos, scale, out, bq, nsplit, pacc, pml); break;
    case NI_KV_F32: launch_attention_vec<NI_KV_F32>(c, q, kv, pos, scale, out, bq, nsplit, pacc, pml); break;
    default: ni_cuda_record(c, 1, "attention: unknown KV format %d", kv.fmt);
    }
}
