/*
 * weights.cu — launchers of the weight family: ni_cuda_embed and
 * ni_cuda_matmul (all 8 weight formats). Device code: weights.cuh.
 *
 * Route ladder of ni_cuda_matmul (T = x.t):
 *   T = 0            nothing.
 *   T = 1            GEMV niw_gemv_kernel<F, NT = 1, R = 2>: a warp per 2 rows,
 *                    16-byte weight loads, x staged in shared memory.
 *   T = 2, 3         the same GEMV with NT = T tokens per pass, R = 4 rows a warp
 *                    (q5/q6/nvfp4: R = 2):
 *                    each decoded weight feeds every token (one weight read).
 *   4 ≤ T ≤ 16       NT = 4 tokens per pass, ⌈T/4⌉ passes in the kernel (the
 *                    block's rows are re-read from L2 per pass, HBM once).
 *   T > 16, fp32     exact fp32 SIMT GEMM niw_f32_gemm_kernel (64 × 64 tiles).
 *   T > 16, others   tensor-core GEMM niw_mma_kernel<F> (64 × 64 × 64 tiles,
 *                    mma.sync m16n8k16 bf16, activations split in
 *                    three bf16 terms).
 * fp32 / bf16 / fp8-row rows that are not 16-byte aligned (K % 4, K % 8,
 * K % 16 ≠ 0, or an unaligned data pointer) use the element-load variants
 * NIW_F32S / NIW_BF16S / NIW_FP8S of the same kernels. q4..q8 and nvfp4
 * need a 16-byte aligned data pointer (the format aligns every plane to 256
 * bytes relative to the tensor start); otherwise the op records an error.
 *
 * Tolerance story (S = Σ_k |x_k · w_k| over the decoded weights w of
 * ni_weight_decode_row, u = 2^-24):
 *   GEMV (all formats) and the fp32 SIMT GEMM: the decoded weights are the
 *     CPU's values bit for bit, the products and sums are fp32 FMAs, so the
 *     error against the exact sum is ≤ (K + 6)·u·S (at most K FMAs in a lane
 *     chain plus a 5-level warp tree), the same class as the CPU's fp32 path.
 *   Tensor-core GEMM: x = hi + mid + lo + r with |r| ≤ 2^-24·|x| (three
 *     bf16 RNE roundings of exact remainders, 8 significant bits each);
 *     weight tile values are exact in bf16, bf16 × bf16 products are exact
 *     in the fp32 mma; the mma's fp32 additions (allowing truncation, 2^-23
 *     per addition and up to 2 additions per mma) add ≤ (3·⌈K/16⌉·2 + 2)·
 *     2^-23·S; the fp32 group-scale fold (q4..q8) adds ≤ ⌈K/G⌉·u·S, the
 *     epilogue scale one u·|y|, and for nvfp4 the CPU's own rounding of
 *     e4m3·inv_div and e2m1·s ≤ 2u·S. So ≈ K·2^-21·S, the fp32 class of the
 *     CPU's GEMM. (With two terms the 2^-16·S residual dominated and broke
 *     the former Go linear_fp32 tolerance at K = 520; NaN codes stay
 *     NaN: NaN bf16 weights and NaN scales propagate through the mma and
 *     the fp32 scale multiply into exactly the affected output rows).
 *   The mma products go into a per-group (q4..q8) or per-k-tile (bf16,
 *     nvfp4, fp8-row) partial that is added to the accumulator once per
 *     group or tile, so the running sum never absorbs the small lo/mid
 *     terms. The Go op tests check each
 *     output against the bound derived from this arithmetic
 *     (internal/numtest, TensorCoreBF16x3; docs/ACCURACY.md).
 */
#include "ctx.cuh"
#include "weights.cuh"

/* ---- helpers ---------------------------------------------------------------- */

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Internal format id of w for the given route (vector or element variant). */
static int route_fmt(const ni_weight *w) {
    const bool a = aligned16(w->data);
    switch (w->fmt) {
    case NI_W_F32: return a && w->k % 4 == 0 ? (int)NI_W_F32 : (int)NIW_F32S;
    case NI_W_BF16: return a && w->k % 8 == 0 ? (int)NI_W_BF16 : (int)NIW_BF16S;
    case NI_W_FP8ROW: return a && w->k % 16 == 0 ? (int)NI_W_FP8ROW : (int)NIW_FP8S;
    case NI_W_Q4:
    case NI_W_Q5:
    case NI_W_Q6:
    case NI_W_Q8:
    case NI_W_NVFP4: return a ? w->fmt : -1;
    default: return -1;
    }
}

