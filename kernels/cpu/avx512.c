/* AVX-512 (F/BW/DQ/VL) + FMA + F16C bodies of the hot kernels: the fp32
 * primitives (dot, dot4, axpy, scal), bf16 rows, the fused T = 1 / small-T
 * GEMV of every quantized weight format (q4/q5/q6/q8, bf16, nvfp4, fp8-row)
 * and the prefill GEMM micro-kernel widened to two 16-column panels.
 *
 * Compiled with a function-level target attribute, like avx2.c, so the
 * package builds for baseline x86-64 and these run only after runtime
 * dispatch (ni_cpu_best_isa: CPUID + XGETBV, NI_ISA_AVX512). Kernels without
 * an AVX-512 body fall back to the AVX2 one (simd.c, weights.c).
 *
 * Numerics follow the AVX2 bodies' schemes with 16-lane vectors: weights
 * are formed exactly in fp32 in registers, only the summation order differs
 * (16-lane partial sums, masked loads for remainders instead of a scalar
 * tail). Each multi-token GEMV keeps a per-token operation sequence that does
 * not depend on nt, so token j's result is bit-identical for every nt and the
 * T = 1 GEMV is the nt = 1 case. The GEMM micro-kernel computes every output
 * exactly like ni_gemm_6x16_avx2 (same FMA chain per element, same sub-block
 * order), so prefill results equal the AVX2 level's bit for bit. */
#include "ni_cpu.h"
#include "perm_high.h"
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

/* Mask of the low r (< 16) lanes. */
#define MASK16(r) ((__mmask16)((1u << (r)) - 1u))

AVX512 INLINE float hsum16(__m512 v) {
    __m256 a = _mm512_castps512_ps256(v), b = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    a = _mm256_add_ps(a, b);
    __m128 lo = _mm256_castps256_ps128(a), hi = _mm256_extractf128_ps(a, 1);
    lo = _mm_add_ps(lo, hi);
    __m128 sh = _mm_movehdup_ps(lo);
    lo = _mm_add_ps(lo, sh);
    sh = _mm_movehl_ps(sh, lo);
    lo = _mm_add_ss(lo, sh);
    return _mm_cvtss_f32(lo);
}

/* ---- fp32 primitives ---- */

AVX512 float ni_dot_avx512(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = MASK16(n - i);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return hsum16(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

AVX512 void ni_dot4_avx512(const float *w, const float *x, int64_t ldx, int64_t n, float *out) {
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 wv = _mm512_loadu_ps(w + i);
        s0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x0 + i), s0);
        s1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x1 + i), s1);
        s2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x2 + i), s2);
        s3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x3 + i), s3);
    }
    if (i < n) {
        __mmask16 m = MASK16(n - i);
        __m512 wv = _mm512_maskz_loadu_ps(m, w + i);
        s0 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x0 + i), s0);
        s1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x1 + i), s1);
        s2 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x2 + i), s2);
        s3 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x3 + i), s3);
    }
    out[0] = hsum16(s0);
    out[1] = hsum16(s1);
    out[2] = hsum16(s2);
    out[3] = hsum16(s3);
}

