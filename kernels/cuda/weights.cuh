/*
 * weights.cuh — device code of the weight family: per-format decode traits,
 * the embedding gather, the (multi-token) GEMV, the tensor-core GEMM for
 * quantised / bf16 weights and the fp32 SIMT GEMM. Launchers and the
 * ni_cuda_embed / ni_cuda_matmul entry points are in weights.cu.
 *
 * Byte layouts: kernels/cpu/weights.c (ni_weight_init, decode_row_isa) and
 * docs/FORMATS-TENSOR.md. Every decoded fp32 weight value is computed with
 * the same arithmetic as the CPU's ni_weight_decode_row:
 *   fp32: w;  bf16: bits << 16;  q4/q5/q6/q8: f16(scale) · code (exact);
 *   nvfp4: e2m1(c) · (e4m3(s) · inv_div);  fp8-row: e4m3(c) · bf16(s) (exact).
 *
 * Device code only: no runtime API calls and no <<<>>> here.
 */
#ifndef NI_CUDA_WEIGHTS_CUH
#define NI_CUDA_WEIGHTS_CUH

#include "common.cuh"
#include "ptx.cuh"

/* Internal format ids: the NI_W_* formats use their 16-byte vector traits;
 * these three are the element-wise fallbacks of the contiguous formats when
 * a row is not 16-byte aligned (K % (16 / element bytes) ≠ 0, or an
 * unaligned data pointer). */
enum { NIW_F32S = 8, NIW_BF16S = 9, NIW_FP8S = 10 };

/* ---- scalar decode helpers ---------------------------------------------- */

/* e4m3 byte → fp32, exact, 0x7f/0xff → NaN: the 7 magnitude bits placed at
 * fp32 bit 20 give 2^(e-127)·(1+m/8) (normal) or m·2^-129 (subnormal), and
 * · 2^120 rescales both exactly to 2^(e-7)·(1+m/8) and m·2^-9. */
__device__ __forceinline__ float niw_e4m3(uint32_t b) {
    float v = __uint_as_float((b & 0x7fu) << 20) * 1.329227995784916e36f; /* 2^120 */
    v = __uint_as_float(__float_as_uint(v) | ((b & 0x80u) << 24));
    return (b & 0x7fu) == 0x7fu ? __uint_as_float(0x7fc00000u) : v;
}

/* 2·|e2m1(c)| for the magnitude bits c & 7: 0,1,2,3,4,6,8,12 (one nibble each). */
__device__ __forceinline__ uint32_t niw_e2m1x2(uint32_t c) { return (0xC8643210u >> ((c & 7u) * 4u)) & 15u; }

/* e2m1(c) · s from hs = s / 2: (2|e2m1|) · hs carries the same significand
 * product as |e2m1| · s, so the rounding is the CPU's; the sign is e2m1's
 * (−0 for code 8, like the CPU table). */
__device__ __forceinline__ float niw_e2m1_mul(uint32_t c, float hs) {
    float m = __uint_as_float(0x4B000000u | niw_e2m1x2(c)) - 8388608.0f;
    return __uint_as_float(__float_as_uint(m * hs) ^ ((c & 8u) << 28));
}

/* Small non-negative integer u < 2^23 → fp32 (magic-number conversion, exact). */
__device__ __forceinline__ float niw_u2f(uint32_t u) { return __uint_as_float(0x4B000000u | u) - 8388608.0f; }

__device__ __forceinline__ uint16_t niw_ld_u16(const uint8_t *p) { return *(const uint16_t *)p; }

/* ---- format traits --------------------------------------------------------
 * A "unit" is what one lane decodes per step: E consecutive elements of a
 * row (E·bits = 128 for the vector formats: one 16-byte load, plus the
 * high-bit plane and scale bytes of the group it belongs to). Unit u covers
 * row elements [u·E, u·E + E). `Row` holds what is constant along a row,
 * `Raw` the loaded bytes of one unit; piece(raw, j, o) decodes elements
 * 4j..4j+3 of the unit to fp32 (j < E/4, a compile-time constant after
 * unrolling). Elements at or beyond K are never stored and meet x = 0 in
 * the GEMV; units that start at or beyond K are never loaded (so a
 * padding group's scale can never leak in).
 */
template <int F> struct WF;

template <> struct WF<NI_W_F32> {
    static constexpr int E = 4;
    struct Row { const float *p; };
    struct Raw { float4 v; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) { return {(const float *)w.data + n * w.k}; }
    static __device__ __forceinline__ Raw load(const ni_weight &, const Row &r, int64_t u) {
        return {*(const float4 *)(r.p + u * 4)};
    }
    static __device__ __forceinline__ void piece(const Raw &r, int, float o[4]) {
        o[0] = r.v.x, o[1] = r.v.y, o[2] = r.v.z, o[3] = r.v.w;
    }
};

template <> struct WF<NIW_F32S> {
    static constexpr int E = 4;
    struct Row { const float *p; };
    struct Raw { float v[4]; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) { return {(const float *)w.data + n * w.k}; }
    static __device__ __forceinline__ Raw load(const ni_weight &w, const Row &r, int64_t u) {
        Raw o;
#pragma unroll
        for (int i = 0; i < 4; i++) o.v[i] = u * 4 + i < w.k ? r.p[u * 4 + i] : 0.0f;
        return o;
    }
    static __device__ __forceinline__ void piece(const Raw &r, int, float o[4]) {
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = r.v[i];
    }
};

