/* AVX2 fused GEMV of the floating-point quantized weights, nvfp4
 * (block_scale_k16_m128x4_v1) and fp8_e4m3fn_row_bf16 (row_scale_v1), for a
 * block of 1..NI_MT_TOKENS tokens.
 *
 * Exact-ordering scheme. Each weight is formed exactly in fp32 in registers
 * and only the dot-product accumulation and one final scaling round:
 *
 *   nvfp4:  w' = (2·e2m1(c)) · (e4m3(s_g) / 256)         exact (≤ 8 significant bits)
 *           y  = f32(f32(Σ w'·x · 128) / d_w)          = Σ e2m1·e4m3·x / d_w
 *   fp8:    w' = e4m3(c) / 256                          exact
 *           y  = f32(Σ w'·x) · f32(256 · s_row)         (256·s is exact)
 *
 * e4m3 bytes are converted through their fp16 bit pattern (sign to bit 15,
 * the 7 magnitude bits to bits 7..13: an fp16 worth e4m3 / 256, including
 * the subnormals, converted by F16C without any fp32 denormal); the NaN code
 * 0x7F/0xFF is mapped to an fp16 NaN. E2M1 codes go through a 16-entry byte
 * table (pshufb) giving the signed integer 2·e2m1.
 *
 * Per token the summation is: per chunk of 64 lanes (one nvfp4 group of
 * four 16-lane blocks, or 64 fp8 codes) two partial FMA sums s0 (lanes
 * 0..7 of each 16) and s1 (lanes 8..15) started from zero, added into the
 * token accumulator acc += s0 + s1; the result is hsum(acc) (fp8: plus the
 * partial chunk and a scalar tail). That sequence does not depend on how
 * many tokens share the pass, so token j's result is bit-identical for
 * every nt (the T = 1 GEMV is the nt = 1 case). */
#include "ni_cpu.h"
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

AVX2 INLINE float fp_hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    __m128 sh = _mm_movehdup_ps(lo);
    lo = _mm_add_ps(lo, sh);
    sh = _mm_movehl_ps(sh, lo);
    lo = _mm_add_ss(lo, sh);
    return _mm_cvtss_f32(lo);
}

/* 16-bit lanes each holding an e4m3 byte → fp16 bits worth e4m3 / 256
 * (NaN for magnitude 0x7F). */
AVX2 INLINE __m256i e4m3_to_h16(__m256i b) {
    const __m256i sgn = _mm256_set1_epi16(0x4000), m7f = _mm256_set1_epi16(0x7f), nan = _mm256_set1_epi16(0x7e00);
    __m256i t = _mm256_slli_epi16(b, 7);                  /* sign → bit 14, magnitude → bits 7..13 */
    __m256i h = _mm256_add_epi16(t, _mm256_and_si256(t, sgn)); /* carry the sign into bit 15 */
    __m256i isnan = _mm256_cmpeq_epi16(_mm256_and_si256(b, m7f), m7f);
    return _mm256_or_si256(h, _mm256_and_si256(isnan, nan));
}

AVX2 INLINE float e4m3_div256(uint8_t b) {
    unsigned short h = (unsigned short)(((b & 0x80) << 8) | ((b & 0x7f) << 7));
    if ((b & 0x7f) == 0x7f) h |= 0x7e00;
    return _cvtsh_ss(h);
}

/* ---- nvfp4 ---- */

/* e4m3 / 256 for every byte (block scales: four table loads per group are
 * cheaper than a vector conversion). Filled on first use. */
static float g_e4m3_256[256];
static int g_e4m3_256_ready;

AVX2 static void e4m3_256_init(void) {
    if (__atomic_load_n(&g_e4m3_256_ready, __ATOMIC_ACQUIRE)) return;
    for (int i = 0; i < 256; i++) g_e4m3_256[i] = e4m3_div256((uint8_t)i);
    __atomic_store_n(&g_e4m3_256_ready, 1, __ATOMIC_RELEASE);
}

AVX2 INLINE __m256 cvt8i(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }

/* ngroups groups of 64 lanes of one row: codes (32 bytes per group), the
 * row's 4 block-scale bytes of group g at scales + 512·g (the 128×4
 * swizzle), divisor d_w. out[j] for the token row x + j·ldx. */
