/*
 * attention.cuh — device code of the paged KV cache and causal GQA attention
 * (contract: ../ninfer_ops.h ni_kv_append, ni_attention; reference:
 * ../cpu/attention.c). Launchers and entry points: attention.cu.
 *
 * Cache layout (ni_kv): vector (page, kv head, off) of a plane lives at vector
 * slot (page·kvh + head)·64 + off; logical page p maps to physical page
 * block_table[p]. A position is unmapped when it is negative, at or beyond
 * table_len·64, or its table entry is outside [0, pages).
 *
 * Unmapped positions while reading: the CPU task (16-token block, kv head)
 * stops at the first unmapped position u it meets, so query t attends
 * positions 0..min(pos[t], u−1), and the task is counted once when its
 * largest pos ≥ u. Every kernel here computes u from the block table (u is
 * the same for every head) and applies exactly that rule, so the output and
 * the NI_CUDA_ERR_ATTN_POS count equal the CPU's (single-thread, unsplit
 * route) whatever route runs.
 */
#ifndef NI_CUDA_ATTENTION_CUH
#define NI_CUDA_ATTENTION_CUH

#include "common.cuh"

/* ---- geometry shared by launcher and kernels ------------------------------ */

#define ATT_NT 128      /* threads per attention block (4 warps) */
#define ATT_P 32        /* positions per K/V tile; divides NI_KV_PAGE, so a tile is inside one page */
#define ATT_TB 16       /* CPU task token block (kernels/cpu/attention.c ATT_TB): unit of the error count */
#define ATT_SPLIT_MAX_T 4 /* split-KV route for T ≤ 4, as the CPU */
#define ATT_SPLIT_MIN 64  /* fewest positions per split (a multiple of ATT_P) */
/* Most splits of one (query chunk, kv head): a device-independent cap, so
 * the partials' scratch has a bound the plan can reserve without knowing
 * the SM count (pkg/layout CUDAOpScratch: 128 splits of T·heads rows). */
#define ATT_SPLIT_MAX 128

/* Shared-memory plan of the attention tile kernel, in floats (every region
 * 16-byte aligned): Q [bq][hdp], Acc [bq4][hdp], KV tile [ATT_P][kp],
 * S [bq4][ATT_P+1], m/l/corr [bq4] each, query limits (int) [bq4], reduction
 * scratch (int) [8]. hdp = hd rounded up to 4 (padding columns are zero); the
 * K/V pitch kp = hdp + 4 or + 8 so that kp/4 is odd (lanes reading float4 at
 * the same column of consecutive rows hit distinct banks). */
struct att_plan {
    int hdp, kp, bq, bq4;
    int64_t off_acc, off_kv, off_s, off_m, off_l, off_c, off_lim, off_red, floats;
};

NI_HD att_plan att_make_plan(int hd, int bq) {
    att_plan p;
    p.hdp = (hd + 3) / 4 * 4;
    p.kp = (p.hdp / 4) % 2 == 0 ? p.hdp + 4 : p.hdp + 8;
    p.bq = bq;
    p.bq4 = (bq + 3) / 4 * 4;
    p.off_acc = (int64_t)bq * p.hdp;
    p.off_kv = p.off_acc + (int64_t)p.bq4 * p.hdp;
    p.off_s = p.off_kv + (int64_t)ATT_P * p.kp;
    p.off_m = p.off_s + (int64_t)p.bq4 * (ATT_P + 1);
    p.off_l = p.off_m + p.bq4;
    p.off_c = p.off_l + p.bq4;
    p.off_lim = p.off_c + p.bq4;
    p.off_red = p.off_lim + p.bq4;
    p.floats = (p.off_red + 8 + 3) / 4 * 4;
    return p;
}

/* Elements per 16-byte chunk of a cache plane. */
NI_HD int att_chunk_elems(int fmt) { return fmt == NI_KV_F32 ? 4 : fmt == NI_KV_BF16 ? 8 : 16; }

