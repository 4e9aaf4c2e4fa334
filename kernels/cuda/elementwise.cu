/*
 * elementwise.cu — launchers and entry points of the row-wise family:
 * ni_cuda_rmsnorm, ni_cuda_gated_rmsnorm, ni_cuda_l2norm, ni_cuda_rope,
 * ni_cuda_sigmoid_mul, ni_cuda_swiglu, ni_cuda_add, ni_cuda_argmax,
 * ni_cuda_gdn_gate, ni_cuda_conv1d_silu (formulas: ../ninfer_ops.h; the
 * behavioural reference is kernels/cpu/elementwise.c). Each launcher picks
 * the route from the shape and the run-time alignment of its operands; the
 * routes are not tuned yet (a later issue measures them).
 */
#include "ctx.cuh"
#include "elementwise.cuh"

/* ---- shared launcher helpers ---- */

static bool al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Every row start of r is 16-byte aligned (float4 access of each row). The
 * token stride only matters for t > 1, the head stride for h > 1. */
static bool rows_vec4(const ni_rows &r) {
    return al16(r.p) && (r.t <= 1 || r.ld % 4 == 0) && (r.h <= 1 || r.hs % 4 == 0);
}

static int round32(int64_t n) { return (int)ni_round_up(n < 32 ? 32 : n, 32); }

/* ---- norms ---- */

/* Cached-route capacity: NPL vectors of VEC floats per thread, NPL ∈ {1,2,4,8}
 * for VEC = 4 (≤ 32 cached floats + 1 tail) and {2,4,8,16} for VEC = 1
 * (≤ 16: 32 scalars + the gated epilogue would exceed the 64 registers of a
 * 1024-thread block). */
static const int kNormNpl4[4] = {1, 2, 4, 8}, kNormNpl1[4] = {2, 4, 8, 16};
#define NI_NORM_WARP_ROWS 4 /* warp route: rows (warps) per 128-thread block */

template <int MODE, int VEC>
static void launch_norm_vec(ni_cuda_ctx *c, int sel, dim3 grid, dim3 block, ni_rows x, ni_rows z, ni_rows y,
                            const float *w, float eps, float scale, int tpr) {
    switch (sel) {
    case 0:
        ni_launch(c, "norm", norm_kernel<MODE, VEC, VEC == 4 ? 1 : 2>, grid, block, 0, x, z, y, w, eps, scale, tpr);
        break;
    case 1:
        ni_launch(c, "norm", norm_kernel<MODE, VEC, VEC == 4 ? 2 : 4>, grid, block, 0, x, z, y, w, eps, scale, tpr);
        break;
    case 2:
        ni_launch(c, "norm", norm_kernel<MODE, VEC, VEC == 4 ? 4 : 8>, grid, block, 0, x, z, y, w, eps, scale, tpr);
        break;
    default:
        ni_launch(c, "norm", norm_kernel<MODE, VEC, VEC == 4 ? 8 : 16>, grid, block, 0, x, z, y, w, eps, scale, tpr);
    }
}

template <int MODE>
static void launch_norm(ni_cuda_ctx *c, ni_rows x, ni_rows z, ni_rows y, const float *w, float eps, float scale) {
    if (x.t <= 0 || x.h <= 0 || x.d <= 0) return;
    const int64_t rows = (int64_t)x.t * x.h;
    const int D = x.d;
    const bool vec = rows_vec4(x) && rows_vec4(y) && (MODE != NI_NORM_GATED || rows_vec4(z)) &&
                     (MODE == NI_NORM_L2 || al16(w));
    const int V = vec ? 4 : 1;
    const int64_t nv = D / V; /* cached vectors of the row (+ D mod 4 scalar tail for VEC = 4) */
    const int *npl = vec ? kNormNpl4 : kNormNpl1;
    if (nv <= 32 * npl[3]) {
        /* Route 1 (warp): D ≤ 1027 (float4 rows) / D ≤ 512 (scalar rows) — one
         * warp per (t,h) row, 4 rows per block, shuffle reduction; the
         * smallest NPL with 32·NPL ≥ D/VEC. */
        int sel = 0;
        while (sel < 3 && 32 * npl[sel] < nv) sel++;
        dim3 grid((unsigned)ni_div_up(rows, NI_NORM_WARP_ROWS)), block(32 * NI_NORM_WARP_ROWS);
        if (vec)
            launch_norm_vec<MODE, 4>(c, sel, grid, block, x, z, y, w, eps, scale, 32);
        else
            launch_norm_vec<MODE, 1>(c, sel, grid, block, x, z, y, w, eps, scale, 32);
        return;
    }
    if (nv <= 1024 * (int64_t)npl[3]) {
        /* Route 2 (block, cached): D ≤ 32771 (float4) / 16384 (scalar) —
         * one block per row; the smallest NPL whose 1024-thread block covers
         * the row, threads = ⌈(D/VEC)/NPL⌉ rounded up to a warp. */
        int sel = 0;
        while (sel < 3 && 1024 * (int64_t)npl[sel] < nv) sel++;
        const int threads = round32(ni_div_up(nv, npl[sel]));
        dim3 grid((unsigned)rows), block(threads);
        if (vec)
            launch_norm_vec<MODE, 4>(c, sel, grid, block, x, z, y, w, eps, scale, threads);
        else
            launch_norm_vec<MODE, 1>(c, sel, grid, block, x, z, y, w, eps, scale, threads);
        return;
    }
    /* Route 3 (block, two-pass): wider rows — one 1024-thread block per row,
     * x read twice (second read mostly from L2). */
    ni_launch(c, "norm_wide", norm_wide_kernel<MODE>, dim3((unsigned)rows), dim3(1024), 0, x, z, y, w, eps, scale);
}

