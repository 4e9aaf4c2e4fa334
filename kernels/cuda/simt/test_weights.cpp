/*
 * test_weights.cpp — the weight family (kernels/cuda/weights.cu:
 * ni_cuda_embed, ni_cuda_matmul for all 8 formats) under the host SIMT
 * harness, against the CPU backend (kernels/cpu, C linkage) and an FP64
 * oracle on the same random inputs.
 *
 *   kernels/cuda/simt/cpuref.sh
 *   g++ -std=c++17 -O2 -DNI_SIMT -I kernels/cuda -I kernels -x c++ kernels/cuda/weights.cu \
 *       kernels/cuda/ctx.cu kernels/cuda/simt/simt.cpp kernels/cuda/simt/test_weights.cpp \
 *       -x none build/simt/libcpuref.a -pthread -lm -o /tmp/test_weights && /tmp/test_weights [seed]
 *
 * Encoded weights are random valid bytes in each format's layout (code and
 * high-bit planes random, scales random finite fp16 / e4m3 / bf16; the
 * padding groups of q4..q8 beyond K get NaN scales, which must never reach
 * an output); ni_weight_decode_row (CPU) gives the reference weight values.
 *
 * Tolerances (u = 2^-24; S = Σ_k |x_k·w_k| in FP64, w the decoded weights):
 *   fp32-FMA routes (GEMV T ≤ 16 for every format, fp32 SIMT GEMM, and the
 *     CPU): any order of ≤ K fp32 additions of exactly-rounded products
 *     (or FMAs) plus a 5-level warp tree errs by ≤ (K + 6)·u·S; decoded
 *     weights are bit-identical to the oracle's. Bound: (K + 8)·u·S.
 *   tensor-core GEMM (T > 16, not fp32): activations enter as hi + mid + lo
 *     bf16 with |x − hi − mid − lo| ≤ 2^-8·2^-8·2^-8·|x| = 2^-24·|x| (three
 *     RNE roundings to 8 significant bits of exact remainders); bf16 × bf16
 *     products are exact; each mma adds its 16 products to the fp32
 *     accumulator with at most 2 roundings that may truncate (≤ 2^-23
 *     relative each, over at most S), 3·⌈K/16⌉ mma's per output; the fp32
 *     group-scale fold adds ⌈K/G⌉ roundings (≤ u·S each); the epilogue scale
 *     and nvfp4's reassociated e4m3·inv_div another 3u·S.
 *     Bound: (2^-24 + 6·⌈K/16⌉·2^-23 + (⌈K/G⌉ + 3)·u)·S.
 *   accumulate: one more rounding of y0 + v: + u·(|y0| + S) on every bound.
 *   embed: decode is the same arithmetic as ni_weight_decode_row: exact.
 * Checks per element: |dev − oracle| ≤ B_dev, |cpu − oracle| ≤ B_cpu,
 * |dev − cpu| ≤ B_dev + B_cpu, and untouched padding of y / out; NaN never
 * passes (comparisons are !(err <= tol)).
 *
 * Route boundary (no nvcc needed): every T ≤ 16 GEMV result must equal the
 * T = 1 GEMV bit for bit per token (the GEMV's per-lane sum order does not
 * depend on the token block), and the T = 17 result must differ from it
 * somewhere (a different route: the GEMM) — so T = 16 ran the GEMV and
 * T = 17 did not. The last line is "N passed, M failed"; exit 0 iff M == 0.
 */
#include "ni_cuda.h"
#include "optest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <vector>

static const double U = 1.0 / 16777216.0; /* 2^-24 */

static int g_pass, g_fail;
static ni_ctx *CPU;

static float normal(float s) {
    double a = uni(), b = uni();
    return (float)(s * sqrt(-2.0 * log(a + 1e-300)) * cos(6.283185307179586 * b));
}
static uint16_t to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static void check(bool ok, const std::string &name, const char *fmt = "", double a = 0, double b = 0) {
    if (ok) {
        g_pass++;
        return;
    }
    g_fail++;
    printf("FAIL %s", name.c_str());
    if (*fmt) printf(fmt, a, b);
    printf("\n");
}

/* Syncs; a launch error is a failed check (counted). */
static bool wsync(const std::string &what, int32_t *cnt) {
    char err[512] = {0};
    int32_t c[NI_CUDA_ERR_N];
    int code = ni_cuda_sync(G, c, err, sizeof err);
    if (cnt) memcpy(cnt, c, sizeof c);
    if (code) {
        printf("FAIL %s: launch error %d: %s\n", what.c_str(), code, err);
        g_fail++;
        return false;
    }
    return true;
}

