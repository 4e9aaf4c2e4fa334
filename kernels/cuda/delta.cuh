/*
 * delta.cuh — device code of the gated delta rule family (formulas:
 * ../ninfer_ops.h ni_gdn_recurrent / ni_gdn_chunked; behavioural reference:
 * kernels/cpu/delta.c). Launchers and entry points are in delta.cu.
 *
 * State S_j ∈ ℝ^{dk×dv}, fp32 row-major [dk][dv], at
 * state + slot_stride·slot + j·dk·dv; k-head kh = j / (v.h / k.h).
 * Every column of S evolves independently (S ← e^g S; δ = β(v − Sᵀk);
 * S ← S + kδᵀ touches column c only through v_c and δ_c), so both forms split
 * dv into column tiles that never talk to each other.
 *
 * Every kernel reads the input slot from device memory (*in_slot); outside
 * [0, slots) the kernel writes nothing and one designated block adds 1 to
 * d_err[NI_CUDA_ERR_SLOT].
 */
#ifndef NI_CUDA_DELTA_CUH
#define NI_CUDA_DELTA_CUH

#include "common.cuh"

/* ---- shared helpers ---- */

/* The input slot, or −1 when it is outside [0, slots) (counted once, by the
 * caller's designated thread when `count` is set). */
__device__ __forceinline__ int32_t gdn_read_slot(const int32_t *in_slot, int32_t slots, int32_t *d_err, bool count) {
    const int32_t s = *in_slot;
    if (s < 0 || s >= slots) {
        if (count) atomicAdd(&d_err[NI_CUDA_ERR_SLOT], 1);
        return -1;
    }
    return s;
}

/* Copies rows [0, nrows) × cols [0, ncols) of a strided fp32 source (row r at
 * src + r·sld) into shared memory dst (row stride dld), multiplying row r by
 * scale[r] when scale is given (one fp32 product, as the CPU's q·EG and
 * k·e^{Γn−Γ}). Rows [nvalid, nrows) are zero-filled. vec: src, sld and ncols are multiples of 4
 * floats (16-byte aligned rows), so the loads are float4. The whole block
 * calls this. */
__device__ __forceinline__ void gdn_stage_rows(float *dst, int dld, const float *src, int64_t sld, int nrows,
                                               int nvalid, int ncols, const float *scale, bool vec) {
    if (vec) {
        const int c4 = ncols >> 2;
        for (int idx = threadIdx.x; idx < nrows * c4; idx += blockDim.x) {
            const int r = idx / c4, c = (idx - r * c4) * 4;
            float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < nvalid) {
                x = *(const float4 *)(src + r * sld + c);
                if (scale) {
                    const float f = scale[r];
                    x.x *= f;
                    x.y *= f;
                    x.z *= f;
                    x.w *= f;
                }
            }
            float *d = dst + r * dld + c;
            d[0] = x.x;
            d[1] = x.y;
            d[2] = x.z;
            d[3] = x.w;
        }
    } else {
        for (int idx = threadIdx.x; idx < nrows * ncols; idx += blockDim.x) {
            const int r = idx / ncols, c = idx - r * ncols;
            float x = 0.0f;
            if (r < nvalid) {
                x = src[r * sld + c];
                if (scale) x *= scale[r];
            }
            dst[r * dld + c] = x;
        }
    }
}

/* ---- recurrent form ---------------------------------------------------- */

/* Geometry of gdn_recurrent_kernel<R, WR>: a warp is 4 row groups × 8
 * columns (lane = rg·8 + c8), WR warps split the dk rows (4·WR row groups,
 * row i = group + 4·WR·m for m < R), WC warps side by side cover 8·WC
 * columns. 128 threads for WR ≤ 4, 32·WR above. */
NI_HD int gdn_rec_wc(int wr) { return wr >= 4 ? 1 : 4 / wr; }
NI_HD int gdn_rec_threads(int wr) { return 32 * wr * gdn_rec_wc(wr); }
NI_HD int gdn_rec_cols(int wr) { return 8 * gdn_rec_wc(wr); }