template <> struct WF<NI_W_BF16> {
    static constexpr int E = 8;
    struct Row { const uint16_t *p; };
    struct Raw { uint32_t q[4]; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) { return {(const uint16_t *)w.data + n * w.k}; }
    static __device__ __forceinline__ Raw load(const ni_weight &, const Row &r, int64_t u) {
        uint4 v = *(const uint4 *)(r.p + u * 8);
        return {{v.x, v.y, v.z, v.w}};
    }
    static __device__ __forceinline__ void piece(const Raw &r, int j, float o[4]) {
        uint32_t a = r.q[2 * j], b = r.q[2 * j + 1];
        o[0] = __uint_as_float(a << 16), o[1] = __uint_as_float(a & 0xffff0000u);
        o[2] = __uint_as_float(b << 16), o[3] = __uint_as_float(b & 0xffff0000u);
    }
};

template <> struct WF<NIW_BF16S> {
    static constexpr int E = 4;
    struct Row { const uint16_t *p; };
    struct Raw { float v[4]; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) { return {(const uint16_t *)w.data + n * w.k}; }
    static __device__ __forceinline__ Raw load(const ni_weight &w, const Row &r, int64_t u) {
        Raw o;
#pragma unroll
        for (int i = 0; i < 4; i++) o.v[i] = u * 4 + i < w.k ? __uint_as_float((uint32_t)r.p[u * 4 + i] << 16) : 0.0f;
        return o;
    }
    static __device__ __forceinline__ void piece(const Raw &r, int, float o[4]) {
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = r.v[i];
    }
};

template <> struct WF<NI_W_FP8ROW> {
    static constexpr int E = 16;
    struct Row { const uint8_t *p; float s; };
    struct Raw { uint32_t q[4]; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) {
        return {w.data + n * w.k, __uint_as_float((uint32_t)niw_ld_u16(w.data + w.scale_off + 2 * n) << 16)};
    }
    static __device__ __forceinline__ Raw load(const ni_weight &, const Row &r, int64_t u) {
        uint4 v = *(const uint4 *)(r.p + u * 16);
        return {{v.x, v.y, v.z, v.w}};
    }
    static __device__ __forceinline__ void piece_s(const Raw &r, int j, float s, float o[4]) {
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = niw_e4m3((r.q[j] >> (8 * i)) & 0xffu) * s;
    }
};

template <> struct WF<NIW_FP8S> {
    static constexpr int E = 4;
    struct Row { const uint8_t *p; float s; };
    struct Raw { float v[4]; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) {
        return {w.data + n * w.k, __uint_as_float((uint32_t)niw_ld_u16(w.data + w.scale_off + 2 * n) << 16)};
    }
    static __device__ __forceinline__ Raw load(const ni_weight &w, const Row &r, int64_t u) {
        Raw o; /* code · s with the row scale applied here (exact product) */
#pragma unroll
        for (int i = 0; i < 4; i++) o.v[i] = u * 4 + i < w.k ? niw_e4m3(r.p[u * 4 + i]) * r.s : 0.0f;
        return o;
    }
    static __device__ __forceinline__ void piece(const Raw &r, int, float o[4]) {
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = r.v[i];
    }
};

/* nvfp4: a unit is 32 codes (16 bytes) = two 16-element blocks of one
 * 64-element scale chunk; the row's block scales of chunk c live at
 * sc + c·512 + (0..3) (128×4 swizzle, see decode_row_isa). */
template <> struct WF<NI_W_NVFP4> {
    static constexpr int E = 32;
    struct Row { const uint8_t *p, *sc; };
    struct Raw { uint32_t q[4]; float hs[2]; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) {
        int64_t rt = n / 128, ri = n % 128, kt = w.k / 64;
        return {w.data + n * (w.k / 2), w.data + w.scale_off + rt * kt * 512 + (ri % 32) * 16 + (ri / 32) * 4};
    }
    static __device__ __forceinline__ Raw load(const ni_weight &w, const Row &r, int64_t u) {
        uint4 v = *(const uint4 *)(r.p + u * 16);
        uint32_t s2 = niw_ld_u16(r.sc + (u >> 1) * 512 + (u & 1) * 2);
        Raw o = {{v.x, v.y, v.z, v.w}, {0.0f, 0.0f}};
        /* s = e4m3 · inv_div as the CPU; hs = s/2 (exact) for niw_e2m1_mul */
        o.hs[0] = 0.5f * (niw_e4m3(s2 & 0xffu) * w.inv_div);
        o.hs[1] = 0.5f * (niw_e4m3(s2 >> 8) * w.inv_div);
        return o;
    }
    static __device__ __forceinline__ void piece(const Raw &r, int j, float o[4]) {
        uint32_t q = r.q[j >> 1] >> ((j & 1) * 16);
        float hs = r.hs[j >> 2];
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = niw_e2m1_mul((q >> (4 * i)) & 15u, hs);
    }
};

/* Grouped integer formats: a unit is half a group (q4/q5/q6: 32 of 64
 * lanes, q8: 16 of 32), i.e. 16 base bytes; group gi = row·gpr + u/2. */