AVX512 void ni_axpy_avx512(float a, const float *x, float *y, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = MASK16(n - i);
        _mm512_mask_storeu_ps(y + i, m,
                              _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* y[d] = fma(a[m−1], X[m−1][d], … fma(a[0], X[0][d], y[d])) for d < n: m
 * axpys in order, each y element kept in a register across them (the same
 * per-element FMA sequence as m calls of ni_axpy_avx512). */
AVX512 void ni_axpy_rows_avx512(const float *a, int m, const float *X, int64_t ldx, float *y, int64_t n) {
    int64_t d = 0;
    for (; d + 128 <= n; d += 128) {
        __m512 acc[8];
        for (int k = 0; k < 8; k++) acc[k] = _mm512_loadu_ps(y + d + 16 * k);
        for (int j = 0; j < m; j++) {
            __m512 av = _mm512_set1_ps(a[j]);
            const float *x = X + j * ldx + d;
            for (int k = 0; k < 8; k++) acc[k] = _mm512_fmadd_ps(av, _mm512_loadu_ps(x + 16 * k), acc[k]);
        }
        for (int k = 0; k < 8; k++) _mm512_storeu_ps(y + d + 16 * k, acc[k]);
    }
    for (; d + 16 <= n; d += 16) {
        __m512 acc = _mm512_loadu_ps(y + d);
        for (int j = 0; j < m; j++) acc = _mm512_fmadd_ps(_mm512_set1_ps(a[j]), _mm512_loadu_ps(X + j * ldx + d), acc);
        _mm512_storeu_ps(y + d, acc);
    }
    if (d < n) {
        __mmask16 mk = MASK16(n - d);
        __m512 acc = _mm512_maskz_loadu_ps(mk, y + d);
        for (int j = 0; j < m; j++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(a[j]), _mm512_maskz_loadu_ps(mk, X + j * ldx + d), acc);
        _mm512_mask_storeu_ps(y + d, mk, acc);
    }
}

/* ni_gdn_decay_kv / ni_gdn_update_o (ni_cpu.h): 128 columns a block, the
 * result (and δ) in registers across the dk rows; full blocks with plain
 * loads and stores (masked stores are slow on some cores), the last partial
 * block masked, as ni_scal_avx512 / ni_axpy_avx512's remainders. */
AVX512 static inline __mmask16 gdn_mask(int64_t d, int64_t dv) {
    return d + 16 <= dv ? (__mmask16)0xffff : d < dv ? MASK16(dv - d) : (__mmask16)0;
}
#define NI_LD(M, P) (full ? _mm512_loadu_ps(P) : _mm512_maskz_loadu_ps(M, P))
#define NI_ST(M, P, V) (full ? _mm512_storeu_ps(P, V) : _mm512_mask_storeu_ps(P, M, V))

AVX512 static inline __attribute__((always_inline)) void gdn_kv_block(const int full, float *S, int dk, int64_t dv,
                                                                     int64_t d, __m512 dc, const float *k, float *kv) {
    __m512 acc[8];
    __mmask16 m[8];
    for (int v = 0; v < 8; v++) acc[v] = _mm512_setzero_ps(), m[v] = gdn_mask(d + 16 * v, dv);
    for (int i = 0; i < dk; i++) {
        float *row = S + (int64_t)i * dv + d;
        const __m512 ki = _mm512_set1_ps(k[i]);
        for (int v = 0; v < 8; v++) {
            __m512 sv = _mm512_mul_ps(dc, NI_LD(m[v], row + 16 * v));
            NI_ST(m[v], row + 16 * v, sv);
            acc[v] = _mm512_fmadd_ps(ki, sv, acc[v]);
        }
    }
    for (int v = 0; v < 8; v++) NI_ST(m[v], kv + d + 16 * v, acc[v]);
}

AVX512 void ni_gdn_decay_kv_avx512(float *S, int dk, int64_t dv, float decay, const float *k, float *kv) {
    const __m512 dc = _mm512_set1_ps(decay);
    int64_t d = 0;
    for (; d + 128 <= dv; d += 128) gdn_kv_block(1, S, dk, dv, d, dc, k, kv);
    if (d < dv) gdn_kv_block(0, S, dk, dv, d, dc, k, kv);
}

AVX512 static inline __attribute__((always_inline)) void gdn_o_block(const int full, float *S, int dk, int64_t dv,
                                                                    int64_t d, const float *k, const float *delta,
                                                                    const float *q, float *o) {
    __m512 acc[8], dl[8];
    __mmask16 m[8];
    for (int v = 0; v < 8; v++) {
        m[v] = gdn_mask(d + 16 * v, dv);
        acc[v] = _mm512_setzero_ps();
        dl[v] = NI_LD(m[v], delta + d + 16 * v);
    }
    for (int i = 0; i < dk; i++) {
        float *row = S + (int64_t)i * dv + d;
        const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
        for (int v = 0; v < 8; v++) {
            __m512 sv = _mm512_fmadd_ps(ki, dl[v], NI_LD(m[v], row + 16 * v));
            NI_ST(m[v], row + 16 * v, sv);
            acc[v] = _mm512_fmadd_ps(qi, sv, acc[v]);
        }
    }
    for (int v = 0; v < 8; v++) NI_ST(m[v], o + d + 16 * v, acc[v]);
}

AVX512 void ni_gdn_update_o_avx512(float *S, int dk, int64_t dv, const float *k, const float *delta, const float *q,
                                   float *o) {
    int64_t d = 0;
    for (; d + 128 <= dv; d += 128) gdn_o_block(1, S, dk, dv, d, k, delta, q, o);
    if (d < dv) gdn_o_block(0, S, dk, dv, d, k, delta, q, o);
}
#undef NI_LD
#undef NI_ST

AVX512 void ni_scal_avx512(float a, float *y, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(av, _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = MASK16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(av, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

AVX512 float ni_sumsq_avx512(const float *x, int64_t n) { return ni_dot_avx512(x, x, n); }

/* ---- bf16 ---- */

AVX512 INLINE __m512 load_bf16x16(const uint16_t *w) {
    __m256i h = _mm256_loadu_si256((const __m256i *)w);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512 INLINE __m512 load_bf16x16_mask(const uint16_t *w, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, w);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512 void ni_bf16_to_f32_row_avx512(const uint16_t *w, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load_bf16x16(w + i));
    if (i < n) {
        __mmask16 m = MASK16(n - i);
        _mm512_mask_storeu_ps(out + i, m, load_bf16x16_mask(w + i, m));
    }
}

/* bf16 row against NT token rows: per token two partial FMA sums (lanes
 * 0..15 and 16..31 of each 32), a masked remainder, one reduction. */
AVX512 INLINE void dot_bf16_nt(const uint16_t *w, const float *x, int64_t ldx, int64_t n, const int NT, float *out) {
    __m512 s0[NI_MT_TOKENS], s1[NI_MT_TOKENS];
    for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 w0 = load_bf16x16(w + i), w1 = load_bf16x16(w + i + 16);
        for (int j = 0; j < NT; j++) {
            s0[j] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + j * ldx + i), s0[j]);
            s1[j] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + j * ldx + i + 16), s1[j]);
        }
    }
    if (i + 16 <= n) {
        __m512 w0 = load_bf16x16(w + i);
        for (int j = 0; j < NT; j++) s0[j] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + j * ldx + i), s0[j]);
        i += 16;
    }
    if (i < n) {
        __mmask16 m = MASK16(n - i);
        __m512 w1 = load_bf16x16_mask(w + i, m);
        for (int j = 0; j < NT; j++) s1[j] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m, x + j * ldx + i), s1[j]);
    }
    for (int j = 0; j < NT; j++) out[j] = hsum16(_mm512_add_ps(s0[j], s1[j]));
}

