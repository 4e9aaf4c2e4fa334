/*
 * test_attention.cpp — the paged KV cache and attention family
 * (kernels/cuda/attention.cu: ni_cuda_kv_append, ni_cuda_attention) under the
 * host SIMT harness, against the CPU backend (kernels/cpu/attention.c, C
 * linkage, one thread, so the CPU runs its unsplit route) and an FP64 oracle
 * on the same inputs.
 *
 *   kernels/cuda/simt/cpuref.sh
 *   g++ -std=c++17 -O2 -DNI_SIMT -I kernels/cuda -I kernels -x c++ kernels/cuda/attention.cu \
 *       kernels/cuda/ctx.cu kernels/cuda/simt/simt.cpp kernels/cuda/simt/test_attention.cpp \
 *       -x none build/simt/libcpuref.a -pthread -lm -o /tmp/test_attention && /tmp/test_attention [seed]
 *
 * Each case runs a sequence of steps on one cache (a CPU copy in host memory
 * and a device copy, both starting as the same byte pattern): an append of T
 * vectors at given positions, then (optionally) attention of T query rows at
 * given positions. Checks per step:
 *   - append: the K, V, KS, VS planes of the device equal the CPU's byte for
 *     byte (whole planes: nothing else was written); the KV_POS counter
 *     equals the CPU's return and the count expected from the table;
 *   - attention: every output element against the FP64 oracle (on the
 *     represented cache values, decoded here independently) within the
 *     derived tolerance, against the CPU within twice that; untouched
 *     elements of the output buffer keep their sentinel; the ATTN_POS counter
 *     equals the CPU's return and the count expected by the CPU task rule.
 * NaN never passes (comparisons are !(err <= tol)). The last line is
 * "N passed, M failed"; the exit status is 0 iff M == 0.
 */
#include "ni_cuda.h"
#include "optest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

static const double U = 1.0 / 16777216.0; /* 2^-24, the fp32 unit roundoff */

static int g_pass, g_fail;
static ni_ctx *CPU;

/* ---- random numbers (splitmix64) ---- */
static int irand(int n) { return (int)(rnd() % (uint64_t)n); }
static float normal(float s) {
    double a = uni(), b = uni();
    return (float)(s * sqrt(-2.0 * log(a + 1e-300)) * cos(6.283185307179586 * b));
}