template <int BITS> struct WQ {
    static constexpr int G = BITS == 8 ? 32 : 64;
    static constexpr int E = G / 2;
    struct Row { int64_t gi0; };
    struct Raw { uint32_t q[4]; uint32_t h[2]; float s; };
    static __device__ __forceinline__ Row row(const ni_weight &w, int64_t n) { return {n * w.gpr}; }
    static __device__ __forceinline__ Raw load(const ni_weight &w, const Row &r, int64_t u) {
        const int64_t gi = r.gi0 + (u >> 1);
        const int half = (int)(u & 1);
        uint4 v = *(const uint4 *)(w.data + gi * 32 + half * 16);
        Raw o = {{v.x, v.y, v.z, v.w}, {0u, 0u}, ni_cu_f16_to_f32(niw_ld_u16(w.data + w.scale_off + 2 * gi))};
        if (BITS == 5) o.h[0] = *(const uint32_t *)(w.data + w.high_off + gi * 8 + half * 4);
        if (BITS == 6) {
            uint2 hv = *(const uint2 *)(w.data + w.high_off + gi * 16 + half * 8);
            o.h[0] = hv.x, o.h[1] = hv.y;
        }
        return o;
    }
    /* Code of element e (0..3) of piece j as an unsigned word v = code + 2^(BITS-1). */
    static __device__ __forceinline__ uint32_t word(const Raw &r, int j, int e) {
        if (BITS == 8) return ((r.q[j] >> (8 * e)) & 0xffu) ^ 0x80u;
        const int i = 4 * j + e; /* element within the unit (0..31) */
        uint32_t u = (r.q[j >> 1] >> ((j & 1) * 16 + 4 * e)) & 15u;
        if (BITS == 5) u |= ((r.h[0] >> i) & 1u) << 4;
        if (BITS == 6) u |= ((r.h[i >> 4] >> ((i & 15) * 2)) & 3u) << 4;
        return u ^ (1u << (BITS - 1));
    }
    static __device__ __forceinline__ void piece(const Raw &r, int j, float o[4]) {
#pragma unroll
        for (int e = 0; e < 4; e++) o[e] = r.s * (niw_u2f(word(r, j, e)) - (float)(1 << (BITS - 1)));
    }
};
template <> struct WF<NI_W_Q4> : WQ<4> {};
template <> struct WF<NI_W_Q5> : WQ<5> {};
template <> struct WF<NI_W_Q6> : WQ<6> {};
template <> struct WF<NI_W_Q8> : WQ<8> {};

/* Uniform piece decode (fp8-row applies its row scale here). */
template <int F>
__device__ __forceinline__ void niw_piece(const typename WF<F>::Row &row, const typename WF<F>::Raw &raw, int j, float o[4]) {
    if constexpr (F == NI_W_FP8ROW) WF<F>::piece_s(raw, j, row.s, o);
    else WF<F>::piece(raw, j, o);
}

/* ---- embedding --------------------------------------------------------------
 * Implements: ni_embed. Route: one block per token, threads over units of
 * the row (16-byte weight loads), decoded values stored to out[t, :];
 * an id outside [0, n) zero-fills the row and counts into err. VST: float4
 * stores (out.p 16-byte aligned and out.ld % 4 == 0).
 */
template <int F, bool VST>
__global__ void __launch_bounds__(128) niw_embed_kernel(ni_weight w, const int32_t *ids, ni_rows out, int32_t *err) {
    typedef WF<F> W;
    const int64_t t = blockIdx.x, K = w.k;
    float *o = out.p + t * out.ld;
    const int32_t id = ids[t];
    if (id < 0 || id >= w.n) {
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) o[k] = 0.0f;
        if (threadIdx.x == 0) atomicAdd(err, 1);
        return;
    }
    const typename W::Row row = W::row(w, id);
    const int64_t U = (K + W::E - 1) / W::E;
    for (int64_t u = threadIdx.x; u < U; u += blockDim.x) {
        const typename W::Raw raw = W::load(w, row, u);
#pragma unroll
        for (int j = 0; j < W::E / 4; j++) {
            float v[4];
            niw_piece<F>(row, raw, j, v);
            const int64_t k = u * W::E + 4 * j;
            if (VST && k + 4 <= K) *(float4 *)(o + k) = make_float4(v[0], v[1], v[2], v[3]);
            else
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k + e < K) o[k + e] = v[e];
        }
    }
}

/* ---- GEMV, T = 1 and small T -------------------------------------------------
 * Implements: ni_matmul for T ≤ NI_SMALL_T (every format). Route: a warp
 * owns R consecutive rows; its lanes take the row's units round-robin
 * (lane + 32·i), so one warp instruction reads 32 × 16 contiguous bytes of
 * each row and every weight byte is read once per pass. The block stages a
 * K-chunk of kc elements of NT tokens in shared memory ([NT][kc], zero
 * beyond K and beyond T), permuted so that the 4-element piece j of every
 * lane's unit is contiguous across the warp (conflict-free float4 reads):
 *   element kl of the chunk → (kl / S)·S + ((kl % E) / 4)·128 + ((kl % S) / E)·4 + kl % 4,
 * S = 32·E. Each decoded weight piece feeds all NT tokens (so a T = 2..4
 * call costs one weight read); T > NT loops token passes (the rows'
 * weights are then re-read from L2). fp32 accumulation per lane in unit
 * order, then a warp-shuffle tree. kc is a multiple of S.
 */