AVX512 void ni_dot_bf16_multi_avx512(const uint16_t *w, const float *x, int64_t ldx, int64_t n, int nt, float *out) {
    switch (nt) {
    case 1: dot_bf16_nt(w, x, ldx, n, 1, out); return;
    case 2: dot_bf16_nt(w, x, ldx, n, 2, out); return;
    case 3: dot_bf16_nt(w, x, ldx, n, 3, out); return;
    default: dot_bf16_nt(w, x, ldx, n, 4, out); return;
    }
}

AVX512 float ni_dot_bf16_avx512(const uint16_t *w, const float *x, int64_t n) {
    float out;
    dot_bf16_nt(w, x, 0, n, 1, &out);
    return out;
}

/* ---- grouped integer (q4/q5/q6/q8) ---- */

/* Signed codes of one grouped-integer group as 16-byte vectors of 16 lanes
 * (the same decoder as avx2.c's dec_codes): 4 vectors for 4/5/6 bits, 2 for
 * 8 bits. */
AVX512 INLINE int dec_codes(int bits, const uint8_t *base, const uint8_t *high, __m128i *out) {
    if (bits == 8) {
        out[0] = _mm_loadu_si128((const __m128i *)base);
        out[1] = _mm_loadu_si128((const __m128i *)(base + 16));
        return 2;
    }
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i sign = _mm_set1_epi8((char)(1 << (bits - 1)));
    const __m128i bit1 = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 1, 2, 4, 8, 16, 32, 64, (char)128);
    const __m128i b6lo = _mm_setr_epi8(1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64);
    const __m128i b6hi = _mm_setr_epi8(2, 8, 32, (char)128, 2, 8, 32, (char)128, 2, 8, 32, (char)128, 2, 8, 32, (char)128);
    const __m128i x10 = _mm_set1_epi8(0x10), x20 = _mm_set1_epi8(0x20);
    const __m128i sh5 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i sh6 = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m128i hv = _mm_setzero_si128();
    if (bits == 5) hv = _mm_loadl_epi64((const __m128i *)high);
    if (bits == 6) hv = _mm_loadu_si128((const __m128i *)high);
    for (int h = 0; h < 2; h++) {
        __m128i b = _mm_loadu_si128((const __m128i *)(base + 16 * h));
        __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
        __m128i u[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)};
        for (int j = 0; j < 2; j++) {
            int lane0 = 32 * h + 16 * j;
            if (bits == 5) {
                __m128i idx = _mm_add_epi8(sh5, _mm_set1_epi8((char)(lane0 / 8)));
                __m128i hb = _mm_shuffle_epi8(hv, idx);
                __m128i on = _mm_cmpeq_epi8(_mm_and_si128(hb, bit1), bit1);
                u[j] = _mm_or_si128(u[j], _mm_and_si128(on, x10));
            } else if (bits == 6) {
                __m128i idx = _mm_add_epi8(sh6, _mm_set1_epi8((char)(lane0 / 4)));
                __m128i hb = _mm_shuffle_epi8(hv, idx);
                __m128i on4 = _mm_cmpeq_epi8(_mm_and_si128(hb, b6lo), b6lo);
                __m128i on5 = _mm_cmpeq_epi8(_mm_and_si128(hb, b6hi), b6hi);
                u[j] = _mm_or_si128(u[j], _mm_or_si128(_mm_and_si128(on4, x10), _mm_and_si128(on5, x20)));
            }
            out[2 * h + j] = _mm_sub_epi8(_mm_xor_si128(u[j], sign), sign);
        }
    }
    return 4;
}

AVX512 INLINE __m512 cvt16(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)); }

/* One group g into acc[j] += scale_g · (s0 + s1), s0 the FMA sum of the
 * even 16-lane chunks, s1 of the odd ones. */
AVX512 INLINE void group_nt(const int bits, const uint8_t *base, const uint8_t *high, __m512 sc, int64_t g,
                            const float *x, int64_t ldx, const int NT, __m512 *acc) {
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0, lanes = bits == 8 ? 32 : 64;
    __m128i q[4];
    int n = dec_codes(bits, base + 32 * g, high + hb * g, q);
    const float *xg = x + lanes * g;
    __m512 s0[NI_MT_TOKENS], s1[NI_MT_TOKENS];
    __m512 w0 = cvt16(q[0]), w1 = cvt16(q[1]);
    for (int j = 0; j < NT; j++) {
        s0[j] = _mm512_mul_ps(w0, _mm512_loadu_ps(xg + j * ldx));
        s1[j] = _mm512_mul_ps(w1, _mm512_loadu_ps(xg + j * ldx + 16));
    }
    if (n == 4) {
        __m512 w2 = cvt16(q[2]), w3 = cvt16(q[3]);
        for (int j = 0; j < NT; j++) {
            s0[j] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(xg + j * ldx + 32), s0[j]);
            s1[j] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(xg + j * ldx + 48), s1[j]);
        }
    }
    for (int j = 0; j < NT; j++) acc[j] = _mm512_fmadd_ps(_mm512_add_ps(s0[j], s1[j]), sc, acc[j]);
}

/* The fp16 scales of groups g0 … g0 + n − 1 (n ≤ 16) as fp32 lanes, one load
 * and one conversion per 16 groups; scale_lane broadcasts lane i (the same
 * exact value as a scalar _cvtsh_ss of that group's scale). */
