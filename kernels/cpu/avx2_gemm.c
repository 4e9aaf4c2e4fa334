/* Large-T (prefill) matmul on AVX2 + FMA: a register-blocked fp32 GEMM
 * micro-kernel over a packed (decoded, transposed) weight panel.
 *
 * Y[T,N] = X[T,K] · W[N,K]ᵀ. The micro-kernel computes a tile of
 * NI_GEMM_MR (6) tokens × NI_GEMM_NR (16) output columns, held in 12 ymm
 * accumulators; per k it loads 16 weights (2 ymm) and broadcasts 6
 * activations, i.e. 12 FMAs per 8 loads (the old row-tile route's dot4 needs
 * 5 loads per 4 FMAs). Activations are read in place (6 token rows); packing
 * them measured no faster. The caller (weights.c, mm_gemm) blocks K by
 * NI_GEMM_KC so a 16-column weight panel (16 KiB) stays in L1 while the
 * tokens of a NI_GEMM_MC block sweep over it, and a task's weight block
 * (NI_GEMM_NC rows × KC, 128 KiB) sits in L2. Accuracy: no FMA chain is
 * longer than K/8 (clamped to [8, 64]) terms — sub-block sums are added in
 * order — so the summation error stays at the old route's level. */
#include "ni_cpu.h"
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* 8×8 transpose of rows s + i·lds (8 floats each) into d + j·NI_GEMM_NR. */
AVX2 static inline void transpose8(const float *s, int64_t lds, float *d) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds), r2 = _mm256_loadu_ps(s + 2 * lds),
           r3 = _mm256_loadu_ps(s + 3 * lds), r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds),
           r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(d + 0 * NI_GEMM_NR, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + 1 * NI_GEMM_NR, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * NI_GEMM_NR, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * NI_GEMM_NR, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * NI_GEMM_NR, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * NI_GEMM_NR, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * NI_GEMM_NR, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * NI_GEMM_NR, _mm256_permute2f128_ps(u3, u7, 0x31));
}

AVX2 void ni_gemm_pack_w_avx2(const float *src, int64_t lds, int nr, int64_t kc, float *dst) {
    if (nr == NI_GEMM_NR) {
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            transpose8(src + k, lds, dst + k * NI_GEMM_NR);
            transpose8(src + 8 * lds + k, lds, dst + k * NI_GEMM_NR + 8);
        }
        for (; k < kc; k++)
            for (int r = 0; r < NI_GEMM_NR; r++) dst[k * NI_GEMM_NR + r] = src[r * lds + k];
        return;
    }
    for (int64_t k = 0; k < kc; k++)
        for (int r = 0; r < NI_GEMM_NR; r++) dst[k * NI_GEMM_NR + r] = r < nr ? src[r * lds + k] : 0.0f;
}

