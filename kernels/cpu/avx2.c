/* AVX2 + FMA bodies. Compiled with a function-level target attribute so the
 * package builds for baseline x86-64 and these run only after runtime
 * dispatch (ni_cpu_best_isa). */
#include "ni_cpu.h"
#include "perm_high.h"
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

/* m axpys in order with each y element in a register across them (the
 * per-element operations of m ni_axpy_avx2 calls; the last n mod 8
 * elements go through ni_axpy_avx2 itself). */
AVX2 void ni_axpy_rows_avx2(const float *a, int m, const float *X, int64_t ldx, float *y, int64_t n) {
    int64_t d = 0;
    for (; d + 64 <= n; d += 64) {
        __m256 acc[8];
        for (int k = 0; k < 8; k++) acc[k] = _mm256_loadu_ps(y + d + 8 * k);
        for (int j = 0; j < m; j++) {
            __m256 av = _mm256_set1_ps(a[j]);
            const float *x = X + j * ldx + d;
            for (int k = 0; k < 8; k++) acc[k] = _mm256_fmadd_ps(av, _mm256_loadu_ps(x + 8 * k), acc[k]);
        }
        for (int k = 0; k < 8; k++) _mm256_storeu_ps(y + d + 8 * k, acc[k]);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 acc = _mm256_loadu_ps(y + d);
        for (int j = 0; j < m; j++) acc = _mm256_fmadd_ps(_mm256_set1_ps(a[j]), _mm256_loadu_ps(X + j * ldx + d), acc);
        _mm256_storeu_ps(y + d, acc);
    }
    if (d < n)
        for (int j = 0; j < m; j++) ni_axpy_avx2(a[j], X + j * ldx + d, y + d, n - d);
}

AVX2 void ni_scal_avx2(float a, float *y, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(av, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* ni_gdn_decay_kv / ni_gdn_update_o (ni_cpu.h): columns in blocks of NV
 * vectors with the result (and δ) in registers across the dk rows; the
 * last dv mod 8 columns as ni_scal_avx2 / ni_axpy_avx2's scalar tails. */
#define NI_GDN_COLS(NV, BODY)                                                                                         \
    for (; d + 8 * (NV) <= dv; d += 8 * (NV)) BODY(NV)
AVX2 void ni_gdn_decay_kv_avx2(float *S, int dk, int64_t dv, float decay, const float *k, float *kv) {
    const __m256 dc = _mm256_set1_ps(decay);
    int64_t d = 0;
#define NI_GDN_KV(NV)                                                                                                 \
    {                                                                                                                 \
        __m256 acc[NV];                                                                                               \
        for (int v = 0; v < (NV); v++) acc[v] = _mm256_setzero_ps();                                                  \
        for (int i = 0; i < dk; i++) {                                                                                \
            float *row = S + (int64_t)i * dv + d;                                                                     \
            const __m256 ki = _mm256_set1_ps(k[i]);                                                                   \
            for (int v = 0; v < (NV); v++) {                                                                          \
                __m256 sv = _mm256_mul_ps(dc, _mm256_loadu_ps(row + 8 * v));                                          \
                _mm256_storeu_ps(row + 8 * v, sv);                                                                    \
                acc[v] = _mm256_fmadd_ps(ki, sv, acc[v]);                                                             \
            }                                                                                                         \
        }                                                                                                             \
        for (int v = 0; v < (NV); v++) _mm256_storeu_ps(kv + d + 8 * v, acc[v]);                                      \
    }
    NI_GDN_COLS(8, NI_GDN_KV);
    NI_GDN_COLS(1, NI_GDN_KV);
#undef NI_GDN_KV
    for (int64_t e = d; e < dv; e++) kv[e] = 0;
    for (int i = 0; i < dk && d < dv; i++) {
        float *row = S + (int64_t)i * dv;
        for (int64_t e = d; e < dv; e++) row[e] *= decay;
        for (int64_t e = d; e < dv; e++) kv[e] += k[i] * row[e];
    }
}

AVX2 void ni_gdn_update_o_avx2(float *S, int dk, int64_t dv, const float *k, const float *delta, const float *q,
                               float *o) {
    int64_t d = 0;
#define NI_GDN_O(NV)                                                                                                  \
    {                                                                                                                 \
        __m256 acc[NV], dl[NV];                                                                                       \
        for (int v = 0; v < (NV); v++) acc[v] = _mm256_setzero_ps(), dl[v] = _mm256_loadu_ps(delta + d + 8 * v);     \
        for (int i = 0; i < dk; i++) {                                                                                \
            float *row = S + (int64_t)i * dv + d;                                                                     \
            const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);                                       \
            for (int v = 0; v < (NV); v++) {                                                                          \
                __m256 sv = _mm256_fmadd_ps(ki, dl[v], _mm256_loadu_ps(row + 8 * v));                                 \
                _mm256_storeu_ps(row + 8 * v, sv);                                                                    \
                acc[v] = _mm256_fmadd_ps(qi, sv, acc[v]);                                                             \
            }                                                                                                         \
        }                                                                                                             \
        for (int v = 0; v < (NV); v++) _mm256_storeu_ps(o + d + 8 * v, acc[v]);                                       \
    }
    NI_GDN_COLS(4, NI_GDN_O);
    NI_GDN_COLS(1, NI_GDN_O);
#undef NI_GDN_O
    for (int64_t e = d; e < dv; e++) o[e] = 0;
    for (int i = 0; i < dk && d < dv; i++) {
        float *row = S + (int64_t)i * dv;
        for (int64_t e = d; e < dv; e++) row[e] += k[i] * delta[e];
        for (int64_t e = d; e < dv; e++) o[e] += q[i] * row[e];
    }
}
#undef NI_GDN_COLS

/* exp of 8 lanes, about 1 ulp: x = n·ln2 + r (n = rne(x·log2 e), r by a
 * two-constant Cody–Waite reduction, |r| ≤ ln2/2), exp(r) by the degree-7
 * polynomial of Cephes' expf, 2^n applied as two factors 2^⌊n/2⌋·2^(n−⌊n/2⌋)
 * so that results in the subnormal range round once. x is clamped to
 * [−104, 89] first (exp overflows to +inf from 88.73, underflows to 0 below
 * −103.97); a NaN passes through both clamps (the NaN is the second operand
 * of max/min) and the polynomial. */
AVX2 static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* y[i] = x[i] / (1 + exp(−x[i])) (ni_silu with the exp above); the last
 * n mod 8 lanes take the scalar ni_silu. x and y may alias. */
AVX2 void ni_silu_avx2(const float *x, float *y, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
    }
    for (; i < n; i++) y[i] = ni_silu(x[i]);
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

/* ---- int8 activations (NI_ACT_Q8, kernels/ninfer_ops.h) ----
 * One weight row of ngroups whole groups against NT quantized token rows:
 * token j's int8 codes at xq + j·ldq, its block scales expanded to 8 lanes
 * each (xe[8b + i] = s_x[b], i < 8; the two 32-value blocks of a q4–q6
 * group have the same scale, NI_ACT_Q8 quantizing per group) at xe + j·lde.
 * Per 32-value block b (group g, scale s_w): the integer dot Σ q_w·q_x is exact in int32
 * (|q_w|·|q_x| ≤ 128·127, pairs summed in int16 without saturation:
 * 2·128·127 < 32767), converted to fp32 and added with the one fp32
 * product s_w·s_x[b] into one of two per-token 8-lane accumulators
 * (alternating blocks, two FMA chains): out[j] = hsum(acc0 + acc1). The sign trick feeds
 * the unsigned × signed byte multiply: |q_w| · (q_x · sign(q_w)). */
AVX2 static inline __attribute__((always_inline)) __m256i q8_dot32(__m256i w, __m256i x) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, ones);
}

/* Block kb (32 values, weight codes wv, weight scale sw) into acc[j]. */
AVX2 static inline __attribute__((always_inline)) void q8_block_nt(__m256i wv, __m256 sw, const int8_t *xq,
                                                               int64_t ldq, const float *xe, int64_t lde,
                                                               int64_t kb, const int NT, __m256 *acc) {
    for (int j = 0; j < NT; j++) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + j * ldq + 32 * kb));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8_dot32(wv, xv)),
                                 _mm256_mul_ps(sw, _mm256_loadu_ps(xe + j * lde + 8 * kb)), acc[j]);
    }
}

