/* Prefill matmul on int8 activations (NI_ACT_Q8 at T > NI_SMALL_T) with
 * AVX-512 VNNI: Y[T,N] = X[T,K]·W[N,K]ᵀ on a panel of NI_Q8G_NR (32) rows
 * packed by ni_q8_pack_panel_avx2 (avx2.c) as offset-binary codes
 * u = q_w + 2^(bits−1) in k-quad order, so one vpdpbusd multiplies 4 codes
 * of 16 rows by 4 activation codes of one token (broadcast) and adds them
 * to that token's 16 int32 lanes. A register tile is NI_Q8G_MR (6) tokens ×
 * 32 rows: 12 int32 accumulators for the current group, 12 fp32 ones across
 * the groups. Per group g and token t the int32 lane of row n is exact:
 * p = Σ u·x_q = Σ q_w·x_q + 2^(bits−1)·Σ x_q, so xoff[t][g] = 2^(bits−1)·Σ x_q
 * is subtracted (exact), then y += fl(fl(p)·s_x[t][g]) · s_w[n][g] (one
 * rounding, then an FMA): the same terms as the one-token int8 GEMVs, in a
 * different order, within the NI_ACT_Q8 contract's bound. */
#include "ni_cpu.h"
#include <immintrin.h>

#define VNNI512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

VNNI512 static inline __attribute__((always_inline)) void q8g_tile(const int MR, const uint8_t *pw, const float *ps,
                                                                 int64_t ngroups, int gk, __mmask16 m0,
                                                                 __mmask16 m1, const int8_t *xq, int64_t ldq,
                                                                 const float *xs, int64_t lds, int sstep,
                                                                 const int32_t *xoff, int64_t ldo, float *y,
                                                                 int64_t ldy, int acc) {
    __m512 f[NI_Q8G_MR][2];
    for (int t = 0; t < MR; t++) f[t][0] = f[t][1] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ngroups; g++) {
        __m512i a[NI_Q8G_MR][2];
        for (int t = 0; t < MR; t++) a[t][0] = a[t][1] = _mm512_setzero_si512();
        const uint8_t *pg = pw + g * gk * (4 * NI_Q8G_NR);
        const int8_t *xg = xq + g * gk * 4;
        for (int j = 0; j < gk; j++) {
            const __m512i w0 = _mm512_loadu_si512((const void *)(pg + j * (4 * NI_Q8G_NR)));
            const __m512i w1 = _mm512_loadu_si512((const void *)(pg + j * (4 * NI_Q8G_NR) + 64));
            for (int t = 0; t < MR; t++) {
                int32_t x4;
                memcpy(&x4, xg + t * ldq + 4 * j, 4);
                const __m512i xb = _mm512_set1_epi32(x4);
                a[t][0] = _mm512_dpbusd_epi32(a[t][0], w0, xb);
                a[t][1] = _mm512_dpbusd_epi32(a[t][1], w1, xb);
            }
        }
        const __m512 s0 = _mm512_loadu_ps(ps + NI_Q8G_NR * g), s1 = _mm512_loadu_ps(ps + NI_Q8G_NR * g + 16);
        for (int t = 0; t < MR; t++) {
            const __m512i o = _mm512_set1_epi32(xoff[t * ldo + g]);
            const __m512 sx = _mm512_set1_ps(xs[t * lds + g * sstep]);
            f[t][0] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[t][0], o)), sx), s0, f[t][0]);
            f[t][1] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[t][1], o)), sx), s1, f[t][1]);
        }
    }
    for (int t = 0; t < MR; t++) {
        float *yt = y + t * ldy;
        if (acc) {
            f[t][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, yt), f[t][0]);
            f[t][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, yt + 16), f[t][1]);
        }
        _mm512_mask_storeu_ps(yt, m0, f[t][0]);
        _mm512_mask_storeu_ps(yt + 16, m1, f[t][1]);
    }
}

/* All T tokens against one packed panel of nr ≤ NI_Q8G_NR rows: token t's
 * codes at xq + t·ldq, its scale for group g at xs[t·lds + g·sstep], its
 * offset at xoff[t·ldo + g]; row r's output at y[t·ldy + r] (added to it
 * when acc). */
VNNI512 void ni_q8_gemm_vnni(const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
                             int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff, int64_t ldo,
                             int T, float *y, int64_t ldy, int acc) {
    const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
#define NI_Q8G_TILE(MR, t)                                                                                            \
    q8g_tile(MR, pw, ps, ngroups, gk, m0, m1, xq + (t) * ldq, ldq, xs + (t) * lds, lds, sstep, xoff + (t) * ldo, ldo, \
             y + (t) * ldy, ldy, acc)
    int t = 0;
    for (; t + NI_Q8G_MR <= T; t += NI_Q8G_MR) NI_Q8G_TILE(NI_Q8G_MR, t);
    switch (T - t) {
    case 5: NI_Q8G_TILE(5, t); break;
    case 4: NI_Q8G_TILE(4, t); break;
    case 3: NI_Q8G_TILE(3, t); break;
    case 2: NI_Q8G_TILE(2, t); break;
    case 1: NI_Q8G_TILE(1, t); break;
    default: break;
    }
#undef NI_Q8G_TILE
}

/* The same at 256 bits for the avx2 level: with AVX-VNNI (two VEX
 * dpbusd), or AVX2 alone (maddubs of two k-quads added in int16, exact
 * for codes ≤ 63: q4–q6 only, ≤ 2·2·63·127 = 32004; then one madd). */
#define Q8G_AVX2 __attribute__((target("avx2,fma,f16c")))
#define Q8G_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

#define Q8G_ATTR Q8G_AVXVNNI
#define Q8G_N(name) name##_avxvnni
#define Q8G_DOT2(acc, wa, xa, wb, xb) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, wa, xa), wb, xb)
#include "q8g_body.h"
#undef Q8G_ATTR
#undef Q8G_N
#undef Q8G_DOT2

#define Q8G_ATTR Q8G_AVX2
#define Q8G_N(name) name##_avx2
#define Q8G_DOT2(acc, wa, xa, wb, xb)                                                                                 \
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(wa, xa), _mm256_maddubs_epi16(wb, xb)), \
                                            _mm256_set1_epi16(1)))
#include "q8g_body.h"
#undef Q8G_ATTR
#undef Q8G_N
#undef Q8G_DOT2