/* ---- small device helpers ------------------------------------------------- */

/* Vector slot of (position, head), or −1 when unmapped (as kv_slot in
 * kernels/cpu/attention.c). */
__device__ __forceinline__ int64_t att_kv_slot(const ni_kv &kv, int32_t pos, int h) {
    if (pos < 0) return -1;
    int32_t lp = pos / NI_KV_PAGE;
    if (lp >= kv.table_len) return -1;
    int32_t pp = kv.block_table[lp];
    if (pp < 0 || pp >= kv.pages) return -1;
    return ((int64_t)pp * kv.kvh + h) * NI_KV_PAGE + pos % NI_KV_PAGE;
}

__device__ __forceinline__ int att_warp_max_i(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ int att_warp_min_i(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Block max / min of ints over ATT_NT threads; every thread gets the result.
 * red: 4 ints of shared memory. */
__device__ __forceinline__ int att_block_max_i(int v, int *red) {
    v = att_warp_max_i(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    return max(max(red[0], red[1]), max(red[2], red[3]));
}
__device__ __forceinline__ int att_block_min_i(int v, int *red) {
    v = att_warp_min_i(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    return min(min(red[0], red[1]), min(red[2], red[3]));
}

/* ---- KV append ------------------------------------------------------------- */

/* Loads x[d0..d0+3] (zeros past hd): one float4 when VEC, else scalars. */
template <bool VEC>
__device__ __forceinline__ float4 att_load4(const float *x, int d0, int hd) {
    if (VEC) {
        if (d0 < hd) return *(const float4 *)(x + d0);
        return make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float4 r;
    r.x = d0 < hd ? x[d0] : 0.f;
    r.y = d0 + 1 < hd ? x[d0 + 1] : 0.f;
    r.z = d0 + 2 < hd ? x[d0 + 2] : 0.f;
    r.w = d0 + 3 < hd ? x[d0 + 3] : 0.f;
    return r;
}

__device__ __forceinline__ float att_amax4(float4 a) { return fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(a.z), fabsf(a.w))); }

/* int8 code of x·inv: round to nearest even, clamp to ±127 (store_vec in
 * kernels/cpu/attention.c). */
__device__ __forceinline__ uint32_t att_i8(float x, float inv) {
    float q = rintf(x * inv);
    q = q > 127.f ? 127.f : q < -127.f ? -127.f : q;
    return (uint32_t)(uint8_t)(int8_t)q;
}

/* Stores 4 code bytes (little-endian packed in c) at o[d0..d0+3], d < hd. */
template <bool VEC>
__device__ __forceinline__ void att_store_b4(uint8_t *o, int d0, int hd, uint32_t c) {
    if (VEC) {
        if (d0 < hd) *(uint32_t *)(o + d0) = c;
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (d0 + j < hd) o[d0 + j] = (uint8_t)(c >> (8 * j));
    }
}

/*
 * Implements: ni_kv_append (one plane of one (t, head) vector).
 * Route: one warp per (token, kv head) vector, blockIdx.y = plane (0 K, 1 V);
 * lane l owns dims 128i + 4l .. +3, so a 64-dim int8 group is one half-warp
 * (absmax by 4 xor-shuffles) and the fp8 row absmax is a warp max. The
 * scale and code arithmetic is store_vec's, operation for operation:
 *   int8: s16 = f16(am / 127), s = f32(s16), inv = s > 0 ? 1/s : 0,
 *         code = clamp(rne(x·inv), ±127);
 *   fp8:  s16 = f16(am / 448), s = f32(s16), code = s > 0 ? e4m3(x / s) : 0.
 * VEC: hd % 4 == 0 and 16-byte aligned rows and planes (float4 loads, 4/8/16
 * byte code stores); otherwise scalar loads and byte stores. An unmapped
 * position skips the vector and the K-plane warp counts it once
 * (NI_CUDA_ERR_KV_POS).
 */
template <int FMT, bool VEC>
__global__ void __launch_bounds__(128) kv_append_kernel(ni_kv kv, ni_rows k, ni_rows v, const int32_t *pos,
                                                        int32_t *err) {
    const int lane = threadIdx.x & 31;
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int plane = blockIdx.y;
    if (w >= (int64_t)k.t * kv.kvh) return; /* whole warp */
    const int t = (int)(w / kv.kvh), h = (int)(w % kv.kvh), hd = kv.hd;
    const int64_t vi = att_kv_slot(kv, pos[t], h);
    if (vi < 0) {
        if (plane == 0 && lane == 0) atomicAdd(err, 1);
        return;
    }
    const ni_rows &r = plane ? v : k;
    const float *x = r.p + (int64_t)t * r.ld + (int64_t)h * r.hs;
    uint8_t *codes = plane ? kv.v : kv.k;
    uint16_t *sp = plane ? kv.vs : kv.ks;
    const int iters = (hd + 127) / 128;

    if (FMT == NI_KV_F32) {
        float *o = (float *)codes + vi * hd;
        for (int i = 0; i < iters; i++) {
            const int d0 = 128 * i + 4 * lane;
            float4 a = att_load4<VEC>(x, d0, hd);
            if (VEC) {
                if (d0 < hd) *(float4 *)(o + d0) = a;
            } else {
                if (d0 < hd) o[d0] = a.x;
                if (d0 + 1 < hd) o[d0 + 1] = a.y;
                if (d0 + 2 < hd) o[d0 + 2] = a.z;
                if (d0 + 3 < hd) o[d0 + 3] = a.w;
            }
        }
    } else if (FMT == NI_KV_BF16) {
        uint16_t *o = (uint16_t *)codes + vi * hd;
        for (int i = 0; i < iters; i++) {
            const int d0 = 128 * i + 4 * lane;
            float4 a = att_load4<VEC>(x, d0, hd);
            uint16_t b0 = ni_f32_to_bf16(a.x), b1 = ni_f32_to_bf16(a.y), b2 = ni_f32_to_bf16(a.z), b3 = ni_f32_to_bf16(a.w);
            if (VEC) {
                if (d0 < hd) *(uint2 *)(o + d0) = make_uint2((uint32_t)b0 | ((uint32_t)b1 << 16), (uint32_t)b2 | ((uint32_t)b3 << 16));
            } else {
                if (d0 < hd) o[d0] = b0;
                if (d0 + 1 < hd) o[d0 + 1] = b1;
                if (d0 + 2 < hd) o[d0 + 2] = b2;
                if (d0 + 3 < hd) o[d0 + 3] = b3;
            }
        }
    } else if (FMT == NI_KV_I8G64) {
        uint8_t *o = codes + vi * hd;
        const int ng = (hd + 63) / 64;
        for (int i = 0; i < iters; i++) {
            const int d0 = 128 * i + 4 * lane, g = 2 * i + (lane >> 4);
            float4 a = att_load4<VEC>(x, d0, hd);
            float am = att_amax4(a);
#pragma unroll
            for (int off = 8; off > 0; off >>= 1) am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, off));
            const uint16_t s16 = ni_cu_f32_to_f16(am / 127.0f);
            const float s = ni_cu_f16_to_f32(s16);
            const float inv = s > 0 ? 1.0f / s : 0.0f;
            if ((lane & 15) == 0 && g < ng) sp[vi * ng + g] = s16;
            const uint32_t c = att_i8(a.x, inv) | (att_i8(a.y, inv) << 8) | (att_i8(a.z, inv) << 16) | (att_i8(a.w, inv) << 24);
            att_store_b4<VEC>(o, d0, hd, c);
        }
    } else { /* NI_KV_FP8ROW */
        uint8_t *o = codes + vi * hd;
        float am = 0.0f;
        for (int i = 0; i < iters; i++) am = fmaxf(am, att_amax4(att_load4<VEC>(x, 128 * i + 4 * lane, hd)));
        am = ni_warp_max(am);
        const uint16_t s16 = ni_cu_f32_to_f16(am / 448.0f);
        const float s = ni_cu_f16_to_f32(s16);
        if (lane == 0) sp[vi] = s16;
        for (int i = 0; i < iters; i++) {
            const int d0 = 128 * i + 4 * lane;
            float4 a = att_load4<VEC>(x, d0, hd);
            uint32_t c = 0;
            if (s > 0)
                c = (uint32_t)ni_cu_f32_to_e4m3(a.x / s) | ((uint32_t)ni_cu_f32_to_e4m3(a.y / s) << 8) |
                    ((uint32_t)ni_cu_f32_to_e4m3(a.z / s) << 16) | ((uint32_t)ni_cu_f32_to_e4m3(a.w / s) << 24);
            att_store_b4<VEC>(o, d0, hd, c);
        }
    }
}

/* ---- attention ------------------------------------------------------------- */

__device__ __forceinline__ void att_st4(float *p, float a, float b, float c, float d) { *(float4 *)p = make_float4(a, b, c, d); }

/* Dequantises positions [0, np) of a tile (np·hd contiguous codes starting
 * at vector slot vi0 of a plane) into the fp32 tile t (pitch kp). VEC: 16-byte
 * chunks (hd a multiple of att_chunk_elems(FMT), planes aligned); otherwise one
 * element per thread and step. Decoding as load_vec: int8 code·s and
 * e4m3(code)·s with s = f32(f16 scale), bf16/fp32 exact. */
template <int FMT, bool VEC>
__device__ __forceinline__ void att_load_tile(float *t, int kp, const uint8_t *plane, const uint16_t *sp, int64_t vi0,
                                              int np, int hd) {
    const int ng = (hd + 63) / 64;
    if (VEC) {
        constexpr int E = FMT == NI_KV_F32 ? 4 : FMT == NI_KV_BF16 ? 8 : 16;
        const int per = hd / E, n = np * per;
        const uint4 *src = (const uint4 *)(plane + vi0 * hd * (FMT == NI_KV_F32 ? 4 : FMT == NI_KV_BF16 ? 2 : 1));
        for (int c = threadIdx.x; c < n; c += ATT_NT) {
            const int p = c / per, d = (c - p * per) * E;
            const uint4 u = src[c];
            float *o = t + p * kp + d;
            if (FMT == NI_KV_F32) {
                att_st4(o, __uint_as_float(u.x), __uint_as_float(u.y), __uint_as_float(u.z), __uint_as_float(u.w));
            } else if (FMT == NI_KV_BF16) {
                att_st4(o, __uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                        __uint_as_float(u.y & 0xffff0000u));
                att_st4(o + 4, __uint_as_float(u.z << 16), __uint_as_float(u.z & 0xffff0000u), __uint_as_float(u.w << 16),
                        __uint_as_float(u.w & 0xffff0000u));
            } else {
                float s;
                if (FMT == NI_KV_I8G64) s = ni_cu_f16_to_f32(sp[(vi0 + p) * ng + d / 64]);
                else s = ni_cu_f16_to_f32(sp[vi0 + p]);
                const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float f[4];
#pragma unroll
                    for (int b = 0; b < 4; b++) {
                        const uint32_t byte = (w[q] >> (8 * b)) & 0xffu;
                        f[b] = (FMT == NI_KV_I8G64 ? (float)(int8_t)byte : ni_cu_e4m3_to_f32((uint8_t)byte)) * s;
                    }
                    att_st4(o + 4 * q, f[0], f[1], f[2], f[3]);
                }
            }
        }
        return;
    }
    const int n = np * hd;
    for (int e = threadIdx.x; e < n; e += ATT_NT) {
        const int p = e / hd, d = e - p * hd;
        const int64_t idx = vi0 * hd + e;
        float f;
        if (FMT == NI_KV_F32) f = ((const float *)plane)[idx];
        else if (FMT == NI_KV_BF16) f = ni_bf16_to_f32(((const uint16_t *)plane)[idx]);
        else if (FMT == NI_KV_I8G64) f = (float)((const int8_t *)plane)[idx] * ni_cu_f16_to_f32(sp[(vi0 + p) * ng + d / 64]);
        else f = ni_cu_e4m3_to_f32(plane[idx]) * ni_cu_f16_to_f32(sp[vi0 + p]);
        t[p * kp + d] = f;
    }
}