__device__ __forceinline__ int niw_perm(int kl, int E) {
    const int S = 32 * E, l = kl % S;
    return kl - l + ((l % E) >> 2) * 128 + (l / E) * 4 + (l & 3);
}

template <int F, int NT, int R>
__global__ void __launch_bounds__(256, 2) niw_gemv_kernel(ni_weight w, ni_rows x, ni_rows y, int acc, int kc) {
    typedef WF<F> W;
    constexpr int E = W::E, S = 32 * E;
    NI_DYN_SMEM(smem);
    float *xs = (float *)smem;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int64_t K = w.k, N = w.n, T = x.t;
    const int64_t n0 = ((int64_t)blockIdx.x * nw + warp) * R;
    typename W::Row rows[R];
#pragma unroll
    for (int r = 0; r < R; r++) rows[r] = W::row(w, n0 + r < N ? n0 + r : N - 1);
    const int64_t U = (K + E - 1) / E;
    for (int64_t t0 = 0; t0 < T; t0 += NT) {
        float a[NT][R];
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int r = 0; r < R; r++) a[t][r] = 0.0f;
        for (int64_t k0 = 0; k0 < K; k0 += kc) {
            __syncthreads(); /* the previous chunk is consumed */
            for (int i = threadIdx.x; i < NT * kc; i += blockDim.x) {
                const int t = i / kc, kl = i - t * kc;
                const int64_t k = k0 + kl;
                xs[t * kc + niw_perm(kl, E)] = (t0 + t < T && k < K) ? x.p[(t0 + t) * x.ld + k] : 0.0f;
            }
            __syncthreads();
            const int64_t u0 = k0 / E;
            const int un = (int)(U - u0 < kc / E ? U - u0 : kc / E);
            for (int ul = lane; ul < un; ul += 32) {
                typename W::Raw raw[R];
#pragma unroll
                for (int r = 0; r < R; r++) raw[r] = W::load(w, rows[r], u0 + ul);
                const float *xp = xs + (ul >> 5) * S + lane * 4;
#pragma unroll
                for (int j = 0; j < E / 4; j++) {
                    float4 xv[NT];
#pragma unroll
                    for (int t = 0; t < NT; t++) xv[t] = *(const float4 *)(xp + t * kc + j * 128);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float v[4];
                        niw_piece<F>(rows[r], raw[r], j, v);
#pragma unroll
                        for (int t = 0; t < NT; t++) {
                            float s = a[t][r];
                            s = fmaf(v[0], xv[t].x, s);
                            s = fmaf(v[1], xv[t].y, s);
                            s = fmaf(v[2], xv[t].z, s);
                            s = fmaf(v[3], xv[t].w, s);
                            a[t][r] = s;
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int t = 0; t < NT; t++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float v = ni_warp_sum(a[t][r]);
                if (lane == t * R + r && t0 + t < T && n0 + r < N) {
                    float *p = y.p + (t0 + t) * y.ld + n0 + r;
                    *p = acc ? *p + v : v;
                }
            }
    }
}

/* ---- tensor-core GEMM, T > NI_SMALL_T ------------------------------------------
 * Implements: ni_matmul for T > NI_SMALL_T, weights bf16, q4/q5/q6/q8,
 * nvfp4, fp8-row. Route: block tile 64 tokens × 64 weight rows, k-tile 64,
 * 4 warps in 2 × 2, warp tile 32 × 32 = 2 × 4 mma.sync m16n8k16 bf16 with
 * fp32 accumulators. Double-buffered shared memory: the activation tile
 * stays fp32 ([64][72], cp.async when 16-byte aligned, else element loads)
 * and each warp splits its A fragments into hi + mid + lo bf16 terms
 * (niw_split3; three mma's: ≈24 significant bits of x, the fp32 value); the weight tile is decoded from
 * registers (loaded one k-tile ahead) into bf16 [64][72] holding values that
 * are exact in bf16: the bf16 weight itself, the integer code (q4..q8), the
 * e4m3 code (fp8-row), e2m1 · e4m3 (nvfp4: ≤ 6 significant bits). Scales:
 * q4..q8 per (row, group) in fp32 on per-group partial accumulators
 * (acc += s · partial after each group of 64, q8: 32, columns); fp8-row's
 * bf16 row scale and nvfp4's inv_div in the epilogue. Padding groups of q8
 * at or beyond K get scale 0 (never their stored value). Row strides of 72
 * (fp32: 288 B, bf16: 144 B) make the fragment reads bank-conflict free.
 * AVEC: x.p 16-byte aligned, x.ld % 4 == 0 and K % 4 == 0.
 */
#define NIW_BM 64
#define NIW_BN 64
#define NIW_BK 64
#define NIW_ALD 72 /* fp32 row stride of the activation tile */
#define NIW_BLD 72 /* bf16 row stride of the weight tile */
#define NIW_MMA_SMEM (2 * NIW_BM * NIW_ALD * 4 + 2 * NIW_BN * NIW_BLD * 2 + 2 * NIW_BN * 2 * 4)

/* (x0, x1) → three bf16x2 terms hi + mid + lo (x0 in the low halves), each
 * the round-to-nearest-even bf16 of the exact remainder of the previous
 * ones: hi = bf16(x), mid = bf16(x − hi), lo = bf16(x − hi − mid). The
 * remainders are exact in fp32 (Sterbenz), so x − (hi + mid + lo) is below
 * 2⁻²⁷·|x| (three 8-bit significands): the three mma's reproduce the fp32
 * product with an error below the fp32 accumulation's own rounding. (Two
 * terms leave up to 2⁻¹⁸·|x| per product, which over K terms exceeds the
 * fp32 path's bounds: measured 1.6× the linear_fp32 tolerance at K = 520.) */
__device__ __forceinline__ uint32_t niw_bf16x2(float x0, float x1) {
#if defined(__CUDA_ARCH__)
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
    return r;
#else
    return (uint32_t)ni_f32_to_bf16(x0) | ((uint32_t)ni_f32_to_bf16(x1) << 16);
#endif
}
__device__ __forceinline__ void niw_split3(float x0, float x1, uint32_t &hi, uint32_t &mid, uint32_t &lo) {
    hi = niw_bf16x2(x0, x1);
    const float r0 = x0 - __uint_as_float(hi << 16), r1 = x1 - __uint_as_float(hi & 0xffff0000u);
    mid = niw_bf16x2(r0, r1);
    const float q0 = r0 - __uint_as_float(mid << 16), q1 = r1 - __uint_as_float(mid & 0xffff0000u);
    lo = niw_bf16x2(q0, q1);
}

/* bf16 bits of an fp32 value known to be exact in bf16 (low 16 bits zero). */
__device__ __forceinline__ uint32_t niw_pack2(float a, float b) {
    return (__float_as_uint(a) >> 16) | (__float_as_uint(b) & 0xffff0000u);
}

/* The weight-tile loader of one thread: row (tid / 2) of the tile, 32
 * consecutive k (half tid % 2) of k-tile kt. Raw bytes are loaded by
 * fetch() one k-tile ahead and turned into bf16 by store(). */
template <int F> struct WT;

template <> struct WT<NI_W_BF16> {
    static constexpr bool GROUPED = false;
    uint4 v[4];
    __device__ __forceinline__ void fetch(const ni_weight &w, int64_t n, int64_t k) {
        const uint16_t *p = (const uint16_t *)w.data + n * w.k + k;
#pragma unroll
        for (int i = 0; i < 4; i++) v[i] = k + 8 * i < w.k ? *(const uint4 *)(p + 8 * i) : make_uint4(0, 0, 0, 0);
    }
    __device__ __forceinline__ void store(const ni_weight &, int64_t, uint16_t *bs, float *) const {
#pragma unroll
        for (int i = 0; i < 4; i++) *(uint4 *)(bs + 8 * i) = v[i];
    }
};

template <> struct WT<NIW_BF16S> {
    static constexpr bool GROUPED = false;
    uint32_t v[16];
    __device__ __forceinline__ void fetch(const ni_weight &w, int64_t n, int64_t k) {
        const uint16_t *p = (const uint16_t *)w.data + n * w.k + k;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t a = k + 2 * i < w.k ? p[2 * i] : 0u, b = k + 2 * i + 1 < w.k ? p[2 * i + 1] : 0u;
            v[i] = a | (b << 16);
        }
    }
    __device__ __forceinline__ void store(const ni_weight &, int64_t, uint16_t *bs, float *) const {
#pragma unroll
        for (int i = 0; i < 4; i++) *(uint4 *)(bs + 8 * i) = make_uint4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
};

/* fp8-row: the e4m3 code value (exact in bf16; NaN codes stay NaN). */
template <> struct WT<NI_W_FP8ROW> {
    static constexpr bool GROUPED = false;
    uint32_t v[8];
    __device__ __forceinline__ void fetch(const ni_weight &w, int64_t n, int64_t k) {
        const uint8_t *p = w.data + n * w.k + k;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            uint4 q = k + 16 * i < w.k ? *(const uint4 *)(p + 16 * i) : make_uint4(0, 0, 0, 0);
            v[4 * i] = q.x, v[4 * i + 1] = q.y, v[4 * i + 2] = q.z, v[4 * i + 3] = q.w;
        }
    }
    __device__ __forceinline__ void store(const ni_weight &, int64_t, uint16_t *bs, float *) const {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t o[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t q = v[2 * i + j / 2] >> ((j & 1) * 16);
                o[j] = niw_pack2(niw_e4m3(q & 0xffu), niw_e4m3((q >> 8) & 0xffu));
            }
            *(uint4 *)(bs + 8 * i) = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
};

template <> struct WT<NIW_FP8S> : WT<NI_W_FP8ROW> {
    __device__ __forceinline__ void fetch(const ni_weight &w, int64_t n, int64_t k) {
        const uint8_t *p = w.data + n * w.k + k;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t q = 0;
#pragma unroll
            for (int b = 0; b < 4; b++) q |= (k + 4 * i + b < w.k ? (uint32_t)p[4 * i + b] : 0u) << (8 * b);
            v[i] = q;
        }
    }
};

/* nvfp4: e2m1 · e4m3 block scale (≤ 6 significant bits: exact in bf16). */
template <> struct WT<NI_W_NVFP4> {
    static constexpr bool GROUPED = false;
    uint4 q;
    uint32_t s2;
    __device__ __forceinline__ void fetch(const ni_weight &w, int64_t n, int64_t k) {
        const int64_t rt = n / 128, ri = n % 128, kt = w.k / 64;
        q = *(const uint4 *)(w.data + n * (w.k / 2) + k / 2);
        s2 = niw_ld_u16(w.data + w.scale_off + rt * kt * 512 + (ri % 32) * 16 + (ri / 32) * 4 + (k / 64) * 512 +
                        ((k / 16) & 3));
    }
    __device__ __forceinline__ void store(const ni_weight &, int64_t, uint16_t *bs, float *) const {
        const uint32_t qq[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int blk = 0; blk < 2; blk++) {
            const float hs = 0.5f * niw_e4m3((s2 >> (8 * blk)) & 0xffu);
            uint32_t o[8];
#pragma unroll
            for (int b = 0; b < 8; b++) { /* byte b of the block: elements 2b, 2b+1 */
                const uint32_t c = qq[2 * blk + b / 4] >> (8 * (b & 3));
                o[b] = niw_pack2(niw_e2m1_mul(c & 15u, hs), niw_e2m1_mul((c >> 4) & 15u, hs));
            }
            *(uint4 *)(bs + 16 * blk) = make_uint4(o[0], o[1], o[2], o[3]);
            *(uint4 *)(bs + 16 * blk + 8) = make_uint4(o[4], o[5], o[6], o[7]);
        }
    }
};

/* q4/q5/q6 (group 64 = one k-tile: this thread holds half a group) and q8
 * (group 32: this thread holds one whole group). ss[2·row + g] receives the
 * fp32 scale of the tile's group g (0 at or beyond K). */
template <int BITS> struct WTQ {
    static constexpr bool GROUPED = true;
    static constexpr int G = BITS == 8 ? 32 : 64;
    uint4 q[BITS == 8 ? 2 : 1];
    uint32_t h[2];
    uint16_t s;
    bool live;
    __device__ __forceinline__ void fetch(const ni_weight &w, int64_t n, int64_t k) {
        const int64_t gi = n * w.gpr + k / G;
        const int off = (int)(k % G) / 2; /* base byte offset within the group: 0 or 16 */
        live = k < w.k;
        if (BITS == 8) {
            q[0] = *(const uint4 *)(w.data + gi * 32);
            q[BITS == 8 ? 1 : 0] = *(const uint4 *)(w.data + gi * 32 + 16);
        } else {
            q[0] = *(const uint4 *)(w.data + gi * 32 + off);
        }
        s = niw_ld_u16(w.data + w.scale_off + 2 * gi);
        h[0] = h[1] = 0;
        if (BITS == 5) h[0] = *(const uint32_t *)(w.data + w.high_off + gi * 8 + off / 4);
        if (BITS == 6) {
            uint2 hv = *(const uint2 *)(w.data + w.high_off + gi * 16 + off / 2);
            h[0] = hv.x, h[1] = hv.y;
        }
    }
    __device__ __forceinline__ float code(int i) const { /* element i of the 32 held */
        uint32_t u;
        if (BITS == 8) {
            u = (((i < 16 ? (&q[0].x)[i / 4] : (&q[BITS == 8 ? 1 : 0].x)[(i - 16) / 4]) >> (8 * (i & 3))) & 0xffu) ^ 0x80u;
            return niw_u2f(u) - 128.0f;
        }
        u = ((&q[0].x)[i / 8] >> (4 * (i & 7))) & 15u;
        if (BITS == 5) u |= ((h[0] >> i) & 1u) << 4;
        if (BITS == 6) u |= ((h[i >> 4] >> ((i & 15) * 2)) & 3u) << 4;
        return niw_u2f(u ^ (1u << (BITS - 1))) - (float)(1 << (BITS - 1));
    }
    __device__ __forceinline__ void store(const ni_weight &, int64_t, uint16_t *bs, float *ss) const {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t o[4];
#pragma unroll
            for (int j = 0; j < 4; j++) o[j] = niw_pack2(code(8 * i + 2 * j), code(8 * i + 2 * j + 1));
            *(uint4 *)(bs + 8 * i) = make_uint4(o[0], o[1], o[2], o[3]);
        }
        if (ss) *ss = live ? ni_cu_f16_to_f32(s) : 0.0f;
    }
};
template <> struct WT<NI_W_Q4> : WTQ<4> {};
template <> struct WT<NI_W_Q5> : WTQ<5> {};
template <> struct WT<NI_W_Q6> : WTQ<6> {};
template <> struct WT<NI_W_Q8> : WTQ<8> {};