extern "C" void ni_cuda_rmsnorm(ni_cuda_ctx *c, ni_rows x, ni_rows y, const float *w, float eps, int zero_centred) {
    if (zero_centred)
        launch_norm<NI_NORM_RMS_ZC>(c, x, x, y, w, eps, 1.0f);
    else
        launch_norm<NI_NORM_RMS>(c, x, x, y, w, eps, 1.0f);
}

extern "C" void ni_cuda_gated_rmsnorm(ni_cuda_ctx *c, ni_rows o, ni_rows z, ni_rows y, const float *w, float eps) {
    launch_norm<NI_NORM_GATED>(c, o, z, y, w, eps, 1.0f);
}

extern "C" void ni_cuda_l2norm(ni_cuda_ctx *c, ni_rows x, ni_rows y, float scale) {
    launch_norm<NI_NORM_L2>(c, x, x, y, nullptr, 0.0f, scale);
}

/* ---- RoPE ---- */

extern "C" void ni_cuda_rope(ni_cuda_ctx *c, ni_rows x, const int32_t *pos, int rot, double theta) {
    /* As the CPU: rot beyond 1024 or beyond the head width does nothing. */
    if (rot > NI_ROPE_MAX_ROT || rot > x.d || rot < 2 || x.t <= 0 || x.h <= 0) return;
    /* Route: one block per token, threads over the heads × rot/2 pairs
     * (≤ 256, at least a warp). */
    const int64_t pairs = (int64_t)x.h * (rot / 2);
    const int threads = pairs >= 256 ? 256 : round32(pairs);
    ni_launch(c, "rope", rope_kernel, dim3((unsigned)x.t), dim3(threads), 0, x, pos, rot, theta);
}

/* ---- elementwise ---- */

template <int OP>
static void launch_ew(ni_cuda_ctx *c, ni_rows a, ni_rows b, ni_rows y) {
    if (a.t <= 0 || a.h <= 0 || a.d <= 0) return;
    const int64_t rows = (int64_t)a.t * a.h;
    const bool vec = rows_vec4(a) && rows_vec4(b) && rows_vec4(y);
    const int V = vec ? 4 : 1;
    const int64_t groups = ni_div_up(a.d, V);
    /* Route: 256-thread 2-D blocks, bx = groups of one row rounded up to a
     * power of two (≤ 256), by = 256 / bx rows; grid.x over rows, grid.y
     * over the row's groups. */
    int bx = 1;
    while (bx < 256 && bx < groups) bx <<= 1;
    const int by = 256 / bx;
    dim3 grid((unsigned)ni_div_up(rows, by), (unsigned)ni_div_up(groups, bx)), block(bx, by);
    if (vec)
        ni_launch(c, "ew", ew_kernel<OP, 4>, grid, block, 0, a, b, y);
    else
        ni_launch(c, "ew", ew_kernel<OP, 1>, grid, block, 0, a, b, y);
}

extern "C" void ni_cuda_sigmoid_mul(ni_cuda_ctx *c, ni_rows x, ni_rows g, ni_rows y) {
    launch_ew<NI_EW_SIGMOID_MUL>(c, x, g, y);
}
extern "C" void ni_cuda_swiglu(ni_cuda_ctx *c, ni_rows g, ni_rows u, ni_rows y) { launch_ew<NI_EW_SWIGLU>(c, g, u, y); }
extern "C" void ni_cuda_add(ni_cuda_ctx *c, ni_rows a, ni_rows b, ni_rows y) { launch_ew<NI_EW_ADD>(c, a, b, y); }

/* ---- argmax ---- */