AVX512 INLINE __m512 scales16(const uint8_t *scales, int64_t g0, int64_t n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1u), scales + 2 * g0));
}
AVX512 INLINE __m512 scale_lane(__m512 sc16, int64_t i) { return _mm512_permutexvar_ps(_mm512_set1_epi32((int)i), sc16); }

/* Fused decode + dot of ngroups whole groups against NT token rows; even
 * groups accumulate into acc0, odd ones into acc1 (two FMA chains). */
AVX512 INLINE void dot_groups_nt(const int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                 int64_t ngroups, const float *x, int64_t ldx, const int NT, float *out) {
    __m512 acc0[NI_MT_TOKENS], acc1[NI_MT_TOKENS];
    for (int j = 0; j < NT; j++) acc0[j] = acc1[j] = _mm512_setzero_ps();
    for (int64_t g0 = 0; g0 < ngroups; g0 += 16) { /* blocks of 16 groups: even groups stay even */
        const int64_t n = ngroups - g0 < 16 ? ngroups - g0 : 16;
        const __m512 sc16 = scales16(scales, g0, n);
        int64_t i = 0;
        for (; i + 2 <= n; i += 2) {
            group_nt(bits, base, high, scale_lane(sc16, i), g0 + i, x, ldx, NT, acc0);
            group_nt(bits, base, high, scale_lane(sc16, i + 1), g0 + i + 1, x, ldx, NT, acc1);
        }
        if (i < n) group_nt(bits, base, high, scale_lane(sc16, i), g0 + i, x, ldx, NT, acc0);
    }
    for (int j = 0; j < NT; j++) out[j] = hsum16(_mm512_add_ps(acc0[j], acc1[j]));
}

#define NI_DG_NT(B, NT) dot_groups_nt(B, base, high, scales, ngroups, x, ldx, NT, out)
#define NI_DG_BITS(B)                                                                                                 \
    switch (nt) {                                                                                                     \
    case 1: NI_DG_NT(B, 1); return;                                                                                   \
    case 2: NI_DG_NT(B, 2); return;                                                                                   \
    case 3: NI_DG_NT(B, 3); return;                                                                                   \
    default: NI_DG_NT(B, 4); return;                                                                                  \
    }

AVX512 void ni_dot_groups_multi_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                       int64_t ngroups, const float *x, int64_t ldx, int nt, float *out) {
    switch (bits) {
    case 4: NI_DG_BITS(4);
    case 5: NI_DG_BITS(5);
    case 6: NI_DG_BITS(6);
    default: NI_DG_BITS(8);
    }
}
#undef NI_DG_NT
#undef NI_DG_BITS

/* NR ≤ 4 consecutive q8 rows of dot_groups_nt at one token, each row
 * computed exactly as alone (group_nt's products, sum and scale FMA, the
 * same two chains): the token's 32 values are loaded once a group for all
 * rows, and the rows pf rows further on are prefetched one cache line per
 * 64 bytes of each plane consumed (pf = 0: none; ni_q8p_rows_vnni_vbmi in avx2.c has the
 * same scheme). */