#define NI_GEMM_FMA_ROW(i)                                                                                     \
    b = _mm256_broadcast_ss(x##i + k);                                                                         \
    c##i##0 = _mm256_fmadd_ps(b, w0, c##i##0);                                                                 \
    c##i##1 = _mm256_fmadd_ps(b, w1, c##i##1);
#define NI_GEMM_STEP                                                                                           \
    {                                                                                                          \
        __m256 w0 = _mm256_load_ps(wp + k * NI_GEMM_NR), w1 = _mm256_load_ps(wp + k * NI_GEMM_NR + 8), b;      \
        NI_GEMM_FMA_ROW(0)                                                                                     \
        NI_GEMM_FMA_ROW(1)                                                                                     \
        NI_GEMM_FMA_ROW(2)                                                                                     \
        NI_GEMM_FMA_ROW(3)                                                                                     \
        NI_GEMM_FMA_ROW(4)                                                                                     \
        NI_GEMM_FMA_ROW(5)                                                                                     \
    }
#define NI_GEMM_ADD(i, j, v) _mm256_store_ps(tile[i] + 8 * j, _mm256_add_ps(_mm256_load_ps(tile[i] + 8 * j), v))

/* The 6×16 tile with sub-blocks of KS k steps (a compile-time constant at
 * each instantiation, so whole sub-blocks run a fixed, unrolled trip count). */
AVX2 static inline __attribute__((always_inline)) void gemm_6x16(const float *x, int64_t ldx, const float *wp,
                                                                 int64_t kc, float *c, int64_t ldc, int mr, int nr,
                                                                 int acc, const int KS) {
    /* rows past mr repeat row mr−1 (computed, never stored) */
    const float *x0 = x, *x1 = x + (mr > 1 ? 1 : 0) * ldx, *x2 = x + (mr > 2 ? 2 : mr - 1) * ldx,
                *x3 = x + (mr > 3 ? 3 : mr - 1) * ldx, *x4 = x + (mr > 4 ? 4 : mr - 1) * ldx,
                *x5 = x + (mr > 5 ? 5 : mr - 1) * ldx;
    if (acc) /* the tile's outputs are read at the end: start fetching them now */
        for (int i = 0; i < mr; i++) {
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i * ldc + NI_GEMM_NR - 1), _MM_HINT_T0);
        }
    /* Each output is an fp32 FMA chain of at most KS terms per sub-block;
     * the sub-block sums are added in order in tile[]. */
    float tile[NI_GEMM_MR][NI_GEMM_NR] __attribute__((aligned(32)));
    for (int64_t ks = 0; ks < kc; ks += KS) {
        int64_t ke = kc - ks < KS ? kc : ks + KS;
        __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
               c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
               c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
               c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
        if (ke - ks == KS)
            for (int64_t k = ks; k < ks + KS; k++) NI_GEMM_STEP
        else
            for (int64_t k = ks; k < ke; k++) NI_GEMM_STEP
        if (ks == 0) {
            _mm256_store_ps(tile[0], c00), _mm256_store_ps(tile[0] + 8, c01);
            _mm256_store_ps(tile[1], c10), _mm256_store_ps(tile[1] + 8, c11);
            _mm256_store_ps(tile[2], c20), _mm256_store_ps(tile[2] + 8, c21);
            _mm256_store_ps(tile[3], c30), _mm256_store_ps(tile[3] + 8, c31);
            _mm256_store_ps(tile[4], c40), _mm256_store_ps(tile[4] + 8, c41);
            _mm256_store_ps(tile[5], c50), _mm256_store_ps(tile[5] + 8, c51);
        } else {
            NI_GEMM_ADD(0, 0, c00), NI_GEMM_ADD(0, 1, c01), NI_GEMM_ADD(1, 0, c10), NI_GEMM_ADD(1, 1, c11);
            NI_GEMM_ADD(2, 0, c20), NI_GEMM_ADD(2, 1, c21), NI_GEMM_ADD(3, 0, c30), NI_GEMM_ADD(3, 1, c31);
            NI_GEMM_ADD(4, 0, c40), NI_GEMM_ADD(4, 1, c41), NI_GEMM_ADD(5, 0, c50), NI_GEMM_ADD(5, 1, c51);
        }
    }
    if (nr == NI_GEMM_NR) {
        for (int i = 0; i < mr; i++) {
            float *ci = c + i * ldc;
            __m256 v0 = _mm256_load_ps(tile[i]), v1 = _mm256_load_ps(tile[i] + 8);
            if (acc) {
                v0 = _mm256_add_ps(_mm256_loadu_ps(ci), v0);
                v1 = _mm256_add_ps(_mm256_loadu_ps(ci + 8), v1);
            }
            _mm256_storeu_ps(ci, v0);
            _mm256_storeu_ps(ci + 8, v1);
        }
        return;
    }
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < nr; j++) ci[j] = acc ? ci[j] + tile[i][j] : tile[i][j];
    }
}
#undef NI_GEMM_FMA_ROW
#undef NI_GEMM_STEP
#undef NI_GEMM_ADD

AVX2 void ni_gemm_6x16_avx2(const float *x, int64_t ldx, const float *wp, int64_t kc, int ks, float *c, int64_t ldc,
                            int mr, int nr, int acc) {
    switch (ks) {
    case 8: gemm_6x16(x, ldx, wp, kc, c, ldc, mr, nr, acc, 8); break;
    case 16: gemm_6x16(x, ldx, wp, kc, c, ldc, mr, nr, acc, 16); break;
    case 32: gemm_6x16(x, ldx, wp, kc, c, ldc, mr, nr, acc, 32); break;
    default: gemm_6x16(x, ldx, wp, kc, c, ldc, mr, nr, acc, 64); break;
    }
}

/* Sub-block length for a K-long sum: K/8 as a power of two in [8, 64], so no
 * FMA chain is longer than the old row-tile route's 8-lane dot (K/8 terms). */
int ni_gemm_ks(int64_t k) {
    int ks = 8;
    while (ks < 64 && 2 * ks * 8 <= k) ks *= 2;
    return ks;
}
