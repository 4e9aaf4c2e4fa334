/*
 * elementwise.cuh — device code of the row-wise family (the CUDA twin of
 * kernels/cpu/elementwise.c): RMSNorm (plain, zero-centred, gated), L2 norm,
 * partial NeoX RoPE, sigmoid gate, SwiGLU, add, argmax, GDN gating and the
 * causal depthwise conv1d + SiLU with slotted state. Formulas:
 * ../ninfer_ops.h. Device code only (no launches, no runtime API calls): the
 * launchers and the ni_cuda_* entry points are in elementwise.cu.
 *
 * Every kernel evaluates the CPU expression in the same order with fp32
 * arithmetic; what differs from the CPU is the summation order of the norm
 * reductions (lane-strided partial sums + butterfly), fused multiply-adds
 * where nvcc contracts a·b + c, and the ulp errors of the device expf/log1pf.
 */
#ifndef NI_CUDA_ELEMENTWISE_CUH
#define NI_CUDA_ELEMENTWISE_CUH

#include "common.cuh"

/* ---- norms ---------------------------------------------------------------- */

enum { NI_NORM_RMS = 0, NI_NORM_RMS_ZC = 1, NI_NORM_GATED = 2, NI_NORM_L2 = 3 };

/* The normalisation factor from Σx² over D, as the CPU computes it. */
template <int MODE>
__device__ __forceinline__ float ni_norm_factor(float ss, int D, float eps, float scale) {
    if (MODE == NI_NORM_L2) return scale / sqrtf(ss + 1e-6f);
    return 1.0f / sqrtf(ss / (float)D + eps);
}

/* y for one element: o = x[d], r = factor, wd = w[d], zd = z[d] (gated). */
template <int MODE>
__device__ __forceinline__ float ni_norm_out(float o, float r, float wd, float zd) {
    if (MODE == NI_NORM_RMS) return o * r * wd;
    if (MODE == NI_NORM_RMS_ZC) return o * r * (1.0f + wd);
    if (MODE == NI_NORM_GATED) return wd * (o * r) * ni_silu(zd);
    return o * r; /* L2 */
}

/* Implements: ni_rmsnorm (MODE RMS / RMS_ZC), ni_gated_rmsnorm (GATED, o = x),
 * ni_l2norm (L2).
 * Route: `tpr` threads per (t,h) row — tpr = 32 (warp route: blockDim.x/32
 * rows per block, warp-shuffle reduction, D ≤ 32·NPL·VEC + 3) or
 * tpr = blockDim.x (block route: one row per block, block reduction).
 * Each thread caches its NPL vectors of VEC floats (VEC = 4: float4 loads,
 * the launcher checked 16-byte alignment of every row and of w) plus, for
 * VEC = 4, one scalar of the D mod 4 tail, so x is read once and x, y may
 * alias: every thread writes exactly the elements it read, after the
 * reduction. */
template <int MODE, int VEC, int NPL>
__global__ void __launch_bounds__(1024) norm_kernel(ni_rows x, ni_rows z, ni_rows y, const float *w, float eps,
                                                    float scale, int tpr) {
    __shared__ float red[32];
    const int D = x.d;
    const int lane = (int)threadIdx.x % tpr;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / tpr) + threadIdx.x / tpr;
    /* The row is uniform per warp (warp route) or per block (block route),
     * so leaving here never splits a shuffle or a __syncthreads. */
    if (row >= (int64_t)x.t * x.h) return;
    const int64_t t = row / x.h, h = row % x.h;
    const float *xp = x.p + t * x.ld + h * x.hs;
    float *yp = y.p + t * y.ld + h * y.hs;
    const float *zp = MODE == NI_NORM_GATED ? z.p + t * z.ld + h * z.hs : nullptr;
    const int nv = D / VEC, rem = D - nv * VEC; /* rem < VEC */

    float v[NPL * VEC];
    float tail = 0.0f, ss = 0.0f;
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        const int vi = i * tpr + lane;
        if (VEC == 4) {
            float4 q = vi < nv ? reinterpret_cast<const float4 *>(xp)[vi] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            v[4 * i + 0] = q.x;
            v[4 * i + 1] = q.y;
            v[4 * i + 2] = q.z;
            v[4 * i + 3] = q.w;
        } else {
            v[i] = vi < nv ? xp[vi] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < VEC; k++) ss += v[VEC * i + k] * v[VEC * i + k];
    }
    if (VEC > 1 && lane < rem) {
        tail = xp[nv * VEC + lane];
        ss += tail * tail;
    }
    if (tpr == 32)
        ss = ni_warp_sum(ss);
    else
        ss = ni_block_sum(ss, red);
    const float r = ni_norm_factor<MODE>(ss, D, eps, scale);