/*
 * Implements: ni_attention (one query chunk of one kv head over one key range).
 * Grid: x = query chunk (bq consecutive (token, group head) pairs of kv head
 * y, pair index t·grp + g), y = kv head, z = key split. ATT_NT threads.
 * Route use (launcher): PARTIAL = split-KV decode (T ≤ 4: every query of the
 * kv head in one chunk shares each K/V tile; split z covers a page-aligned
 * key range whose length is derived on the device from the actual context
 * length, at least ATT_SPLIT_MIN; writes unnormalised (m, l, acc) partials);
 * !PARTIAL = query-block tiles over the whole causal range, normalised output.
 * Per tile of ATT_P positions (inside one page, so contiguous codes):
 *   1. K tile dequantised into shared fp32;
 *   2. scores: lane = position, warp w = queries w, w+4, … in register blocks
 *      of 8 (one float4 of K per 32 FMAs, Q broadcast); s = scale·(q·k),
 *      −inf past the query's limit;
 *   3. online softmax per query (warp per query, lane per position):
 *      m' = max(m, max s), p = e^(s−m'), corr = e^(m−m'), l' = l·corr + Σp;
 *      meanwhile the V tile replaces K in shared memory;
 *   4. PV: a thread owns 4 queries × 4 dims of Acc, acc = acc·corr + Σ_p p·V.
 * fp32 throughout. Unmapped positions: see the header comment. A masked
 * (query, position) pair inside a tile gets weight 0, so a non-finite cached
 * V at a position another query of the tile may read would give 0·inf = NaN
 * where the CPU skips the pair (only with non-finite cache contents).
 * __launch_bounds__(ATT_NT, 1): without the min-blocks hint ptxas capped the
 * kernel at 64 registers and spilled; with it, ~96–112 and no spills (shared
 * memory, not registers, limits the blocks per SM).
 */
