/* AVX2 + FMA bodies. Compiled with a function-level target attribute so the
 * package builds for baseline x86-64 and these run only after runtime
 * dispatch (ni_cpu_best_isa). */
#include "ni_cpu.h"
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    __m128 sh = _mm_movehdup_ps(lo);
    lo = _mm_add_ps(lo, sh);
    sh = _mm_movehl_ps(sh, lo);
    lo = _mm_add_ss(lo, sh);
    return _mm_cvtss_f32(lo);
}

AVX2 float ni_dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

AVX2 void ni_dot4_avx2(const float *w, const float *x, int64_t ldx, int64_t n, float *out) {
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = _mm256_loadu_ps(w + i);
        s0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + i), s0);
        s1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x1 + i), s1);
        s2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x2 + i), s2);
        s3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x3 + i), s3);
    }
    float r0 = hsum(s0), r1 = hsum(s1), r2 = hsum(s2), r3 = hsum(s3);
    for (; i < n; i++) {
        r0 += w[i] * x0[i];
        r1 += w[i] * x1[i];
        r2 += w[i] * x2[i];
        r3 += w[i] * x3[i];
    }
    out[0] = r0;
    out[1] = r1;
    out[2] = r2;
    out[3] = r3;
}

AVX2 void ni_axpy_avx2(float a, const float *x, float *y, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

AVX2 void ni_scal_avx2(float a, float *y, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(av, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

AVX2 float ni_sumsq_avx2(const float *x, int64_t n) { return ni_dot_avx2(x, x, n); }

AVX2 static inline __m256 load_bf16(const uint16_t *w) {
    __m128i h = _mm_loadu_si128((const __m128i *)w);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2 float ni_dot_bf16_avx2(const uint16_t *w, const float *x, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(load_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += ni_bf16(w[i]) * x[i];
    return s;
}

AVX2 void ni_bf16_to_f32_row_avx2(const uint16_t *w, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load_bf16(w + i));
    for (; i < n; i++) out[i] = ni_bf16(w[i]);
}

/* Stores 16 signed bytes as 16 floats scaled by s. */
AVX2 static inline void store16(__m128i q, __m256 s, float *out) {
    _mm256_storeu_ps(out, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))));
}

/* Signed codes of one grouped-integer group as 16-byte vectors of 16 lanes:
 * 4 vectors (64 lanes) for 4/5/6 bits, 2 (32 lanes) for 8 bits. */
AVX2 static inline __attribute__((always_inline)) int dec_codes(int bits, const uint8_t *base, const uint8_t *high,
                                                             __m128i *out) {
    if (bits == 8) {
        out[0] = _mm_loadu_si128((const __m128i *)base);
        out[1] = _mm_loadu_si128((const __m128i *)(base + 16));
        return 2;
    }
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i sign = _mm_set1_epi8((char)(1 << (bits - 1)));
    /* bit masks selecting lane i's high bits from the byte holding them */
    const __m128i bit1 = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 1, 2, 4, 8, 16, 32, 64, (char)128);
    const __m128i b6lo = _mm_setr_epi8(1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64, 1, 4, 16, 64);
    const __m128i b6hi = _mm_setr_epi8(2, 8, 32, (char)128, 2, 8, 32, (char)128, 2, 8, 32, (char)128, 2, 8, 32, (char)128);
    const __m128i x10 = _mm_set1_epi8(0x10), x20 = _mm_set1_epi8(0x20);
    /* byte-broadcast shuffles: lane i takes byte i/8 (q5) or i/4 (q6) */
    const __m128i sh5 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i sh6 = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m128i hv = _mm_setzero_si128();
    if (bits == 5) hv = _mm_loadl_epi64((const __m128i *)high); /* 8 bytes */
    if (bits == 6) hv = _mm_loadu_si128((const __m128i *)high);  /* 16 bytes */
    for (int h = 0; h < 2; h++) { /* 32 lanes per half: base bytes 16h .. 16h+15 */
        __m128i b = _mm_loadu_si128((const __m128i *)(base + 16 * h));
        __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
        __m128i u[2] = {_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi)}; /* lanes 32h + 16j + 0..15 */
        for (int j = 0; j < 2; j++) {
            int lane0 = 32 * h + 16 * j;
            if (bits == 5) { /* lane i: bit i of the 64-bit stream */
                __m128i idx = _mm_add_epi8(sh5, _mm_set1_epi8((char)(lane0 / 8)));
                __m128i hb = _mm_shuffle_epi8(hv, idx);
                __m128i on = _mm_cmpeq_epi8(_mm_and_si128(hb, bit1), bit1);
                u[j] = _mm_or_si128(u[j], _mm_and_si128(on, x10));
            } else if (bits == 6) { /* lane i: bits 2i, 2i+1 */
                __m128i idx = _mm_add_epi8(sh6, _mm_set1_epi8((char)(lane0 / 4)));
                __m128i hb = _mm_shuffle_epi8(hv, idx);
                __m128i on4 = _mm_cmpeq_epi8(_mm_and_si128(hb, b6lo), b6lo);
                __m128i on5 = _mm_cmpeq_epi8(_mm_and_si128(hb, b6hi), b6hi);
                u[j] = _mm_or_si128(u[j], _mm_or_si128(_mm_and_si128(on4, x10), _mm_and_si128(on5, x20)));
            }
            out[2 * h + j] = _mm_sub_epi8(_mm_xor_si128(u[j], sign), sign); /* sign-extend */
        }
    }
    return 4;
}