#pragma unroll
    for (int i = 0; i < NPL; i++) {
        const int vi = i * tpr + lane;
        if (vi >= nv) break;
        if (VEC == 4) {
            float4 wq = make_float4(0.0f, 0.0f, 0.0f, 0.0f), zq = wq;
            if (MODE != NI_NORM_L2) wq = reinterpret_cast<const float4 *>(w)[vi];
            if (MODE == NI_NORM_GATED) zq = reinterpret_cast<const float4 *>(zp)[vi];
            float4 o;
            o.x = ni_norm_out<MODE>(v[4 * i + 0], r, wq.x, zq.x);
            o.y = ni_norm_out<MODE>(v[4 * i + 1], r, wq.y, zq.y);
            o.z = ni_norm_out<MODE>(v[4 * i + 2], r, wq.z, zq.z);
            o.w = ni_norm_out<MODE>(v[4 * i + 3], r, wq.w, zq.w);
            reinterpret_cast<float4 *>(yp)[vi] = o;
        } else {
            const float wd = MODE != NI_NORM_L2 ? w[vi] : 0.0f, zd = MODE == NI_NORM_GATED ? zp[vi] : 0.0f;
            yp[vi] = ni_norm_out<MODE>(v[i], r, wd, zd);
        }
    }
    if (VEC > 1 && lane < rem) {
        const int d = nv * VEC + lane;
        const float wd = MODE != NI_NORM_L2 ? w[d] : 0.0f, zd = MODE == NI_NORM_GATED ? zp[d] : 0.0f;
        yp[d] = ni_norm_out<MODE>(tail, r, wd, zd);
    }
}

/* Implements: the same ops for rows too wide to cache (D > the cached
 * routes' capacity). Route: one block per row, two passes over global memory
 * (Σx², then x re-read and y written); each thread writes only the elements
 * it read itself, so x, y may alias. Scalar loads, coalesced across the block. */
template <int MODE>
__global__ void __launch_bounds__(1024) norm_wide_kernel(ni_rows x, ni_rows z, ni_rows y, const float *w, float eps,
                                                         float scale) {
    __shared__ float red[32];
    const int D = x.d;
    const int64_t row = blockIdx.x, t = row / x.h, h = row % x.h;
    const float *xp = x.p + t * x.ld + h * x.hs;
    float *yp = y.p + t * y.ld + h * y.hs;
    const float *zp = MODE == NI_NORM_GATED ? z.p + t * z.ld + h * z.hs : nullptr;
    float ss = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) ss += xp[d] * xp[d];
    ss = ni_block_sum(ss, red);
    const float r = ni_norm_factor<MODE>(ss, D, eps, scale);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        const float wd = MODE != NI_NORM_L2 ? w[d] : 0.0f, zd = MODE == NI_NORM_GATED ? zp[d] : 0.0f;
        yp[d] = ni_norm_out<MODE>(xp[d], r, wd, zd);
    }
}

/* ---- RoPE ------------------------------------------------------------------ */

#define NI_ROPE_MAX_ROT 1024

/* Implements: ni_rope (partial NeoX, in place).
 * Route: one block per token. The rot/2 (cos φ, sin φ) pairs of the token
 * are computed once into shared memory exactly as the CPU does — φ =
 * pos·theta^(−2j/rot) with pow, cos and sin in double, then rounded to
 * float — and the block then rotates the (head, j) pairs, consecutive j on
 * consecutive threads (coalesced). Dims ≥ rot are not touched. */