/* ---- independent decoders of the stored formats (exact, in double) ---- */
static double dec_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024.0 + m, e - 25);
    return s ? -v : v;
}
static double dec_bf16(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static double dec_e4m3(uint8_t b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    double v = e == 0 ? ldexp((double)m, -9) : ldexp(8.0 + m, e - 10);
    return s ? -v : v;
}

/* ---- layouts: element (t,h,d) at off + t*ld + h*hs + d of a buffer ---- */
struct Lay {
    int t, h, d;
    int64_t ld, hs, off, n;
    int64_t at(int64_t t_, int64_t h_, int64_t d_) const { return off + t_ * ld + h_ * hs + d_; }
};
/* kind 0: dense, aligned; 1: padded strides, 16-byte aligned rows; 2: odd
 * strides and an odd offset (scalar routes). One guard element after. */
static Lay lay(int t, int h, int d, int kind) {
    Lay L{t, h, d, 0, 0, 0, 0};
    if (kind == 0) {
        L.hs = d;
        L.ld = (int64_t)h * d;
    } else if (kind == 1) {
        L.hs = (d + 3) / 4 * 4 + 4;
        L.ld = h * L.hs + 8;
        L.off = 4;
    } else {
        L.hs = d + 1;
        L.ld = h * L.hs + 3;
        L.off = 1;
    }
    L.n = L.off + (t > 0 ? (int64_t)(t - 1) * L.ld + (int64_t)(h - 1) * L.hs + d : 0) + 1;
    return L;
}
static ni_rows rows(float *base, const Lay &L) { return ni_rows{base + L.off, L.t, L.h, L.d, L.ld, L.hs}; }

/* ---- device buffers ---- */


/* ---- checking ---- */
struct Check {
    std::string name;
    int bad = 0;
    double worst = 0;
    void elem(const char *what, int64_t i, double got, double want, double tol) {
        double e = fabs(got - want);
        if (!(e <= tol)) {
            if (bad < 4)
                printf("  %s: %s[%lld] got %.9g want %.9g (err %.3g, tol %.3g)\n", name.c_str(), what, (long long)i, got,
                       want, e, tol);
            bad++;
        } else if (tol > 0 && e / tol > worst) {
            worst = e / tol;
        }
    }
    void eq(const char *what, long long got, long long want) {
        if (got != want) {
            if (bad < 8) printf("  %s: %s = %lld, want %lld\n", name.c_str(), what, got, want);
            bad++;
        }
    }
    void fail(const char *msg) {
        printf("  %s: %s\n", name.c_str(), msg);
        bad++;
    }
    void done() {
        if (bad) {
            printf("FAIL %s (%d bad)\n", name.c_str(), bad);
            g_fail++;
        } else {
            g_pass++;
        }
    }
};

/* ---- a cache held twice: CPU (host) and device ---- */
struct Cache {
    int fmt, kvh, hd, pages;
    std::vector<int32_t> table;
    int64_t code_bytes, scale_count; /* whole plane */
    std::vector<uint8_t> hk, hv;
    std::vector<uint16_t> hks, hvs;
    uint8_t *dk = nullptr, *dv = nullptr;
    uint16_t *dks = nullptr, *dvs = nullptr;
    int32_t *dtable = nullptr;

    void init(int fmt_, int kvh_, int hd_, int pages_, const std::vector<int32_t> &table_) {
        fmt = fmt_, kvh = kvh_, hd = hd_, pages = pages_, table = table_;
        const int64_t nvec = (int64_t)pages * kvh * NI_KV_PAGE;
        code_bytes = nvec * ni_kv_vec_bytes(fmt, hd);
        scale_count = nvec * ni_kv_scale_count(fmt, hd);
        /* the same arbitrary starting pattern on both sides (finite values:
         * small int8 codes, e4m3 codes < 0x70, bf16/f32 of small magnitude) */
        hk.resize((size_t)code_bytes);
        hv.resize((size_t)code_bytes);
        for (size_t i = 0; i < hk.size(); i++) {
            hk[i] = (uint8_t)(fmt == NI_KV_I8G64 || fmt == NI_KV_FP8ROW ? irand(0x60) : (i % 2 ? 0x3c : irand(256)));
            hv[i] = (uint8_t)(fmt == NI_KV_I8G64 || fmt == NI_KV_FP8ROW ? irand(0x60) : (i % 2 ? 0x3c : irand(256)));
        }
        if (fmt == NI_KV_F32) /* keep the fp32 pattern finite: high bytes 0x3c */
            for (size_t i = 3; i < hk.size(); i += 4) hk[i] = hv[i] = 0x3c;
        hks.assign((size_t)scale_count, 0x2c00); /* 1/16 */
        hvs.assign((size_t)scale_count, 0x2c00);
        dk = dev_put(hk);
        dv = dev_put(hv);
        if (scale_count) {
            dks = dev_put(hks);
            dvs = dev_put(hvs);
        }
        dtable = dev_put(table);
    }
    void release() {
        dev_free(dk);
        dev_free(dv);
        if (dks) dev_free(dks);
        if (dvs) dev_free(dvs);
        dev_free(dtable);
    }
    ni_kv cpu() {
        return ni_kv{fmt, kvh, hd, pages, hk.data(), hv.data(), scale_count ? hks.data() : nullptr,
                     scale_count ? hvs.data() : nullptr, table.data(), (int32_t)table.size()};
    }
    ni_kv dev() { return ni_kv{fmt, kvh, hd, pages, dk, dv, dks, dvs, dtable, (int32_t)table.size()}; }
    /* Vector slot of (pos, head) or −1 (the rule of ninfer_ops.h). */
    int64_t slot(int32_t pos, int h) const {
        if (pos < 0 || pos / NI_KV_PAGE >= (int32_t)table.size()) return -1;
        int32_t pp = table[(size_t)(pos / NI_KV_PAGE)];
        if (pp < 0 || pp >= pages) return -1;
        return ((int64_t)pp * kvh + h) * NI_KV_PAGE + pos % NI_KV_PAGE;
    }
    /* First unmapped position. */
    int64_t first_unmapped() const {
        for (size_t lp = 0; lp < table.size(); lp++)
            if (table[lp] < 0 || table[lp] >= pages) return (int64_t)lp * NI_KV_PAGE;
        return (int64_t)table.size() * NI_KV_PAGE;
    }
    /* Represented value of (slot, d) of a plane, decoded here. */
    double val(bool v, int64_t vi, int d) const {
        const std::vector<uint8_t> &c = v ? hv : hk;
        const std::vector<uint16_t> &s = v ? hvs : hks;
        switch (fmt) {
        case NI_KV_F32: {
            float f;
            memcpy(&f, &c[(size_t)((vi * hd + d) * 4)], 4);
            return f;
        }
        case NI_KV_BF16: {
            uint16_t b;
            memcpy(&b, &c[(size_t)((vi * hd + d) * 2)], 2);
            return dec_bf16(b);
        }
        case NI_KV_I8G64: {
            const int ng = (hd + 63) / 64;
            return (double)(int8_t)c[(size_t)(vi * hd + d)] * dec_f16(s[(size_t)(vi * ng + d / 64)]);
        }
        default: return dec_e4m3(c[(size_t)(vi * hd + d)]) * dec_f16(s[(size_t)vi]);
        }
    }
};

/* ---- one append step ----
 * k, v values: N(0,1) with per-vector magnitude 1, or occasionally 1e-3, 40
 * or all zero (zero absmax → scale 0, codes 0), to reach the scale range. */
static void step_append(const std::string &name, Cache &C, const std::vector<int32_t> &pos, int kind) {
    const int T = (int)pos.size();
    Check ck;
    ck.name = name + " append T=" + std::to_string(T);
    Lay L = lay(T, C.kvh, C.hd, kind);
    std::vector<float> k((size_t)L.n, 0.f), v((size_t)L.n, 0.f);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < C.kvh; h++) {
            for (int pl = 0; pl < 2; pl++) {
                int r = irand(16);
                float mag = r == 0 ? 1e-3f : r == 1 ? 40.f : r == 2 ? 0.f : 1.f;
                std::vector<float> &x = pl ? v : k;
                for (int d = 0; d < C.hd; d++) x[(size_t)L.at(t, h, d)] = normal(mag);
            }
        }
    float *dkb = dev_put(k), *dvb = dev_put(v);
    int32_t *dpos = dev_put(pos);
    int bad_cpu = ni_kv_append(CPU, C.cpu(), rows(k.data(), L), rows(v.data(), L), pos.data());
    ni_cuda_kv_append(G, C.dev(), rows(dkb, L), rows(dvb, L), dpos);
    int32_t cnt[NI_CUDA_ERR_N];
    if (!dsync(ck.name.c_str(), cnt)) ck.fail("launch error");
    int want = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < C.kvh; h++) want += C.slot(pos[(size_t)t], h) < 0;
    ck.eq("cpu bad count", bad_cpu, want);
    ck.eq("KV_POS counter", cnt[NI_CUDA_ERR_KV_POS], want);
    for (int i = 0; i < NI_CUDA_ERR_N; i++)
        if (i != NI_CUDA_ERR_KV_POS && cnt[i]) ck.eq("other counter", cnt[i], 0);
    /* byte-equal planes */
    auto cmp8 = [&](const char *what, const std::vector<uint8_t> &h, const uint8_t *d) {
        std::vector<uint8_t> g = dev_get(d, h.size());
        int64_t nb = 0, first = -1;
        for (size_t i = 0; i < h.size(); i++)
            if (g[i] != h[i]) {
                if (first < 0) first = (int64_t)i;
                nb++;
            }
        if (nb) {
            printf("  %s: %s differs in %lld bytes (first at %lld: dev %02x cpu %02x)\n", ck.name.c_str(), what,
                   (long long)nb, (long long)first, g[(size_t)first], h[(size_t)first]);
            ck.bad++;
        }
    };
    auto cmp16 = [&](const char *what, const std::vector<uint16_t> &h, const uint16_t *d) {
        std::vector<uint16_t> g = dev_get(d, h.size());
        int64_t nb = 0, first = -1;
        for (size_t i = 0; i < h.size(); i++)
            if (g[i] != h[i]) {
                if (first < 0) first = (int64_t)i;
                nb++;
            }
        if (nb) {
            printf("  %s: %s differs in %lld scales (first at %lld: dev %04x cpu %04x)\n", ck.name.c_str(), what,
                   (long long)nb, (long long)first, g[(size_t)first], h[(size_t)first]);
            ck.bad++;
        }
    };
    cmp8("K plane", C.hk, C.dk);
    cmp8("V plane", C.hv, C.dv);
    if (C.scale_count) {
        cmp16("KS plane", C.hks, C.dks);
        cmp16("VS plane", C.hvs, C.dvs);
    }
    dev_free(dkb);
    dev_free(dvb);
    dev_free(dpos);
    ck.done();
}