/* ---- embedding ---------------------------------------------------------------- */

/* Route: one block of 128 threads per token (grid = T). */
template <int F> static void launch_embed(ni_cuda_ctx *c, const ni_weight *w, const int32_t *ids, ni_rows out) {
    const bool vst = aligned16(out.p) && out.ld % 4 == 0;
    if (vst)
        ni_launch(c, "niw_embed_kernel", niw_embed_kernel<F, true>, dim3((unsigned)out.t), dim3(128), 0, *w, ids, out,
                  c->d_err + NI_CUDA_ERR_EMBED_IDS);
    else
        ni_launch(c, "niw_embed_kernel", niw_embed_kernel<F, false>, dim3((unsigned)out.t), dim3(128), 0, *w, ids, out,
                  c->d_err + NI_CUDA_ERR_EMBED_IDS);
}

extern "C" void ni_cuda_embed(ni_cuda_ctx *c, const ni_weight *w, const int32_t *ids, ni_rows out) {
    if (out.t <= 0) return;
    switch (route_fmt(w)) {
    case NI_W_F32: launch_embed<NI_W_F32>(c, w, ids, out); break;
    case NIW_F32S: launch_embed<NIW_F32S>(c, w, ids, out); break;
    case NI_W_BF16: launch_embed<NI_W_BF16>(c, w, ids, out); break;
    case NIW_BF16S: launch_embed<NIW_BF16S>(c, w, ids, out); break;
    case NI_W_Q4: launch_embed<NI_W_Q4>(c, w, ids, out); break;
    case NI_W_Q5: launch_embed<NI_W_Q5>(c, w, ids, out); break;
    case NI_W_Q6: launch_embed<NI_W_Q6>(c, w, ids, out); break;
    case NI_W_Q8: launch_embed<NI_W_Q8>(c, w, ids, out); break;
    case NI_W_NVFP4: launch_embed<NI_W_NVFP4>(c, w, ids, out); break;
    case NI_W_FP8ROW: launch_embed<NI_W_FP8ROW>(c, w, ids, out); break;
    case NIW_FP8S: launch_embed<NIW_FP8S>(c, w, ids, out); break;
    default: ni_cuda_record(c, 1, "ni_cuda_embed: weight format %d unsupported or data not 16-byte aligned", (int)w->fmt);
    }
}

/* ---- matmul: GEMV (T ≤ NI_SMALL_T) ---------------------------------------------- */

#define NIW_GEMV_SMEM (48 * 1024) /* x chunk budget: no opt-in, ≥ 4 blocks per SM */

template <int F, int NT, int R>
static void launch_gemv_nt(ni_cuda_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int acc) {
    constexpr int S = 32 * WF<F>::E; /* elements per warp step */
    /* K chunk: all of K when NT·K fp32 fit the budget, else the largest
     * multiple of S that does */
    int64_t kmax = (int64_t)(NIW_GEMV_SMEM / (NT * 4)) / S * S;
    int64_t kc = ni_round_up(w->k, S);
    if (kc > kmax) kc = kmax;
    /* warps per block: 8, halved (down to 2) while the grid would not give
     * every SM two blocks */
    int nw = 8;
    const int64_t sms = c->info.sm_count > 0 ? c->info.sm_count : 1;
    while (nw > 2 && ni_div_up(w->n, (int64_t)nw * R) < 2 * sms) nw /= 2;
    const int64_t blocks = ni_div_up(w->n, (int64_t)nw * R);
    ni_launch(c, "niw_gemv_kernel", niw_gemv_kernel<F, NT, R>, dim3((unsigned)blocks), dim3(32 * nw),
              (size_t)(NT * kc * 4), *w, x, y, acc, (int)kc);
}

/* Rows per warp for NT ≥ 2: 4 (each x piece read from shared memory feeds
 * 4 rows), 2 for q5/q6 and nvfp4 whose decode needs more registers (R = 4
 * spills under the 128-register cap of 2 blocks × 256 threads per SM:
 * q5/q6 on sm_90a, nvfp4 on sm_89). */
template <int F> static void launch_gemv(ni_cuda_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int acc) {
    constexpr int R = F == NI_W_Q5 || F == NI_W_Q6 || F == NI_W_NVFP4 ? 2 : 4;
    switch (x.t) {
    case 1: launch_gemv_nt<F, 1, 2>(c, w, x, y, acc); break;
    case 2: launch_gemv_nt<F, 2, R>(c, w, x, y, acc); break;
    case 3: launch_gemv_nt<F, 3, R>(c, w, x, y, acc); break;
    default: launch_gemv_nt<F, 4, R>(c, w, x, y, acc); break;
    }
}