__global__ void __launch_bounds__(256) rope_kernel(ni_rows x, const int32_t *pos, int rot, double theta) {
    __shared__ float cs[NI_ROPE_MAX_ROT / 2], sn[NI_ROPE_MAX_ROT / 2];
    const int half = rot / 2;
    const int64_t t = blockIdx.x;
    const double p = (double)pos[t];
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
        const double ang = p * pow(theta, -2.0 * j / rot);
        double sd, cd;
#if defined(__CUDA_ARCH__)
        /* sincospi(φ/π) instead of sin/cos(φ): libdevice's double sin/cos
         * carry a Payne–Hanek slow path with a local-memory frame. φ itself
         * already has a relative error ≈ 2^-52 (pow + product), which the
         * extra division by π (2^-53) does not change; both are far below
         * the float rounding of the result. */
        sincospi(ang / 3.141592653589793, &sd, &cd);
#else
        sd = sin(ang);
        cd = cos(ang);
#endif
        cs[j] = (float)cd;
        sn[j] = (float)sd;
    }
    __syncthreads();
    const int pairs = x.h * half;
    for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
        const int h = i / half, j = i - h * half;
        float *xp = x.p + t * x.ld + (int64_t)h * x.hs;
        const float u = xp[j], v = xp[j + half], c = cs[j], s = sn[j];
        xp[j] = u * c - v * s;
        xp[j + half] = v * c + u * s;
    }
}

/* ---- elementwise: sigmoid gate, SwiGLU, add ------------------------------------ */

enum { NI_EW_SIGMOID_MUL = 0, NI_EW_SWIGLU = 1, NI_EW_ADD = 2 };

template <int OP>
__device__ __forceinline__ float ni_ew(float a, float b) {
    if (OP == NI_EW_SIGMOID_MUL) return a * ni_sigmoid(b); /* y = x ⊙ sigmoid(g) */
    if (OP == NI_EW_SWIGLU) return ni_silu(a) * b;        /* y = silu(g) ⊙ u */
    return a + b;                                         /* y = a + b */
}

/* Implements: ni_sigmoid_mul, ni_swiglu, ni_add (per (t,h,d)).
 * Route: 2-D blocks, threadIdx.y over (t,h) rows, threadIdx.x over the
 * VEC-wide groups of one row (VEC = 4: float4 loads/stores, the launcher
 * checked 16-byte alignment of every row of a, b and y; the last group of a
 * row with D mod 4 ≠ 0 goes scalar). y may alias a or b (same element, same
 * thread). */
template <int OP, int VEC>
__global__ void __launch_bounds__(256) ew_kernel(ni_rows a, ni_rows b, ni_rows y) {
    const int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y;
    const int64_t g = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    const int D = a.d;
    if (row >= (int64_t)a.t * a.h || g * VEC >= D) return;
    const int64_t t = row / a.h, h = row % a.h;
    const float *ap = a.p + t * a.ld + h * a.hs, *bp = b.p + t * b.ld + h * b.hs;
    float *yp = y.p + t * y.ld + h * y.hs;
    const int d = (int)g * VEC;
    if (VEC == 4 && d + 4 <= D) {
        const float4 p = reinterpret_cast<const float4 *>(ap)[g], q = reinterpret_cast<const float4 *>(bp)[g];
        float4 o;
        o.x = ni_ew<OP>(p.x, q.x);
        o.y = ni_ew<OP>(p.y, q.y);
        o.z = ni_ew<OP>(p.z, q.z);
        o.w = ni_ew<OP>(p.w, q.w);
        reinterpret_cast<float4 *>(yp)[g] = o;
    } else {
        for (int k = d; k < D && k < d + VEC; k++) yp[k] = ni_ew<OP>(ap[k], bp[k]);
    }
}

/* ---- argmax -------------------------------------------------------------------- */

/* (v, i) beats (bv, bi): i is a real candidate (≥ 0) and either nothing is
 * held yet, v is larger, or v ties with a lower index. NaN never becomes a
 * candidate. */