static const char *fname(int f) {
    static const char *n[] = {"f32", "bf16", "q4", "q5", "q6", "q8", "nvfp4", "fp8row"};
    return n[f];
}

/* ---- random encoded weights ---- */
struct Wt {
    int fmt;
    int64_t n, k;
    std::vector<uint8_t> bytes;
    ni_weight hw;             /* host geometry + host data */
    ni_weight dw;             /* same geometry, device data */
    std::vector<float> dec;   /* decoded rows [n][k] (CPU decoder) */
    uint8_t *dptr;
};

static uint8_t rand_e4m3(int lo, int hi) { /* magnitude codes lo..hi, random sign */
    return (uint8_t)((lo + (int)(rnd() % (uint64_t)(hi - lo + 1))) | ((rnd() & 1) ? 0x80 : 0));
}

static Wt make_weight(int fmt, int64_t n, int64_t k) {
    Wt W;
    W.fmt = fmt, W.n = n, W.k = k;
    ni_weight g;
    ni_weight_init(&g, fmt, n, k, NULL, 0); /* geometry (returns -2: no data) */
    W.bytes.assign((size_t)g.bytes, 0);
    uint8_t *b = W.bytes.data();
    switch (fmt) {
    case NI_W_F32:
        for (int64_t i = 0; i < n * k; i++) {
            float v = normal(1.0f);
            memcpy(b + 4 * i, &v, 4);
        }
        break;
    case NI_W_BF16:
        for (int64_t i = 0; i < n * k; i++) {
            uint16_t v = to_bf16(normal(1.0f));
            memcpy(b + 2 * i, &v, 2);
        }
        break;
    case NI_W_Q4:
    case NI_W_Q5:
    case NI_W_Q6:
    case NI_W_Q8: {
        for (int64_t i = 0; i < g.scale_off; i++) b[i] = (uint8_t)rnd(); /* code planes (and the zero gaps) */
        for (int64_t r = 0; r < n; r++)
            for (int64_t gi = 0; gi < g.gpr; gi++) {
                uint16_t s = gi * g.group >= k ? (uint16_t)0x7e00 /* NaN: must never be used */
                                               : ni_f32_to_f16((float)((0.5 + uni()) * 0.125 * ((rnd() & 1) ? -1 : 1)));
                memcpy(b + g.scale_off + 2 * (r * g.gpr + gi), &s, 2);
            }
        break;
    }
    case NI_W_NVFP4: {
        for (int64_t i = 0; i < n * k / 2; i++) b[i] = (uint8_t)rnd();
        for (int64_t i = 0; i < n * (k / 16); i++) b[g.scale_off + i] = rand_e4m3(0x20, 0x48) & 0x7f; /* scales ≥ 0 */
        float d = 3.0f;
        memcpy(b + g.div_off, &d, 4);
        break;
    }
    case NI_W_FP8ROW: {
        for (int64_t i = 0; i < n * k; i++) {
            uint8_t c = (uint8_t)rnd();
            if ((c & 0x7f) == 0x7f) c ^= 1; /* no NaN codes */
            b[i] = c;
        }
        for (int64_t r = 0; r < n; r++) {
            uint16_t s = to_bf16((float)((0.5 + uni()) * 0.01));
            memcpy(b + g.scale_off + 2 * r, &s, 2);
        }
        break;
    }
    }
    if (ni_weight_init(&W.hw, fmt, n, k, W.bytes.data(), (int64_t)W.bytes.size()) != 0) {
        fprintf(stderr, "ni_weight_init(%s, %lld, %lld) failed\n", fname(fmt), (long long)n, (long long)k);
        exit(2);
    }
    W.dec.resize((size_t)(n * k));
    for (int64_t r = 0; r < n; r++) ni_weight_decode_row(&W.hw, r, W.dec.data() + r * k);
    W.dptr = dev_put(W.bytes);
    W.dw = W.hw;
    W.dw.data = W.dptr;
    return W;
}

/* ---- matmul case ---- */
static bool is_gemm_tc(int fmt, int T) { return T > NI_SMALL_T && fmt != NI_W_F32; }

/* Runs one matmul case; returns the device result [T][N] (dense) for the
 * route-boundary checks. */