/* Implements: ni_gdn_recurrent. Route: one block per (column tile of
 * 8·WC columns, v-head) — grid (⌈dv / (8·WC)⌉, v.h) —, the tile of S in
 * registers (R floats per thread) across all T tokens. Per token:
 *   S ← e^{g} S;  kv = Sᵀk (in-thread R-term FMA chain, then the 4 row groups
 *   of the warp by shuffles, then the WR warps through shared memory);
 *   δ = β (v − kv);  S ← S + k δᵀ;  o = Sᵀq (reduced the same way).
 * q and k of `tb` tokens at a time are staged in shared memory
 * ([tb][dk] each). State loads/stores: every warp instruction touches 4 rows
 * × 32 contiguous bytes (full sectors). Dynamic shared memory:
 * (2·tb·dk + 2·WR·8·WC) floats. Requires dk ≤ 4·WR·R. out_slot ≥ 0: the
 * final state goes there; NI_PER_TOKEN: the state after token t goes to
 * slot t. The initial state is read completely into registers before any
 * store, and each element is stored only by the thread that loaded it, so
 * in-place updates (out_slot == *in_slot, or slot t == *in_slot) are safe. */
/* (min blocks 1: without it ptxas 13.0 capped <16,1> at 72 registers on
 * sm_100a and spilled; with it, 144 registers and no spill) */
template <int R, int WR>
__global__ void __launch_bounds__(32 * WR * (WR >= 4 ? 1 : 4 / WR), 1)
    gdn_recurrent_kernel(ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state, int64_t slot_stride,
                         int32_t slots, const int32_t *in_slot, int out_slot, ni_rows o, int tb, int qvec, int kvec,
                         int32_t *d_err) {
    constexpr int WC = WR >= 4 ? 1 : 4 / WR;
    constexpr int NRG = 4 * WR;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wc = warp % WC, wr = warp / WC;
    const int c8 = lane & 7, rg = lane >> 3, rgi = wr * 4 + rg;
    const int j = blockIdx.y, dk = k.d, dv = v.d, T = v.t;
    const int kh = j / (v.h / k.h);
    const int col = blockIdx.x * (8 * WC) + wc * 8 + c8;
    const bool colok = col < dv;
    const int32_t slot = gdn_read_slot(in_slot, slots, d_err, blockIdx.x == 0 && blockIdx.y == 0 && tid == 0);
    if (slot < 0) return;

    const int64_t hsz = (int64_t)dk * dv;
    /* rows rgi + NRG·m, m < nval, exist; element offsets in a head fit 32 bits */
    const int nval = !colok ? 0 : dk > rgi ? (dk - rgi + NRG - 1) / NRG : 0;
    const int off0 = rgi * dv + col, stp = NRG * dv;
    float s[R];
    {
        const float *S0 = state + slot_stride * slot + j * hsz;
#pragma unroll
        for (int m = 0; m < R; m++) s[m] = m < nval ? S0[off0 + m * stp] : 0.0f;
    }
    NI_DYN_SMEM(smem);
    float *qs = (float *)smem, *ks = qs + tb * dk;
    float *red = ks + tb * dk; /* [2][WR][8·WC]: kv and o partials of the WR row warps */
    const int rix = wc * 8 + c8;

    for (int t0 = 0; t0 < T; t0 += tb) {
        const int nb = T - t0 < tb ? T - t0 : tb;
        __syncthreads(); /* the previous batch is consumed */
        gdn_stage_rows(qs, dk, q.p + (int64_t)t0 * q.ld + (int64_t)kh * q.hs, q.ld, nb, nb, dk, nullptr, qvec != 0);
        gdn_stage_rows(ks, dk, k.p + (int64_t)t0 * k.ld + (int64_t)kh * k.hs, k.ld, nb, nb, dk, nullptr, kvec != 0);
        __syncthreads();
        for (int tt = 0; tt < nb; tt++) {
            const int t = t0 + tt;
            const float decay = expf(g.p[(int64_t)t * g.ld + (int64_t)j * g.hs]);
            const float b = beta.p[(int64_t)t * beta.ld + (int64_t)j * beta.hs];
            const float *kt = ks + tt * dk, *qt = qs + tt * dk;
            float kv = 0.0f;
#pragma unroll
            for (int m = 0; m < R; m++) {
                const int i = rgi + NRG * m;
                const float ki = i < dk ? kt[i] : 0.0f;
                s[m] *= decay;
                kv = fmaf(ki, s[m], kv);
            }
            kv += __shfl_xor_sync(0xffffffffu, kv, 8);
            kv += __shfl_xor_sync(0xffffffffu, kv, 16);
            if (WR > 1) {
                if (rg == 0) red[wr * 8 * WC + rix] = kv;
                __syncthreads();
                kv = 0.0f;
#pragma unroll
                for (int w = 0; w < WR; w++) kv += red[w * 8 * WC + rix];
            }
            const float vv = colok ? v.p[(int64_t)t * v.ld + (int64_t)j * v.hs + col] : 0.0f;
            const float delta = b * (vv - kv);
            float oo = 0.0f;
#pragma unroll
            for (int m = 0; m < R; m++) {
                const int i = rgi + NRG * m;
                const float ki = i < dk ? kt[i] : 0.0f, qi = i < dk ? qt[i] : 0.0f;
                s[m] = fmaf(ki, delta, s[m]);
                oo = fmaf(qi, s[m], oo);
            }
            oo += __shfl_xor_sync(0xffffffffu, oo, 8);
            oo += __shfl_xor_sync(0xffffffffu, oo, 16);
            if (WR > 1) {
                /* buffer 1: buffer 0 may still be read by a slower warp; the
                 * barrier below also orders the next token's buffer-0 write
                 * after every read of this token's buffer 0 */
                if (rg == 0) red[(WR + wr) * 8 * WC + rix] = oo;
                __syncthreads();
                oo = 0.0f;
#pragma unroll
                for (int w = 0; w < WR; w++) oo += red[(WR + w) * 8 * WC + rix];
            }
            if (wr == 0 && rg == 0 && colok) o.p[(int64_t)t * o.ld + (int64_t)j * o.hs + col] = oo;
            if (out_slot == NI_PER_TOKEN) {
                float *St = state + slot_stride * t + j * hsz;
#pragma unroll
                for (int m = 0; m < R; m++)
                    if (m < nval) St[off0 + m * stp] = s[m];
            }
        }
    }
    if (out_slot >= 0) {
        float *Sd = state + slot_stride * out_slot + j * hsz;
#pragma unroll
        for (int m = 0; m < R; m++)
            if (m < nval) Sd[off0 + m * stp] = s[m];
    }
}