__device__ __forceinline__ bool ni_argmax_better(float v, int i, float bv, int bi) {
    return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

__device__ __forceinline__ void ni_argmax_take(float v, int i, float &bv, int &bi) {
    /* Candidates reach a thread in increasing index order, so strictly
     * greater keeps the lowest index of a tie. */
    if (v == v && (bi < 0 || v > bv)) {
        bv = v;
        bi = i;
    }
}

/* Implements: ni_argmax (x.h = 1; lowest index wins ties, NaN never wins, a
 * row without a non-NaN value gives 0).
 * Route: one block per row; each thread scans a block-strided set of VEC-wide
 * groups in increasing order (VEC = 4: float4 loads, row 16-byte aligned),
 * the D mod 4 tail scalar, then a shuffle + shared-memory (value, index)
 * reduction. */
template <int VEC>
__global__ void __launch_bounds__(1024) argmax_kernel(ni_rows x, int32_t *out) {
    __shared__ float rv[32];
    __shared__ int ri[32];
    const int64_t t = blockIdx.x;
    const float *xp = x.p + t * x.ld;
    const int D = x.d, nv = D / VEC;
    float bv = 0.0f;
    int bi = -1;
    for (int g = threadIdx.x; g < nv; g += blockDim.x) {
        if (VEC == 4) {
            const float4 q = reinterpret_cast<const float4 *>(xp)[g];
            ni_argmax_take(q.x, 4 * g + 0, bv, bi);
            ni_argmax_take(q.y, 4 * g + 1, bv, bi);
            ni_argmax_take(q.z, 4 * g + 2, bv, bi);
            ni_argmax_take(q.w, 4 * g + 3, bv, bi);
        } else {
            ni_argmax_take(xp[g], g, bv, bi);
        }
    }
    for (int d = nv * VEC + threadIdx.x; d < D; d += blockDim.x) ni_argmax_take(xp[d], d, bv, bi);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ni_argmax_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        rv[warp] = bv;
        ri[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        bv = lane < nw ? rv[lane] : 0.0f;
        bi = lane < nw ? ri[lane] : -1;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ni_argmax_better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) out[t] = bi < 0 ? 0 : bi;
    }
}

/* ---- GDN gating ----------------------------------------------------------------- */

/* Implements: ni_gdn_gate. Route: one thread per (t, j) (d = 1 each):
 * beta = sigmoid(b), g = −exp(a_log[j]) · softplus(a + dt_bias[j]). */
__global__ void __launch_bounds__(256) gdn_gate_kernel(ni_rows a, ni_rows b, const float *a_log, const float *dt_bias,
                                                       ni_rows g, ni_rows beta) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)a.t * a.h) return;
    const int64_t t = i / a.h, j = i % a.h;
    const float x = a.p[t * a.ld + j * a.hs] + dt_bias[j];
    g.p[t * g.ld + j * g.hs] = -expf(a_log[j]) * ni_softplus(x);
    beta.p[t * beta.ld + j * beta.hs] = ni_sigmoid(b.p[t * b.ld + j * b.hs]);
}

/* ---- causal conv1d + SiLU ------------------------------------------------------- */

/* Tokens per chunk of the chunked conv route (≥ 15 = the widest window, so
 * the window before a later chunk lies entirely inside the call). */
#define NI_CONV_CHUNK 64

/* Window element i of channel ch in the state slot starting at element `at`. */
__device__ __forceinline__ float ni_conv_state_load(const void *state, int bf16, int64_t at) {
    return bf16 ? ni_bf16_to_f32(((const uint16_t *)state)[at]) : ((const float *)state)[at];
}

/* Stores the window (MAXSW registers, sw live) to the slot at element `at`. */
template <int MAXSW>
__device__ __forceinline__ void ni_conv_store(void *state, int bf16, int64_t at, const float *win, int sw) {
#pragma unroll
    for (int i = 0; i < MAXSW; i++) {
        if (i >= sw) break;
        if (bf16)
            ((uint16_t *)state)[at + i] = ni_f32_to_bf16(win[i]); /* exact: win holds bf16 values */
        else
            ((float *)state)[at + i] = win[i];
    }
}

/* Implements: ni_conv1d_silu (x.h = 1, kw = sw + 1 ≤ MAXSW + 1 ≤ 16).
 * Route: one thread per (channel, token chunk); blockIdx.y = chunk of
 * `tc` tokens (one chunk = the whole call for short T). The thread keeps
 * the kw weights and the sw-entry window in registers (static indices
 * only) and walks its tokens in order. The window before the first token
 * comes from slot *in_slot (halo == nullptr: one chunk) or, in the chunked
 * route, from halo[chunk][sw][C]: the snapshot conv1d_halo_kernel took
 * before this kernel of the input window (chunk 0) and of the sw pre-conv
 * inputs before each later chunk — so chunks neither read outputs of
 * another chunk (x, y may alias) nor a slot that another chunk already
 * overwrote (out_slot == *in_slot, per-token slots). Within a thread,
 * x[t, ch] is read before y[t, ch] is written. With bf16 state every input
 * entering the window is rounded to bf16 (RNE) as on the CPU. A bad
 * *in_slot (outside [0, slots)) counts once in *err and nothing is written. */