/* ---- one attention step ----
 * Tolerance (per output element (t, h, d), vs the FP64 softmax-weighted sum
 * on the represented K/V and the fp32 q; n = positions attended,
 * B_d = Σ_s p_s |V_sd| / Σ_s p_s with the exact weights p):
 *   scores: fp32 dot over hd terms in any order, |Δ(q·k)| ≤ γ_hd Σ|q_d k_d|,
 *     then one product by scale: |Δs| ≤ Δ = (hd + 2)·u·|scale|·max_s Σ_d|q_d k_sd|;
 *     softmax is shift invariant, so the weights move by factors within
 *     e^{±2Δ};
 *   weights: e^{x} by expf (≤ 2 ulp = 4u on CUDA, 1 ulp CPU) on a rounded
 *     argument (x e^x ≤ 1/e: ≤ u relative), the running-max rescales (one
 *     expf and one product per rescale, up to one per position: ≤ 6u each)
 *     and the sums of n terms for acc and l (γ_n each): together at most
 *     16·(n + 8)·u relative per weight (all positive terms);
 *   a weight perturbation by factors (1 + ε_s), |ε_s| ≤ ε moves
 *     Σ p_s v_s / Σ p_s by ≤ ε Σ p_s |v_s − out| / ((1 − ε) Σ p_s) ≤ 2ε B/(1 − ε);
 *   the final acc · (1/l) (2 roundings) and the split merge (≤ 8u): 4u·B.
 *   underflow (large score spreads): the relative model above holds for
 *     normal fp32 numbers only. A weight below 2^-126 is off by less than
 *     2^-126 absolutely (subnormal or flushed), a product p·v or a partial
 *     sum in the subnormal range by < 2^-149 per operation, and l ≥ 1 (the
 *     largest weight is e^0), so these add at most
 *     A = 2^-126·(n·max_s|V_sd| + n + 1) to the output.
 *   tol = (2.2·ε + 4u)·B_d + A with ε = expm1(2Δ) + 16(n + 8)u; n = 0 → exactly 0.
 * The CPU must be within the same bound, so device vs CPU gets 2·tol. */
