/*
 * tcmodel_test.cpp — unit tests of tcmodel.h, the tensor-core accumulation
 * model of the harness's mma emulation. Hand-worked cases from
 * ../shared/reference/tensor-core-numerics.md, an independent double-based
 * restatement of the model on random data, its error bound, exactness on
 * small integers, and that ieee mode is the original fmaf chain bit for bit.
 * Last line: "N passed, M failed"; exit status 0 iff M == 0.
 *   g++ -std=c++17 -O2 -Wall -Wextra -ffp-contract=off kernels/cuda/simt/tcmodel_test.cpp -o tcmodel_test
 *   tcmodel_test [seed]      tcmodel_test --print-mode (the model NINFER_SIMT_MMA selects)
 */
#include "tcmodel.h"

#include <fenv.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

using tcmodel::A100;
using tcmodel::B200;
using tcmodel::H100;
using tcmodel::IEEE;
using tcmodel::Mode;

#include "minitest.h"

static uint64_t g_rng = 1;
static uint64_t rnd() { /* splitmix64 */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rrange(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

static const Mode kModes[4] = {IEEE, A100, H100, B200};

/* One mma output element from a short list of (a, b) pairs (the rest zero). */
struct Dot {
    float a[16] = {0}, b[16] = {0};
    float c = 0;
    Dot &p(int k, float x, float y) {
        a[k] = x;
        b[k] = y;
        return *this;
    }
    float run(Mode m) const { return tcmodel::mma_k16(m, a, b, c); }
};

static bool same(float x, float y) { return tcmodel::f2u(x) == tcmodel::f2u(y); }
static const float P = 1.0f; /* readability: p(k, value, P) is a product equal to value */

/* Checks the four modes against expected values (bit for bit, +0 ≠ -0). */
static bool expect(const char *what, const Dot &d, float ieee, float a100, float h100) {
    const float want[4] = {ieee, a100, h100, h100};
    for (int i = 0; i < 4; i++) {
        float got = d.run(kModes[i]);
        CHECK(same(got, want[i]), "%s: %s gives %a, expected %a", what, tcmodel::mode_name(kModes[i]), got, want[i]);
    }
    return true;
}

/* ---- hand-worked cases ------------------------------------------------------- */

/* c = 1, one product 1.5·2^-23: exact 1 + 2^-23 + 2^-24, a tie at fp32.
 * IEEE RNE goes to the even 1 + 2^-22; the models keep the term exactly
 * (F ≥ 24) and RZ the sum to 1 + 2^-23: the last bit differs. */
static bool t_last_bit() {
    Dot d;
    d.c = 1;
    d.p(0, 1.5f * 0x1p-23f, P);
    if (!expect("1 + 1.5*2^-23", d, 1 + 0x1p-22f, 1 + 0x1p-23f, 1 + 0x1p-23f)) return false;
    /* the same below zero: RZ is toward zero on the magnitude */
    Dot e;
    e.c = -1;
    e.p(0, -1.5f * 0x1p-23f, P);
    return expect("-1 - 1.5*2^-23", e, -1 - 0x1p-22f, -1 - 0x1p-23f, -1 - 0x1p-23f);
}

/* Alignment to e_max = 0 keeps F fraction bits: 2^-25 survives on H100
 * (F = 25) and is dropped on A100 (F = 24); 2^-26 is dropped by both.
 * IEEE drops each one in turn (1 + 2^-25 rounds to 1). */
static bool t_alignment_drops() {
    Dot d;
    d.c = 1;
    for (int k = 0; k < 16; k++) d.p(k, 0x1p-25f, P);
    if (!expect("1 + 16*2^-25", d, 1, 1, 1 + 0x1p-21f)) return false;
    Dot e;
    e.c = 1;
    for (int k = 0; k < 16; k++) e.p(k, 0x1p-26f, P);
    if (!expect("1 + 16*2^-26", e, 1, 1, 1)) return false;
    /* 2^-24: kept by both models (normalised once at the end), while each
     * IEEE step is a tie that rounds back to 1 */
    Dot f;
    f.c = 1;
    for (int k = 0; k < 16; k++) f.p(k, 0x1p-24f, P);
    return expect("1 + 16*2^-24", f, 1, 1 + 0x1p-20f, 1 + 0x1p-20f);
}

/* The accumulator is one more addend: with products ±4 (e_max = 2) c = 1 +
 * 2^-23 sits on H100's grid 2^-23 but loses its last bit on A100's 2^-22;
 * with ±8 (e_max = 3) H100 loses it too. IEEE loses it through 5 + 2^-23. */
static bool t_c_truncated() {
    Dot d;
    d.c = 1 + 0x1p-23f;
    d.p(0, 2, 2).p(1, -2, 2);
    if (!expect("(1+2^-23) + 4 - 4", d, 1, 1, 1 + 0x1p-23f)) return false;
    Dot e;
    e.c = 1 + 0x1p-23f;
    e.p(0, 2, 4).p(1, -2, 4);
    return expect("(1+2^-23) + 8 - 8", e, 1, 1, 1);
}

/* Cancellation. 1 + 2^-24 - 1: the models normalise once, at the end, so
 * the small term survives (exact 2^-24); IEEE rounds 1 + 2^-24 to 1 first.
 * 1 + 2^-26 - 1: the models drop 2^-26 at alignment; the zero is +0. */
static bool t_cancellation() {
    Dot d;
    d.p(0, 1, P).p(1, 0x1p-24f, P).p(2, -1, P);
    if (!expect("1 + 2^-24 - 1", d, 0, 0x1p-24f, 0x1p-24f)) return false;
    Dot e;
    e.p(0, 1, P).p(1, 0x1p-26f, P).p(2, -1, P);
    if (!expect("1 + 2^-26 - 1", e, 0, 0, 0)) return false;
    /* exact zero sum: +0 in the models, whatever the signs */
    Dot f;
    f.c = -0.0f;
    f.p(0, -1, P).p(1, 1, P);
    for (int i = 1; i < 4; i++) CHECK(same(f.run(kModes[i]), 0.0f), "-1 + 1 + (-0) not +0");
    return true;
}

/* Each term is truncated toward zero on its own magnitude: -3·2^-27 (0.75
 * of H100's grid unit 2^-25) becomes 0, not -2^-25 (floor would give
 * 1 - 2^-25 → RZ 1 - 2^-24). */
static bool t_trunc_toward_zero() {
    Dot d;
    d.c = 1;
    d.p(0, -1.5f * 0x1p-26f, P);
    if (!expect("1 - 3*2^-27", d, 1, 1, 1)) return false;
    /* -(2^-24 + 2^-25): A100 keeps -2^-24 of it, H100 all; RZ of 1 - 1.5·2^-24
     * (leading bit 2^-1, lsb 2^-24) gives 1 - 2^-23 on H100 */
    Dot e;
    e.c = 1;
    e.p(0, -1.5f * 0x1p-24f, P);
    return expect("1 - 1.5*2^-24", e, 1 - 0x1p-23f, 1 - 0x1p-24f, 1 - 0x1p-23f);
}

/* A100 runs k16 as two fused steps of 8: order across them matters. Eight
 * 2^-25 in the first step sum exactly to 2^-22, which the second step keeps;
 * after 1 in the first step, they are dropped in the second. */
static bool t_a100_two_steps() {
    Dot d;
    for (int k = 0; k < 8; k++) d.p(k, 0x1p-25f, P);
    d.p(8, 1, P);
    if (!expect("8*2^-25 | 1", d, 1 + 0x1p-22f, 1 + 0x1p-22f, 1 + 0x1p-22f)) return false;
    Dot e;
    e.p(0, 1, P);
    for (int k = 8; k < 16; k++) e.p(k, 0x1p-25f, P);
    /* IEEE: 1 + 2^-25 rounds to 1 each time */
    return expect("1 | 8*2^-25", e, 1, 1, 1 + 0x1p-22f);
}

/* A subnormal result is truncated on the 2^-149 grid. (Tiny values are where
 * the published models differ; this checks this implementation's choice.) */
static bool t_subnormal() {
    Dot d;
    d.p(0, 1.75f * 0x1p-75f, 0x1p-74f); /* 1.75·2^-149 */
    if (!expect("1.75*2^-149", d, 0x1p-148f, 0x1p-149f, 0x1p-149f)) return false;
    Dot e;
    e.p(0, 1.5f * 0x1p-74f, 0x1p-74f); /* 3·2^-149, exact */
    return expect("3*2^-149", e, 3 * 0x1p-149f, 3 * 0x1p-149f, 3 * 0x1p-149f);
}

/* NaN, Inf·0, +Inf + -Inf give NaN; products may exceed fp32 range inside a
 * step and cancel. */
static bool t_special() {
    for (int i = 1; i < 4; i++) {
        Mode m = kModes[i];
        Dot d;
        d.p(3, NAN, 1);
        CHECK(isnan(d.run(m)), "%s: NaN input", tcmodel::mode_name(m));
        Dot e;
        e.p(0, INFINITY, 0);
        CHECK(isnan(e.run(m)), "%s: Inf*0", tcmodel::mode_name(m));
        Dot f;
        f.c = -INFINITY;
        f.p(9, INFINITY, 2);
        CHECK(isnan(f.run(m)), "%s: Inf - Inf", tcmodel::mode_name(m));
        Dot g;
        g.c = 1;
        g.p(12, -INFINITY, 2);
        CHECK(same(g.run(m), -INFINITY), "%s: -Inf", tcmodel::mode_name(m));
        Dot h;
        h.c = 0x1p-20f;
        h.p(0, 0x1p100f, 0x1p100f).p(1, -0x1p100f, 0x1p100f);
        CHECK(same(h.run(m), 0.0f), "%s: 2^200 - 2^200 + 2^-20 gave %a (c is dropped at alignment)",
              tcmodel::mode_name(m), h.run(m));
    }
    return true;
}

/* ---- random properties ---------------------------------------------------------- */

static float rand_bf16(int elo, int ehi) {
    uint32_t s = rnd() & 1, e = (uint32_t)(127 + rrange(elo, ehi)), m = rnd() & 0x7f;
    return tcmodel::u2f(s << 31 | e << 23 | m << 16);
}
static float rand_f32(int elo, int ehi) {
    uint32_t s = rnd() & 1, e = (uint32_t)(127 + rrange(elo, ehi)), m = rnd() & 0x7fffff;
    return tcmodel::u2f(s << 31 | e << 23 | m);
}

/* The model restated in doubles, written independently of tcmodel.h for
 * normal inputs: each term is trunc(x / 2^(e_max−F))·2^(e_max−F) (exact in
 * double: bf16 products have 16 bits, terms < 2^(F+2) grid units, the sum of
 * 17 < 2^32), then the double is converted to float with FE_TOWARDZERO. */
static float ref_step(const float *a, const float *b, int n, float c, int F) {
    int emax = INT_MIN;
    for (int i = 0; i < n; i++)
        if (a[i] != 0 && b[i] != 0 && ilogbf(a[i]) + ilogbf(b[i]) > emax) emax = ilogbf(a[i]) + ilogbf(b[i]);
    if (c != 0 && ilogbf(c) > emax) emax = ilogbf(c);
    if (emax == INT_MIN) return 0;
    const double grid = ldexp(1.0, emax - F);
    double s = trunc((double)c / grid) * grid;
    for (int i = 0; i < n; i++) s += trunc((double)a[i] * (double)b[i] / grid) * grid;
    if (s == 0) return 0;
    fesetround(FE_TOWARDZERO);
    volatile double vs = s;
    volatile float r = (float)vs;
    fesetround(FE_TONEAREST);
    return r;
}
static float ref_k16(Mode m, const float *a, const float *b, float c) {
    if (m == A100) return ref_step(a + 8, b + 8, 8, ref_step(a, b, 8, c, 24), 24);
    return ref_step(a, b, 16, c, 25);
}

/* Random tiles at several exponent spreads (narrow: little dropped; wide:
 * whole terms dropped), c from tiny to dominant: tcmodel == the restatement. */
static bool t_random_vs_restatement() {
    const int spreads[4][2] = {{-2, 2}, {-6, 6}, {-20, 20}, {-40, 40}};
    for (int it = 0; it < 40000; it++) {
        const int *sp = spreads[it % 4];
        float a[16], b[16];
        for (int k = 0; k < 16; k++) {
            a[k] = rand_bf16(sp[0], sp[1]);
            b[k] = rand_bf16(sp[0], sp[1]);
            if (rnd() % 8 == 0) a[k] = 0;
        }
        float c = (it % 5 == 0) ? 0.0f : rand_f32(2 * sp[0] - 4, 2 * sp[1] + 4);
        for (int i = 1; i < 4; i++) {
            float got = tcmodel::mma_k16(kModes[i], a, b, c), want = ref_k16(kModes[i], a, b, c);
            CHECK(same(got, want), "iteration %d %s: %a, restatement %a", it, tcmodel::mode_name(kModes[i]), got,
                  want);
        }
    }
    return true;
}

/* |d − exact| ≤ u·S per fused step, u = 2^-23 + n·2^-F (= 5·2^-23 for all
 * three), S = |c| + Σ|a b| (the reference's §4); A100's two steps: d1 is
 * within u·S1 and then d within u·(|d1| + S2), so within ≈ 2u·S. The IEEE
 * chain: 16 roundings, each ≤ 2^-24 of a partial sum ≤ S(1 + 2^-24)^16. */
static bool t_error_bound() {
    const double u = 5 * 0x1p-23;
    for (int it = 0; it < 20000; it++) {
        float a[16], b[16];
        for (int k = 0; k < 16; k++) {
            a[k] = rand_bf16(-8, 8);
            b[k] = rand_bf16(-8, 8);
        }
        float c = rand_f32(-10, 10);
        double ex = c, S = fabs((double)c);
        for (int k = 0; k < 16; k++) {
            ex += (double)a[k] * b[k];
            S += fabs((double)a[k] * b[k]);
        }
        const double bound[4] = {16 * 0x1p-24 * 1.0001 * S, (2 * u + u * u) * S, u * S, u * S};
        for (int i = 0; i < 4; i++) {
            double err = fabs((double)tcmodel::mma_k16(kModes[i], a, b, c) - ex);
            CHECK(err <= bound[i], "iteration %d %s: error %.3g > bound %.3g (S = %.6g)", it,
                  tcmodel::mode_name(kModes[i]), err, bound[i], S);
        }
    }
    return true;
}

/* a, b in −8…8 and c in −64…64: every partial sum is a small integer, so every
 * mode gives the exact value. */
static bool t_small_integers_exact() {
    for (int it = 0; it < 20000; it++) {
        float a[16], b[16];
        long ex = rrange(-64, 64);
        float c = (float)ex;
        for (int k = 0; k < 16; k++) {
            a[k] = (float)rrange(-8, 8);
            b[k] = (float)rrange(-8, 8);
            ex += (long)a[k] * (long)b[k];
        }
        for (int i = 0; i < 4; i++) {
            float got = tcmodel::mma_k16(kModes[i], a, b, c);
            CHECK(got == (float)ex, "iteration %d %s: %.9g, exact %ld", it, tcmodel::mode_name(kModes[i]), got, ex);
            CHECK(ex != 0 || same(got, 0.0f) || i == 0, "%s: zero sum is not +0", tcmodel::mode_name(kModes[i]));
        }
    }
    return true;
}

/* ieee mode is the harness's original emulation, kept verbatim here. */
static float old_emulation(const float *A, const float *B, float C) {
    float acc = C;
    for (int k = 0; k < 16; k++) acc = fmaf(A[k], B[k], acc);
    return acc;
}
static bool t_ieee_is_old_chain() {
    for (int it = 0; it < 40000; it++) {
        float a[16], b[16];
        for (int k = 0; k < 16; k++) {
            a[k] = rand_bf16(-30, 30);
            b[k] = rand_bf16(-30, 30);
        }
        float c = rand_f32(-60, 60);
        if (it % 1000 == 1) a[it % 16] = INFINITY;
        if (it % 1000 == 2) c = NAN;
        float got = tcmodel::mma_k16(IEEE, a, b, c), want = old_emulation(a, b, c);
        CHECK(same(got, want), "iteration %d: %a, old chain %a", it, got, want);
    }
    return true;
}

static bool t_modes() {
    Mode m;
    CHECK(tcmodel::parse_mode("ieee", &m) && m == IEEE, "ieee");
    CHECK(tcmodel::parse_mode("a100", &m) && m == A100, "a100");
    CHECK(tcmodel::parse_mode("h100", &m) && m == H100, "h100");
    CHECK(tcmodel::parse_mode("h200", &m) && m == H100, "h200");
    CHECK(tcmodel::parse_mode("b200", &m) && m == B200, "b200");
    CHECK(!tcmodel::parse_mode("H100", &m) && !tcmodel::parse_mode("", &m) && !tcmodel::parse_mode("v100", &m),
          "unknown names must be refused");
    unsetenv("NINFER_SIMT_MMA");
    CHECK(tcmodel::mode_from_env() == tcmodel::kDefaultMode, "default");
    setenv("NINFER_SIMT_MMA", "b200", 1);
    CHECK(tcmodel::mode_from_env() == B200, "from env");
    return true;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--print-mode")) { /* the model NINFER_SIMT_MMA selects (run-tests.sh) */
        printf("%s\n", tcmodel::mode_name(tcmodel::mode_from_env()));
        return 0;
    }
    g_rng = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1;
    printf("tcmodel test: seed %llu, default model %s\n", (unsigned long long)g_rng,
           tcmodel::mode_name(tcmodel::kDefaultMode));
    run("last_bit_rz_vs_rne", t_last_bit);
    run("alignment_drops_small_addends", t_alignment_drops);
    run("accumulator_is_aligned_too", t_c_truncated);
    run("cancellation_normalised_once", t_cancellation);
    run("truncation_toward_zero_per_term", t_trunc_toward_zero);
    run("a100_two_steps", t_a100_two_steps);
    run("subnormal_result_grid", t_subnormal);
    run("special_values", t_special);
    run("random_vs_double_restatement", t_random_vs_restatement);
    run("error_bound_per_step", t_error_bound);
    run("small_integers_exact", t_small_integers_exact);
    run("ieee_is_old_fmaf_chain", t_ieee_is_old_chain);
    run("mode_names_and_env", t_modes);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