/* ---- chunked form ------------------------------------------------------- */

/* Chunked route limits and geometry (shared by launcher and kernels). */
#define NI_GDN_CK_THREADS 256
#define NI_GDN_CK_DK_MAX 128 /* phase-c register tile: 4 rows of 32 per thread */
#define NI_GDN_CK_BV 32      /* state-pass column tile */

/* Per (chunk of the segment, v-head) scratch record, floats:
 * QK [64][64] ((QKᵀ) ⊙ D, zero above the diagonal), W [64][dk], U [64][dv],
 * Γ [64]. Every part starts at a multiple of 4 floats. */
NI_HD int64_t gdn_ck_rec(int dk, int dv) {
    return (int64_t)NI_GDN_CHUNK * NI_GDN_CHUNK + (int64_t)NI_GDN_CHUNK * (ni_round_up(dk, 4) + ni_round_up(dv, 4)) +
           NI_GDN_CHUNK;
}
NI_HD int64_t gdn_ck_w_off() { return (int64_t)NI_GDN_CHUNK * NI_GDN_CHUNK; }
NI_HD int64_t gdn_ck_u_off(int dk) { return gdn_ck_w_off() + (int64_t)NI_GDN_CHUNK * ni_round_up(dk, 4); }
NI_HD int64_t gdn_ck_g_off(int dk, int dv) { return gdn_ck_u_off(dk) + (int64_t)NI_GDN_CHUNK * ni_round_up(dv, 4); }
/* Odd shared-memory row strides: rows read column-wise by different threads
 * land in different banks. */