/* Group g's fp16 weight scale as fp32 (exact), and broadcast to 8 lanes. */
AVX2 static inline __attribute__((always_inline)) float q8_scale1(const uint8_t *scales, int64_t g) {
    return _cvtsh_ss((unsigned short)(scales[2 * g] | (scales[2 * g + 1] << 8)));
}
AVX2 static inline __attribute__((always_inline)) __m256 q8_scale(const uint8_t *scales, int64_t g) {
    return _mm256_set1_ps(q8_scale1(scales, g));
}
/* The 4-row T = 1 kernels' combined scales of 8 groups from g8: row r's
 * fp16 weight scales (rows rs bytes apart) times the token's activation
 * scales sx of those groups, s_w·s_x, to csw[8r + i] (broadcast from there:
 * at AVX2's 16 registers the rows' scale vectors spilled). */
AVX2 static inline __attribute__((always_inline)) void q8_csw8(float *csw, const int NR, const uint8_t *scales,
                                                           int64_t rs, int64_t g8, __m256 sx) {
    for (int r = 0; r < NR; r++)
        _mm256_store_ps(csw + 8 * r,
                        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + r * rs + 2 * g8))), sx));
}

/* Two FMA chains per token: even blocks into acc0, odd blocks into acc1
 * (for q4/q5/q6 the two blocks of a group, for q8 even and odd groups). */
AVX2 static inline __attribute__((always_inline)) void q8_groups_nt(const int bits, const uint8_t *base,
                                                                const uint8_t *high, const uint8_t *scales,
                                                                int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                                const float *xe, int64_t lde, const int NT,
                                                                float *out) {
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;
    __m256 acc0[NI_MT_MAX], acc1[NI_MT_MAX];
    for (int j = 0; j < NT; j++) acc0[j] = acc1[j] = _mm256_setzero_ps();
    if (bits == 8) {
        int64_t g = 0;
        for (; g + 2 <= ngroups; g += 2) {
            q8_block_nt(_mm256_loadu_si256((const __m256i *)(base + 32 * g)), q8_scale(scales, g), xq, ldq, xe, lde, g,
                        NT, acc0);
            q8_block_nt(_mm256_loadu_si256((const __m256i *)(base + 32 * g + 32)), q8_scale(scales, g + 1), xq, ldq, xe,
                        lde, g + 1, NT, acc1);
        }
        if (g < ngroups)
            q8_block_nt(_mm256_loadu_si256((const __m256i *)(base + 32 * g)), q8_scale(scales, g), xq, ldq, xe, lde, g,
                        NT, acc0);
    } else {
        for (int64_t g = 0; g < ngroups; g++) {
            __m128i q[4];
            dec_codes(bits, base + 32 * g, high + hb * g, q);
            __m256 sw = q8_scale(scales, g);
            q8_block_nt(_mm256_set_m128i(q[1], q[0]), sw, xq, ldq, xe, lde, 2 * g, NT, acc0);
            q8_block_nt(_mm256_set_m128i(q[3], q[2]), sw, xq, ldq, xe, lde, 2 * g + 1, NT, acc1);
        }
    }
    for (int j = 0; j < NT; j++) out[j] = hsum(_mm256_add_ps(acc0[j], acc1[j]));
}

/* NR ≤ 4 consecutive q8 rows of q8_groups_nt at one token (int8
 * activations, the sign trick), each row computed exactly as alone (the
 * same block terms and products s_w·s_x, two FMA chains over even and odd
 * groups): the token's codes are loaded once a group for all rows; each
 * row's products of 8 groups are formed at once (one vcvtph2ps, one
 * multiply by the token's block scales xs) and broadcast from memory, and
 * the 8-group loop runs rolled (as q8ur in q8u_body.h: AVX2's 16 registers);
 * the rows pf rows further on are prefetched one cache line per 64 bytes of
 * each plane consumed (pf = 0: none; as ni_q8p_rows_vnni_vbmi). */
#define NI_Q8R2_ROWS 4
AVX2 static inline __attribute__((always_inline)) void q8_rows_avx2(const int NR, const uint8_t *base,
                                                                const uint8_t *scales, ni_row_block rb,
                                                                int64_t ngroups, const int8_t *xq, const float *xs,
                                                                ni_pf pf, float *out) {
    const uint8_t *pb = base + pf.rows * rb.base, *ps = scales + pf.rows * rb.scales;
    __m256 acc0[NI_Q8R2_ROWS], acc1[NI_Q8R2_ROWS];
    float csw[NI_Q8R2_ROWS * 8] __attribute__((aligned(32))); /* row r, group g8 + i: csw[8r + i] */
    for (int r = 0; r < NR; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
#define NI_Q8R2_STEP(G, I, ACC)                                                                                       \
    {                                                                                                                 \
        const int64_t g = (G);                                                                                        \
        ni_prefetch_step(pf, NR, g, pb, 32, NULL, 0, ps, 2);                                                          \
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 32 * g));                                        \
        for (int r = 0; r < NR; r++) {                                                                                \
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(base + r * rb.base + 32 * g));                    \
            ACC[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8_dot32(wv, xv)), _mm256_broadcast_ss(csw + 8 * r + (I)),    \
                                     ACC[r]);                                                                         \
        }                                                                                                             \
    }
    int64_t g8 = 0;
    for (; g8 + 8 <= ngroups; g8 += 8) {
        q8_csw8(csw, NR, scales, rb.scales, g8, _mm256_loadu_ps(xs + g8)); /* q8: one block scale a group */
        _Pragma("GCC unroll 1") for (int i = 0; i < 8; i += 2) {
            NI_Q8R2_STEP(g8 + i, i, acc0)
            NI_Q8R2_STEP(g8 + i + 1, i + 1, acc1)
        }
    }
    for (int i = 0; g8 + i < ngroups; i++) /* the last < 8 groups: even into acc0, odd into acc1 */
        for (int r = 0; r < NR; r++)
            csw[8 * r + i] = q8_scale1(scales + r * rb.scales, g8 + i) * xs[g8 + i];
    for (int i = 0; g8 + i < ngroups; i += 2) {
        NI_Q8R2_STEP(g8 + i, i, acc0)
        if (g8 + i + 1 < ngroups) NI_Q8R2_STEP(g8 + i + 1, i + 1, acc1)
    }
#undef NI_Q8R2_STEP
    for (int r = 0; r < NR; r++) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
}

AVX2 void ni_q8_rows_avx2(const uint8_t *base, const uint8_t *scales, ni_row_block rb, int64_t ngroups,
                          const int8_t *xq, const float *xs, ni_pf pf, float *out) {
    for (int r0 = 0; r0 < rb.n; r0 += NI_Q8R2_ROWS) {
        const uint8_t *b = base + r0 * rb.base, *s = scales + r0 * rb.scales;
        switch (rb.n - r0 < NI_Q8R2_ROWS ? rb.n - r0 : NI_Q8R2_ROWS) {
        case 1: q8_rows_avx2(1, b, s, rb, ngroups, xq, xs, pf, out + r0); break;
        case 2: q8_rows_avx2(2, b, s, rb, ngroups, xq, xs, pf, out + r0); break;
        case 3: q8_rows_avx2(3, b, s, rb, ngroups, xq, xs, pf, out + r0); break;
        default: q8_rows_avx2(4, b, s, rb, ngroups, xq, xs, pf, out + r0); break;
        }
    }
}

#define NI_Q8_NT(B, NT) q8_groups_nt(B, base, high, scales, ngroups, xq, ldq, xe, lde, NT, out)
#define NI_Q8_BITS(B)                                                                                                 \
    switch (nt) {                                                                                                     \
    case 1: NI_Q8_NT(B, 1); return;                                                                                   \
    case 2: NI_Q8_NT(B, 2); return;                                                                                   \
    case 3: NI_Q8_NT(B, 3); return;                                                                                   \
    default: NI_Q8_NT(B, 4); return;                                                                                  \
    }

AVX2 void ni_q8_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                  int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde,
                                  int nt, float *out) {
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    case 6: NI_Q8_BITS(6);
    default: NI_Q8_BITS(8);
    }
}