#define NI_DGR_ROWS 4
AVX512 INLINE void dot_q8_rows(const int NR, const uint8_t *base, const uint8_t *scales, ni_row_block rb,
                               int64_t ngroups, const float *x, ni_pf pf, float *out) {
    const uint8_t *pb = base + pf.rows * rb.base, *ps = scales + pf.rows * rb.scales;
    __m512 acc0[NI_DGR_ROWS], acc1[NI_DGR_ROWS], sc16[NI_DGR_ROWS];
    for (int r = 0; r < NR; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
#define NI_DGR_STEP(G, I, ACC)                                                                                        \
    {                                                                                                                 \
        const int64_t g = (G);                                                                                        \
        ni_prefetch_step(pf, NR, g, pb, 32, NULL, 0, ps, 2);                                                          \
        const __m512 x0 = _mm512_loadu_ps(x + 32 * g), x1 = _mm512_loadu_ps(x + 32 * g + 16);                       \
        for (int r = 0; r < NR; r++) {                                                                                \
            const uint8_t *bp = base + r * rb.base + 32 * g;                                                          \
            __m512 s0 = _mm512_mul_ps(cvt16(_mm_loadu_si128((const __m128i *)bp)), x0);                               \
            __m512 s1 = _mm512_mul_ps(cvt16(_mm_loadu_si128((const __m128i *)(bp + 16))), x1);                        \
            ACC[r] = _mm512_fmadd_ps(_mm512_add_ps(s0, s1), scale_lane(sc16[r], I), ACC[r]);                          \
        }                                                                                                             \
    }
    for (int64_t g0 = 0; g0 < ngroups; g0 += 16) {
        const int64_t n = ngroups - g0 < 16 ? ngroups - g0 : 16;
        for (int r = 0; r < NR; r++) sc16[r] = scales16(scales + r * rb.scales, g0, n);
        int64_t i = 0;
        for (; i + 2 <= n; i += 2) {
            NI_DGR_STEP(g0 + i, i, acc0)
            NI_DGR_STEP(g0 + i + 1, i + 1, acc1)
        }
        if (i < n) NI_DGR_STEP(g0 + i, i, acc0)
    }
#undef NI_DGR_STEP
    for (int r = 0; r < NR; r++) out[r] = hsum16(_mm512_add_ps(acc0[r], acc1[r]));
}

AVX512 void ni_dot_q8_rows_avx512(const uint8_t *base, const uint8_t *scales, ni_row_block rb, int64_t ngroups,
                                  const float *x, ni_pf pf, float *out) {
    for (int r0 = 0; r0 < rb.n; r0 += NI_DGR_ROWS) {
        const uint8_t *b = base + r0 * rb.base, *s = scales + r0 * rb.scales;
        switch (rb.n - r0 < NI_DGR_ROWS ? rb.n - r0 : NI_DGR_ROWS) {
        case 1: dot_q8_rows(1, b, s, rb, ngroups, x, pf, out + r0); break;
        case 2: dot_q8_rows(2, b, s, rb, ngroups, x, pf, out + r0); break;
        case 3: dot_q8_rows(3, b, s, rb, ngroups, x, pf, out + r0); break;
        default: dot_q8_rows(4, b, s, rb, ngroups, x, pf, out + r0); break;
        }
    }
}

/* ---- grouped integer, permuted lanes (q4/q5/q6 with BMI2) ----
 * The T ≤ 16 fp32-activation GEMV on the lane order of the int8 path's
 * permuted layout (avx2.c, q8p): each 64-value group of the activation rows
 * is stored even lanes first (x0, x2, …, x62, x1, x3, …, x63; ni_matmul_act
 * permutes the rows once per matmul), so a group's 64 signed codes come out
 * of its 32 base bytes with one nibble split (low nibbles = even lanes, high
 * = odd) and its q5/q6 high bits as byte masks by pext, with no per-lane
 * shuffles. Per group: the four 16-lane code chunks convert to fp32 and
 * meet the matching activation chunks in two FMA chains (chunks 0,2 and
 * 1,3), then acc = fma(s0 + s1, scale, acc) with two accumulators
 * (even / odd groups) — the per-token sequence of dot_groups_nt above with
 * another pairing of the lanes, independent of nt. ni_dot_groups_perm_vbmi
 * is the same kernel with the high bits by vpmultishiftqb (perm_high.h):
 * the same codes, so bit-identical results. */
#define AVX512P __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi2")))
#define AVX512PV __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi2,avx512vbmi")))

/* The 32 base bytes of group g as 64 unsigned low nibbles, permuted lanes. */
AVX512P INLINE __m512i perm_low(const uint8_t *base, int64_t g) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i b = _mm256_loadu_si256((const __m256i *)(base + 32 * g));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m4)),
                              _mm256_and_si256(_mm256_srli_epi16(b, 4), m4), 1);
}

/* Unsigned bits-bit codes → signed (code − 2^(bits−1)). */
AVX512P INLINE __m512i perm_signed(const int bits, __m512i wv) {
    const __m512i sg = _mm512_set1_epi8((char)(1 << (bits - 1)));
    return _mm512_sub_epi8(_mm512_xor_si512(wv, sg), sg);
}

AVX512P INLINE __m512i perm_codes(const int bits, const uint8_t *base, const uint8_t *high, int64_t g) {
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;
    __m512i wv = perm_low(base, g);
    if (bits == 5) {
        uint64_t h;
        memcpy(&h, high + hb * g, 8);
        __mmask64 m = _pext_u64(h, 0x5555555555555555ull) | (_pext_u64(h, 0xaaaaaaaaaaaaaaaaull) << 32);
        wv = _mm512_mask_add_epi8(wv, m, wv, _mm512_set1_epi8(0x10));
    } else if (bits == 6) {
        uint64_t h0, h1;
        memcpy(&h0, high + hb * g, 8);
        memcpy(&h1, high + hb * g + 8, 8);
        uint64_t e4 = _pext_u64(h0, 0x1111111111111111ull) | (_pext_u64(h1, 0x1111111111111111ull) << 16);
        uint64_t e5 = _pext_u64(h0, 0x2222222222222222ull) | (_pext_u64(h1, 0x2222222222222222ull) << 16);
        uint64_t o4 = _pext_u64(h0, 0x4444444444444444ull) | (_pext_u64(h1, 0x4444444444444444ull) << 16);
        uint64_t o5 = _pext_u64(h0, 0x8888888888888888ull) | (_pext_u64(h1, 0x8888888888888888ull) << 16);
        wv = _mm512_mask_add_epi8(wv, e4 | (o4 << 32), wv, _mm512_set1_epi8(0x10));
        wv = _mm512_mask_add_epi8(wv, e5 | (o5 << 32), wv, _mm512_set1_epi8(0x20));
    }
    return perm_signed(bits, wv);
}

/* The same codes with the high bits by vpmultishiftqb (perm_high.h). */
AVX512PV INLINE __m512i perm_codes_vbmi(const int bits, const uint8_t *base, const uint8_t *high, int64_t g) {
    __m512i wv = perm_low(base, g);
    if (bits != 4) wv = ni_perm_or_high_vbmi(bits, wv, high + (bits == 5 ? 8 : 16) * g);
    return perm_signed(bits, wv);
}