static void step_attend(const std::string &name, Cache &C, int grp, const std::vector<int32_t> &pos, int kind,
                        float scale) {
    const int T = (int)pos.size(), nh = C.kvh * grp, hd = C.hd;
    Check ck;
    ck.name = name + " attention T=" + std::to_string(T);
    Lay L = lay(T, nh, hd, kind);
    std::vector<float> q((size_t)L.n, 0.f);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++)
            for (int d = 0; d < hd; d++) q[(size_t)L.at(t, h, d)] = normal(1.f);
    const float SENT = -12345.5f;
    std::vector<float> ocpu((size_t)L.n, SENT), o0((size_t)L.n, SENT);
    float *dq = dev_put(q), *dout = dev_put(o0);
    int32_t *dpos = dev_put(pos);
    int bad_cpu = ni_attention(CPU, rows(q.data(), L), C.cpu(), pos.data(), scale, rows(ocpu.data(), L));
    ni_cuda_attention(G, rows(dq, L), C.dev(), dpos, scale, rows(dout, L));
    int32_t cnt[NI_CUDA_ERR_N];
    if (!dsync(ck.name.c_str(), cnt)) ck.fail("launch error");
    std::vector<float> got = dev_get(dout, (size_t)L.n);

    /* expected count: CPU tasks (16-token block, kv head) whose largest pos
     * reaches the first unmapped position */
    const int64_t u = C.first_unmapped();
    int want_bad = 0;
    for (int b = 0; b * 16 < T; b++) {
        int last = -1;
        for (int t = b * 16; t < T && t < b * 16 + 16; t++) last = std::max(last, pos[(size_t)t]);
        if (last >= 0 && last >= u) want_bad += C.kvh;
    }
    ck.eq("cpu bad count", bad_cpu, want_bad);
    ck.eq("ATTN_POS counter", cnt[NI_CUDA_ERR_ATTN_POS], want_bad);
    for (int i = 0; i < NI_CUDA_ERR_N; i++)
        if (i != NI_CUDA_ERR_ATTN_POS && cnt[i]) ck.eq("other counter", cnt[i], 0);

    std::vector<char> m((size_t)L.n, 0);
    std::vector<double> sc, p, kabs;
    for (int t = 0; t < T; t++) {
        const int64_t lim = std::min<int64_t>(pos[(size_t)t], u - 1);
        const int n = lim < 0 ? 0 : (int)(lim + 1);
        for (int h = 0; h < nh; h++) {
            const int kh = h / grp;
            sc.assign((size_t)n, 0);
            double mx = -INFINITY, dmax = 0;
            for (int s = 0; s < n; s++) {
                const int64_t vi = C.slot(s, kh);
                double dot = 0, ab = 0;
                for (int d = 0; d < hd; d++) {
                    double qd = q[(size_t)L.at(t, h, d)], kd = C.val(false, vi, d);
                    dot += qd * kd;
                    ab += fabs(qd * kd);
                }
                sc[(size_t)s] = dot * scale;
                mx = std::max(mx, sc[(size_t)s]);
                dmax = std::max(dmax, ab);
            }
            double den = 0;
            for (int s = 0; s < n; s++) den += (sc[(size_t)s] = exp(sc[(size_t)s] - mx));
            const double Delta = (hd + 2) * U * fabs(scale) * dmax;
            const double eps = expm1(2 * Delta) + 16.0 * (n + 8) * U;
            for (int d = 0; d < hd; d++) {
                const int64_t i = L.at(t, h, d);
                m[(size_t)i] = 1;
                double acc = 0, B = 0, vmax = 0;
                for (int s = 0; s < n; s++) {
                    const double vv = C.val(true, C.slot(s, kh), d);
                    acc += sc[(size_t)s] * vv;
                    B += sc[(size_t)s] * fabs(vv);
                    vmax = std::max(vmax, fabs(vv));
                }
                const double A = ldexp(n * vmax + n + 1, -126);
                const double want = n ? acc / den : 0.0, tol = n ? (2.2 * eps + 4 * U) * (B / den) + A : 0.0;
                ck.elem("dev-oracle", i, got[(size_t)i], want, tol);
                ck.elem("cpu-oracle", i, ocpu[(size_t)i], want, tol);
                ck.elem("dev-cpu", i, got[(size_t)i], ocpu[(size_t)i], 2 * tol);
            }
        }
    }
    for (int64_t i = 0; i < L.n; i++)
        if (!m[(size_t)i] && memcmp(&got[(size_t)i], &SENT, 4) != 0) {
            if (ck.bad < 8) printf("  %s: untouched out[%lld] = %g\n", ck.name.c_str(), (long long)i, got[(size_t)i]);
            ck.bad++;
        }
    /* in place (out aliases q): same values bit for bit */
    if (kind == 0 && T <= 8) {
        ni_cuda_attention(G, rows(dq, L), C.dev(), dpos, scale, rows(dq, L));
        if (!dsync(ck.name.c_str(), cnt)) ck.fail("launch error (in place)");
        std::vector<float> g2 = dev_get(dq, (size_t)L.n);
        int nb = 0;
        for (int64_t i = 0; i < L.n; i++)
            if (m[(size_t)i] && memcmp(&g2[(size_t)i], &got[(size_t)i], 4) != 0) nb++;
        if (nb) {
            printf("  %s: in-place result differs in %d elements\n", ck.name.c_str(), nb);
            ck.bad++;
        }
    }
    dev_free(dq);
    dev_free(dout);
    dev_free(dpos);
    if (ck.bad == 0 && getenv("VERBOSE")) printf("  ok %s (worst err/tol %.3g)\n", ck.name.c_str(), ck.worst);
    ck.done();
}