/* ---- AVX2 on offset-binary codes (q4 permuted, q5 s-order, q6 r-order) ----
 * The stored two's-complement code c with its top bit flipped is
 * u = q + 2^(bits−1) ∈ [0, 2^bits): maddubs takes it as its unsigned
 * operand directly (pair sums ≤ 2·63·127 < 32767, no saturation; not q8,
 * whose u reaches 255), and each 32-value block's int32 lanes start from the
 * token's offset lanes xo = −2^(bits−1)·Σ of each 4 activation codes
 * (ni_q8u_offsets_avx2, once per matmul, on the codes as stored), so
 * p = Σ u·x − 2^(bits−1)·Σ x = Σ q·x: exact int32 lanes, without the two
 * vpsignb per block and token. q4 keeps the lane grouping of the
 * sign-trick body above (the same int32 lanes, the same fp32 steps in the
 * same order: bit-identical results); q5 runs on the s-order layout
 * (dec_s5) and q6 on the r-order layout (dec_r6), whose int32 lanes group
 * the lanes differently (same values up to fp32 rounding of the block sums).
 * The codes of a group are decoded at 256 bits with no BMI2 (pext is
 * microcoded on some AVX2 CPUs). */
AVX2 void ni_q8u_offsets_avx2(int bits, const int8_t *xq, int64_t ngroups, int32_t *xo) {
    const __m256i ov = _mm256_set1_epi8((char)(1 << (bits - 1))), ones = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < ngroups; g++) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(xq + 64 * g));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(xq + 64 * g + 32));
        __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(ov, x0), _mm256_maddubs_epi16(ov, x1));
        __m256i s = _mm256_madd_epi16(s16, ones);
        _mm256_storeu_si256((__m256i *)(xo + 8 * g), _mm256_sub_epi32(_mm256_setzero_si256(), s));
    }
}

/* The group loop with the fp16 group scales converted 8 at a time (one
 * vcvtph2ps, then a lane broadcast per group, instead of two byte loads, an
 * insert and a conversion per group; the same fp32 values): GROUP(g, sw)
 * per group. Unrolled, so each broadcast is one vpermps with a constant
 * index (rolled, GCC built the index with vmovd + vpbroadcastd per group). */
#define NI_Q8U_SCALES8(GROUP)                                                                                         \
    int64_t g8 = 0;                                                                                                   \
    for (; g8 + 8 <= ngroups; g8 += 8) {                                                                              \
        const __m256 s8v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + 2 * g8)));                      \
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                                          \
            GROUP(g8 + i, _mm256_permutevar8x32_ps(s8v, _mm256_set1_epi32(i)))                                        \
    }                                                                                                                 \
    for (; g8 < ngroups; g8++) GROUP(g8, q8_scale(scales, g8))

/* The 64 offset-binary codes of a q5 group in the s-order layout (q8_perm
 * 3): position 16h + 4d + j (h = half, d, j < 4) of u[0] holds lane
 * 32h + 8j + 2d, the low nibble of base byte 16h + 4j + d (one byte shuffle,
 * a 4×4 transpose in each half), and the same position of u[1] the next
 * lane, that byte's high nibble. Lane 8m + e takes bit e of high byte m, so
 * dword d of half h holds high bytes 4h..4h+3 (one byte shuffle), their high
 * nibbles shifted down for d ≥ 2 (one word shift and a blend), and one dword
 * shift per vector by 4 − 2(d mod 2) (u[0], e = 2d) or one less (u[1],
 * e = 2d + 1) lines bit e up at bit 4; andnot both flips it (offset binary)
 * and masks it: 7 operations for the 64 high bits instead of 11 in the
 * natural layout, and no unpack or lane permute of the nibbles. Every int32
 * lane of the dot products holds four lanes of one half (one block); the
 * low half of each vector is block 0, the high half block 1, as the
 * permuted block scales [s0×4, s1×4] expect. */
AVX2 static inline __attribute__((always_inline)) void dec_s5(const uint8_t *base, const uint8_t *high, __m256i *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), x10 = _mm256_set1_epi8(0x10);
    const __m256i tr = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13,
                                        2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i ih = _mm256_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6,
                                        7, 4, 5, 6, 7);
    const __m256i c0 = _mm256_setr_epi32(4, 2, 4, 2, 4, 2, 4, 2), c1 = _mm256_setr_epi32(3, 1, 3, 1, 3, 1, 3, 1);
    __m256i b = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)base), tr);
    uint64_t h;
    memcpy(&h, high, 8);
    __m256i hs = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)h), ih);
    hs = _mm256_blend_epi32(hs, _mm256_srli_epi16(hs, 4), 0xcc);
    u[0] = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_andnot_si256(_mm256_sllv_epi32(hs, c0), x10));
    u[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                           _mm256_andnot_si256(_mm256_sllv_epi32(hs, c1), x10));
}

/* The 64 offset-binary codes of a q6 group in the r-order layout (lane
 * 4m + r, r = i mod 4, takes bits 2r, 2r + 1 of high byte m): the
 * activation codes of a group are stored so that every int32 lane of the
 * dot products holds 4 lanes of one r (weights.c, q8_perm 2): u[0] = low
 * nibbles, positions 16h + 8ρ + p ↔ lanes 32h + 4p + 2ρ (ρ = 0, 1); u[1] =
 * high nibbles, the same lanes + 1. Then one byte shuffle places high byte
 * m under its 4 lanes and one dword shift by 4 − 2r (r = 0, 1 after a
 * 2-bit pre-shift for the odd lanes) lines bits 2r, 2r + 1 up at bits 4, 5:
 * 8 operations for the 128 high bits instead of 18 in the natural layout.
 * Low half of each vector = block 0 (lanes 0..31), high half = block 1, as
 * the permuted block scales [s0×4, s1×4] expect. */
AVX2 static inline __attribute__((always_inline)) void dec_r6(const uint8_t *base, const uint8_t *high, __m256i *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), x30 = _mm256_set1_epi8(0x30), sg = _mm256_set1_epi8((char)0xaa);
    const __m256i ib = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14,
                                        1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i ih = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 8,
                                        9, 10, 11, 12, 13, 14, 15);
    const __m256i cnt = _mm256_setr_epi32(4, 4, 0, 0, 4, 4, 0, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)base), ib);
    __m256i hs = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)high)), ih);
    hs = _mm256_xor_si256(hs, sg); /* the top bit of every lane's two high bits: offset binary */
    __m256i h0 = _mm256_and_si256(_mm256_sllv_epi32(hs, cnt), x30);
    __m256i h1 = _mm256_and_si256(_mm256_sllv_epi32(_mm256_srli_epi16(hs, 2), cnt), x30);
    u[0] = _mm256_or_si256(_mm256_and_si256(b, m4), h0);
    u[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), h1);
}

/* AVX2: each block's maddubs pair sums (≤ 2·63·127 = 16002) added in
 * int16 (≤ 32004 < 32767: exact), one madd, the offset lanes. */
#define Q8U_ATTR AVX2
#define Q8U_N(name) name##_avx2
#define Q8U_GROUP_P(u0, u1, x0, x1, xo)                                                                               \
    _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, x0), _mm256_maddubs_epi16(u1, x1)), \
                                       _mm256_set1_epi16(1)),                                                         \
                     xo)
#include "q8u_body.h"
#undef Q8U_ATTR
#undef Q8U_N
#undef Q8U_GROUP_P

/* AVX-VNNI (VEX dpbusd at 256 bits, on AVX2-level CPUs that have it): two
 * dpbusd from the offset lanes; the same int32 lanes (no int16 stage). */
#define AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define Q8U_ATTR AVXVNNI
#define Q8U_N(name) name##_avxvnni
#define Q8U_GROUP_P(u0, u1, x0, x1, xo) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(xo, u0, x0), u1, x1)
#include "q8u_body.h"
#undef Q8U_ATTR
#undef Q8U_N
#undef Q8U_GROUP_P

#undef NI_Q8_NT
#define NI_Q8_NT(B, NT) q8_groups_nt(B, base, high, scales, ngroups, xq, ldq, xe, lde, NT, out)

/* AVX-512 BW (+ VNNI): 64 codes per step, two 32-value blocks (one q4/q5/q6
 * group, or two q8 groups) in one zmm; int32 lanes 0..7 belong to the first
 * block, 8..15 to the second, which the expanded scales match lane for
 * lane. The sign moves onto the activations with a mask subtract (no vpsignb
 * at 512 bits). Same per-block terms as the AVX2 body, 16-lane summation,
 * two FMA chains (alternating steps). */