NI_HD int gdn_odd(int n) { return n | 1; }
/* Shared memory (bytes) of the two chunked kernels. */
NI_HD size_t gdn_ck_prep_smem(int dk, int dv) {
    const int sk = gdn_odd(dk), sw = gdn_odd(dk > dv ? dk : dv);
    return (size_t)4 * ((size_t)NI_GDN_CHUNK * (sk + sw + 65) + 3 * NI_GDN_CHUNK);
}
NI_HD size_t gdn_ck_state_smem(int dk) {
    const int sk = gdn_odd(dk);
    return (size_t)4 * ((size_t)dk * NI_GDN_CK_BV + (size_t)NI_GDN_CHUNK * (sk + 65 + NI_GDN_CK_BV) + 2 * NI_GDN_CHUNK);
}

/* Implements: ni_gdn_chunked, state-independent part. Route: one block of
 * 256 threads per (chunk cc of the segment, v-head j) — grid (chunks, v.h),
 * all chunks in parallel. For the n ≤ 64 tokens of the chunk:
 *   Γ = cumsum g (sequential, as the CPU), EG = e^Γ;
 *   QK_is = (q_i·k_s) e^{Γi−Γs} (s ≤ i), A_is = β_i (k_i·k_s) e^{Γi−Γs} (s < i)
 *     — one 64×64 tile, 4×4 outputs per thread, rows i = ti + 16a, s = ts + 16b;
 *   W = L⁻¹ (diag(β) K ⊙ e^Γ), U = L⁻¹ diag(β) V by forward substitution, one
 *     thread per column (dk + dv columns, independent), W in place over K.
 * Writes the record QK, W, U, Γ (rows < n) to scratch + (cc·v.h + j)·rec.
 * Shared memory: K [64][dk|1], Q then U [64][max(dk,dv)|1], A [64][65], Γ,
 * EG, β [64]. Requires dk ≤ 128 (the launcher's route condition). */