template <int F, bool AVEC>
__global__ void __launch_bounds__(128, F == NI_W_Q8 || F == NI_W_BF16 || F == NIW_BF16S ? 2 : 3) niw_mma_kernel(ni_weight w, ni_rows x, ni_rows y, int acc) {
    typedef WT<F> L;
    constexpr bool GROUPED = L::GROUPED;
    constexpr int G = F == NI_W_Q8 ? 32 : 64; /* k columns per scale group (grouped formats) */
    constexpr int KS_PER_G = G / 16;
    /* Every format's mma products go into a partial sum (see "Tolerance
     * story" in weights.cu): per scale group for the grouped formats, per
     * k-tile for the others, so the small lo/mid activation terms never
     * vanish into the running sum. The partial's 32 registers need the
     * 2-blocks-per-SM launch bound for q8 and bf16 (no spills, make cuda-check). */
    NI_DYN_SMEM(smem);
    float *As = (float *)smem;                                              /* [2][BM][ALD] */
    uint16_t *Bs = (uint16_t *)(smem + 2 * NIW_BM * NIW_ALD * 4);           /* [2][BN][BLD] */
    float *Ss = (float *)(smem + 2 * NIW_BM * NIW_ALD * 4 + 2 * NIW_BN * NIW_BLD * 2); /* [2][BN][2] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
    const int64_t K = w.k, N = w.n, T = x.t;
    const int64_t tb = (int64_t)blockIdx.y * NIW_BM, nb = (int64_t)blockIdx.x * NIW_BN;
    const int nk = (int)((K + NIW_BK - 1) / NIW_BK);
    /* weight loader role: tile row lr, k half lh */
    const int lr = tid >> 1, lh = tid & 1;
    const int64_t ln = nb + lr < N ? nb + lr : N - 1;

    auto load_a = [&](int kt, int buf) {
        float *as = As + buf * NIW_BM * NIW_ALD;
        const int64_t k0 = (int64_t)kt * NIW_BK;
        if (AVEC) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int ch = tid + 128 * i, r = ch >> 4, c4 = (ch & 15) * 4;
                const int64_t t = tb + r, k = k0 + c4;
                const bool ok = t < T && k < K;
                ni_cp_async_16_zfill(as + r * NIW_ALD + c4, ok ? (const void *)(x.p + t * x.ld + k) : (const void *)x.p,
                                     ok ? 16 : 0);
            }
            ni_cp_async_commit();
        } else {
            for (int i = 0; i < 32; i++) {
                const int e = tid + 128 * i, r = e >> 6, cc = e & 63;
                const int64_t t = tb + r, k = k0 + cc;
                as[r * NIW_ALD + cc] = t < T && k < K ? x.p[t * x.ld + k] : 0.0f;
            }
        }
    };
    auto store_b = [&](const L &ld, int buf) {
        uint16_t *bs = Bs + buf * NIW_BN * NIW_BLD + lr * NIW_BLD + lh * 32;
        float *ss = GROUPED ? Ss + buf * NIW_BN * 2 + lr * 2 : nullptr;
        /* q4..q6: one group per k-tile, the low half thread writes it;
         * q8: two groups, each half thread writes its own */
        if (GROUPED && F != NI_W_Q8) ss = lh == 0 ? ss : nullptr;
        if (GROUPED && F == NI_W_Q8) ss = ss + lh;
        ld.store(w, ln, bs, ss);
    };

    float accm[2][4][4];
    float part[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++) accm[mi][ni][i] = 0.0f, part[mi][ni][i] = 0.0f;

    L ld;
    load_a(0, 0);
    ld.fetch(w, ln, lh * 32);
    store_b(ld, 0);
    if (AVEC) ni_cp_async_wait_all();
    __syncthreads();

    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt & 1, nxt = cur ^ 1;
        const bool more = kt + 1 < nk;
        if (more) {
            load_a(kt + 1, nxt);
            ld.fetch(w, ln, (int64_t)(kt + 1) * NIW_BK + lh * 32);
        }
        const float *as = As + cur * NIW_BM * NIW_ALD;
        const uint16_t *bs = Bs + cur * NIW_BN * NIW_BLD;