#define NI_PERM_GROUP(CODES, G, SC, ACC)                                                                              \
    {                                                                                                                 \
        const int64_t g = (G);                                                                                        \
        const __m512 sc = (SC);                                                                                       \
        __m512i wv = CODES(bits, base, high, g);                                                                      \
        __m512 w0 = cvt16(_mm512_castsi512_si128(wv)), w1 = cvt16(_mm512_extracti32x4_epi32(wv, 1));                  \
        __m512 w2 = cvt16(_mm512_extracti32x4_epi32(wv, 2)), w3 = cvt16(_mm512_extracti32x4_epi32(wv, 3));            \
        const float *xg = xp + 64 * g;                                                                                \
        for (int j = 0; j < NT; j++) {                                                                                \
            const float *x = xg + j * ldx;                                                                            \
            __m512 s0 = _mm512_mul_ps(w0, _mm512_loadu_ps(x)), s1 = _mm512_mul_ps(w1, _mm512_loadu_ps(x + 16));       \
            s0 = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + 32), s0);                                                    \
            s1 = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + 48), s1);                                                    \
            ACC[j] = _mm512_fmadd_ps(_mm512_add_ps(s0, s1), sc, ACC[j]);                                              \
        }                                                                                                             \
    }

#define NI_PERM_GROUPS_BODY(CODES)                                                                                    \
    __m512 acc0[NI_MT_TOKENS], acc1[NI_MT_TOKENS];                                                                    \
    for (int j = 0; j < NT; j++) acc0[j] = acc1[j] = _mm512_setzero_ps();                                             \
    for (int64_t g0 = 0; g0 < ngroups; g0 += 16) {                                                                    \
        const int64_t n = ngroups - g0 < 16 ? ngroups - g0 : 16;                                                      \
        const __m512 sc16 = scales16(scales, g0, n);                                                                  \
        int64_t i = 0;                                                                                                \
        for (; i + 2 <= n; i += 2) {                                                                                  \
            NI_PERM_GROUP(CODES, g0 + i, scale_lane(sc16, i), acc0)                                                   \
            NI_PERM_GROUP(CODES, g0 + i + 1, scale_lane(sc16, i + 1), acc1)                                           \
        }                                                                                                             \
        if (i < n) NI_PERM_GROUP(CODES, g0 + i, scale_lane(sc16, i), acc0)                                            \
    }                                                                                                                 \
    for (int j = 0; j < NT; j++) out[j] = hsum16(_mm512_add_ps(acc0[j], acc1[j]));

AVX512P INLINE void perm_groups_nt(const int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                   int64_t ngroups, const float *xp, int64_t ldx, const int NT, float *out) {
    NI_PERM_GROUPS_BODY(perm_codes)
}

AVX512PV INLINE void perm_groups_nt_vbmi(const int bits, const uint8_t *base, const uint8_t *high,
                                        const uint8_t *scales, int64_t ngroups, const float *xp, int64_t ldx,
                                        const int NT, float *out) {
    NI_PERM_GROUPS_BODY(perm_codes_vbmi)
}
#undef NI_PERM_GROUPS_BODY
#undef NI_PERM_GROUP

#define NI_PG_BITS(B)                                                                                                 \
    switch (nt) {                                                                                                     \
    case 1: NI_PG_NT(B, 1); return;                                                                                   \
    case 2: NI_PG_NT(B, 2); return;                                                                                   \
    case 3: NI_PG_NT(B, 3); return;                                                                                   \
    default: NI_PG_NT(B, 4); return;                                                                                  \
    }

#define NI_PG_NT(B, NT) perm_groups_nt(B, base, high, scales, ngroups, xp, ldx, NT, out)
AVX512P void ni_dot_groups_perm_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                       int64_t ngroups, const float *xp, int64_t ldx, int nt, float *out) {
    switch (bits) {
    case 4: NI_PG_BITS(4);
    case 5: NI_PG_BITS(5);
    default: NI_PG_BITS(6);
    }
}
#undef NI_PG_NT

#define NI_PG_NT(B, NT) perm_groups_nt_vbmi(B, base, high, scales, ngroups, xp, ldx, NT, out)
AVX512PV void ni_dot_groups_perm_vbmi(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                      int64_t ngroups, const float *xp, int64_t ldx, int nt, float *out) {
    switch (bits) {
    case 4: NI_PG_BITS(4);
    case 5: NI_PG_BITS(5);
    default: NI_PG_BITS(6);
    }
}
#undef NI_PG_NT
#undef NI_PG_BITS

/* ---- nvfp4 / fp8-row (the scheme of avx2_fp.c) ---- */

/* e4m3 byte → fp16 bits worth e4m3 / 256 (NaN for magnitude 0x7F), 16 lanes. */
AVX512 INLINE __m256i e4m3_to_h16(__m256i b) {
    const __m256i sgn = _mm256_set1_epi16(0x4000), m7f = _mm256_set1_epi16(0x7f), nan = _mm256_set1_epi16(0x7e00);
    __m256i t = _mm256_slli_epi16(b, 7);
    __m256i h = _mm256_add_epi16(t, _mm256_and_si256(t, sgn));
    __m256i isnan = _mm256_cmpeq_epi16(_mm256_and_si256(b, m7f), m7f);
    return _mm256_or_si256(h, _mm256_and_si256(isnan, nan));
}

static float g_e4m3_256x[256];
static int g_e4m3_256x_ready;

AVX512 static void e4m3_256_init512(void) {
    if (__atomic_load_n(&g_e4m3_256x_ready, __ATOMIC_ACQUIRE)) return;
    for (int i = 0; i < 256; i++) {
        unsigned short h = (unsigned short)(((i & 0x80) << 8) | ((i & 0x7f) << 7));
        if ((i & 0x7f) == 0x7f) h |= 0x7e00;
        g_e4m3_256x[i] = _cvtsh_ss(h);
    }
    __atomic_store_n(&g_e4m3_256x_ready, 1, __ATOMIC_RELEASE);
}