#define AVX512Q8 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl")))
#define AVX512VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

#define NI_Q8_512_STEP(DOT, S, ACC)                                                                                   \
    {                                                                                                                 \
        const int64_t s = (S);                                                                                        \
        __m512i wv;                                                                                                   \
        __m512 sw;                                                                                                    \
        if (bits == 8) {                                                                                              \
            int64_t g = 2 * s;                                                                                        \
            float sw0 = _cvtsh_ss((unsigned short)(scales[2 * g] | (scales[2 * g + 1] << 8))), sw1 = 0;               \
            __m256i lo = _mm256_loadu_si256((const __m256i *)(base + 32 * g)), hi = _mm256_setzero_si256();           \
            if (g + 1 < ngroups) {                                                                                    \
                hi = _mm256_loadu_si256((const __m256i *)(base + 32 * g + 32));                                       \
                sw1 = _cvtsh_ss((unsigned short)(scales[2 * g + 2] | (scales[2 * g + 3] << 8)));                      \
            }                                                                                                         \
            wv = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);                                               \
            sw = _mm512_insertf32x8(_mm512_set1_ps(sw0), _mm256_set1_ps(sw1), 1);                                     \
        } else {                                                                                                      \
            __m128i q[4];                                                                                             \
            dec_codes(bits, base + 32 * s, high + hb * s, q);                                                         \
            wv = _mm512_inserti32x4(                                                                                  \
                _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(q[0]), q[1], 1), q[2], 2), q[3], 3);     \
            sw = _mm512_set1_ps(_cvtsh_ss((unsigned short)(scales[2 * s] | (scales[2 * s + 1] << 8))));               \
        }                                                                                                             \
        __m512i aw = _mm512_abs_epi8(wv);                                                                             \
        __mmask64 neg = _mm512_movepi8_mask(wv);                                                                      \
        for (int j = 0; j < NT; j++) {                                                                                \
            __m512i xv = _mm512_loadu_si512((const void *)(xq + j * ldq + 64 * s));                                   \
            __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);                                   \
            __m512i p = DOT;                                                                                          \
            ACC[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, _mm512_loadu_ps(xe + j * lde + 16 * s)), \
                                     ACC[j]);                                                                         \
        }                                                                                                             \
    }

#define NI_Q8_512_BODY(DOT)                                                                                           \
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;                                                            \
    const int64_t steps = bits == 8 ? (ngroups + 1) / 2 : ngroups;                                                    \
    __m512 acc0[NI_MT_MAX], acc1[NI_MT_MAX]; /* two FMA chains: even and odd steps */                                 \
    for (int j = 0; j < NT; j++) acc0[j] = acc1[j] = _mm512_setzero_ps();                                             \
    int64_t s2 = 0;                                                                                                   \
    for (; s2 + 2 <= steps; s2 += 2) {                                                                                \
        NI_Q8_512_STEP(DOT, s2, acc0)                                                                                 \
        NI_Q8_512_STEP(DOT, s2 + 1, acc1)                                                                             \
    }                                                                                                                 \
    if (s2 < steps) NI_Q8_512_STEP(DOT, s2, acc0)                                                                     \
    for (int j = 0; j < NT; j++) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));

AVX512Q8 static inline __attribute__((always_inline)) void q8_512_nt(const int bits, const uint8_t *base,
                                                                 const uint8_t *high, const uint8_t *scales,
                                                                 int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                                 const float *xe, int64_t lde, const int NT,
                                                                 float *out) {
    NI_Q8_512_BODY(_mm512_madd_epi16(_mm512_maddubs_epi16(aw, sx), _mm512_set1_epi16(1)))
}

AVX512VNNI static inline __attribute__((always_inline)) void q8_vnni_nt(const int bits, const uint8_t *base,
                                                                    const uint8_t *high, const uint8_t *scales,
                                                                    int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                                    const float *xe, int64_t lde, const int NT,
                                                                    float *out) {
    NI_Q8_512_BODY(_mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx))
}

/* q8 weights on VNNI (ni_q8w_multi_vnni): each step is two 32-value groups
 * (64 codes), flipped to offset binary (u = q + 128) for vpdpbusd, which
 * starts from the token's offset lanes xo (−128·Σ of each 4 activation
 * codes, ni_q8p_offsets_vnni); the fp16 scales are converted 16 at a time
 * and each step's pair broadcast by one vpermps. The same int32 lanes,
 * scales and FMA chains (even / odd steps) as the q8 case of q8_vnni_nt:
 * bit-identical, without its scalar scale conversions, sign mask and
 * per-token negation. A missing second group (odd ngroups) reads as zero
 * codes (u = 128 against zero activation codes: p = 0) with scale 0. */
#define NI_Q8W_STEP(I, ACC)                                                                                           \
    {                                                                                                                 \
        const int64_t s = s0 + (I);                                                                                   \
        ni_prefetch_step(pf, 1, s, pb, 64, NULL, 0, ps, 4);                                                           \
        __m512i wv = 2 * s + 1 < ngroups ? _mm512_loadu_si512((const void *)(base + 64 * s))                          \
                                         : _mm512_maskz_loadu_epi8(0xffffffffull, base + 64 * s);                     \
        wv = _mm512_xor_si512(wv, flip);                                                                              \
        const __m512 sw = _mm512_permutexvar_ps(_mm512_add_epi32(pair, _mm512_set1_epi32((int)(2 * (I)))), sc16);     \
        for (int j = 0; j < NT; j++) {                                                                                \
            __m512i xv = _mm512_loadu_si512((const void *)(xq + j * ldq + 64 * s));                                   \
            __m512i p = _mm512_dpbusd_epi32(_mm512_loadu_si512((const void *)(xo + j * ldo + 16 * s)), wv, xv);       \
            ACC[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, _mm512_loadu_ps(xe + j * lde + 16 * s)), \
                                     ACC[j]);                                                                         \
        }                                                                                                             \
    }

AVX512VNNI static inline __attribute__((always_inline)) void q8w_vnni_nt(const uint8_t *base, const uint8_t *scales,
                                                                     int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                                     const int32_t *xo, int64_t ldo, const float *xe,
                                                                     int64_t lde, const int NT, const uint8_t *pb,
                                                                     const uint8_t *ps, ni_pf pf, float *out) {
    const int64_t steps = (ngroups + 1) / 2;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 acc0[NI_MT_MAX], acc1[NI_MT_MAX]; /* two FMA chains: even and odd steps */
    for (int j = 0; j < NT; j++) acc0[j] = acc1[j] = _mm512_setzero_ps();
    for (int64_t s0 = 0; s0 < steps; s0 += 8) { /* 16 groups per scale load; s0 even */
        const int64_t ng = ngroups - 2 * s0 < 16 ? ngroups - 2 * s0 : 16, ns = (ng + 1) / 2;
        const __m512 sc16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << ng) - 1u), scales + 4 * s0));
        int64_t i = 0;
        for (; i + 2 <= ns; i += 2) {
            NI_Q8W_STEP(i, acc0)
            NI_Q8W_STEP(i + 1, acc1)
        }
        if (i < ns) NI_Q8W_STEP(i, acc0)
    }
    for (int j = 0; j < NT; j++) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));
}
#undef NI_Q8W_STEP

AVX512VNNI void ni_q8w_multi_vnni(const uint8_t *base, const uint8_t *scales, int64_t ngroups, const int8_t *xq,
                                  int64_t ldq, const int32_t *xo, int64_t ldo, const float *xe, int64_t lde, int nt,
                                  ni_pf pf, ni_row_block rb, float *out) {
    const uint8_t *pb = base + pf.rows * rb.base, *ps = scales + pf.rows * rb.scales;
    switch (nt) {
    case 1: q8w_vnni_nt(base, scales, ngroups, xq, ldq, xo, ldo, xe, lde, 1, pb, ps, pf, out); return;
    case 2: q8w_vnni_nt(base, scales, ngroups, xq, ldq, xo, ldo, xe, lde, 2, pb, ps, pf, out); return;
    case 3: q8w_vnni_nt(base, scales, ngroups, xq, ldq, xo, ldo, xe, lde, 3, pb, ps, pf, out); return;
    default: q8w_vnni_nt(base, scales, ngroups, xq, ldq, xo, ldo, xe, lde, 4, pb, ps, pf, out); return;
    }
}