static std::vector<int32_t> range(int a, int b) { /* [a, b) */
    std::vector<int32_t> r;
    for (int i = a; i < b; i++) r.push_back(i);
    return r;
}
/* Physical pages 0..pages−1 in random order, first `len` of them. */
static std::vector<int32_t> shuffled(int pages, int len) {
    std::vector<int32_t> t = range(0, pages);
    for (int i = pages - 1; i > 0; i--) std::swap(t[(size_t)i], t[(size_t)irand(i + 1)]);
    t.resize((size_t)len);
    return t;
}

static const char *fmt_name(int f) {
    return f == NI_KV_BF16 ? "bf16" : f == NI_KV_I8G64 ? "i8g64" : f == NI_KV_FP8ROW ? "fp8row" : "f32";
}

/* A step: append at apos (may be empty), then attention at qpos (may be empty). */
struct Step {
    std::vector<int32_t> apos, qpos;
};
static void run_case(const char *what, int fmt, int kvh, int grp, int hd, int pages, const std::vector<int32_t> &table,
                     const std::vector<Step> &steps, int kind) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s %s kvh=%d grp=%d hd=%d layout=%d", what, fmt_name(fmt), kvh, grp, hd, kind);
    Cache C;
    C.init(fmt, kvh, hd, pages, table);
    const float scale = (float)(1.0 / sqrt((double)hd));
    for (const Step &s : steps) {
        if (!s.apos.empty()) step_append(buf, C, s.apos, kind);
        if (!s.qpos.empty()) step_attend(buf, C, grp, s.qpos, kind, scale);
    }
    C.release();
}