#pragma unroll
        for (int ks = 0; ks < NIW_BK / 16; ks++) {
            uint32_t ah[2][4], am[2][4], al[2][4], bf[4][2];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const float *a0 = as + (wm + mi * 16 + g) * NIW_ALD + ks * 16 + 2 * c;
                const float2 p0 = *(const float2 *)a0, p1 = *(const float2 *)(a0 + 8 * NIW_ALD);
                const float2 p2 = *(const float2 *)(a0 + 8), p3 = *(const float2 *)(a0 + 8 * NIW_ALD + 8);
                niw_split3(p0.x, p0.y, ah[mi][0], am[mi][0], al[mi][0]);
                niw_split3(p1.x, p1.y, ah[mi][1], am[mi][1], al[mi][1]);
                niw_split3(p2.x, p2.y, ah[mi][2], am[mi][2], al[mi][2]);
                niw_split3(p3.x, p3.y, ah[mi][3], am[mi][3], al[mi][3]);
            }
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const uint16_t *b0 = bs + (wn + ni * 8 + g) * NIW_BLD + ks * 16 + 2 * c;
                bf[ni][0] = *(const uint32_t *)b0;
                bf[ni][1] = *(const uint32_t *)(b0 + 8);
            }
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    float *d = part[mi][ni];
                    /* smallest term first: its products are not absorbed by the larger sums */
                    ni_mma_bf16_16816(d, al[mi], bf[ni], d);
                    ni_mma_bf16_16816(d, am[mi], bf[ni], d);
                    ni_mma_bf16_16816(d, ah[mi], bf[ni], d);
                }
            if (GROUPED && (ks + 1) % KS_PER_G == 0) { /* end of a scale group: acc += s · partial */
                const int grp = F == NI_W_Q8 ? ks / KS_PER_G : 0;
                const float *ss = Ss + cur * NIW_BN * 2;
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    const int col = wn + ni * 8 + 2 * c;
                    const float s0 = ss[col * 2 + grp], s1 = ss[(col + 1) * 2 + grp];
#pragma unroll
                    for (int mi = 0; mi < 2; mi++) {
                        accm[mi][ni][0] = fmaf(s0, part[mi][ni][0], accm[mi][ni][0]);
                        accm[mi][ni][1] = fmaf(s1, part[mi][ni][1], accm[mi][ni][1]);
                        accm[mi][ni][2] = fmaf(s0, part[mi][ni][2], accm[mi][ni][2]);
                        accm[mi][ni][3] = fmaf(s1, part[mi][ni][3], accm[mi][ni][3]);
#pragma unroll
                        for (int i = 0; i < 4; i++) part[mi][ni][i] = 0.0f;
                    }
                }
            }
            if (!GROUPED && ks + 1 == NIW_BK / 16) { /* end of the k-tile: acc += partial */
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int ni = 0; ni < 4; ni++)
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            accm[mi][ni][i] += part[mi][ni][i];
                            part[mi][ni][i] = 0.0f;
                        }
            }
        }
        if (more) store_b(ld, nxt);
        if (AVEC) ni_cp_async_wait_all();
        __syncthreads();
    }

    /* epilogue: column scale (fp8-row bf16 row scale, nvfp4 inv_div) */