/* NR ≤ NI_Q8WR_ROWS consecutive q8 rows of q8w_vnni_nt at one token, each
 * row computed exactly as alone (the same steps, the same two FMA chains
 * over even and odd steps, the same products s_w·s_x, formed for 16 groups
 * of a row at once from the token's block scales xs, the same final sum):
 * the token's codes and offset lanes are loaded once a step for all NR rows, and the
 * NR rows pf rows further on are prefetched one cache line per 64 bytes of
 * each plane consumed (q8pr_vnni_vbmi's scheme; pf = 0: no prefetch). */
#define NI_Q8WR_ROWS 4
AVX512VNNI static inline __attribute__((always_inline)) void q8wr_vnni(const int NR, const uint8_t *base,
                                                                   const uint8_t *scales, ni_row_block rb,
                                                                   int64_t ngroups, const int8_t *xq,
                                                                   const int32_t *xo, const float *xs, ni_pf pf,
                                                                   float *out) {
    const int64_t steps = (ngroups + 1) / 2;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const uint8_t *pb = base + pf.rows * rb.base, *ps = scales + pf.rows * rb.scales;
    __m512 acc0[NI_Q8WR_ROWS], acc1[NI_Q8WR_ROWS], sc16[NI_Q8WR_ROWS];
    for (int r = 0; r < NR; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
#define NI_Q8WR_STEP(I, ACC)                                                                                          \
    {                                                                                                                 \
        const int64_t s = s0 + (I);                                                                                   \
        ni_prefetch_step(pf, NR, s, pb, 64, NULL, 0, ps, 4);                                                          \
        const __m512i xv = _mm512_loadu_si512((const void *)(xq + 64 * s));                                           \
        const __m512i ov = _mm512_loadu_si512((const void *)(xo + 16 * s));                                           \
        const __m512i idx = _mm512_add_epi32(pair, _mm512_set1_epi32((int)(2 * (I))));                               \
        for (int r = 0; r < NR; r++) {                                                                                \
            const uint8_t *bp = base + r * rb.base + 64 * s;                                                          \
            __m512i wv = 2 * s + 1 < ngroups ? _mm512_loadu_si512((const void *)bp)                                   \
                                             : _mm512_maskz_loadu_epi8(0xffffffffull, bp);                            \
            wv = _mm512_xor_si512(wv, flip);                                                                          \
            const __m512 sw = _mm512_permutexvar_ps(idx, sc16[r]);                                                    \
            ACC[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(ov, wv, xv)), sw, ACC[r]);                \
        }                                                                                                             \
    }
    for (int64_t s0 = 0; s0 < steps; s0 += 8) { /* 16 groups per scale load; s0 even */
        const int64_t ng = ngroups - 2 * s0 < 16 ? ngroups - 2 * s0 : 16, ns = (ng + 1) / 2;
        const __mmask16 gm = (__mmask16)((1u << ng) - 1u);
        const __m512 sx = _mm512_maskz_loadu_ps(gm, xs + 2 * s0); /* q8: one block scale a group */
        for (int r = 0; r < NR; r++)
            sc16[r] = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(gm, scales + r * rb.scales + 4 * s0)), sx);
        int64_t i = 0;
        for (; i + 2 <= ns; i += 2) {
            NI_Q8WR_STEP(i, acc0)
            NI_Q8WR_STEP(i + 1, acc1)
        }
        if (i < ns) NI_Q8WR_STEP(i, acc0)
    }
#undef NI_Q8WR_STEP
    for (int r = 0; r < NR; r++) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

AVX512VNNI void ni_q8w_rows_vnni(const uint8_t *base, const uint8_t *scales, ni_row_block rb, int64_t ngroups,
                                 const int8_t *xq, const int32_t *xo, const float *xs, ni_pf pf, float *out) {
    for (int r0 = 0; r0 < rb.n; r0 += NI_Q8WR_ROWS) {
        const uint8_t *b = base + r0 * rb.base, *s = scales + r0 * rb.scales;
        switch (rb.n - r0 < NI_Q8WR_ROWS ? rb.n - r0 : NI_Q8WR_ROWS) {
        case 1: q8wr_vnni(1, b, s, rb, ngroups, xq, xo, xs, pf, out + r0); break;
        case 2: q8wr_vnni(2, b, s, rb, ngroups, xq, xo, xs, pf, out + r0); break;
        case 3: q8wr_vnni(3, b, s, rb, ngroups, xq, xo, xs, pf, out + r0); break;
        default: q8wr_vnni(4, b, s, rb, ngroups, xq, xo, xs, pf, out + r0); break;
        }
    }
}

AVX512Q8 void ni_q8_groups_multi_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                        int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde,
                                        int nt, float *out) {
#undef NI_Q8_NT
#define NI_Q8_NT(B, NT) q8_512_nt(B, base, high, scales, ngroups, xq, ldq, xe, lde, NT, out)
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    case 6: NI_Q8_BITS(6);
    default: NI_Q8_BITS(8);
    }
}

AVX512VNNI void ni_q8_groups_multi_vnni(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                       int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde,
                                       int nt, float *out) {
#undef NI_Q8_NT
#define NI_Q8_NT(B, NT) q8_vnni_nt(B, base, high, scales, ngroups, xq, ldq, xe, lde, NT, out)
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    case 6: NI_Q8_BITS(6);
    default: NI_Q8_BITS(8);
    }
}

/* Permuted layout (q4 at AVX2, q4/q5/q6 at AVX-512): each 64-value group's
 * activation codes are stored even lanes first (x0, x2, …, x62, x1, x3, …,
 * x63) and its expanded scales as [s0×4, s1×4, s0×4, s1×4], so the weight
 * codes need no interleave: the low nibbles of the group's 32 base bytes are
 * its even lanes, the high nibbles its odd lanes (int32 lanes 0..3 of each
 * 32-byte half sum block 0, lanes 4..7 block 1). */
AVX2 static inline __attribute__((always_inline)) void q8p_q4_nt(const uint8_t *base, const uint8_t *scales,
                                                             int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                             const float *xe, int64_t lde, const int NT, float *out) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), s8 = _mm256_set1_epi8(8);
    __m256 acc[2][NI_MT_MAX];
    for (int j = 0; j < NT; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ngroups; g++) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(base + 32 * g));
        __m256i w0 = _mm256_sub_epi8(_mm256_xor_si256(_mm256_and_si256(b, m4), s8), s8);
        __m256i w1 = _mm256_sub_epi8(_mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), s8), s8);
        __m256 sw = _mm256_set1_ps(_cvtsh_ss((unsigned short)(scales[2 * g] | (scales[2 * g + 1] << 8))));
        for (int j = 0; j < NT; j++) {
            const int8_t *x = xq + j * ldq + 64 * g;
            const float *e = xe + j * lde + 16 * g;
            __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(q8_dot32(w0, _mm256_loadu_si256((const __m256i *)x))),
                                      _mm256_loadu_ps(e));
            __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(q8_dot32(w1, _mm256_loadu_si256((const __m256i *)(x + 32)))),
                                      _mm256_loadu_ps(e + 8));
            acc[0][j] = _mm256_fmadd_ps(v0, sw, acc[0][j]);
            acc[1][j] = _mm256_fmadd_ps(v1, sw, acc[1][j]);
        }
    }
    for (int j = 0; j < NT; j++) out[j] = hsum(_mm256_add_ps(acc[0][j], acc[1][j]));
}

AVX2 void ni_q8p_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                   int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde,
                                   int nt, float *out) {
    (void)bits;
    (void)high;
    switch (nt) {
    case 1: q8p_q4_nt(base, scales, ngroups, xq, ldq, xe, lde, 1, out); return;
    case 2: q8p_q4_nt(base, scales, ngroups, xq, ldq, xe, lde, 2, out); return;
    case 3: q8p_q4_nt(base, scales, ngroups, xq, ldq, xe, lde, 3, out); return;
    default: q8p_q4_nt(base, scales, ngroups, xq, ldq, xe, lde, 4, out); return;
    }
}

#define AVX512Q8P __attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512dq,avx512vl")))
#define AVX512VNNIP __attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))
#define AVX512VNNIVBMIP                                                                                               \
    __attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi")))