static std::vector<float> run_matmul(const Wt &W, int T, int acc, int xpad, int ypad, bool quiet = false) {
    const int64_t N = W.n, K = W.k, ldx = K + xpad, ldy = N + ypad;
    char nm[160];
    snprintf(nm, sizeof nm, "matmul/%s[%lld,%lld]/T=%d/acc=%d/ldx=%lld/ldy=%lld", fname(W.fmt), (long long)N,
             (long long)K, T, acc, (long long)ldx, (long long)ldy);
    std::vector<float> x((size_t)(T * ldx + 1)), y0((size_t)(T * ldy + 1));
    for (int t = 0; t < T; t++)
        for (int64_t k = 0; k < ldx; k++) x[(size_t)(t * ldx + k)] = k < K ? normal(1.0f) : NAN; /* padding: NaN */
    for (auto &v : y0) v = normal(1.0f);
    float *dx = dev_put(x), *dy = dev_put(y0);
    ni_rows xr = {dx, T, 1, (int32_t)K, ldx, K}, yr = {dy, T, 1, (int32_t)N, ldy, N};
    ni_cuda_matmul(G, &W.dw, xr, yr, acc);
    std::vector<float> out((size_t)(T * N));
    if (!wsync(nm, NULL)) {
        ni_cuda_free(G, dx), ni_cuda_free(G, dy);
        return out;
    }
    std::vector<float> gy = dev_get(dy, y0.size());
    std::vector<float> cy = y0;
    ni_rows cx = {x.data(), T, 1, (int32_t)K, ldx, K}, cyr = {cy.data(), T, 1, (int32_t)N, ldy, N};
    ni_matmul(CPU, &W.hw, cx, cyr, acc);
    const bool tc = is_gemm_tc(W.fmt, T);
    const int G_ = W.fmt == NI_W_Q8 ? 32 : 64;
    int bad = 0, badpad = 0;
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, S = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)x[(size_t)(t * ldx + k)] * (double)W.dec[(size_t)(n * K + k)];
                s += p, S += fabs(p);
            }
            const double y0v = y0[(size_t)(t * ldy + n)];
            if (acc) s += y0v;
            const double accb = acc ? U * (fabs(y0v) + S) : 0.0;
            const double bc = (K + 8) * U * S + accb + 1e-30;
            const double bd = (tc ? (ldexp(1.0, -24) + 6.0 * ((K + 15) / 16) * ldexp(1.0, -23) +
                                     ((K + G_ - 1) / G_ + 3) * U) * S
                                  : (K + 8) * U * S) + accb + 1e-30;
            const double gv = gy[(size_t)(t * ldy + n)], cv = cy[(size_t)(t * ldy + n)];
            const double eg = fabs(gv - s), ec = fabs(cv - s), egc = fabs(gv - cv);
            if (!(eg <= bd) || !(ec <= bc) || !(egc <= bd + bc)) {
                if (bad < 3 && !quiet)
                    printf("  %s y[%d,%lld]: dev %.9g cpu %.9g oracle %.9g (bound dev %.3g cpu %.3g)\n", nm, t,
                           (long long)n, gv, cv, s, bd, bc);
                bad++;
            }
            if (eg / bd > worst) worst = eg / bd;
            out[(size_t)(t * N + n)] = (float)gv;
        }
    for (size_t i = 0; i < gy.size(); i++) { /* padding of y (and the guard element) untouched */
        const int64_t t = (int64_t)i / ldy, n = (int64_t)i % ldy;
        if ((t >= T || n >= N) && memcmp(&gy[i], &y0[i], 4) != 0) badpad++;
    }
    if (getenv("NIW_VERBOSE")) printf("  %s worst %.3g of bound\n", nm, worst);
    check(bad == 0, nm, ": %.0f elements outside the bound%s", bad, 0);
    check(badpad == 0, std::string(nm) + "/padding", ": %.0f padding elements changed%s", badpad, 0);
    ni_cuda_free(G, dx), ni_cuda_free(G, dy);
    return out;
}

/* Route boundary: T ≤ 16 GEMV bit-identical per token to T = 1; T = 17 not.
 * Uses the same x rows for every T (the first T rows of one x). */
