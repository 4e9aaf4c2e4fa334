/*
 * tcmodel.h — how the harness's mma.sync emulation accumulates: a model of
 * NVIDIA tensor-core arithmetic for bf16/fp16 inputs with fp32 accumulate,
 * selectable at run time (NINFER_SIMT_MMA=ieee|a100|h100|b200).
 *
 * Header-only, no dependencies beyond libc; pure functions (mode_from_env
 * reads the environment). Unit tests: tcmodel_test.cpp.
 *
 * The model (../shared/reference/tensor-core-numerics.md, after Fasi, Higham,
 * Mikaitis & Pranesh, PeerJ CS 7:e330 (2021), and Khattak & Mikaitis,
 * arXiv 2512.07004, models/{A100,H100,B200}TC.m + Generic_BFMA_TC.m; the
 * same algorithm as MMA-Sim's fused_sum, arXiv 2511.10909). One fused step
 * of n products plus the fp32 accumulator c:
 *   1. each product a_i*b_i is exact; its alignment exponent is ea+eb (the
 *      significand is left unnormalised in [1,4));
 *   2. c is one more addend, aligned together with the products;
 *   3. every term is aligned to the largest alignment exponent e_max and
 *      truncated toward zero (on its magnitude) to F fraction bits below
 *      2^e_max: no guard, round or sticky bits;
 *   4. the truncated terms are summed exactly (no carry is lost) and
 *      normalised once, at the end;
 *   5. the sum is rounded toward zero to fp32 (24 significant bits, or the
 *      2^-149 grid for a subnormal result).
 * Zero terms take no part in e_max (as KM), and e_max is clamped from below
 * (KM: -132 on A100, -133 on H100/B200). A zero sum is +0. NaN in, or
 * Inf*0, or +Inf + -Inf: NaN (0x7fffffff). An overflowing sum: ±FLT_MAX
 * (IEEE round-toward-zero; not confirmed by either source).
 *
 * m16n8k16 bf16 per output element:
 *   ieee: acc = c; acc = fmaf(a_k, b_k, acc) for k = 0..15 (the harness's
 *         original emulation, IEEE round-to-nearest-even at every step);
 *   a100: d = step(a[0:8], b[0:8], c), d = step(a[8:16], b[8:16], d); F = 24;
 *   h100, b200: d = step(a[0:16], b[0:16], c); F = 25.
 */
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace tcmodel {

enum Mode { IEEE = 0, A100 = 1, H100 = 2, B200 = 3 };

/* The default when NINFER_SIMT_MMA is unset or empty (README.md, "Tensor-core
 * accumulation model"). */
static const Mode kDefaultMode = A100;

inline const char *mode_name(Mode m) {
    switch (m) {
    case IEEE: return "ieee";
    case A100: return "a100";
    case H100: return "h100";
    default: return "b200";
    }
}

/* "ieee", "a100", "h100" (also "h200", the same model), "b200". */
inline bool parse_mode(const char *s, Mode *out) {
    if (!strcmp(s, "ieee")) *out = IEEE;
    else if (!strcmp(s, "a100")) *out = A100;
    else if (!strcmp(s, "h100") || !strcmp(s, "h200")) *out = H100;
    else if (!strcmp(s, "b200")) *out = B200;
    else return false;
    return true;
}

/* NINFER_SIMT_MMA, or kDefaultMode when unset or empty. An unknown value is
 * fatal: a typo must not silently select another model. */
inline Mode mode_from_env() {
    const char *s = getenv("NINFER_SIMT_MMA");
    if (!s || !*s) return kDefaultMode;
    Mode m;
    if (!parse_mode(s, &m)) {
        fprintf(stderr, "simt: NINFER_SIMT_MMA=%s: expected ieee, a100, h100 (or h200) or b200\n", s);
        exit(2);
    }
    return m;
}

inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
inline float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Finite x = sig * 2^(exp - 23), sig < 2^24 (hidden bit included; a
 * subnormal has exp = -126 and no hidden bit). */
inline void decode(float x, uint64_t *sig, int *exp, bool *neg) {
    uint32_t u = f2u(x), e = (u >> 23) & 0xff, m = u & 0x7fffff;
    *neg = u >> 31;
    if (e == 0) {
        *sig = m;
        *exp = -126;
    } else {
        *sig = m | 0x800000u;
        *exp = (int)e - 127;
    }
}

/* One fused step: RZ_fp32( sum_i trunc_F(a[i]*b[i]) + trunc_F(c) ), the
 * truncation being to the grid 2^(e_max - F) with e_max = max(emax_floor,
 * largest alignment exponent of the nonzero terms). a, b, c any fp32 values
 * (the mma path passes bf16 values); n <= 64, F <= 40. */
inline float fused_step(const float *a, const float *b, int n, float c, int F, int emax_floor) {
    /* special values */
    bool nan = isnan(c), pinf = isinf(c) && c > 0, ninf = isinf(c) && c < 0;
    for (int i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) nan = true;
        else if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] == 0 || b[i] == 0) nan = true;
            else if ((a[i] < 0) != (b[i] < 0)) ninf = true;
            else pinf = true;
        }
    }
    if (nan || (pinf && ninf)) return u2f(0x7fffffffu);
    if (pinf) return INFINITY;
    if (ninf) return -INFINITY;

    /* terms: magnitude M * 2^q, alignment exponent E */
    uint64_t M[65];
    int q[65], E[65];
    bool neg[65];
    int nt = 0;
    for (int i = 0; i < n; i++) {
        uint64_t sa, sb;
        int ea, eb;
        bool na, nb;
        decode(a[i], &sa, &ea, &na);
        decode(b[i], &sb, &eb, &nb);
        if (sa == 0 || sb == 0) continue; /* zero products take no part (KM) */
        M[nt] = sa * sb;                  /* < 2^48, exact */
        q[nt] = ea + eb - 46;
        E[nt] = ea + eb;
        neg[nt] = na != nb;
        nt++;
    }
    {
        uint64_t sc;
        int ec;
        bool nc;
        decode(c, &sc, &ec, &nc);
        if (sc != 0) {
            M[nt] = sc;
            q[nt] = ec - 23;
            E[nt] = ec;
            neg[nt] = nc;
            nt++;
        }
    }
    if (nt == 0) return 0.0f;
    int emax = emax_floor;
    for (int i = 0; i < nt; i++)
        if (E[i] > emax) emax = E[i];
    const int g = emax - F; /* the grid: every term becomes an integer multiple of 2^g */
    int64_t sum = 0;        /* |term| < 2^(F+2), so |sum| < 2^(F+2)·65 */
    for (int i = 0; i < nt; i++) {
        int sh = q[i] - g;
        uint64_t t;
        if (sh >= 0) t = M[i] << sh; /* only c, by at most F - 23 */
        else t = -sh >= 64 ? 0 : M[i] >> -sh; /* truncation toward zero of the magnitude */
        sum += neg[i] ? -(int64_t)t : (int64_t)t;
    }
    if (sum == 0) return 0.0f;
    const bool sneg = sum < 0;
    uint64_t mag = sneg ? (uint64_t)(-sum) : (uint64_t)sum;
    int top = 63 - __builtin_clzll(mag); /* leading bit is 2^(top + g) */
    int L = top + g;
    if (L > 127) return sneg ? -3.40282347e38f : 3.40282347e38f; /* RZ overflow */
    int lsb = L - 23;
    if (lsb < -149) lsb = -149;
    int sh = lsb - g;
    if (sh > 0) mag >>= sh; /* RZ: drop the bits below the 24th (or below 2^-149) */
    else mag <<= -sh;
    float r = (float)ldexp((double)mag, lsb); /* mag < 2^24 on a representable grid: exact */
    return sneg ? -r : r;
}

/* One output element of mma.m16n8k16 with fp32 accumulate: c + sum_k a[k]*b[k]
 * (a, b the bf16 values as floats), accumulated as `mode` does. */
inline float mma_k16(Mode mode, const float a[16], const float b[16], float c) {
    switch (mode) {
    case IEEE: {
        float acc = c;
        for (int k = 0; k < 16; k++) acc = fmaf(a[k], b[k], acc);
        return acc;
    }
    case A100: {
        float d = fused_step(a, b, 8, c, 24, -132);
        return fused_step(a + 8, b + 8, 8, d, 24, -132);
    }
    default: /* H100, B200 */
        return fused_step(a, b, 16, c, 25, -133);
    }
}

} // namespace tcmodel