template <int MAXSW>
__global__ void __launch_bounds__(128) conv1d_silu_kernel(ni_rows x, ni_rows y, const float *w, int kw, void *state,
                                                          int bf16, int64_t slot_stride, int32_t slots,
                                                          const int32_t *in_slot, int out_slot, int tc,
                                                          const float *halo, int32_t *err) {
    const int32_t s_in = *in_slot;
    if (s_in < 0 || s_in >= slots) {
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) atomicAdd(err, 1);
        return;
    }
    const int C = x.d, T = x.t, sw = kw - 1;
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= C) return;
    const int chunk = blockIdx.y;
    const int t0 = chunk * tc, t1 = t0 + tc < T ? t0 + tc : T;

    const float *wc = w + (int64_t)ch * kw;
    float wr[MAXSW], win[MAXSW];
    const float wlast = wc[sw];
#pragma unroll
    for (int i = 0; i < MAXSW; i++) {
        wr[i] = i < sw ? wc[i] : 0.0f;
        win[i] = 0.0f;
    }
    if (!halo) {
        const int64_t at = slot_stride * s_in + (int64_t)ch * sw;
#pragma unroll
        for (int i = 0; i < MAXSW; i++)
            if (i < sw) win[i] = ni_conv_state_load(state, bf16, at + i);
    } else {
#pragma unroll
        for (int i = 0; i < MAXSW; i++) {
            if (i < sw) {
                const float v = halo[((int64_t)chunk * sw + i) * C + ch];
                /* chunk 0 holds state values (already bf16); later chunks raw inputs */
                win[i] = bf16 && chunk > 0 ? ni_bf16_to_f32(ni_f32_to_bf16(v)) : v;
            }
        }
    }
    const bool per = out_slot == NI_PER_TOKEN;
    for (int t = t0; t < t1; t++) {
        const float xin = x.p[(int64_t)t * x.ld + ch];
        float s = wlast * xin;
#pragma unroll
        for (int i = 0; i < MAXSW; i++)
            if (i < sw) s += wr[i] * win[i];
        const float xr = bf16 ? ni_bf16_to_f32(ni_f32_to_bf16(xin)) : xin;
#pragma unroll
        for (int i = 0; i < MAXSW; i++) {
            const float next = win[i + 1 < MAXSW ? i + 1 : i];
            win[i] = i < sw - 1 ? next : (i == sw - 1 ? xr : win[i]);
        }
        y.p[(int64_t)t * y.ld + ch] = ni_silu(s);
        if (per) ni_conv_store<MAXSW>(state, bf16, slot_stride * t + (int64_t)ch * sw, win, sw);
    }
    if (!per && t1 == T) ni_conv_store<MAXSW>(state, bf16, slot_stride * out_slot + (int64_t)ch * sw, win, sw);
}

/* The chunked conv route's snapshot, run before conv1d_silu_kernel:
 * halo[0][i][ch] = window entry i of slot *in_slot (as fp32), and for
 * chunk c ≥ 1 halo[c][i][ch] = x[c·tc − sw + i, ch]. A bad slot is left to
 * the conv kernel to report. */
__global__ void __launch_bounds__(256) conv1d_halo_kernel(ni_rows x, int sw, int tc, const void *state, int bf16,
                                                          int64_t slot_stride, int32_t slots, const int32_t *in_slot,
                                                          float *halo) {
    const int C = x.d;
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    const int32_t s_in = *in_slot;
    if (ch >= C || s_in < 0 || s_in >= slots) return;
    const int c = blockIdx.y;
    float *h = halo + (int64_t)c * sw * C + ch;
    if (c == 0) {
        const int64_t at = slot_stride * s_in + (int64_t)ch * sw;
        for (int i = 0; i < sw; i++) h[(int64_t)i * C] = ni_conv_state_load(state, bf16, at + i);
    } else {
        for (int i = 0; i < sw; i++) h[(int64_t)i * C] = x.p[(int64_t)(c * tc - sw + i) * x.ld + ch];
    }
}

#endif