/* ---- matmul: GEMMs (T > NI_SMALL_T) ----------------------------------------------- */

/* Grid: x over 64-row weight tiles (fastest, so neighbouring blocks share
 * the activation tile in L2), y over 64-token tiles. */
template <int F> static void launch_mma(ni_cuda_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int acc) {
    const dim3 grid((unsigned)ni_div_up(w->n, NIW_BN), (unsigned)ni_div_up(x.t, NIW_BM));
    const bool avec = aligned16(x.p) && x.ld % 4 == 0 && w->k % 4 == 0;
    if (avec)
        ni_launch(c, "niw_mma_kernel", niw_mma_kernel<F, true>, grid, dim3(128), (size_t)NIW_MMA_SMEM, *w, x, y, acc);
    else
        ni_launch(c, "niw_mma_kernel", niw_mma_kernel<F, false>, grid, dim3(128), (size_t)NIW_MMA_SMEM, *w, x, y, acc);
}

static void launch_f32_gemm(ni_cuda_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int acc) {
    const dim3 grid((unsigned)ni_div_up(w->n, 64), (unsigned)ni_div_up(x.t, 64));
    const bool vec = aligned16(w->data) && w->k % 4 == 0 && aligned16(x.p) && x.ld % 4 == 0;
    if (vec) ni_launch(c, "niw_f32_gemm_kernel", niw_f32_gemm_kernel<true>, grid, dim3(256), 0, *w, x, y, acc);
    else ni_launch(c, "niw_f32_gemm_kernel", niw_f32_gemm_kernel<false>, grid, dim3(256), 0, *w, x, y, acc);
}

extern "C" void ni_cuda_matmul(ni_cuda_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int accumulate) {
    if (x.t <= 0 || w->n <= 0) return;
    const int f = route_fmt(w);
    const int acc = accumulate != 0;
    if (x.t <= NI_SMALL_T) {
        switch (f) {
        case NI_W_F32: launch_gemv<NI_W_F32>(c, w, x, y, acc); return;
        case NIW_F32S: launch_gemv<NIW_F32S>(c, w, x, y, acc); return;
        case NI_W_BF16: launch_gemv<NI_W_BF16>(c, w, x, y, acc); return;
        case NIW_BF16S: launch_gemv<NIW_BF16S>(c, w, x, y, acc); return;
        case NI_W_Q4: launch_gemv<NI_W_Q4>(c, w, x, y, acc); return;
        case NI_W_Q5: launch_gemv<NI_W_Q5>(c, w, x, y, acc); return;
        case NI_W_Q6: launch_gemv<NI_W_Q6>(c, w, x, y, acc); return;
        case NI_W_Q8: launch_gemv<NI_W_Q8>(c, w, x, y, acc); return;
        case NI_W_NVFP4: launch_gemv<NI_W_NVFP4>(c, w, x, y, acc); return;
        case NI_W_FP8ROW: launch_gemv<NI_W_FP8ROW>(c, w, x, y, acc); return;
        case NIW_FP8S: launch_gemv<NIW_FP8S>(c, w, x, y, acc); return;
        default: break;
        }
    } else {
        switch (f) {
        case NI_W_F32:
        case NIW_F32S: launch_f32_gemm(c, w, x, y, acc); return;
        case NI_W_BF16: launch_mma<NI_W_BF16>(c, w, x, y, acc); return;
        case NIW_BF16S: launch_mma<NIW_BF16S>(c, w, x, y, acc); return;
        case NI_W_Q4: launch_mma<NI_W_Q4>(c, w, x, y, acc); return;
        case NI_W_Q5: launch_mma<NI_W_Q5>(c, w, x, y, acc); return;
        case NI_W_Q6: launch_mma<NI_W_Q6>(c, w, x, y, acc); return;
        case NI_W_Q8: launch_mma<NI_W_Q8>(c, w, x, y, acc); return;
        case NI_W_NVFP4: launch_mma<NI_W_NVFP4>(c, w, x, y, acc); return;
        case NI_W_FP8ROW: launch_mma<NI_W_FP8ROW>(c, w, x, y, acc); return;
        case NIW_FP8S: launch_mma<NIW_FP8S>(c, w, x, y, acc); return;
        default: break;
        }
    }
    ni_cuda_record(c, 1, "ni_cuda_matmul: weight format %d unsupported or data not 16-byte aligned", (int)w->fmt);
}