static void route_boundary(const Wt &W) {
    const int64_t N = W.n, K = W.k;
    const int TM = 17;
    std::vector<float> x((size_t)(TM * K));
    for (auto &v : x) v = normal(1.0f);
    float *dx = dev_put(x);
    float *dy = dev_put(std::vector<float>((size_t)(TM * N)));
    std::vector<std::vector<float>> res;
    const int Ts[] = {1, 2, 3, 4, 5, 16, 17};
    for (int T : Ts) {
        ni_rows xr = {dx, T, 1, (int32_t)K, K, K}, yr = {dy, T, 1, (int32_t)N, N, N};
        ni_cuda_matmul(G, &W.dw, xr, yr, 0);
        wsync("route", NULL);
        res.push_back(dev_get(dy, (size_t)(T * N)));
    }
    /* res[i][t·N + n] vs the T = 1 result of token t: run T = 1 per token */
    std::vector<float> one((size_t)(TM * N));
    for (int t = 0; t < TM; t++) {
        ni_rows xr = {dx + t * K, 1, 1, (int32_t)K, K, K}, yr = {dy, 1, 1, (int32_t)N, N, N};
        ni_cuda_matmul(G, &W.dw, xr, yr, 0);
        wsync("route", NULL);
        std::vector<float> r = dev_get(dy, (size_t)N);
        memcpy(one.data() + t * N, r.data(), (size_t)N * 4);
    }
    for (size_t i = 0; i < res.size(); i++) {
        const int T = Ts[i];
        int diff = 0;
        for (int64_t j = 0; j < T * N; j++) diff += memcmp(&res[i][(size_t)j], &one[(size_t)j], 4) != 0;
        char nm[96];
        snprintf(nm, sizeof nm, "route/%s[%lld,%lld]/T=%d", fname(W.fmt), (long long)N, (long long)K, T);
        if (T <= NI_SMALL_T) check(diff == 0, std::string(nm) + " GEMV bit-identical to T=1", ": %.0f differ%s", diff, 0);
        else check(diff > 0, std::string(nm) + " not the GEMV route", ": %.0f differ%s", diff, 0);
    }
    ni_cuda_free(G, dx), ni_cuda_free(G, dy);
}

/* NaN codes (nvfp4 block scale 0x7f, fp8 code 0xff) surface as NaN in exactly
 * the affected output row on every route. */
static void nan_rows(int fmt) {
    const int64_t N = 128, K = 128, bad = 5;
    Wt W = make_weight(fmt, N, K);
    if (fmt == NI_W_NVFP4) { /* row 5, block 6: chunk 1, slot 2 */
        W.bytes[(size_t)(W.hw.scale_off + 1 * 512 + (bad % 32) * 16 + (bad / 32) * 4 + 2)] = 0x7f;
    } else {
        W.bytes[(size_t)(bad * K + K - 3)] = 0xff;
    }
    ni_cuda_h2d(G, W.dptr, W.bytes.data(), (int64_t)W.bytes.size());
    for (int T : {1, 3, 16, 17}) {
        std::vector<float> x((size_t)(T * K));
        for (auto &v : x) v = normal(1.0f);
        float *dx = dev_put(x), *dy = dev_put(std::vector<float>((size_t)(T * N)));
        ni_rows xr = {dx, T, 1, (int32_t)K, K, K}, yr = {dy, T, 1, (int32_t)N, N, N};
        ni_cuda_matmul(G, &W.dw, xr, yr, 0);
        char nm[96];
        snprintf(nm, sizeof nm, "nan/%s/T=%d", fname(fmt), T);
        if (!wsync(nm, NULL)) continue;
        std::vector<float> y = dev_get(dy, (size_t)(T * N));
        int wrong = 0;
        for (int t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++) wrong += (bool)isnan(y[(size_t)(t * N + n)]) != (n == bad);
        check(wrong == 0, nm, ": %.0f outputs with the wrong NaN-ness%s", wrong, 0);
        ni_cuda_free(G, dx), ni_cuda_free(G, dy);
    }
    ni_cuda_free(G, W.dptr);
}