template <int FMT, bool VEC, bool PARTIAL>
__global__ void __launch_bounds__(ATT_NT, 1) attention_tile_kernel(ni_rows q, ni_kv kv, const int32_t *pos, float scale,
                                                                ni_rows out, int32_t *err, int bq, float *pacc,
                                                                float *pml, int nsplit) {
    NI_DYN_SMEM(att_smem);
    const att_plan pl = att_make_plan(kv.hd, bq);
    float *sQ = (float *)att_smem, *sAcc = sQ + pl.off_acc, *sKV = sQ + pl.off_kv, *sS = sQ + pl.off_s;
    float *sM = sQ + pl.off_m, *sL = sQ + pl.off_l, *sC = sQ + pl.off_c;
    int *sLim = (int *)(sQ + pl.off_lim), *sRed = (int *)(sQ + pl.off_red);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int T = q.t, nh = q.h, kvh = kv.kvh, grp = nh / kvh, hd = kv.hd, hdp = pl.hdp, kp = pl.kp;
    const int h = blockIdx.y, z = blockIdx.z;
    const int64_t npairs = (int64_t)T * grp, j0 = (int64_t)blockIdx.x * bq;
    const int nq = (int)(npairs - j0 < bq ? npairs - j0 : bq);
    const int SP = ATT_P + 1; /* pitch of S */

    /* 1. limits. Chunk max pos, and the CPU tasks (token block b, head h) this
     * block reports: b is owned by the chunk holding pair 16·b·grp. */
    const int64_t tb = (int64_t)ATT_TB * grp;
    const int b0 = (int)((j0 + tb - 1) / tb), b1 = (int)((j0 + nq + tb - 1) / tb);
    int cmax = -1, omax = -1;
    for (int j = tid; j < nq; j += ATT_NT) {
        const int p = pos[(j0 + j) / grp];
        sLim[j] = p;
        cmax = max(cmax, p);
    }
    for (int i = tid; i < (b1 - b0) * ATT_TB; i += ATT_NT) {
        const int t = b0 * ATT_TB + i;
        if (t < T) omax = max(omax, pos[t]);
    }
    cmax = att_block_max_i(cmax, sRed);
    omax = att_block_max_i(omax, sRed + 4);
    /* u = first unmapped position (pages scanned up to the largest pos needed). */
    const int need = max(cmax, omax);
    int scan = need < 0 ? 0 : need / NI_KV_PAGE + 1;
    if (scan > kv.table_len) scan = kv.table_len;
    int bad = scan;
    for (int lp = tid; lp < scan; lp += ATT_NT) {
        const int32_t pp = kv.block_table[lp];
        if (pp < 0 || pp >= kv.pages) bad = min(bad, lp);
    }
    bad = att_block_min_i(bad, sRed);
    const int64_t u = (int64_t)bad * NI_KV_PAGE;
    if (z == 0 && tid < b1 - b0) { /* count the owned CPU tasks that meet u */
        const int tb0 = (b0 + tid) * ATT_TB;
        int bm = -1;
        for (int t = tb0; t < tb0 + ATT_TB && t < T; t++) bm = max(bm, pos[t]);
        if (bm >= 0 && (int64_t)bm >= u) atomicAdd(err, 1);
    }
    const int n = (int)((int64_t)cmax < u - 1 ? (int64_t)cmax : u - 1) + 1; /* keys [0, n) serve this chunk */

    /* 2. Q, accumulators, softmax state; zero padding. */
    for (int j = tid; j < nq; j += ATT_NT) {
        if ((int64_t)sLim[j] > u - 1) sLim[j] = (int)(u - 1);
        sM[j] = -INFINITY;
        sL[j] = 0.0f;
    }
    for (int j = nq + tid; j < pl.bq4; j += ATT_NT) sC[j] = 1.0f;
    for (int e = tid; e < pl.bq4 * SP; e += ATT_NT) sS[e] = 0.0f;
    for (int e = tid; e < pl.bq4 * hdp; e += ATT_NT) sAcc[e] = 0.0f;
    if (hdp > hd)
        for (int e = tid; e < ATT_P * (hdp - hd); e += ATT_NT) sKV[(e / (hdp - hd)) * kp + hd + e % (hdp - hd)] = 0.0f;
    if (VEC) {
        const int hd4 = hd / 4;
        for (int e = tid; e < nq * hd4; e += ATT_NT) {
            const int j = e / hd4, d = (e - j * hd4) * 4;
            const int64_t pr = j0 + j;
            const int t = (int)(pr / grp), hh = h * grp + (int)(pr % grp);
            *(float4 *)(sQ + j * hdp + d) = *(const float4 *)(q.p + t * q.ld + hh * q.hs + d);
        }
    } else {
        for (int e = tid; e < nq * hdp; e += ATT_NT) {
            const int j = e / hdp, d = e - j * hdp;
            const int64_t pr = j0 + j;
            const int t = (int)(pr / grp), hh = h * grp + (int)(pr % grp);
            sQ[j * hdp + d] = d < hd ? q.p[t * q.ld + hh * q.hs + d] : 0.0f;
        }
    }

    /* Key range of this block. */
    int s0 = 0, s1 = n;
    if (PARTIAL) {
        int len = n <= 0 ? ATT_SPLIT_MIN : (n + nsplit - 1) / nsplit;
        len = (len + ATT_P - 1) / ATT_P * ATT_P;
        if (len < ATT_SPLIT_MIN) len = ATT_SPLIT_MIN;
        s0 = (int)min((int64_t)z * len, (int64_t)n);
        s1 = (int)min((int64_t)s0 + len, (int64_t)n);
    }
    __syncthreads();

    const uint8_t *kplane = kv.k, *vplane = kv.v;
    for (int s = s0; s < s1; s += ATT_P) {
        const int np = s1 - s < ATT_P ? s1 - s : ATT_P;
        const int32_t pp = kv.block_table[s / NI_KV_PAGE]; /* mapped: s < u */
        const int64_t vi0 = ((int64_t)pp * kvh + h) * NI_KV_PAGE + s % NI_KV_PAGE;
        att_load_tile<FMT, VEC>(sKV, kp, kplane, kv.ks, vi0, np, hd);
        __syncthreads();

        /* scores */
        for (int jb = warp; jb < nq; jb += 4 * 8) {
            float acc[8];
#pragma unroll
            for (int i = 0; i < 8; i++) acc[i] = 0.0f;
            if (lane < np) {
                const float *kr = sKV + lane * kp;
                for (int d = 0; d < hdp; d += 4) {
                    const float4 k4 = *(const float4 *)(kr + d);
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        const int j = min(jb + 4 * i, nq - 1);
                        const float4 q4 = *(const float4 *)(sQ + j * hdp + d);
                        acc[i] += q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w;
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int j = jb + 4 * i;
                if (j < nq) sS[j * SP + lane] = (lane < np && s + lane <= sLim[j]) ? scale * acc[i] : -INFINITY;
            }
        }
        __syncthreads();

        /* online softmax (queries) and the V tile (threads all) */
        for (int j = warp; j < nq; j += 4) {
            const float x = sS[j * SP + lane];
            const float mo = sM[j], mn = fmaxf(mo, ni_warp_max(x));
            float p, corr;
            if (mn == -INFINITY) {
                p = 0.0f;
                corr = 1.0f;
            } else {
                p = expf(x - mn);
                corr = expf(mo - mn);
            }
            const float sum = ni_warp_sum(p);
            sS[j * SP + lane] = p;
            if (lane == 0) {
                sL[j] = sL[j] * corr + sum;
                sM[j] = mn;
                sC[j] = corr;
            }
        }
        att_load_tile<FMT, VEC>(sKV, kp, vplane, kv.vs, vi0, np, hd);
        __syncthreads();

        /* PV: item = (query quad c, dim quad d4) */
        const int hd4 = hdp / 4, nquad = (nq + 3) / 4;
        for (int it = tid; it < nquad * hd4; it += ATT_NT) {
            const int c = it / hd4, d = (it - c * hd4) * 4, jq = 4 * c;
            float4 a[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float cr = sC[jq + i];
                a[i] = *(const float4 *)(sAcc + (jq + i) * hdp + d);
                a[i].x *= cr;
                a[i].y *= cr;
                a[i].z *= cr;
                a[i].w *= cr;
            }
#pragma unroll 4
            for (int p = 0; p < np; p++) {
                const float4 v4 = *(const float4 *)(sKV + p * kp + d);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float w = sS[(jq + i) * SP + p];
                    a[i].x += w * v4.x;
                    a[i].y += w * v4.y;
                    a[i].z += w * v4.z;
                    a[i].w += w * v4.w;
                }
            }
#pragma unroll
            for (int i = 0; i < 4; i++) *(float4 *)(sAcc + (jq + i) * hdp + d) = a[i];
        }
        __syncthreads();
    }

    /* outputs */
    if (PARTIAL) {
        for (int j = tid; j < nq; j += ATT_NT) {
            const int64_t pr = j0 + j, t = pr / grp, hh = h * grp + pr % grp;
            const int64_t idx = ((int64_t)z * T + t) * nh + hh;
            pml[2 * idx] = sM[j];
            pml[2 * idx + 1] = sL[j];
        }
        for (int e = tid; e < nq * hd; e += ATT_NT) {
            const int j = e / hd, d = e - j * hd;
            const int64_t pr = j0 + j, t = pr / grp, hh = h * grp + pr % grp;
            pacc[(((int64_t)z * T + t) * nh + hh) * hd + d] = sAcc[j * hdp + d];
        }
        return;
    }
    if (VEC) {
        const int hd4 = hd / 4;
        for (int e = tid; e < nq * hd4; e += ATT_NT) {
            const int j = e / hd4, d = (e - j * hd4) * 4;
            const int64_t pr = j0 + j;
            const int t = (int)(pr / grp), hh = h * grp + (int)(pr % grp);
            const float inv = sL[j] > 0 ? 1.0f / sL[j] : 0.0f;
            float4 a = *(const float4 *)(sAcc + j * hdp + d);
            a.x *= inv;
            a.y *= inv;
            a.z *= inv;
            a.w *= inv;
            *(float4 *)(out.p + t * out.ld + hh * out.hs + d) = a;
        }
    } else {
        for (int e = tid; e < nq * hd; e += ATT_NT) {
            const int j = e / hd, d = e - j * hd;
            const int64_t pr = j0 + j;
            const int t = (int)(pr / grp), hh = h * grp + (int)(pr % grp);
            const float inv = sL[j] > 0 ? 1.0f / sL[j] : 0.0f;
            out.p[t * out.ld + hh * out.hs + d] = sAcc[j * hdp + d] * inv;
        }
    }
}