/* The high bits of group g ORed into wv: by pext (below) or by
 * vpmultishiftqb (perm_high.h); the kernels are compiled once per variant. */
#define NI_Q8P_HIGH_PEXT                                                                                              \
        if (bits == 5) {                                                                                              \
            uint64_t h;                                                                                               \
            memcpy(&h, high + hb * g, 8);                                                                             \
            __mmask64 m = _pext_u64(h, 0x5555555555555555ull) | (_pext_u64(h, 0xaaaaaaaaaaaaaaaaull) << 32);          \
            wv = _mm512_or_si512(wv, _mm512_maskz_mov_epi8(m, _mm512_set1_epi8(0x10)));                               \
        } else if (bits == 6) {                                                                                       \
            uint64_t h0, h1;                                                                                          \
            memcpy(&h0, high + hb * g, 8);                                                                            \
            memcpy(&h1, high + hb * g + 8, 8);                                                                        \
            uint64_t e4 = _pext_u64(h0, 0x1111111111111111ull) | (_pext_u64(h1, 0x1111111111111111ull) << 16);        \
            uint64_t e5 = _pext_u64(h0, 0x2222222222222222ull) | (_pext_u64(h1, 0x2222222222222222ull) << 16);        \
            uint64_t o4 = _pext_u64(h0, 0x4444444444444444ull) | (_pext_u64(h1, 0x4444444444444444ull) << 16);        \
            uint64_t o5 = _pext_u64(h0, 0x8888888888888888ull) | (_pext_u64(h1, 0x8888888888888888ull) << 16);        \
            wv = _mm512_or_si512(wv, _mm512_maskz_mov_epi8(e4 | (o4 << 32), _mm512_set1_epi8(0x10)));                 \
            wv = _mm512_or_si512(wv, _mm512_maskz_mov_epi8(e5 | (o5 << 32), _mm512_set1_epi8(0x20)));                 \
        }

#define NI_Q8P_HIGH_VBMI                                                                                              \
    if (bits != 4) wv = ni_perm_or_high_vbmi(bits, wv, high + hb * g);

/* q5/q6 high bits of the permuted lanes: bit m of the even mask is lane 2m,
 * bit 32 + m of the odd half lane 2m + 1 (pext of the high plane). */
#define NI_Q8P_512_STEP(DOT, G, ACC)                                                                                  \
    {                                                                                                                 \
        const int64_t g = (G);                                                                                        \
        __m256i b = _mm256_loadu_si256((const __m256i *)(base + 32 * g));                                             \
        __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m4)),                              \
                                        _mm256_and_si256(_mm256_srli_epi16(b, 4), m4), 1);                            \
        NI_Q8P_HIGH                                                                                                   \
        wv = _mm512_sub_epi8(_mm512_xor_si512(wv, sg), sg);                                                           \
        __m512 sw = _mm512_set1_ps(_cvtsh_ss((unsigned short)(scales[2 * g] | (scales[2 * g + 1] << 8))));            \
        __m512i aw = _mm512_abs_epi8(wv);                                                                             \
        __mmask64 neg = _mm512_movepi8_mask(wv);                                                                      \
        for (int j = 0; j < NT; j++) {                                                                                \
            __m512i xv = _mm512_loadu_si512((const void *)(xq + j * ldq + 64 * g));                                   \
            __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);                                   \
            __m512i p = DOT;                                                                                          \
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(p), _mm512_loadu_ps(xe + j * lde + 16 * g));                  \
            ACC[j] = _mm512_fmadd_ps(v, sw, ACC[j]);                                                                  \
        }                                                                                                             \
    }

/* The group loop of the permuted int8 bodies: STEP(g, acc) per group, two
 * FMA chains (even and odd groups), then the 16-lane sums. */
#define NI_Q8P_GROUPS(STEP)                                                                                           \
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;                                                            \
    const __m256i m4 = _mm256_set1_epi8(0x0f);                                                                        \
    const __m512i sg = _mm512_set1_epi8((char)(1 << (bits - 1)));                                                     \
    __m512 acc0[NI_MT_MAX], acc1[NI_MT_MAX]; /* two FMA chains: even and odd groups */                                \
    for (int j = 0; j < NT; j++) acc0[j] = acc1[j] = _mm512_setzero_ps();                                             \
    int64_t g2 = 0;                                                                                                   \
    for (; g2 + 2 <= ngroups; g2 += 2) {                                                                              \
        STEP(g2, acc0)                                                                                                \
        STEP(g2 + 1, acc1)                                                                                            \
    }                                                                                                                 \
    if (g2 < ngroups) STEP(g2, acc0)                                                                                  \
    for (int j = 0; j < NT; j++) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));

/* AVX-512 BW (no VNNI): the sign trick and maddubs + madd. */
#define NI_Q8P_BW_STEP(G, ACC)                                                                                        \
    NI_Q8P_512_STEP(_mm512_madd_epi16(_mm512_maddubs_epi16(aw, sx), _mm512_set1_epi16(1)), G, ACC)

#define NI_Q8P_HIGH NI_Q8P_HIGH_PEXT
AVX512Q8P static inline __attribute__((always_inline)) void q8p_512_nt(const int bits, const uint8_t *base,
                                                                   const uint8_t *high, const uint8_t *scales,
                                                                   int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                                   const float *xe, int64_t lde, const int NT,
                                                                   float *out) {
    NI_Q8P_GROUPS(NI_Q8P_BW_STEP)
}

#undef NI_Q8P_HIGH

/* VNNI on the offset-binary codes u = q + 2^(bits−1) (the stored
 * two's-complement code with its top bit flipped; no sign trick): vpdpbusd
 * takes u as its unsigned operand and starts from the token's offset lanes
 * xo = −2^(bits−1)·Σ of each 4 codes (ni_q8p_offsets_vnni, once per
 * matmul), so p = Σ u·x − 2^(bits−1)·Σ x = Σ q·x, the same int32 lanes as
 * the signed form: bit-identical results, four fewer instructions per
 * group (no sub/abs/sign mask per group, no negation per token). */
#define NI_Q8PU_STEP(G, ACC)                                                                                          \
    {                                                                                                                 \
        const int64_t g = (G);                                                                                        \
        ni_prefetch_step(pf, 1, g, pb, 32, ph, hb, ps, 2);                                                            \
        __m256i b = _mm256_loadu_si256((const __m256i *)(base + 32 * g));                                             \
        __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m4)),                              \
                                        _mm256_and_si256(_mm256_srli_epi16(b, 4), m4), 1);                            \
        NI_Q8P_HIGH                                                                                                   \
        wv = _mm512_xor_si512(wv, sg); /* two's complement code → offset binary u = q + 2^(bits−1) */                 \
        __m512 sw = _mm512_set1_ps(_cvtsh_ss((unsigned short)(scales[2 * g] | (scales[2 * g + 1] << 8))));            \
        for (int j = 0; j < NT; j++) {                                                                                \
            __m512i xv = _mm512_loadu_si512((const void *)(xq + j * ldq + 64 * g));                                   \
            __m512i p = _mm512_dpbusd_epi32(_mm512_loadu_si512((const void *)(xo + j * ldo + 16 * g)), wv, xv);       \
            const __m512 swx = _mm512_mul_ps(sw, _mm512_set1_ps(xs[j * ldx + 2 * g])); /* s_w·s_x */                 \
            ACC[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), swx, ACC[j]);                                             \
        }                                                                                                             \
    }

#define NI_Q8P_HIGH NI_Q8P_HIGH_PEXT
AVX512VNNIP static inline __attribute__((always_inline)) void q8p_vnni_nt(
    const int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales, int64_t ngroups, const int8_t *xq,
    int64_t ldq, const int32_t *xo, int64_t ldo, const float *xs, int64_t ldx, const int NT, ni_pf pf, ni_row_block rb,
    float *out) {
    const uint8_t *pb = base + pf.rows * rb.base, *ph = high + pf.rows * rb.high, *ps = scales + pf.rows * rb.scales;
    NI_Q8P_GROUPS(NI_Q8PU_STEP)
}
#undef NI_Q8P_HIGH