int main(int argc, char **argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const uint64_t seed = argc > 1 ? strtoull(argv[1], nullptr, 0) : (uint64_t)time(nullptr);
    g_rng = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    int code = 0;
    char err[256];
    G = ni_cuda_ctx_new(0, &code, err, sizeof err);
    CPU = ni_ctx_new(1, ni_cpu_best_isa());
    if (!G || !CPU) {
        printf("context: %d %s\n", code, err);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    static const int fmts[] = {NI_KV_BF16, NI_KV_I8G64, NI_KV_FP8ROW, NI_KV_F32};
    for (int fmt : fmts) {
        /* A. hd 64, GQA 1, shuffled pages: prefill across the 63/64 edge,
         * then T = 1, 2, 4 (split-KV route), 5 and 64 (query tiles) across
         * the 127/128 edge; T = 65 prefill over a 2-page history. */
        run_case("seq", fmt, 2, 1, 64, 6, shuffled(6, 5),
                 {{range(0, 65), range(0, 65)},
                  {range(65, 66), range(65, 66)},
                  {range(66, 68), range(66, 68)},
                  {range(68, 72), range(68, 72)},
                  {range(72, 77), range(72, 77)},
                  {range(77, 127), {}},
                  {range(127, 128), range(127, 128)},
                  {range(128, 130), range(128, 130)},
                  {range(130, 194), range(130, 194)}},
                 0);
        /* B. hd 256, GQA 6 (one kv head: 6 query heads per block), padded
         * strides: prefill T = 8 across 63/64, decode across 127/128. */
        run_case("gqa6", fmt, 1, 6, 256, 4, shuffled(4, 4),
                 {{range(0, 60), {}},
                  {range(60, 68), range(60, 68)},
                  {range(68, 127), range(126, 127)},
                  {range(127, 128), range(127, 128)},
                  {range(128, 129), range(128, 129)},
                  {range(129, 131), range(129, 131)}},
                 1);
        /* C. GQA 2, hd 72 (int8 tail group of 8; not a multiple of the
         * 16-byte code chunk: scalar tile loads for int8/fp8), odd strides
         * and offsets (scalar everything). */
        run_case("odd", fmt, 2, 2, 72, 3, shuffled(3, 3),
                 {{range(0, 5), range(0, 5)}, {range(5, 70), range(5, 70)}, {range(70, 71), range(70, 71)}, {range(71, 73), range(71, 73)}},
                 2);
        run_case("odd", fmt, 1, 2, 64, 3, shuffled(3, 3), {{range(0, 66), range(60, 66)}, {range(66, 67), range(66, 67)}}, 2);
        /* D. long context (1000 positions, table of 24 pages of which 16
         * mapped): decode T = 1 and speculative verify T = 4 at p..p+3
         * (split-KV with 16 active splits of 64 and empty ones), T = 3
         * at scattered positions, T = 4 prefill-free history read. */
        {
            std::vector<int32_t> tab = shuffled(20, 16);
            tab.resize(24, -1);
            run_case("long", fmt, 2, 2, 64, 20, tab,
                     {{range(0, 996), {}},
                      {range(996, 1000), range(996, 1000)},
                      {{}, {999}},
                      {{}, {999, 500, 0}},
                      {{}, {640, 641, 700, 1000 - 1}}},
                     0);
        }
    }
    /* E. hd 256, 2 kv heads × GQA 6 decode at ~300 positions (the 0.8B/27B
     * attention shape, small), fp8 and int8. */
    for (int fmt : {NI_KV_FP8ROW, NI_KV_I8G64})
        run_case("decode", fmt, 2, 6, 256, 6, shuffled(6, 6),
                 {{range(0, 300), {}}, {range(300, 301), range(300, 301)}, {range(301, 303), range(301, 303)}}, 0);
    /* E2. split route with two query chunks (T·grp = 32 > 28, the hd-256
     * chunk limit); hd 37 (not a multiple of 4: padded head dim, scalar
     * everything); hd 36. */
    for (int fmt : fmts) {
        run_case("chunks", fmt, 1, 8, 256, 3, shuffled(3, 3), {{range(0, 100), {}}, {range(100, 104), range(100, 104)}}, 0);
        run_case("hd37", fmt, 1, 3, 37, 3, shuffled(3, 3),
                 {{range(0, 70), range(0, 70)}, {range(70, 71), range(70, 71)}, {range(71, 74), range(71, 74)}}, 0);
        run_case("hd36", fmt, 2, 1, 36, 3, shuffled(3, 3), {{range(0, 66), range(0, 66)}, {range(66, 68), range(66, 68)}}, 1);
    }
    /* T = 0: nothing runs, nothing is counted. */
    {
        Check ck;
        ck.name = "T=0";
        Cache C;
        C.init(NI_KV_I8G64, 1, 64, 1, {0});
        std::vector<uint8_t> k0 = C.hk;
        float *buf = dev_put(std::vector<float>(64, 1.0f));
        ni_rows r0{buf, 0, 1, 64, 64, 64};
        ni_cuda_kv_append(G, C.dev(), r0, r0, nullptr);
        ni_cuda_attention(G, r0, C.dev(), nullptr, 1.0f, r0);
        int32_t cnt[NI_CUDA_ERR_N];
        if (!dsync("T=0", cnt)) ck.fail("launch error");
        for (int i = 0; i < NI_CUDA_ERR_N; i++) ck.eq("counter", cnt[i], 0);
        if (dev_get(C.dk, k0.size()) != k0) ck.fail("K plane changed");
        dev_free(buf);
        C.release();
        ck.done();
    }
    /* F. bad positions. Table [2, 0, −1, 5 (≥ pages), 1] over 4 pages: u = 128.
     * Appends at −1, 128 (unmapped page), 200 (entry ≥ pages), 320 (past the
     * table) are skipped and counted; attention rows reaching ≥ 128 stop at
     * 127 and are counted per CPU task (16-token block × kv head); a row at
     * pos −1 attends nothing (zeros). T = 2 (split route) and T = 20 (query
     * tiles, two token blocks) and T = 40 with the bad rows in block 2 only. */
    for (int fmt : fmts) {
        std::vector<int32_t> tab = {2, 0, -1, 5, 1};
        std::vector<int32_t> a = range(0, 128);
        std::vector<int32_t> qa = {100, 130};
        std::vector<int32_t> qb = range(110, 130); /* 20 rows, 2 token blocks; both reach ≥ 128? block 0: 110..125 no */
        std::vector<int32_t> qc = range(60, 100);
        qc[35] = 400;
        qc[36] = -1;
        run_case("badpos", fmt, 2, 2, 64, 4, tab,
                 {{a, {}}, {{-1, 128, 5, 200, 320, 64}, qa}, {{}, qb}, {{}, qc}, {{}, {-1}}, {{}, {-1, 3}}}, 0);
        /* first bad entry ≥ pages (u = 64), mapped pages after it */
        run_case("badpos-big", fmt, 1, 2, 64, 2, {1, 7, 0},
                 {{range(0, 64), {}}, {{64, 130}, {63, 70}}, {{}, range(60, 66)}, {{}, {130}}}, 0);
        /* page 0 unmapped: everything is unmapped (u = 0) */
        run_case("badpos0", fmt, 1, 3, 64, 2, {-1, 1}, {{{0, 70}, {5, 70}}, {{}, range(0, 6)}}, 0);
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    ni_cuda_ctx_free(G);
    ni_ctx_free(CPU);
    return g_fail ? 1 : 0;
}