AVX512 INLINE void nvfp4_nt(const uint8_t *codes, const uint8_t *scales, int64_t ngroups, float div, const float *x,
                            int64_t ldx, const int NT, float *out) {
    const __m128i tbl = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m512 acc[NI_MT_TOKENS];
    for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ngroups; g++) {
        const uint8_t *sg = scales + 512 * g;
        const uint8_t *cg = codes + 32 * g;
        const float *xg = x + 64 * g;
        __m512 s[2][NI_MT_TOKENS];
        for (int h = 0; h < 2; h++) {
            __m128i b = _mm_loadu_si128((const __m128i *)(cg + 16 * h));
            __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
            __m128i u[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)};
            for (int i = 0; i < 2; i++) { /* block 2h + i; s[i] takes the even / odd blocks */
                __m512 w = _mm512_mul_ps(cvt16(_mm_shuffle_epi8(tbl, u[i])), _mm512_set1_ps(g_e4m3_256x[sg[2 * h + i]]));
                const float *xb = xg + 16 * (2 * h + i);
                for (int j = 0; j < NT; j++) {
                    __m512 xv = _mm512_loadu_ps(xb + j * ldx);
                    s[i][j] = h == 0 ? _mm512_mul_ps(w, xv) : _mm512_fmadd_ps(w, xv, s[i][j]);
                }
            }
        }
        for (int j = 0; j < NT; j++) acc[j] = _mm512_add_ps(acc[j], _mm512_add_ps(s[0][j], s[1][j]));
    }
    for (int j = 0; j < NT; j++) out[j] = (hsum16(acc[j]) * 128.0f) / div;
}

AVX512 void ni_dot_nvfp4_multi_avx512(const uint8_t *codes, const uint8_t *scales, int64_t ngroups, float div,
                                      const float *x, int64_t ldx, int nt, float *out) {
    e4m3_256_init512();
    switch (nt) {
    case 1: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 1, out); return;
    case 2: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 2, out); return;
    case 3: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 3, out); return;
    default: nvfp4_nt(codes, scales, ngroups, div, x, ldx, 4, out); return;
    }
}

/* 16 fp8 codes (the low r of them when masked; the rest read as 0) → 16
 * floats worth e4m3 / 256. */
AVX512 INLINE __m512 fp8_dec16(const uint8_t *c) {
    return _mm512_cvtph_ps(e4m3_to_h16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)c))));
}
AVX512 INLINE __m512 fp8_dec16_mask(const uint8_t *c, __mmask16 m) {
    return _mm512_cvtph_ps(e4m3_to_h16(_mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, c))));
}

AVX512 INLINE void fp8_nt(const uint8_t *codes, float scale, int64_t k, const float *x, int64_t ldx, const int NT,
                          float *out) {
    __m512 acc[NI_MT_TOKENS], s0[NI_MT_TOKENS], s1[NI_MT_TOKENS];
    for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= k; i += 64) {
        for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm512_setzero_ps();
        for (int b = 0; b < 4; b++) {
            __m512 w = fp8_dec16(codes + i + 16 * b);
            for (int j = 0; j < NT; j++) {
                __m512 xv = _mm512_loadu_ps(x + j * ldx + i + 16 * b);
                if (b & 1) s1[j] = _mm512_fmadd_ps(w, xv, s1[j]);
                else s0[j] = _mm512_fmadd_ps(w, xv, s0[j]);
            }
        }
        for (int j = 0; j < NT; j++) acc[j] = _mm512_add_ps(acc[j], _mm512_add_ps(s0[j], s1[j]));
    }
    if (i < k) { /* partial chunk: whole 16-lane blocks, then a masked one */
        for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm512_setzero_ps();
        int b = 0;
        for (; i + 16 <= k; i += 16, b++) {
            __m512 w = fp8_dec16(codes + i);
            for (int j = 0; j < NT; j++) {
                __m512 xv = _mm512_loadu_ps(x + j * ldx + i);
                if (b & 1) s1[j] = _mm512_fmadd_ps(w, xv, s1[j]);
                else s0[j] = _mm512_fmadd_ps(w, xv, s0[j]);
            }
        }
        if (i < k) {
            __mmask16 m = MASK16(k - i);
            __m512 w = fp8_dec16_mask(codes + i, m);
            for (int j = 0; j < NT; j++) {
                __m512 xv = _mm512_maskz_loadu_ps(m, x + j * ldx + i);
                if (b & 1) s1[j] = _mm512_fmadd_ps(w, xv, s1[j]);
                else s0[j] = _mm512_fmadd_ps(w, xv, s0[j]);
            }
        }
        for (int j = 0; j < NT; j++) acc[j] = _mm512_add_ps(acc[j], _mm512_add_ps(s0[j], s1[j]));
    }
    float s256 = scale * 256.0f;
    for (int j = 0; j < NT; j++) out[j] = hsum16(acc[j]) * s256;
}

AVX512 void ni_dot_fp8row_multi_avx512(const uint8_t *codes, float scale, int64_t k, const float *x, int64_t ldx,
                                       int nt, float *out) {
    switch (nt) {
    case 1: fp8_nt(codes, scale, k, x, ldx, 1, out); return;
    case 2: fp8_nt(codes, scale, k, x, ldx, 2, out); return;
    case 3: fp8_nt(codes, scale, k, x, ldx, 3, out); return;
    default: fp8_nt(codes, scale, k, x, ldx, 4, out); return;
    }
}