#define NI_Q8P_HIGH NI_Q8P_HIGH_VBMI
AVX512VNNIVBMIP static inline __attribute__((always_inline)) void q8p_vnni_vbmi_nt(
    const int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales, int64_t ngroups, const int8_t *xq,
    int64_t ldq, const int32_t *xo, int64_t ldo, const float *xs, int64_t ldx, const int NT, ni_pf pf, ni_row_block rb,
    float *out) {
    const uint8_t *pb = base + pf.rows * rb.base, *ph = high + pf.rows * rb.high, *ps = scales + pf.rows * rb.scales;
    NI_Q8P_GROUPS(NI_Q8PU_STEP)
}
#undef NI_Q8P_HIGH

/* NR ≤ NI_Q8PR_ROWS consecutive rows of q8p_vnni_vbmi_nt at one token, each
 * row computed exactly as alone, on the token arrays in pair order
 * (ni_q8p_pair_order): two groups a step, so one 64-byte load of the base
 * plane holds both groups' nibbles, one and gives both groups' low-nibble
 * lanes and one shift + and both groups' high-nibble lanes. Lanes 0–7 of
 * the low half are group g's lanes 0–7 and lanes 8–15 group g + 1's lanes
 * 0–7 (the high half: lanes 8–15 of each), which is where pair order puts
 * the token's codes and offset lanes; every int32 lane is the same sum as
 * alone and every float lane takes the same FMA by the same product
 * s_w·s_x (formed for 16 groups of a row at once from the unexpanded block
 * scales) in the same order, into accumulators (lo, hi) whose lanes are those
 * of q8p_vnni_vbmi_nt's two chains (even groups, odd groups) rearranged:
 * put back at the end, the final sum is the same bits. The sign flip to
 * offset binary costs one xor of the packed bytes (q4), nothing (q5: folded
 * into the ternary-logic OR, a | (~t & 0x10)) or one xor of the high bits
 * before they are spread (q6). An unpaired last group takes the one-group
 * step (its arrays are in natural order). While it runs, the NR rows pf
 * rows further on are prefetched, one cache line per 64 bytes of each plane
 * consumed (pf = 0: no prefetch). */
#define NI_Q8PR_ROWS 4
AVX512VNNIVBMIP static inline __attribute__((always_inline)) void q8pr_vnni_vbmi(
    const int bits, const int NR, const uint8_t *base, const uint8_t *high, const uint8_t *scales, ni_row_block rb,
    int64_t ngroups, const int8_t *xq, const int32_t *xo, const float *xs, ni_pf pf, float *out) {
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i sg = _mm512_set1_epi8((char)(1 << (bits - 1)));
    const uint8_t *ctrl = bits == 5 ? ni_perm_ctrl5 : ni_perm_ctrl6;
    /* the one-group control bytes of lanes 0–31 (low half) and 32–63 (high half), once per group of the pair */
    const __m512i clo = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)ctrl));
    const __m512i chi = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)(ctrl + 32)));
    const __m512i hm = _mm512_set1_epi8(bits == 5 ? 0x10 : 0x30);
    /* q5: the 8 high bytes of each group to qwords 0–3 and 4–7; q6: each group's two qwords to qwords 0,0,1,1 of its half */
    const __m512i hsp = bits == 5 ? _mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1) : _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
    const __m512i sidx0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const uint8_t *pb = base + pf.rows * rb.base, *ph = high + pf.rows * rb.high, *ps = scales + pf.rows * rb.scales;
    __m512 alo[NI_Q8PR_ROWS], ahi[NI_Q8PR_ROWS];
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512 sw[NI_Q8PR_ROWS]; /* the rows' combined scales s_w·s_x of 16 groups (fp16 → fp32 is exact) */
    for (int r = 0; r < NR; r++) alo[r] = ahi[r] = sw[r] = _mm512_setzero_ps();
    int64_t g = 0;
    for (; g + 2 <= ngroups; g += 2) {
        ni_prefetch_step(pf, NR, g, pb, 32, ph, hb, ps, 2);
        ni_prefetch_step(pf, NR, g + 1, pb, 32, ph, hb, ps, 2);
        if (!(g & 15)) {
            const int64_t ng = ngroups - g >= 16 ? 16 : ngroups - g;
            const __mmask16 sm = (__mmask16)((1u << ng) - 1);
            /* the 16 groups' activation scales: the even ones of their 32 block scales (group g's at xs[2g]) */
            const __mmask16 m0 = (__mmask16)(2 * ng >= 16 ? 0xffff : (1u << (2 * ng)) - 1);
            const __mmask16 m1 = (__mmask16)(2 * ng >= 32 ? 0xffff : 2 * ng <= 16 ? 0 : (1u << (2 * ng - 16)) - 1);
            const __m512 sx = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, xs + 2 * g), evens,
                                                     _mm512_maskz_loadu_ps(m1, xs + 2 * g + 16));
            for (int r = 0; r < NR; r++)
                sw[r] = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(sm, scales + r * rb.scales + 2 * g)), sx);
        }
        const __m512i sidx = _mm512_add_epi32(sidx0, _mm512_set1_epi32((int)(g & 15)));
        const __m512i xlo = _mm512_loadu_si512((const void *)(xq + 64 * g));
        const __m512i xhi = _mm512_loadu_si512((const void *)(xq + 64 * g + 64));
        const __m512i olo = _mm512_loadu_si512((const void *)(xo + 16 * g));
        const __m512i ohi = _mm512_loadu_si512((const void *)(xo + 16 * g + 16));
        for (int r = 0; r < NR; r++) {
            __m512i b = _mm512_loadu_si512((const void *)(base + r * rb.base + 32 * g));
            if (bits == 4) b = _mm512_xor_si512(b, _mm512_set1_epi8((char)0x88));
            __m512i lo = _mm512_and_si512(b, m4), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
            if (bits == 5) {
                const __m512i src = _mm512_permutexvar_epi64(
                    hsp, _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(high + r * rb.high + 8 * g))));
                lo = _mm512_ternarylogic_epi32(lo, _mm512_multishift_epi64_epi8(clo, src), hm, 0xF2); /* a | (~b & c) */
                hi = _mm512_ternarylogic_epi32(hi, _mm512_multishift_epi64_epi8(chi, src), hm, 0xF2);
            } else if (bits == 6) {
                __m512i src = _mm512_permutexvar_epi64(
                    hsp, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(high + r * rb.high + 16 * g))));
                src = _mm512_xor_si512(src, _mm512_set1_epi8((char)0xAA)); /* bit 2L + 1 = bit 5 of lane L's code */
                lo = _mm512_ternarylogic_epi32(lo, _mm512_multishift_epi64_epi8(clo, src), hm, 0xF8); /* a | (b & c) */
                hi = _mm512_ternarylogic_epi32(hi, _mm512_multishift_epi64_epi8(chi, src), hm, 0xF8);
            }
            const __m512 s2 = _mm512_permutexvar_ps(sidx, sw[r]);
            alo[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(olo, lo, xlo)), s2, alo[r]);
            ahi[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(ohi, hi, xhi)), s2, ahi[r]);
        }
    }
    const __m512i even = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i odd = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m256i m4y = _mm256_set1_epi8(0x0f);
    if (g < ngroups) ni_prefetch_step(pf, NR, g, pb, 32, ph, hb, ps, 2);
    for (int r = 0; r < NR; r++) {
        __m512 acc0 = _mm512_permutex2var_ps(alo[r], even, ahi[r]), acc1 = _mm512_permutex2var_ps(alo[r], odd, ahi[r]);
        if (g < ngroups) { /* the unpaired last group (even), as q8p_vnni_vbmi_nt's step */
            __m256i b = _mm256_loadu_si256((const __m256i *)(base + r * rb.base + 32 * g));
            __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m4y)),
                                            _mm256_and_si256(_mm256_srli_epi16(b, 4), m4y), 1);
            if (bits != 4) wv = ni_perm_or_high_vbmi(bits, wv, high + r * rb.high + hb * g);
            wv = _mm512_xor_si512(wv, sg);
            const __m512i xv = _mm512_loadu_si512((const void *)(xq + 64 * g));
            const __m512i ov = _mm512_loadu_si512((const void *)(xo + 16 * g));
            acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(ov, wv, xv)),
                                   _mm512_set1_ps(q8_scale1(scales + r * rb.scales, g) * xs[2 * g]), acc0);
        }
        out[r * NI_MT_TOKENS] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
}