/* Embedding: T = 6 ids with one bad id (n) and one negative; out strided. */
static void embed_case(const Wt &W, int pad) {
    const int64_t N = W.n, K = W.k, ld = K + pad;
    const int T = 6;
    std::vector<int32_t> ids = {3, (int32_t)N, 0, (int32_t)(N - 1), -1, 7};
    std::vector<float> out((size_t)(T * ld + 1));
    for (auto &v : out) v = 1234.5f;
    int32_t *di = dev_put(ids);
    float *dout = dev_put(out);
    ni_rows o = {dout, T, 1, (int32_t)K, ld, K};
    ni_cuda_embed(G, &W.dw, di, o);
    char nm[96];
    snprintf(nm, sizeof nm, "embed/%s[%lld,%lld]/ld=%lld", fname(W.fmt), (long long)N, (long long)K, (long long)ld);
    int32_t cnt[NI_CUDA_ERR_N];
    if (wsync(nm, cnt)) {
        std::vector<float> g = dev_get(dout, out.size());
        int bad = 0, badpad = 0;
        for (int t = 0; t < T; t++) {
            const bool ok = ids[t] >= 0 && ids[t] < N;
            for (int64_t k = 0; k < K; k++) {
                const float want = ok ? W.dec[(size_t)(ids[t] * K + k)] : 0.0f;
                bad += memcmp(&g[(size_t)(t * ld + k)], &want, 4) != 0; /* exact decode */
            }
        }
        for (size_t i = 0; i < g.size(); i++)
            if (((int64_t)i / ld >= T || (int64_t)i % ld >= K) && g[i] != 1234.5f) badpad++;
        check(bad == 0, nm, ": %.0f values differ from ni_weight_decode_row%s", bad, 0);
        check(badpad == 0, std::string(nm) + "/padding", ": %.0f padding changed%s", badpad, 0);
        check(cnt[NI_CUDA_ERR_EMBED_IDS] == 2, std::string(nm) + "/bad-id count", ": %.0f (want %.0f)",
              cnt[NI_CUDA_ERR_EMBED_IDS], 2);
    }
    ni_cuda_free(G, di), ni_cuda_free(G, dout);
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_rng = seed;
    printf("test_weights seed %llu\n", (unsigned long long)seed);
    int code = 0;
    char err[256];
    G = ni_cuda_ctx_new(0, &code, err, sizeof err);
    CPU = ni_ctx_new(1, ni_cpu_best_isa());
    if (!G || !CPU) {
        fprintf(stderr, "context: %s\n", G ? "cpu" : err);
        return 2;
    }
    struct Shape { int fmt; int64_t n, k; };
    /* per format: a K that is a multiple of 128 (vector routes) and a second
     * K: odd (element fallback) for fp32/bf16/fp8-row, a partial group +
     * padding groups for q4..q8, a second 128-row tile for nvfp4 */
    const Shape shapes[] = {
        {NI_W_F32, 72, 256},    {NI_W_F32, 130, 201},   {NI_W_BF16, 72, 256},  {NI_W_BF16, 130, 201},
        {NI_W_Q4, 72, 256},     {NI_W_Q4, 130, 200},    {NI_W_Q5, 72, 256},    {NI_W_Q5, 130, 200},
        {NI_W_Q6, 72, 256},     {NI_W_Q6, 130, 200},    {NI_W_Q8, 72, 256},    {NI_W_Q8, 130, 200},
        {NI_W_NVFP4, 128, 256}, {NI_W_NVFP4, 256, 192}, {NI_W_FP8ROW, 72, 256}, {NI_W_FP8ROW, 130, 201},
    };
    const int Ts_full[] = {1, 2, 3, 5, 16, 17, 40, 67};
    const int Ts_short[] = {1, 3, 16, 17, 67};
    for (const Shape &sh : shapes) {
        Wt W = make_weight(sh.fmt, sh.n, sh.k);
        const bool first = sh.k % 128 == 0 && !(sh.fmt == NI_W_NVFP4 && sh.n == 256);
        const int *Ts = first ? Ts_full : Ts_short;
        const int nT = first ? 8 : 5;
        for (int i = 0; i < nT; i++) {
            const int T = Ts[i];
            /* alternate accumulate and the x/y strides: +4 keeps rows 16-byte
             * aligned (vector / cp.async routes), +3 / +5 do not */
            run_matmul(W, T, i & 1, (i & 2) ? 3 : 4, (i & 1) ? 5 : 0);
        }
        embed_case(W, 3);
        if (first) {
            embed_case(W, 0);
            route_boundary(W);
        }
        ni_cuda_free(G, W.dptr);
    }
    /* GEMV K-chunk edges (kc = 48 KiB / (NT·4) rounded to the warp step:
     * NT = 1 → 12288, NT = 4 → 3072 elements), the warps-per-block ladder
     * (large N: 8 warps a block), several token tiles of the GEMM */
    struct Extra { int fmt; int64_t n, k; int T; };
    const Extra extra[] = {
        {NI_W_Q4, 72, 13312, 1},  {NI_W_Q4, 72, 4096, 5},   {NI_W_BF16, 40, 3200, 4}, {NI_W_F32, 40, 3101, 6},
        {NI_W_Q8, 4300, 128, 1},  {NI_W_Q4, 8500, 128, 2},  {NI_W_Q6, 130, 256, 130}, {NI_W_F32, 130, 256, 130},
    };
    for (const Extra &e : extra) {
        Wt W = make_weight(e.fmt, e.n, e.k);
        run_matmul(W, e.T, 1, 4, 1);
        ni_cuda_free(G, W.dptr);
    }
    nan_rows(NI_W_NVFP4);
    nan_rows(NI_W_FP8ROW);
    ni_cuda_ctx_free(G);
    ni_ctx_free(CPU);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail == 0 ? 0 : 1;
}