#pragma unroll
    for (int ni = 0; ni < 4; ni++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t n = nb + wn + ni * 8 + 2 * c + h;
            if (n >= N) continue;
            float cs = 1.0f;
            if (F == NI_W_FP8ROW || F == NIW_FP8S)
                cs = __uint_as_float((uint32_t)niw_ld_u16(w.data + w.scale_off + 2 * n) << 16);
            if (F == NI_W_NVFP4) cs = w.inv_div;
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int v = 0; v < 2; v++) {
                    const int64_t t = tb + wm + mi * 16 + g + 8 * v;
                    if (t >= T) continue;
                    float r = accm[mi][ni][2 * v + h];
                    if (F == NI_W_FP8ROW || F == NIW_FP8S || F == NI_W_NVFP4) r *= cs;
                    float *p = y.p + t * y.ld + n;
                    *p = acc ? *p + r : r;
                }
        }
    }
}

/* ---- fp32 SIMT GEMM, T > NI_SMALL_T, fp32 weights ---------------------------------
 * Implements: ni_matmul for T > NI_SMALL_T with fp32 weights (exact fp32
 * recipe: no bf16 tensor cores). Route: block tile 64 tokens × 64 rows,
 * k-tile 16, 256 threads each own 4 × 4 outputs; both tiles stored k-major
 * in shared memory (double-buffered, loaded one k-tile ahead into
 * registers); each output is one sequential fp32 FMA chain over k.
 * VEC: 16-byte loads of x and w (x.p, w.data 16-byte aligned, x.ld % 4 == 0,
 * K % 4 == 0), else element loads.
 */