#define NI_Q8PR(B, R)                                                                                                 \
    q8pr_vnni_vbmi(B, R, base + r0 * rb.base, high + r0 * rb.high, scales + r0 * rb.scales, rb, ngroups, xq, xo, xs,  \
                   pf, out + r0 * NI_MT_TOKENS)
#define NI_Q8PR_NR(B)                                                                                                 \
    switch (nr) {                                                                                                     \
    case 1: NI_Q8PR(B, 1); break;                                                                                     \
    case 2: NI_Q8PR(B, 2); break;                                                                                     \
    case 3: NI_Q8PR(B, 3); break;                                                                                     \
    default: NI_Q8PR(B, 4); break;                                                                                    \
    }

AVX512VNNIVBMIP void ni_q8p_rows_vnni_vbmi(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                           ni_row_block rb, int64_t ngroups, const int8_t *xq, const int32_t *xo,
                                           const float *xs, ni_pf pf, float *out) {
    for (int r0 = 0; r0 < rb.n; r0 += NI_Q8PR_ROWS) {
        const int nr = rb.n - r0 < NI_Q8PR_ROWS ? rb.n - r0 : NI_Q8PR_ROWS;
        switch (bits) {
        case 4: NI_Q8PR_NR(4); break;
        case 5: NI_Q8PR_NR(5); break;
        default: NI_Q8PR_NR(6); break;
        }
    }
}

AVX512VNNIP void ni_q8p_offsets_vnni(int bits, const int8_t *xq, int64_t ngroups, int32_t *xo) {
    const __m512i ov = _mm512_set1_epi8((char)(1 << (bits - 1)));
    for (int64_t g = 0; g < ngroups; g++) {
        __m512i xv = _mm512_loadu_si512((const void *)(xq + 64 * g));
        _mm512_storeu_si512((void *)(xo + 16 * g),
                            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), ov, xv)));
    }
}

AVX512Q8P void ni_q8p_groups_multi_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                          int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe,
                                          int64_t lde, int nt, float *out) {
#undef NI_Q8_NT
#define NI_Q8_NT(B, NT) q8p_512_nt(B, base, high, scales, ngroups, xq, ldq, xe, lde, NT, out)
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    default: NI_Q8_BITS(6);
    }
}

AVX512VNNIP void ni_q8p_groups_multi_vnni(int bits, const uint8_t *base, const uint8_t *high,
                                          const uint8_t *scales, ni_row_block rb, int64_t ngroups,
                                          const int8_t *xq, int64_t ldq, const int32_t *xo, int64_t ldo,
                                          const float *xs, int64_t ldx, int nt, ni_pf pf, float *out) {
#undef NI_Q8_NT
#define NI_Q8_NT(B, NT)                                                                                               \
    for (int r = 0; r < rb.n; r++)                                                                                    \
    q8p_vnni_nt(B, base + r * rb.base, high + r * rb.high, scales + r * rb.scales, ngroups, xq, ldq, xo, ldo, xs,         \
                ldx, NT, pf, rb, out + r * NI_MT_TOKENS)
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    default: NI_Q8_BITS(6);
    }
}

AVX512VNNIVBMIP void ni_q8p_groups_multi_vnni_vbmi(int bits, const uint8_t *base, const uint8_t *high,
                                                   const uint8_t *scales, ni_row_block rb, int64_t ngroups,
                                                   const int8_t *xq, int64_t ldq, const int32_t *xo, int64_t ldo,
                                                   const float *xs, int64_t ldx, int nt, ni_pf pf, float *out) {
#undef NI_Q8_NT
#define NI_Q8_NT(B, NT)                                                                                               \
    for (int r = 0; r < rb.n; r++)                                                                                    \
    q8p_vnni_vbmi_nt(B, base + r * rb.base, high + r * rb.high, scales + r * rb.scales, ngroups, xq, ldq, xo, ldo, xs,    \
                     ldx, NT, pf, rb, out + r * NI_MT_TOKENS)
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    default: NI_Q8_BITS(6);
    }
}

/* Quantizes k fp32 values to int8 codes q[0..kpad) (zero past k) in blocks
 * of blk = 32 or 64 values, one scale per 32 values in s[0..kpad/32) (a
 * 64-value block's twice), as the NI_ACT_Q8 contract says. */
AVX2 void ni_q8_quantize_avx2(const float *x, int64_t k, int64_t kpad, int blk, int8_t *q, float *s) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const int nv = blk / 8;
    for (int64_t b0 = 0; b0 < kpad; b0 += blk) {
        int64_t n = k - b0 < blk ? (k - b0 > 0 ? k - b0 : 0) : blk;
        if (n < blk) { /* partial or padding block: the scalar reference */
            ni_q8_quantize_block(x + b0, (int)n, blk, q + b0, s + b0 / 32);
            continue;
        }
        __m256 v[8], m = _mm256_setzero_ps();
        int bad = 0;
        for (int i = 0; i < nv; i++) {
            v[i] = _mm256_loadu_ps(x + b0 + 8 * i);
            __m256 a = _mm256_and_ps(v[i], absm);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(3.4028235e38f), _CMP_NLE_UQ));
            m = _mm256_max_ps(m, a);
        }
        if (bad) {
            ni_q8_quantize_block(x + b0, blk, blk, q + b0, s + b0 / 32);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < blk / 32; j++) s[b0 / 32 + j] = d;
        __m256 idv = _mm256_set1_ps(id), lim = _mm256_set1_ps(127.0f);
        for (int h = 0; h < nv; h += 4) {
            __m256i c[4];
            for (int i = 0; i < 4; i++) {
                __m256 r = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[h + i], idv), _mm256_set1_ps(-127.0f)), lim);
                c[i] = _mm256_cvtps_epi32(r); /* round to nearest even (MXCSR default) */
            }
            __m256i p01 = _mm256_packs_epi32(c[0], c[1]), p23 = _mm256_packs_epi32(c[2], c[3]);
            __m256i p = _mm256_packs_epi16(p01, p23);
            /* undo the in-lane interleave of the two packs: dwords 0 4 1 5 2 6 3 7 */
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(q + b0 + 8 * h), p); /* codes 8h .. 8h + 31 */
        }
    }
}

/* ---- int8 prefill GEMM: weight panels (ni_q8_gemm_vnni, gemm_q8.c) ---- */

/* Packs rb.n ≤ NI_Q8G_NR rows of a grouped-integer weight (ngroups groups
 * of G = 64 codes, 32 for q8) as offset-binary codes u = q + 2^(bits−1)
 * (0 … 2^bits − 1, bytes) in k-quad order: the 4 codes k = 4j … 4j + 3 of
 * row r (j counted across the row: j = g·G/4 + quad) at
 * pw + 4·(NI_Q8G_NR·j + r); rows r ≥ rb.n get zero codes (their results
 * are not stored). ps[NI_Q8G_NR·g + r] = the fp32 value of row r's group
 * scale. One dpbusd then multiplies 4 codes of 16 rows by the same 4
 * activation codes. */
AVX2 void ni_q8_pack_panel_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                ni_row_block rb, int64_t ngroups, uint8_t *pw, float *ps) {
    const int G = bits == 8 ? 32 : 64, R = NI_Q8G_NR;
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;
    const __m128i off = _mm_set1_epi8((char)(1 << (bits - 1)));
    for (int r = 0; r < R; r++) {
        uint32_t *dst = (uint32_t *)pw + r;
        if (r >= rb.n) {
            for (int64_t j = 0; j < ngroups * G / 4; j++) dst[R * j] = 0;
            for (int64_t g = 0; g < ngroups; g++) ps[R * g + r] = 0;
            continue;
        }
        const uint8_t *br = base + r * rb.base, *hr = high + r * rb.high, *sr = scales + r * rb.scales;
        for (int64_t g = 0; g < ngroups; g++) {
            __m128i q[4];
            int nv = dec_codes(bits, br + 32 * g, hr + hb * g, q);
            for (int v = 0; v < nv; v++) {
                uint32_t u[4];
                _mm_storeu_si128((__m128i *)u, _mm_add_epi8(q[v], off));
                int64_t j = g * (G / 4) + 4 * v;
                dst[R * j] = u[0], dst[R * (j + 1)] = u[1], dst[R * (j + 2)] = u[2], dst[R * (j + 3)] = u[3];
            }
            ps[R * g + r] = _cvtsh_ss((unsigned short)(sr[2 * g] | (sr[2 * g + 1] << 8)));
        }
    }
}