/* ---- prefill GEMM: 6 tokens × 32 columns (two packed 16-column panels) ---- */

#define NI_G_ROW(i)                                                                                                   \
    b = _mm512_set1_ps(x##i[k]);                                                                                      \
    c##i##0 = _mm512_fmadd_ps(b, w0, c##i##0);                                                                        \
    c##i##1 = _mm512_fmadd_ps(b, w1, c##i##1);
#define NI_G_STEP                                                                                                     \
    {                                                                                                                 \
        __m512 w0 = _mm512_loadu_ps(wp0 + k * NI_GEMM_NR), w1 = _mm512_loadu_ps(wp1 + k * NI_GEMM_NR), b;             \
        NI_G_ROW(0)                                                                                                   \
        NI_G_ROW(1)                                                                                                   \
        NI_G_ROW(2)                                                                                                   \
        NI_G_ROW(3)                                                                                                   \
        NI_G_ROW(4)                                                                                                   \
        NI_G_ROW(5)                                                                                                   \
    }
#define NI_G_ADD(i, j, v) _mm512_store_ps(tile[i] + 16 * j, _mm512_add_ps(_mm512_load_ps(tile[i] + 16 * j), v))

AVX512 INLINE void gemm_6x32(const float *x, int64_t ldx, const float *wp0, const float *wp1, int64_t kc, float *c,
                             int64_t ldc, int mr, int nr, int acc, const int KS) {
    const float *x0 = x, *x1 = x + (mr > 1 ? 1 : 0) * ldx, *x2 = x + (mr > 2 ? 2 : mr - 1) * ldx,
                *x3 = x + (mr > 3 ? 3 : mr - 1) * ldx, *x4 = x + (mr > 4 ? 4 : mr - 1) * ldx,
                *x5 = x + (mr > 5 ? 5 : mr - 1) * ldx;
    if (acc)
        for (int i = 0; i < mr; i++) {
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i * ldc + 2 * NI_GEMM_NR - 1), _MM_HINT_T0);
        }
    float tile[NI_GEMM_MR][2 * NI_GEMM_NR] __attribute__((aligned(64)));
    for (int64_t ks = 0; ks < kc; ks += KS) {
        int64_t ke = kc - ks < KS ? kc : ks + KS;
        __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),
               c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),
               c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),
               c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
        if (ke - ks == KS)
            for (int64_t k = ks; k < ks + KS; k++) NI_G_STEP
        else
            for (int64_t k = ks; k < ke; k++) NI_G_STEP
        if (ks == 0) {
            _mm512_store_ps(tile[0], c00), _mm512_store_ps(tile[0] + 16, c01);
            _mm512_store_ps(tile[1], c10), _mm512_store_ps(tile[1] + 16, c11);
            _mm512_store_ps(tile[2], c20), _mm512_store_ps(tile[2] + 16, c21);
            _mm512_store_ps(tile[3], c30), _mm512_store_ps(tile[3] + 16, c31);
            _mm512_store_ps(tile[4], c40), _mm512_store_ps(tile[4] + 16, c41);
            _mm512_store_ps(tile[5], c50), _mm512_store_ps(tile[5] + 16, c51);
        } else {
            NI_G_ADD(0, 0, c00), NI_G_ADD(0, 1, c01), NI_G_ADD(1, 0, c10), NI_G_ADD(1, 1, c11);
            NI_G_ADD(2, 0, c20), NI_G_ADD(2, 1, c21), NI_G_ADD(3, 0, c30), NI_G_ADD(3, 1, c31);
            NI_G_ADD(4, 0, c40), NI_G_ADD(4, 1, c41), NI_G_ADD(5, 0, c50), NI_G_ADD(5, 1, c51);
        }
    }
    if (nr == 2 * NI_GEMM_NR) {
        for (int i = 0; i < mr; i++) {
            float *ci = c + i * ldc;
            __m512 v0 = _mm512_load_ps(tile[i]), v1 = _mm512_load_ps(tile[i] + 16);
            if (acc) {
                v0 = _mm512_add_ps(_mm512_loadu_ps(ci), v0);
                v1 = _mm512_add_ps(_mm512_loadu_ps(ci + 16), v1);
            }
            _mm512_storeu_ps(ci, v0);
            _mm512_storeu_ps(ci + 16, v1);
        }
        return;
    }
    for (int i = 0; i < mr; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < nr; j++) ci[j] = acc ? ci[j] + tile[i][j] : tile[i][j];
    }
}
#undef NI_G_ROW
#undef NI_G_STEP
#undef NI_G_ADD

AVX512 void ni_gemm_6x32_avx512(const float *x, int64_t ldx, const float *wp0, const float *wp1, int64_t kc, int ks,
                                float *c, int64_t ldc, int mr, int nr, int acc) {
    switch (ks) {
    case 8: gemm_6x32(x, ldx, wp0, wp1, kc, c, ldc, mr, nr, acc, 8); break;
    case 16: gemm_6x32(x, ldx, wp0, wp1, kc, c, ldc, mr, nr, acc, 16); break;
    case 32: gemm_6x32(x, ldx, wp0, wp1, kc, c, ldc, mr, nr, acc, 32); break;
    default: gemm_6x32(x, ldx, wp0, wp1, kc, c, ldc, mr, nr, acc, 64); break;
    }
}