AVX2 void ni_dec_group_avx2(int bits, const uint8_t *base, const uint8_t *high, float s, float *out) {
    __m256 sv = _mm256_set1_ps(s);
    __m128i q[4];
    int n = dec_codes(bits, base, high, q);
    for (int i = 0; i < n; i++) store16(q[i], sv, out + 16 * i);
}

AVX2 static inline __m256 cvt8(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }

/* Fused decode + dot of ngroups whole groups of one row against NT token
 * rows x + j·ldx (j < NT): out[j] = hsum(Σ_g scale_g · (s0 + s1)), where
 * s0/s1 are the group's two partial FMA sums of code · x_j. Each group's
 * codes are decoded to fp32 once, in registers, and feed all NT tokens. Per
 * token the operation sequence is the same for every NT, so a token's
 * result does not depend on how many tokens share the pass: a (k+1)-token
 * verify reproduces the one-token decode bit for bit. NT and bits are
 * compile-time constants at every call site. */
#define NI_MT_MAX NI_MT_TOKENS
AVX2 static inline __attribute__((always_inline)) void dot_groups_nt(const int bits, const uint8_t *base,
                                                                 const uint8_t *high, const uint8_t *scales,
                                                                 int64_t ngroups, const float *x, int64_t ldx,
                                                                 const int NT, float *out) {
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0, lanes = bits == 8 ? 32 : 64;
    __m256 acc[NI_MT_MAX];
    for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ngroups; g++) {
        __m128i q[4];
        int n = dec_codes(bits, base + 32 * g, high + hb * g, q);
        const float *xg = x + lanes * g;
        __m256 s0[NI_MT_MAX], s1[NI_MT_MAX];
        for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm256_setzero_ps();
        for (int i = 0; i < n; i++) {
            __m256 wl = cvt8(q[i]), wh = cvt8(_mm_srli_si128(q[i], 8));
            for (int j = 0; j < NT; j++) {
                s0[j] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(xg + j * ldx + 16 * i), s0[j]);
                s1[j] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(xg + j * ldx + 16 * i + 8), s1[j]);
            }
        }
        __m256 sc = _mm256_set1_ps(_cvtsh_ss((unsigned short)(scales[2 * g] | (scales[2 * g + 1] << 8))));
        for (int j = 0; j < NT; j++) acc[j] = _mm256_fmadd_ps(_mm256_add_ps(s0[j], s1[j]), sc, acc[j]);
    }
    for (int j = 0; j < NT; j++) out[j] = hsum(acc[j]);
}

#define NI_DG_NT(B, NT) dot_groups_nt(B, base, high, scales, ngroups, x, ldx, NT, out)
#define NI_DG_BITS(B)                                                                                                 \
    switch (nt) {                                                                                                     \
    case 1: NI_DG_NT(B, 1); return;                                                                                   \
    case 2: NI_DG_NT(B, 2); return;                                                                                   \
    case 3: NI_DG_NT(B, 3); return;                                                                                   \
    default: NI_DG_NT(B, 4); return;                                                                                  \
    }

AVX2 void ni_dot_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                   int64_t ngroups, const float *x, int64_t ldx, int nt, float *out) {
    switch (bits) {
    case 4: NI_DG_BITS(4);
    case 5: NI_DG_BITS(5);
    case 6: NI_DG_BITS(6);
    default: NI_DG_BITS(8);
    }
}

AVX2 float ni_dot_groups_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                              int64_t ngroups, const float *x) {
    float out;
    switch (bits) {
    case 4: dot_groups_nt(4, base, high, scales, ngroups, x, 0, 1, &out); break;
    case 5: dot_groups_nt(5, base, high, scales, ngroups, x, 0, 1, &out); break;
    case 6: dot_groups_nt(6, base, high, scales, ngroups, x, 0, 1, &out); break;
    default: dot_groups_nt(8, base, high, scales, ngroups, x, 0, 1, &out); break;
    }
    return out;
}

/* bf16 row against NT token rows; per token the same operation sequence as
 * ni_dot_bf16_avx2 (bit-identical results for every NT). */
AVX2 static inline __attribute__((always_inline)) void dot_bf16_nt(const uint16_t *w, const float *x, int64_t ldx,
                                                               int64_t n, const int NT, float *out) {
    __m256 s0[NI_MT_MAX], s1[NI_MT_MAX];
    for (int j = 0; j < NT; j++) s0[j] = s1[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = load_bf16(w + i), w1 = load_bf16(w + i + 8);
        for (int j = 0; j < NT; j++) {
            s0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + j * ldx + i), s0[j]);
            s1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + j * ldx + i + 8), s1[j]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        __m256 w0 = load_bf16(w + i);
        for (int j = 0; j < NT; j++) s0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + j * ldx + i), s0[j]);
    }
    for (int j = 0; j < NT; j++) {
        const float *xj = x + j * ldx;
        float s = hsum(_mm256_add_ps(s0[j], s1[j]));
        for (int64_t r = i; r < n; r++) s += ni_bf16(w[r]) * xj[r];
        out[j] = s;
    }
}

AVX2 void ni_dot_bf16_multi_avx2(const uint16_t *w, const float *x, int64_t ldx, int64_t n, int nt, float *out) {
    switch (nt) {
    case 1: dot_bf16_nt(w, x, ldx, n, 1, out); return;
    case 2: dot_bf16_nt(w, x, ldx, n, 2, out); return;
    case 3: dot_bf16_nt(w, x, ldx, n, 3, out); return;
    default: dot_bf16_nt(w, x, ldx, n, 4, out); return;
    }
}