extern "C" void ni_cuda_argmax(ni_cuda_ctx *c, ni_rows x, int32_t *out) {
    if (x.t <= 0) return; /* D = 0 still runs: a row without candidates gives 0, as on the CPU */
    const bool vec = al16(x.p) && (x.t <= 1 || x.ld % 4 == 0);
    const int64_t groups = ni_div_up(x.d, vec ? 4 : 1);
    /* Route: one block per row (vocab rows up to ~250k: 1024 threads, ~61
     * float4 each); smaller rows use one thread per group, ≥ a warp. */
    const int threads = groups >= 1024 ? 1024 : round32(groups);
    if (vec)
        ni_launch(c, "argmax", argmax_kernel<4>, dim3((unsigned)x.t), dim3(threads), 0, x, out);
    else
        ni_launch(c, "argmax", argmax_kernel<1>, dim3((unsigned)x.t), dim3(threads), 0, x, out);
}

/* ---- GDN gating ---- */

extern "C" void ni_cuda_gdn_gate(ni_cuda_ctx *c, ni_rows a, ni_rows b, const float *a_log, const float *dt_bias,
                                 ni_rows g, ni_rows beta) {
    if (a.t <= 0 || a.h <= 0) return;
    /* Route: one thread per (t, j), 256 per block. */
    const int64_t n = (int64_t)a.t * a.h;
    ni_launch(c, "gdn_gate", gdn_gate_kernel, dim3((unsigned)ni_div_up(n, 256)), dim3(256), 0, a, b, a_log, dt_bias,
              g, beta);
}

/* ---- causal conv1d + SiLU ---- */

extern "C" void ni_cuda_conv1d_silu(ni_cuda_ctx *c, ni_rows x, ni_rows y, const float *w, int kw, void *state,
                                    int state_bf16, int64_t slot_stride, int32_t slots, const int32_t *in_slot,
                                    int out_slot) {
    if (kw < 1 || kw > 16 || x.d <= 0 || x.t < 0) return; /* as the CPU */
    if (out_slot != NI_PER_TOKEN && (out_slot < 0 || out_slot >= slots)) {
        ni_cuda_record(c, 1, "conv1d_silu: output slot %d outside [0,%d)", out_slot, slots);
        return;
    }
    if (out_slot == NI_PER_TOKEN && x.t > slots) {
        ni_cuda_record(c, 1, "conv1d_silu: %d per-token states, %d slots", x.t, slots);
        return;
    }
    const int sw = kw - 1, T = x.t, C = x.d;
    /* Route 1 (sequential): T ≤ 64 — one thread per channel walks every
     * token (decode, short verify); the window comes straight from the
     * slot. T = 0 still runs: out_slot ≥ 0 then gets a copy of the input
     * window, as on the CPU.
     * Route 2 (chunked): T > 64 — one thread per (channel, 64-token chunk)
     * after a snapshot kernel copied the input window and the sw inputs
     * before each chunk to scratch (chunks run concurrently: in place, or
     * with out_slot == in_slot, a chunk must not see another's writes). */
    const int tc = T > NI_CONV_CHUNK ? NI_CONV_CHUNK : (T > 0 ? T : 1);
    const int chunks = T > 0 ? (int)ni_div_up(T, tc) : 1;
    const float *halo = nullptr;
    if (chunks > 1 && sw > 0) {
        float *h = (float *)ni_cuda_scratch(c, (int64_t)chunks * sw * C * 4);
        if (!h) return; /* error recorded */
        ni_launch(c, "conv1d_halo", conv1d_halo_kernel, dim3((unsigned)ni_div_up(C, 256), (unsigned)chunks),
                  dim3(256), 0, x, sw, tc, (const void *)state, state_bf16, slot_stride, slots, in_slot, h);
        halo = h;
    }
    dim3 grid((unsigned)ni_div_up(C, 128), (unsigned)chunks), block(128);
    int32_t *err = c->d_err + NI_CUDA_ERR_SLOT;
    /* The register window is sized by the smallest instance that holds kw − 1. */
    if (sw <= 1)
        ni_launch(c, "conv1d_silu", conv1d_silu_kernel<1>, grid, block, 0, x, y, w, kw, state, state_bf16, slot_stride,
                  slots, in_slot, out_slot, tc, halo, err);
    else if (sw <= 3)
        ni_launch(c, "conv1d_silu", conv1d_silu_kernel<3>, grid, block, 0, x, y, w, kw, state, state_bf16, slot_stride,
                  slots, in_slot, out_slot, tc, halo, err);
    else if (sw <= 7)
        ni_launch(c, "conv1d_silu", conv1d_silu_kernel<7>, grid, block, 0, x, y, w, kw, state, state_bf16, slot_stride,
                  slots, in_slot, out_slot, tc, halo, err);
    else
        ni_launch(c, "conv1d_silu", conv1d_silu_kernel<15>, grid, block, 0, x, y, w, kw, state, state_bf16,
                  slot_stride, slots, in_slot, out_slot, tc, halo, err);
}