/*
 * Implements: ni_attention, split-KV merge (merge_task in
 * kernels/cpu/attention.c): per (t, head), M = max_s m_s,
 * out = Σ_s e^(m_s−M) acc_s / Σ_s e^(m_s−M) l_s over splits with l_s > 0
 * (0 when none). Route: one warp per (t, head), 4 per block; lanes own
 * float4 dims when VEC (hd % 4 == 0 and out rows aligned), else single dims.
 */
template <bool VEC>
__global__ void __launch_bounds__(128) attention_merge_kernel(const float *pacc, const float *pml, int nsplit,
                                                              ni_rows out, int hd) {
    const int lane = threadIdx.x & 31;
    const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t rows = (int64_t)out.t * out.h;
    if (w >= rows) return;
    const int t = (int)(w / out.h), hh = (int)(w % out.h);
    float M = -INFINITY;
    for (int s = lane; s < nsplit; s += 32) M = fmaxf(M, pml[2 * (s * rows + w)]);
    M = ni_warp_max(M);
    float L = 0.0f;
    for (int s = lane; s < nsplit; s += 32) {
        const float l = pml[2 * (s * rows + w) + 1];
        if (l != 0.0f) L += expf(pml[2 * (s * rows + w)] - M) * l;
    }
    L = ni_warp_sum(L);
    const float inv = L > 0 ? 1.0f / L : 0.0f;
    float *o = out.p + (int64_t)t * out.ld + (int64_t)hh * out.hs;
    const int step = VEC ? 128 : 32;
    for (int d0 = 0; d0 < hd; d0 += step) {
        const int d = VEC ? d0 + 4 * lane : d0 + lane;
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int s = 0; s < nsplit; s++) {
            const float l = pml[2 * (s * rows + w) + 1];
            if (l == 0.0f) continue; /* warp-uniform */
            const float e = expf(pml[2 * (s * rows + w)] - M);
            const float *r = pacc + (s * rows + w) * hd;
            if (VEC) {
                if (d < hd) {
                    const float4 x = *(const float4 *)(r + d);
                    a.x += e * x.x;
                    a.y += e * x.y;
                    a.z += e * x.z;
                    a.w += e * x.w;
                }
            } else if (d < hd) {
                a.x += e * r[d];
            }
        }
        if (VEC) {
            if (d < hd) *(float4 *)(o + d) = make_float4(a.x * inv, a.y * inv, a.z * inv, a.w * inv);
        } else if (d < hd) {
            o[d] = a.x * inv;
        }
    }
}

#endif