__global__ void __launch_bounds__(NI_GDN_CK_THREADS)
    gdn_chunk_prep_kernel(ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *scratch, int chunk0,
                          int32_t slots, const int32_t *in_slot, int32_t *d_err, int qvec, int kvec) {
    constexpr int C = NI_GDN_CHUNK;
    const int tid = threadIdx.x, cc = blockIdx.x, j = blockIdx.y;
    const int dk = k.d, dv = v.d, T = v.t, nv = v.h;
    const int kh = j / (v.h / k.h);
    if (gdn_read_slot(in_slot, slots, d_err, false) < 0) return; /* counted by the state pass */
    const int t0 = (chunk0 + cc) * C, n = T - t0 < C ? T - t0 : C;
    const int sk = gdn_odd(dk), sw = gdn_odd(dk > dv ? dk : dv);
    NI_DYN_SMEM(smem);
    float *Ks = (float *)smem, *Qs = Ks + C * sk, *As = Qs + C * sw;
    float *G = As + C * 65, *EG = G + C, *B = EG + C;
    float *rec = scratch + ((int64_t)cc * nv + j) * gdn_ck_rec(dk, dv);
    float *QKg = rec, *Wg = rec + gdn_ck_w_off(), *Ug = rec + gdn_ck_u_off(dk), *Gg = rec + gdn_ck_g_off(dk, dv);

    if (tid == 0) {
        float acc = 0.0f;
        for (int i = 0; i < C; i++) {
            if (i < n) {
                acc += g.p[(int64_t)(t0 + i) * g.ld + (int64_t)j * g.hs];
                G[i] = acc;
                EG[i] = expf(acc);
                B[i] = beta.p[(int64_t)(t0 + i) * beta.ld + (int64_t)j * beta.hs];
            } else {
                G[i] = 0.0f;
                EG[i] = 0.0f;
                B[i] = 0.0f;
            }
        }
    }
    gdn_stage_rows(Ks, sk, k.p + (int64_t)t0 * k.ld + (int64_t)kh * k.hs, k.ld, C, n, dk, nullptr, kvec != 0);
    gdn_stage_rows(Qs, sw, q.p + (int64_t)t0 * q.ld + (int64_t)kh * q.hs, q.ld, C, n, dk, nullptr, qvec != 0);
    __syncthreads();

    /* QK and A: 64×64, thread tile rows ti + 16a × cols ts + 16b */
    {
        const int ti = tid >> 4, ts = tid & 15;
        float akk[4][4], aqk[4][4];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int b = 0; b < 4; b++) akk[a][b] = aqk[a][b] = 0.0f;
        for (int r = 0; r < dk; r++) {
            float ka[4], qa[4], kb[4];
#pragma unroll
            for (int a = 0; a < 4; a++) {
                ka[a] = Ks[(ti + 16 * a) * sk + r];
                qa[a] = Qs[(ti + 16 * a) * sw + r];
                kb[a] = Ks[(ts + 16 * a) * sk + r];
            }
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    akk[a][b] = fmaf(ka[a], kb[b], akk[a][b]);
                    aqk[a][b] = fmaf(qa[a], kb[b], aqk[a][b]);
                }
        }
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = ti + 16 * a;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const int s = ts + 16 * b;
                float qk = 0.0f, av = 0.0f;
                if (i < n && s <= i) {
                    const float dec = expf(G[i] - G[s]);
                    qk = aqk[a][b] * dec;
                    if (s < i) av = B[i] * akk[a][b] * dec;
                }
                As[i * 65 + s] = av;
                if (i < n) QKg[i * C + s] = qk;
            }
        }
    }
    __syncthreads(); /* A complete; Q no longer needed (its space becomes U) */

    /* forward substitution, one column per thread: row i needs rows s < i
     * of its own column only */
    float *Us = Qs;
    for (int c = tid; c < dk + dv; c += blockDim.x) {
        if (c < dk) {
            for (int i = 0; i < n; i++) {
                float w = B[i] * EG[i] * Ks[i * sk + c];
                const float *ai = As + i * 65;
                for (int s = 0; s < i; s++) w = fmaf(-ai[s], Ks[s * sk + c], w);
                Ks[i * sk + c] = w;
                Wg[(int64_t)i * dk + c] = w;
            }
        } else {
            const int cv = c - dk;
            const float *vc = v.p + (int64_t)t0 * v.ld + (int64_t)j * v.hs + cv;
            for (int i = 0; i < n; i++) {
                float u = B[i] * vc[(int64_t)i * v.ld];
                const float *ai = As + i * 65;
                for (int s = 0; s < i; s++) u = fmaf(-ai[s], Us[s * sw + cv], u);
                Us[i * sw + cv] = u;
                Ug[(int64_t)i * dv + cv] = u;
            }
        }
    }
    if (tid < n) Gg[tid] = G[tid];
}

/* Implements: ni_gdn_chunked, state pass. Route: one block of 256 threads
 * per (column tile of 32, v-head) — grid (⌈dv/32⌉, v.h) — walks the `nch`
 * chunks of the segment in order with its S tile [dk][32] in shared memory:
 *   a) V' = U − W S            (64×32 outputs, 2 rows × 4 columns per thread)
 *   b) O = (Q ⊙ e^Γ) S + QK V' (same tiling; written to o)
 *   c) S ← e^{Γn} S + (K ⊙ e^{Γn−Γ})ᵀ V'  (dk×32, 4 rows × 4 columns)
 * with W, then Q ⊙ e^Γ, then K ⊙ e^{Γn−Γ} staged in one [64][dk|1] buffer.
 * first: the segment starts from slot *in_slot (else from out_slot, where
 * the previous segment left it); count: this launch counts a bad slot.
 * nch = 0 copies the state (T = 0, as the CPU). Each block reads and writes
 * only its own columns, so out_slot == *in_slot is safe. */