AVX2 INLINE void nvfp4_nt(const uint8_t *codes, const uint8_t *scales, int64_t ngroups, float div, const float *x,
                          int64_t ldx, const int NT, float *out) {
    /* 2·e2m1 as signed bytes: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives */
    const __m128i tbl = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m256 acc[NI_MT_TOKENS];
    for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ngroups; g++) {
        const uint8_t *sg = scales + 512 * g;
        const uint8_t *cg = codes + 32 * g;
        const float *xg = x + 64 * g;
        __m256 s0[NI_MT_TOKENS], s1[NI_MT_TOKENS];
        for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm256_setzero_ps();
        for (int h = 0; h < 2; h++) {
            __m128i b = _mm_loadu_si128((const __m128i *)(cg + 16 * h));
            __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
            __m128i u[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)};
            for (int i = 0; i < 2; i++) { /* block 2h + i: lanes 16·(2h+i) .. +15 */
                __m128i q = _mm_shuffle_epi8(tbl, u[i]);
                __m256 sc = _mm256_broadcast_ss(g_e4m3_256 + sg[2 * h + i]);
                __m256 w0 = _mm256_mul_ps(cvt8i(q), sc), w1 = _mm256_mul_ps(cvt8i(_mm_srli_si128(q, 8)), sc);
                const float *xb = xg + 16 * (2 * h + i);
                for (int j = 0; j < NT; j++) {
                    s0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xb + j * ldx), s0[j]);
                    s1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + j * ldx + 8), s1[j]);
                }
            }
        }
        for (int j = 0; j < NT; j++) acc[j] = _mm256_add_ps(acc[j], _mm256_add_ps(s0[j], s1[j]));
    }
    for (int j = 0; j < NT; j++) out[j] = (fp_hsum(acc[j]) * 128.0f) / div;
}

AVX2 void ni_dot_nvfp4_multi_avx2(const uint8_t *codes, const uint8_t *scales, int64_t ngroups, float div,
                                  const float *x, int64_t ldx, int nt, float *out) {
    e4m3_256_init();
    switch (nt) {
    case 1: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 1, out); return;
    case 2: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 2, out); return;
    case 3: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 3, out); return;
    default: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 4, out); return;
    }
}

/* ---- fp8 row ---- */

/* 16 codes → two vectors of e4m3 / 256 (lanes 0..7, 8..15). */
AVX2 INLINE void fp8_dec16(const uint8_t *c, __m256 *w0, __m256 *w1) {
    __m256i h = e4m3_to_h16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)c)));
    *w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    *w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

AVX2 INLINE void fp8_nt(const uint8_t *codes, float scale, int64_t k, const float *x, int64_t ldx, const int NT,
                        float *out) {
    __m256 acc[NI_MT_TOKENS], s0[NI_MT_TOKENS], s1[NI_MT_TOKENS];
    for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= k; i += 64) {
        for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm256_setzero_ps();
        for (int b = 0; b < 4; b++) {
            __m256 w0, w1;
            fp8_dec16(codes + i + 16 * b, &w0, &w1);
            for (int j = 0; j < NT; j++) {
                s0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + j * ldx + i + 16 * b), s0[j]);
                s1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + j * ldx + i + 16 * b + 8), s1[j]);
            }
        }
        for (int j = 0; j < NT; j++) acc[j] = _mm256_add_ps(acc[j], _mm256_add_ps(s0[j], s1[j]));
    }
    if (i + 16 <= k) { /* partial chunk: whole 16-lane blocks */
        for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm256_setzero_ps();
        for (; i + 16 <= k; i += 16) {
            __m256 w0, w1;
            fp8_dec16(codes + i, &w0, &w1);
            for (int j = 0; j < NT; j++) {
                s0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + j * ldx + i), s0[j]);
                s1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + j * ldx + i + 8), s1[j]);
            }
        }
        for (int j = 0; j < NT; j++) acc[j] = _mm256_add_ps(acc[j], _mm256_add_ps(s0[j], s1[j]));
    }
    float tail[16];
    int nr = (int)(k - i);
    for (int r = 0; r < nr; r++) tail[r] = e4m3_div256(codes[i + r]);
    float s256 = scale * 256.0f;
    for (int j = 0; j < NT; j++) {
        const float *xj = x + j * ldx + i;
        float s = fp_hsum(acc[j]);
        for (int r = 0; r < nr; r++) s += tail[r] * xj[r];
        out[j] = s * s256;
    }
}

AVX2 void ni_dot_fp8row_multi_avx2(const uint8_t *codes, float scale, int64_t k, const float *x, int64_t ldx, int nt,
                                   float *out) {
    switch (nt) {
    case 1: fp8_nt(codes, scale, k, x, ldx, 1, out); return;
    case 2: fp8_nt(codes, scale, k, x, ldx, 2, out); return;
    case 3: fp8_nt(codes, scale, k, x, ldx, 3, out); return;
    default: fp8_nt(codes, scale, k, x, ldx, 4, out); return;
    }
}