#define NIW_FBK 16
#define NIW_FLD 68 /* k-major row stride (64 + 4) */

template <bool VEC>
__global__ void __launch_bounds__(256) niw_f32_gemm_kernel(ni_weight w, ni_rows x, ni_rows y, int acc) {
    __shared__ __align__(16) float As[2][NIW_FBK][NIW_FLD];
    __shared__ __align__(16) float Bs[2][NIW_FBK][NIW_FLD];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t K = w.k, N = w.n, T = x.t;
    const int64_t tb = (int64_t)blockIdx.y * 64, nb = (int64_t)blockIdx.x * 64;
    const float *wp = (const float *)w.data;
    /* loader role: tile row lr (token or weight row), 4 consecutive k at lk */
    const int lr = tid >> 2, lk = (tid & 3) * 4;
    const int64_t lt = tb + lr, ln = nb + lr;
    const int nk = (int)((K + NIW_FBK - 1) / NIW_FBK);
    float ra[4], rb[4];
    auto fetch = [&](int kt) {
        const int64_t k = (int64_t)kt * NIW_FBK + lk;
        if (VEC) {
            const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            float4 a = lt < T && k < K ? *(const float4 *)(x.p + lt * x.ld + k) : z;
            float4 b = ln < N && k < K ? *(const float4 *)(wp + ln * K + k) : z;
            ra[0] = a.x, ra[1] = a.y, ra[2] = a.z, ra[3] = a.w;
            rb[0] = b.x, rb[1] = b.y, rb[2] = b.z, rb[3] = b.w;
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                ra[i] = lt < T && k + i < K ? x.p[lt * x.ld + k + i] : 0.0f;
                rb[i] = ln < N && k + i < K ? wp[ln * K + k + i] : 0.0f;
            }
        }
    };
    auto put = [&](int buf) {
#pragma unroll
        for (int i = 0; i < 4; i++) As[buf][lk + i][lr] = ra[i], Bs[buf][lk + i][lr] = rb[i];
    };
    float c[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) c[i][j] = 0.0f;
    fetch(0);
    put(0);
    __syncthreads();
    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt & 1;
        if (kt + 1 < nk) fetch(kt + 1);
#pragma unroll
        for (int kk = 0; kk < NIW_FBK; kk++) {
            const float4 a = *(const float4 *)&As[cur][kk][ty * 4];
            const float4 b = *(const float4 *)&Bs[cur][kk][tx * 4];
            const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) c[i][j] = fmaf(av[i], bv[j], c[i][j]);
        }
        if (kt + 1 < nk) put(cur ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int64_t t = tb + ty * 4 + i;
        if (t >= T) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t n = nb + tx * 4 + j;
            if (n >= N) continue;
            float *p = y.p + t * y.ld + n;
            *p = acc ? *p + c[i][j] : c[i][j];
        }
    }
}

#endif