__global__ void __launch_bounds__(NI_GDN_CK_THREADS)
    gdn_chunk_state_kernel(ni_rows q, ni_rows k, ni_rows o, const float *scratch, int chunk0, int nch, int nv,
                           float *state, int64_t slot_stride, int32_t slots, const int32_t *in_slot, int out_slot,
                           int first, int count, int32_t *d_err, int qvec, int kvec, int wvec) {
    constexpr int C = NI_GDN_CHUNK, BV = NI_GDN_CK_BV;
    const int tid = threadIdx.x, j = blockIdx.y;
    const int dk = k.d, dv = o.d, T = o.t;
    const int kh = j / (nv / k.h);
    const int32_t slot =
        gdn_read_slot(in_slot, slots, d_err, count && blockIdx.x == 0 && blockIdx.y == 0 && tid == 0);
    if (slot < 0) return;
    const int sk = gdn_odd(dk);
    const int col0 = blockIdx.x * BV;
    const int64_t hsz = (int64_t)dk * dv;
    NI_DYN_SMEM(smem);
    float *Ss = (float *)smem, *X = Ss + dk * BV, *Y = X + C * sk, *VP = Y + C * 65;
    float *F1 = VP + C * BV, *F2 = F1 + C;

    {
        const float *S0 = state + slot_stride * (first ? slot : out_slot) + j * hsz;
        for (int idx = tid; idx < dk * BV; idx += blockDim.x) {
            const int r = idx / BV, c = idx - r * BV, cg = col0 + c;
            Ss[idx] = cg < dv ? S0[(int64_t)r * dv + cg] : 0.0f;
        }
    }
    const int tx = tid & 7, ty = tid >> 3; /* columns 4tx..4tx+3; row lane ty ∈ [0, 32) */
    const int64_t rec = gdn_ck_rec(dk, dv);
    for (int cc = 0; cc < nch; cc++) {
        const int t0 = (chunk0 + cc) * C, n = T - t0 < C ? T - t0 : C;
        const float *R = scratch + ((int64_t)cc * nv + j) * rec;
        const float *Gg = R + gdn_ck_g_off(dk, dv), *Ug = R + gdn_ck_u_off(dk);
        const float gl = Gg[n - 1];
        __syncthreads(); /* previous chunk finished with X, Y, VP, F; S loaded */
        if (tid < C) {
            const float gi = tid < n ? Gg[tid] : 0.0f;
            F1[tid] = tid < n ? expf(gi) : 0.0f;
            F2[tid] = tid < n ? expf(gl - gi) : 0.0f;
        }
        gdn_stage_rows(X, sk, R + gdn_ck_w_off(), dk, C, n, dk, nullptr, wvec != 0);
        for (int idx = tid; idx < C * BV; idx += blockDim.x) {
            const int i = idx / BV, c = idx - i * BV, cg = col0 + c;
            VP[idx] = (i < n && cg < dv) ? Ug[(int64_t)i * dv + cg] : 0.0f;
        }
        __syncthreads();
        /* a) V' = U − W S (each thread updates only its own outputs) */
        {
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            const float *x0 = X + ty * sk, *x1 = X + (ty + 32) * sk;
            for (int r = 0; r < dk; r++) {
                const float4 sv = *(const float4 *)(Ss + r * BV + 4 * tx);
                const float w0 = x0[r], w1 = x1[r];
                acc[0][0] = fmaf(w0, sv.x, acc[0][0]);
                acc[0][1] = fmaf(w0, sv.y, acc[0][1]);
                acc[0][2] = fmaf(w0, sv.z, acc[0][2]);
                acc[0][3] = fmaf(w0, sv.w, acc[0][3]);
                acc[1][0] = fmaf(w1, sv.x, acc[1][0]);
                acc[1][1] = fmaf(w1, sv.y, acc[1][1]);
                acc[1][2] = fmaf(w1, sv.z, acc[1][2]);
                acc[1][3] = fmaf(w1, sv.w, acc[1][3]);
            }
#pragma unroll
            for (int a = 0; a < 2; a++)
#pragma unroll
                for (int c = 0; c < 4; c++) VP[(ty + 32 * a) * BV + 4 * tx + c] -= acc[a][c];
        }
        __syncthreads();
        /* b) O = (Q ⊙ e^Γ) S + QK V' */
        gdn_stage_rows(X, sk, q.p + (int64_t)t0 * q.ld + (int64_t)kh * q.hs, q.ld, C, n, dk, F1, qvec != 0);
        gdn_stage_rows(Y, 65, R, C, C, n, C, nullptr, true);
        __syncthreads();
        {
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            const float *x0 = X + ty * sk, *x1 = X + (ty + 32) * sk;
            for (int r = 0; r < dk; r++) {
                const float4 sv = *(const float4 *)(Ss + r * BV + 4 * tx);
                const float w0 = x0[r], w1 = x1[r];
                acc[0][0] = fmaf(w0, sv.x, acc[0][0]);
                acc[0][1] = fmaf(w0, sv.y, acc[0][1]);
                acc[0][2] = fmaf(w0, sv.z, acc[0][2]);
                acc[0][3] = fmaf(w0, sv.w, acc[0][3]);
                acc[1][0] = fmaf(w1, sv.x, acc[1][0]);
                acc[1][1] = fmaf(w1, sv.y, acc[1][1]);
                acc[1][2] = fmaf(w1, sv.z, acc[1][2]);
                acc[1][3] = fmaf(w1, sv.w, acc[1][3]);
            }
            const float *y0 = Y + ty * 65, *y1 = Y + (ty + 32) * 65;
            for (int s = 0; s < n; s++) {
                const float4 pv = *(const float4 *)(VP + s * BV + 4 * tx);
                const float a0 = y0[s], a1 = y1[s];
                acc[0][0] = fmaf(a0, pv.x, acc[0][0]);
                acc[0][1] = fmaf(a0, pv.y, acc[0][1]);
                acc[0][2] = fmaf(a0, pv.z, acc[0][2]);
                acc[0][3] = fmaf(a0, pv.w, acc[0][3]);
                acc[1][0] = fmaf(a1, pv.x, acc[1][0]);
                acc[1][1] = fmaf(a1, pv.y, acc[1][1]);
                acc[1][2] = fmaf(a1, pv.z, acc[1][2]);
                acc[1][3] = fmaf(a1, pv.w, acc[1][3]);
            }
#pragma unroll
            for (int a = 0; a < 2; a++) {
                const int i = ty + 32 * a;
                if (i < n) {
                    float *orow = o.p + (int64_t)(t0 + i) * o.ld + (int64_t)j * o.hs;
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        if (col0 + 4 * tx + c < dv) orow[col0 + 4 * tx + c] = acc[a][c];
                }
            }
        }
        __syncthreads(); /* every read of S for this chunk is done */
        /* c) S ← e^{Γn} S + (K ⊙ e^{Γn−Γ})ᵀ V' */
        gdn_stage_rows(X, sk, k.p + (int64_t)t0 * k.ld + (int64_t)kh * k.hs, k.ld, C, n, dk, F2, kvec != 0);
        __syncthreads();
        {
            const float es = expf(gl);
            float acc[4][4];
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int c = 0; c < 4; c++) acc[a][c] = 0.0f;
            for (int i = 0; i < n; i++) {
                const float4 pv = *(const float4 *)(VP + i * BV + 4 * tx);
                const float *xi = X + i * sk;
#pragma unroll
                for (int a = 0; a < 4; a++) {
                    const int r = ty + 32 * a;
                    const float xr = r < dk ? xi[r] : 0.0f;
                    acc[a][0] = fmaf(xr, pv.x, acc[a][0]);
                    acc[a][1] = fmaf(xr, pv.y, acc[a][1]);
                    acc[a][2] = fmaf(xr, pv.z, acc[a][2]);
                    acc[a][3] = fmaf(xr, pv.w, acc[a][3]);
                }
            }
#pragma unroll
            for (int a = 0; a < 4; a++) {
                const int r = ty + 32 * a;
                if (r < dk) {
                    float *sr = Ss + r * BV + 4 * tx;
#pragma unroll
                    for (int c = 0; c < 4; c++) sr[c] = fmaf(es, sr[c], acc[a][c]);
                }
            }
        }
    }
    __syncthreads();
    {
        float *Sd = state + slot_stride * out_slot + j * hsz;
        for (int idx = tid; idx < dk * BV; idx += blockDim.x) {
            const int r = idx / BV, c = idx - r * BV, cg = col0 + c;
            if (cg < dv) Sd[(int64_t)r * dv + cg] = Ss[idx];
        }
    }
}

#endif
