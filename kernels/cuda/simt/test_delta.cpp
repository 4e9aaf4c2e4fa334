/*
 * test_delta.cpp — ni_cuda_gdn_recurrent / ni_cuda_gdn_chunked on the host
 * SIMT harness against the CPU backend (ni_gdn_recurrent / ni_gdn_chunked)
 * and an FP64 oracle, on fresh random inputs (seed: argv[1], else the
 * time; printed). Last line: "N passed, M failed"; exit 0 iff M == 0.
 *
 * Inputs follow the model: q, k L2-normalised (q also scaled by dk^-1/2),
 * β ∈ [0,1], g ≤ 0. Then every per-token transition P_t = e^{g}(I − β k kᵀ)
 * is symmetric with eigenvalues in [0,1]: ‖P_t‖₂ ≤ 1. Each column s of a
 * state evolves alone, so an error Δs in a column is carried forward without
 * growth and the rounding errors of the steps simply add up (first order).
 *
 * Tolerances (derived, u = 2^-24, γ_n ≈ n·u; expf within 2 ulp ≤ 4u
 * relative; ‖k‖ ≤ 1, ‖q‖ ≤ dk^-1/2; norms of exact FP64 quantities):
 *
 * Recurrent, per column c, token t (s = exact column before the token, s'
 * after):
 *   decay ŝ1 = fl(fl(e^g)·s): 5u·‖s‖;  kv = Σ k_i ŝ1_i: γ_dk‖s‖ + 5u‖s‖;
 *   δ = fl(β·fl(v − kv)): (dk+8)u‖s‖ + 2u|v|;  s' = ŝ1 + k δ (axpy, ≤ 2
 *   roundings): 2u(2‖s‖ + |v|) + 5u‖s‖ + |Δδ|. Hence
 *     E_t = E_{t−1} + (dk+17)·u·‖s‖ + 4u·|v_c|            (state column, 2-norm)
 *     |Δo_t,c| ≤ ‖q_t‖ (E_t + dk·u·‖s'‖)                 (o = Σ q_i s'_i)
 *   and |ΔS_ic| ≤ E (an element is bounded by its column's 2-norm).
 *
 * Chunked, per chunk (n tokens, exact input state S, exact chunk quantities
 * from an FP64 WY evaluation, |·| elementwise, products of |·| matrices):
 *   Γ̂ = sequential fp32 cumsum: |ΔΓ_i| ≤ EΓ_i = u Σ_{m≤i}|Γ_m|; every decay
 *   factor e^{x} (x = Γi−Γs, Γi, Γn−Γi, Γn; |x| ≤ |Γ_{n−1}|) has relative
 *   error ≤ εD = 2·max EΓ + u|Γ_{n−1}| + 4u.
 *   A_is = β_i(k_i·k_s)D_is: |ΔA| ≤ δA = (dk+2)u + εD.
 *   Forward substitution (Higham Thm 8.5): (L̂+ΔL)Ŵ = R̂, |ΔL| ≤ γ_n|L|, so
 *     |ΔW| ≤ |L⁻¹|((2u+εD)|R_W| + M0|W|), |ΔU| ≤ |L⁻¹|(u|R_U| + M0|U|)
 *     with M0 = n·u·|L| + δA·J (J: strictly lower ones), R_W = βK⊙e^Γ, R_U = βV.
 *   V' = U − W S (dk+1 terms): eV' = |ΔU| + |ΔW||S| + (dk+1)u(|U| + |W||S|).
 *   O = (Q⊙e^Γ) S + QK V' (dk+n terms; |ΔQK_is| ≤ dk·u‖q_i‖D_is + (u+εD)|QK_is|):
 *     eO = (u+εD+(dk+n)u)|Q̃||S| + (dk+n)u|QK||V'| + |QK| eV' + |ΔQK||V'|.
 *   S' = e^{Γn} S + K̃ᵀV' (n+1 terms, K̃ = K⊙e^{Γn−Γ}):
 *     eS = (εD+(n+2)u) e^{Γn}|S| + ((n+2)u+εD)|K̃|ᵀ|V'| + |K̃|ᵀ eV'.
 *   The propagated error of the chunk's input state (2-norm p_c per column)
 *   reaches o_i by at most ‖q_i‖p_c and the output state by at most p_c;
 *   p_c ← p_c + ‖eS_{:,c}‖₂.
 *
 * All bounds are first order and are multiplied by 1.01 for the second-order
 * terms (each bound is ≤ ~1e-3 relative here, so those are ≤ 1e-3 of it).
 * An implementation is checked against the FP64 recurrent oracle with its own
 * form's bound; two implementations against each other with the sum of
 * their bounds. NaN never passes.
 */
#include "ni_cuda.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <vector>


static const double U32 = 5.9604644775390625e-8; /* 2^-24 */
static const double SECOND_ORDER = 1.01;

static int g_pass = 0, g_fail = 0;

/* ---- random numbers ---- */
static uint64_t g_rng;
static uint64_t rnd64() {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rnd_u() { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static double rnd_n() {
    double a = rnd_u(), b = rnd_u();
    if (a < 1e-300) a = 1e-300;
    return sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b);
}

/* ---- checks ---- */
static void report(const std::string &name, bool ok, const char *fmt = "", double a = 0, double b = 0,
                   long where = -1) {
    if (ok) {
        g_pass++;
    } else {
        g_fail++;
        printf("FAIL %s ", name.c_str());
        printf(fmt, a, b, where);
        printf("\n");
    }
}
/* |got[i] − want[i]| ≤ tol[i] for all i (NaN fails). */
static void check_close(const std::string &name, const float *got, const double *want, const double *tol,
                        size_t n) {
    double worst = 0, wtol = 0;
    long wi = -1;
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= tol[i])) {
            if (ok || !(e / tol[i] <= worst / wtol)) {
                worst = e;
                wtol = tol[i];
                wi = (long)i;
            }
            ok = false;
        }
    }
    report(name, ok, "err %.3g > tol %.3g at %ld", worst, wtol, wi);
}
static void check_close_f(const std::string &name, const float *got, const float *want, const double *tol,
                          size_t n) {
    std::vector<double> w(want, want + n);
    check_close(name, got, w.data(), tol, n);
}
static void check_bits(const std::string &name, const float *got, const float *want, size_t n) {
    long bad = -1;
    for (size_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&got[i], &want[i], 4) != 0) bad = (long)i;
    report(name, bad < 0, "changed (%g vs %g) at %ld", bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0, bad);
}

/* ---- case description ---- */
struct Layout {
    int64_t base, ld, hs; /* element (t, h, d) at buf[base + t·ld + h·hs + d] */
};
struct Case {
    std::string name;
    int T, nk, nv, dk, dv;
    int gmode;      /* 0: g ∈ −[0, 0.5], 1: strong decay −[5, 30], 2: near 0 −[0, 1e-3] */
    int strided;    /* 0: separate contiguous q, k, v; 1: column slices of one projection (odd ld);
                       2: slices with ld and heads 16-byte aligned; 3: odd slices and head stride hs = d + 1 */
    int slots, in, out;
    int64_t slot_pad; /* slot_stride = nv·dk·dv + slot_pad */
    int ostrided;     /* o rows with padding (ld > nv·dv) */
    int seg_chunks;   /* chunked test hook (0: by budget) */
};

struct Inputs {
    std::vector<float> proj, qb, kb, vb, g, beta, state0;
    Layout lq, lk, lv, lo;
    int64_t olen, slot_stride;
};

static float *row_ptr(float *p, const Layout &l, int t, int h) { return p + l.base + t * l.ld + h * l.hs; }

static ni_rows mk_rows(float *p, const Layout &l, int t, int h, int d) {
    ni_rows r;
    r.p = p + l.base;
    r.t = t;
    r.h = h;
    r.d = d;
    r.ld = l.ld;
    r.hs = l.hs;
    return r;
}

static void make_inputs(const Case &c, Inputs &in) {
    const int T = c.T, nk = c.nk, nv = c.nv, dk = c.dk, dv = c.dv;
    /* layouts */
    if (c.strided == 0) {
        in.lq = {0, (int64_t)nk * dk, dk};
        in.lk = {0, (int64_t)nk * dk, dk};
        in.lv = {0, (int64_t)nv * dv, dv};
    } else {
        int64_t hq = c.strided == 3 ? dk + 1 : dk, hv = c.strided == 3 ? dv + 1 : dv;
        int64_t qo = c.strided == 2 ? 4 : 1; /* leading pad */
        int64_t ko = qo + nk * hq + (c.strided == 2 ? 4 : 3);
        int64_t vo = ko + nk * hq + (c.strided == 2 ? 8 : 1);
        int64_t ld = vo + nv * hv + (c.strided == 2 ? 4 : 2);
        if (c.strided == 2) ld = (ld + 3) / 4 * 4;
        else if (ld % 2 == 0) ld++;
        in.lq = {qo, ld, hq};
        in.lk = {ko, ld, hq};
        in.lv = {vo, ld, hv};
    }
    in.lo = c.ostrided ? Layout{2, (int64_t)nv * dv + 5, dv} : Layout{0, (int64_t)nv * dv, dv};
    in.olen = in.lo.base + (int64_t)(T > 0 ? T : 1) * in.lo.ld;
    auto sz = [&](const Layout &l, int h, int d) { return (size_t)(l.base + (int64_t)(T > 0 ? T : 1) * l.ld + h * l.hs + d); };
    const float SENT = -777.0f;
    if (c.strided == 0) {
        in.qb.assign(sz(in.lq, nk, dk), SENT);
        in.kb.assign(sz(in.lk, nk, dk), SENT);
        in.vb.assign(sz(in.lv, nv, dv), SENT);
    } else {
        in.proj.assign(sz(in.lv, nv, dv), SENT);
    }
    float *qp = c.strided ? in.proj.data() : in.qb.data();
    float *kp = c.strided ? in.proj.data() : in.kb.data();
    float *vp = c.strided ? in.proj.data() : in.vb.data();
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < nk; h++) {
            for (int w = 0; w < 2; w++) {
                float *x = row_ptr(w ? kp : qp, w ? in.lk : in.lq, t, h);
                double ss = 0;
                for (int d = 0; d < dk; d++) {
                    x[d] = (float)rnd_n();
                    ss += (double)x[d] * x[d];
                }
                for (int d = 0; d < dk; d++) {
                    x[d] = (float)((double)x[d] / sqrt(ss + 1e-6));
                    if (!w) x[d] = (float)((double)x[d] / sqrt((double)dk)); /* q·dk^-1/2 */
                }
            }
        }
        for (int h = 0; h < nv; h++) {
            float *x = row_ptr(vp, in.lv, t, h);
            for (int d = 0; d < dv; d++) x[d] = (float)rnd_n();
        }
    }
    in.g.resize((size_t)(T > 0 ? T : 1) * nv);
    in.beta.resize(in.g.size());
    for (size_t i = 0; i < in.g.size(); i++) {
        double gm = c.gmode == 0 ? 0.5 * rnd_u() : c.gmode == 1 ? 5.0 + 25.0 * rnd_u() : 1e-3 * rnd_u();
        in.g[i] = (float)(-gm);
        in.beta[i] = (float)rnd_u();
    }
    in.slot_stride = (int64_t)nv * dk * dv + c.slot_pad;
    in.state0.resize((size_t)c.slots * in.slot_stride);
    for (auto &x : in.state0) x = (float)(0.3 * rnd_n());
}

/* ---- FP64 oracle: recurrent form + its bound; chunked form + its bound ---- */
struct Oracle {
    std::vector<double> o;      /* [T][nv][dv] (recurrent, exact) */
    std::vector<double> st;     /* [T][nv][dk][dv] states after each token (exact) */
    std::vector<double> s_in;   /* [nv][dk][dv] initial */
    std::vector<double> bo_rec; /* bound on |Δo| of the recurrent form */
    std::vector<double> bs_rec; /* [T][nv][dv] column bound after token t (recurrent) */
    std::vector<double> bo_ck;  /* chunked bounds */
    std::vector<double> bs_ck;  /* [nv][dk][dv] final state, elementwise */
    std::vector<double> o_ck;   /* chunked FP64 outputs (oracle self-check) */
    std::vector<double> s_ck;   /* chunked FP64 final state */
};

static void oracle(const Case &c, Inputs &in, int in_slot, Oracle &R) {
    const int T = c.T, nv = c.nv, dk = c.dk, dv = c.dv, grp = c.nv / c.nk;
    const double u = U32;
    float *qp = c.strided ? in.proj.data() : in.qb.data();
    float *kp = c.strided ? in.proj.data() : in.kb.data();
    float *vp = c.strided ? in.proj.data() : in.vb.data();
    const int64_t hsz = (int64_t)dk * dv;
    R.s_in.assign(in.state0.begin() + in_slot * in.slot_stride, in.state0.begin() + in_slot * in.slot_stride + nv * hsz);
    R.o.assign((size_t)T * nv * dv, 0);
    R.st.assign((size_t)T * nv * hsz, 0);
    R.bo_rec.assign((size_t)T * nv * dv, 0);
    R.bs_rec.assign((size_t)T * nv * dv, 0);
    R.bo_ck.assign((size_t)T * nv * dv, 0);
    R.o_ck.assign((size_t)T * nv * dv, 0);
    R.bs_ck.assign((size_t)nv * hsz, 0);
    R.s_ck.assign((size_t)nv * hsz, 0);
    std::vector<double> S(hsz), kv(dv), E(dv), nrm(dv);
    for (int j = 0; j < nv; j++) {
        const int kh = j / grp;
        /* ---- recurrent ---- */
        for (int64_t i = 0; i < hsz; i++) S[i] = R.s_in[j * hsz + i];
        for (int d = 0; d < dv; d++) E[d] = 0;
        for (int t = 0; t < T; t++) {
            const float *q = row_ptr(qp, in.lq, t, kh), *k = row_ptr(kp, in.lk, t, kh), *v = row_ptr(vp, in.lv, t, j);
            const double a = exp((double)in.g[t * nv + j]), b = in.beta[t * nv + j];
            double qn = 0;
            for (int i = 0; i < dk; i++) qn += (double)q[i] * q[i];
            qn = sqrt(qn);
            for (int d = 0; d < dv; d++) {
                double s2 = 0;
                for (int i = 0; i < dk; i++) s2 += S[i * dv + d] * S[i * dv + d];
                nrm[d] = sqrt(s2);
            }
            for (int64_t i = 0; i < hsz; i++) S[i] *= a;
            for (int d = 0; d < dv; d++) {
                double s = 0;
                for (int i = 0; i < dk; i++) s += S[i * dv + d] * k[i];
                kv[d] = b * ((double)v[d] - s);
            }
            for (int i = 0; i < dk; i++)
                for (int d = 0; d < dv; d++) S[i * dv + d] += (double)k[i] * kv[d];
            for (int d = 0; d < dv; d++) {
                double s = 0, s2 = 0;
                for (int i = 0; i < dk; i++) {
                    s += S[i * dv + d] * q[i];
                    s2 += S[i * dv + d] * S[i * dv + d];
                }
                const size_t oi = ((size_t)t * nv + j) * dv + d;
                R.o[oi] = s;
                E[d] += (dk + 17) * u * nrm[d] + 4 * u * fabs((double)v[d]);
                R.bs_rec[oi] = SECOND_ORDER * E[d];
                R.bo_rec[oi] = SECOND_ORDER * qn * (E[d] + dk * u * sqrt(s2));
            }
            for (int64_t i = 0; i < hsz; i++) R.st[((size_t)t * nv + j) * hsz + i] = S[i];
        }
        /* ---- chunked (FP64 WY form with the running bound) ---- */
        const int C = 64;
        for (int64_t i = 0; i < hsz; i++) S[i] = R.s_in[j * hsz + i];
        std::vector<double> p(dv, 0.0); /* propagated-error 2-norm per column */
        for (int t0 = 0; t0 < T; t0 += C) {
            const int n = T - t0 < C ? T - t0 : C;
            std::vector<double> G(n), EG(n), B(n), qn(n);
            double acc = 0, eacc = 0, emax = 0;
            for (int i = 0; i < n; i++) {
                acc += (double)in.g[(t0 + i) * nv + j];
                G[i] = acc;
                eacc += u * fabs(acc);
                if (eacc > emax) emax = eacc;
                EG[i] = exp(acc);
                B[i] = in.beta[(t0 + i) * nv + j];
            }
            const double eD = 2 * emax + u * fabs(G[n - 1]) + 4 * u, dA = (dk + 2) * u + eD;
            auto K = [&](int i, int r) { return (double)row_ptr(kp, in.lk, t0 + i, kh)[r]; };
            auto Q = [&](int i, int r) { return (double)row_ptr(qp, in.lq, t0 + i, kh)[r]; };
            auto V = [&](int i, int d) { return (double)row_ptr(vp, in.lv, t0 + i, j)[d]; };
            for (int i = 0; i < n; i++) {
                double s = 0;
                for (int r = 0; r < dk; r++) s += Q(i, r) * Q(i, r);
                qn[i] = sqrt(s);
            }
            std::vector<double> L(n * n, 0), QK(n * n, 0), D(n * n, 0);
            for (int i = 0; i < n; i++)
                for (int s = 0; s <= i; s++) {
                    double kk = 0, qk = 0;
                    for (int r = 0; r < dk; r++) {
                        kk += K(i, r) * K(s, r);
                        qk += Q(i, r) * K(s, r);
                    }
                    D[i * n + s] = exp(G[i] - G[s]);
                    QK[i * n + s] = qk * D[i * n + s];
                    L[i * n + s] = s == i ? 1.0 : B[i] * kk * D[i * n + s];
                }
            /* Li = L⁻¹ (unit lower) */
            std::vector<double> Li(n * n, 0);
            for (int cidx = 0; cidx < n; cidx++)
                for (int i = cidx; i < n; i++) {
                    double x = i == cidx ? 1.0 : 0.0;
                    for (int s = cidx; s < i; s++) x -= L[i * n + s] * Li[s * n + cidx];
                    Li[i * n + cidx] = x;
                }
            /* M = |Li| (n·u·|L| + δA·J) */
            std::vector<double> M(n * n, 0);
            for (int i = 0; i < n; i++)
                for (int s = 0; s <= i; s++) {
                    double x = 0;
                    for (int m = s; m <= i; m++) {
                        double lm = n * u * fabs(L[m * n + s]) + (m > s ? dA : 0.0);
                        x += fabs(Li[i * n + m]) * lm;
                    }
                    M[i * n + s] = x;
                }
            /* U, W and their bounds */
            std::vector<double> Uu(n * dv), W(n * dk), dU(n * dv), dW(n * dk);
            for (int i = 0; i < n; i++) {
                for (int d = 0; d < dv; d++) {
                    double x = 0, rb = 0, mb = 0;
                    for (int s = 0; s <= i; s++) {
                        x += Li[i * n + s] * B[s] * V(s, d);
                        rb += fabs(Li[i * n + s]) * fabs(B[s] * V(s, d));
                    }
                    Uu[i * dv + d] = x;
                    (void)mb;
                    dU[i * dv + d] = u * rb;
                }
                for (int r = 0; r < dk; r++) {
                    double x = 0, rb = 0;
                    for (int s = 0; s <= i; s++) {
                        const double rw = B[s] * EG[s] * K(s, r);
                        x += Li[i * n + s] * rw;
                        rb += fabs(Li[i * n + s]) * fabs(rw);
                    }
                    W[i * dk + r] = x;
                    dW[i * dk + r] = (2 * u + eD) * rb;
                }
            }
            for (int i = 0; i < n; i++) {
                for (int d = 0; d < dv; d++) {
                    double x = 0;
                    for (int s = 0; s <= i; s++) x += M[i * n + s] * fabs(Uu[s * dv + d]);
                    dU[i * dv + d] += x;
                }
                for (int r = 0; r < dk; r++) {
                    double x = 0;
                    for (int s = 0; s <= i; s++) x += M[i * n + s] * fabs(W[s * dk + r]);
                    dW[i * dk + r] += x;
                }
            }
            /* V' = U − W S and eV' */
            std::vector<double> VP(n * dv), eV(n * dv);
            for (int i = 0; i < n; i++)
                for (int d = 0; d < dv; d++) {
                    double ws = 0, aws = 0, dws = 0;
                    for (int r = 0; r < dk; r++) {
                        ws += W[i * dk + r] * S[r * dv + d];
                        aws += fabs(W[i * dk + r]) * fabs(S[r * dv + d]);
                        dws += dW[i * dk + r] * fabs(S[r * dv + d]);
                    }
                    VP[i * dv + d] = Uu[i * dv + d] - ws;
                    eV[i * dv + d] = dU[i * dv + d] + dws + (dk + 1) * u * (fabs(Uu[i * dv + d]) + aws);
                }
            /* O and its bound */
            for (int i = 0; i < n; i++)
                for (int d = 0; d < dv; d++) {
                    double qs = 0, aqs = 0, qv = 0, aqv = 0, qe = 0, dqv = 0;
                    for (int r = 0; r < dk; r++) {
                        const double qt = Q(i, r) * EG[i];
                        qs += qt * S[r * dv + d];
                        aqs += fabs(qt) * fabs(S[r * dv + d]);
                    }
                    for (int s = 0; s <= i; s++) {
                        const double a = QK[i * n + s];
                        qv += a * VP[s * dv + d];
                        aqv += fabs(a) * fabs(VP[s * dv + d]);
                        qe += fabs(a) * eV[s * dv + d];
                        const double dq = dk * u * qn[i] * D[i * n + s] + (u + eD) * fabs(a);
                        dqv += dq * fabs(VP[s * dv + d]);
                    }
                    const size_t oi = ((size_t)(t0 + i) * nv + j) * dv + d;
                    R.o_ck[oi] = qs + qv;
                    const double eo = (u + eD + (dk + n) * u) * aqs + (dk + n) * u * aqv + qe + dqv;
                    R.bo_ck[oi] = SECOND_ORDER * (eo + qn[i] * p[d]);
                }
            /* S' and its bound */
            const double en = exp(G[n - 1]);
            std::vector<double> Sn(hsz), eS(hsz);
            for (int r = 0; r < dk; r++)
                for (int d = 0; d < dv; d++) {
                    double x = 0, ax = 0, ex = 0;
                    for (int i = 0; i < n; i++) {
                        const double kt = K(i, r) * exp(G[n - 1] - G[i]);
                        x += kt * VP[i * dv + d];
                        ax += fabs(kt) * fabs(VP[i * dv + d]);
                        ex += fabs(kt) * eV[i * dv + d];
                    }
                    Sn[r * dv + d] = en * S[r * dv + d] + x;
                    eS[r * dv + d] = (eD + (n + 2) * u) * en * fabs(S[r * dv + d]) + ((n + 2) * u + eD) * ax + ex;
                }
            for (int d = 0; d < dv; d++) {
                double s2 = 0;
                for (int r = 0; r < dk; r++) {
                    R.bs_ck[j * hsz + r * dv + d] = SECOND_ORDER * (p[d] + eS[r * dv + d]);
                    s2 += eS[r * dv + d] * eS[r * dv + d];
                }
                p[d] += sqrt(s2);
            }
            S = Sn;
        }
        if (T == 0)
            for (int64_t i = 0; i < hsz; i++) R.bs_ck[j * hsz + i] = 0;
        for (int64_t i = 0; i < hsz; i++) R.s_ck[j * hsz + i] = S[i];
    }
}

/* ---- running the ops ---- */
struct Dev {
    ni_cuda_ctx *cx;
    ni_ctx *cpu;
};

struct Result {
    std::vector<float> o, state;
    int32_t err_slot;
    int rc;
};

/* Runs one op on the CUDA (simt) context or on the CPU; form 0 recurrent,
 * 1 chunked. */
static Result run_op(Dev &dv_, const Case &c, Inputs &in, int in_slot, int out_slot, int form, bool cuda) {
    const int T = c.T, nk = c.nk, nv = c.nv, dk = c.dk, dv = c.dv;
    Result res;
    std::vector<float> o(in.olen, 1234.5f), st = in.state0;
    std::vector<float> *bufs[6] = {c.strided ? &in.proj : &in.qb, c.strided ? &in.proj : &in.kb,
                                   c.strided ? &in.proj : &in.vb, &in.g, &in.beta, nullptr};
    if (!cuda) {
        ni_rows q = mk_rows(bufs[0]->data(), in.lq, T, nk, dk), k = mk_rows(bufs[1]->data(), in.lk, T, nk, dk);
        ni_rows v = mk_rows(bufs[2]->data(), in.lv, T, nv, dv);
        Layout lg = {0, nv, 1};
        ni_rows g = mk_rows(in.g.data(), lg, T, nv, 1), b = mk_rows(in.beta.data(), lg, T, nv, 1);
        ni_rows oo = mk_rows(o.data(), in.lo, T, nv, dv);
        int32_t is = in_slot;
        if (form == 0) ni_gdn_recurrent(dv_.cpu, q, k, v, g, b, st.data(), in.slot_stride, &is, out_slot, oo);
        else ni_gdn_chunked(dv_.cpu, q, k, v, g, b, st.data(), in.slot_stride, &is, out_slot, oo);
        res.o = o;
        res.state = st;
        res.err_slot = 0;
        res.rc = 0;
        return res;
    }
    int code = 0;
    auto up = [&](const std::vector<float> &h) {
        float *d = (float *)ni_cuda_malloc(dv_.cx, (int64_t)h.size() * 4 + 4, "test", &code);
        ni_cuda_h2d(dv_.cx, d, h.data(), (int64_t)h.size() * 4);
        return d;
    };
    float *dq = up(*bufs[0]), *dk_ = c.strided ? dq : up(*bufs[1]), *dvv = c.strided ? dq : up(*bufs[2]);
    float *dg = up(in.g), *db = up(in.beta), *dout = up(o), *dst = up(st);
    int32_t *dslot = (int32_t *)ni_cuda_malloc(dv_.cx, 4, "slot", &code);
    int32_t is = in_slot;
    ni_cuda_h2d(dv_.cx, dslot, &is, 4);
    ni_rows q = mk_rows(dq, in.lq, T, nk, dk), k = mk_rows(dk_, in.lk, T, nk, dk);
    ni_rows v = mk_rows(dvv, in.lv, T, nv, dv);
    Layout lg = {0, nv, 1};
    ni_rows g = mk_rows(dg, lg, T, nv, 1), b = mk_rows(db, lg, T, nv, 1);
    ni_rows oo = mk_rows(dout, in.lo, T, nv, dv);
    ni_cuda_set_gdn_segment(dv_.cx, c.seg_chunks);
    if (form == 0) ni_cuda_gdn_recurrent(dv_.cx, q, k, v, g, b, dst, in.slot_stride, c.slots, dslot, out_slot, oo);
    else ni_cuda_gdn_chunked(dv_.cx, q, k, v, g, b, dst, in.slot_stride, c.slots, dslot, out_slot, oo);
    ni_cuda_set_gdn_segment(dv_.cx, 0);
    int32_t cnt[NI_CUDA_ERR_N];
    char err[256] = "";
    res.rc = ni_cuda_sync(dv_.cx, cnt, err, sizeof err);
    if (res.rc) printf("  cuda error: %s\n", err);
    res.err_slot = cnt[NI_CUDA_ERR_SLOT];
    res.o.resize(o.size());
    res.state.resize(st.size());
    ni_cuda_d2h(dv_.cx, res.o.data(), dout, (int64_t)o.size() * 4);
    ni_cuda_d2h(dv_.cx, res.state.data(), dst, (int64_t)st.size() * 4);
    ni_cuda_free(dv_.cx, dq);
    if (!c.strided) {
        ni_cuda_free(dv_.cx, dk_);
        ni_cuda_free(dv_.cx, dvv);
    }
    ni_cuda_free(dv_.cx, dg);
    ni_cuda_free(dv_.cx, db);
    ni_cuda_free(dv_.cx, dout);
    ni_cuda_free(dv_.cx, dst);
    ni_cuda_free(dv_.cx, dslot);
    return res;
}

/* Gathers o (t, j, d) of a run into [T][nv][dv]; checks the padding of
 * strided o rows kept the sentinel. */
static std::vector<float> gather_o(const Case &c, const Inputs &in, const std::vector<float> &o, const std::string &nm) {
    std::vector<float> r((size_t)c.T * c.nv * c.dv);
    std::vector<char> used(o.size(), 0);
    for (int t = 0; t < c.T; t++)
        for (int j = 0; j < c.nv; j++)
            for (int d = 0; d < c.dv; d++) {
                size_t idx = in.lo.base + t * in.lo.ld + j * in.lo.hs + d;
                r[((size_t)t * c.nv + j) * c.dv + d] = o[idx];
                used[idx] = 1;
            }
    long bad = -1;
    for (size_t i = 0; i < o.size() && bad < 0; i++)
        if (!used[i] && o[i] != 1234.5f) bad = (long)i;
    report(nm + "/o_padding_untouched", bad < 0, "%g %g at %ld", bad >= 0 ? o[bad] : 0, 0, bad);
    return r;
}

static std::vector<double> add(const std::vector<double> &a, const std::vector<double> &b) {
    std::vector<double> r(a.size());
    for (size_t i = 0; i < a.size(); i++) r[i] = a[i] + b[i];
    return r;
}
static std::vector<double> scale(const std::vector<double> &a, double f) {
    std::vector<double> r(a.size());
    for (size_t i = 0; i < a.size(); i++) r[i] = a[i] * f;
    return r;
}
/* [nv][dv] column bound → [nv][dk][dv] elementwise */
static std::vector<double> colb(const Case &c, const double *b) {
    std::vector<double> r((size_t)c.nv * c.dk * c.dv);
    for (int j = 0; j < c.nv; j++)
        for (int i = 0; i < c.dk; i++)
            for (int d = 0; d < c.dv; d++) r[((size_t)j * c.dk + i) * c.dv + d] = b[j * c.dv + d];
    return r;
}

/* Every slot s ∉ written keeps its bits, and the padding after each slot's
 * heads too. */
static void check_untouched(const std::string &nm, const Case &c, const Inputs &in, const std::vector<float> &st,
                            const std::vector<int> &written) {
    const int64_t hs = (int64_t)c.nv * c.dk * c.dv;
    for (int s = 0; s < c.slots; s++) {
        bool w = false;
        for (int x : written) w |= x == s;
        const int64_t off = s * in.slot_stride, n = w ? in.slot_stride - hs : in.slot_stride;
        const int64_t from = w ? off + hs : off;
        if (n > 0) check_bits(nm + "/slot" + std::to_string(s) + (w ? "_padding" : "_untouched"), st.data() + from,
                              in.state0.data() + from, (size_t)n);
    }
}

static void run_case(Dev &dev, const Case &c) {
    Inputs in;
    make_inputs(c, in);
    Oracle R;
    oracle(c, in, c.in, R);
    const int T = c.T;
    const int64_t hsz = (int64_t)c.nv * c.dk * c.dv;
    const size_t on = (size_t)T * c.nv * c.dv;
    const bool ck_rec = c.dk > 128; /* the chunked route falls back to the recurrent kernel */
    std::string nm = c.name;

    /* oracle self-check: the FP64 WY form equals the FP64 recurrence (any
     * difference beyond 1e-9 relative would be an oracle bug) */
    if (T > 0) {
        std::vector<double> tol(on), tols(hsz);
        for (size_t i = 0; i < on; i++) tol[i] = 1e-9 * (1 + fabs(R.o[i]));
        const double *sl = &R.st[(size_t)(T - 1) * hsz];
        for (int64_t i = 0; i < hsz; i++) tols[i] = 1e-9 * (1 + fabs(sl[i]));
        std::vector<float> of(R.o_ck.begin(), R.o_ck.end()), sf(R.s_ck.begin(), R.s_ck.end());
        (void)of;
        bool ok = true;
        for (size_t i = 0; i < on; i++) ok &= fabs(R.o_ck[i] - R.o[i]) <= tol[i];
        for (int64_t i = 0; i < hsz; i++) ok &= fabs(R.s_ck[i] - sl[i]) <= tols[i];
        report(nm + "/oracle_forms_agree", ok);
    }

    if (c.out == NI_PER_TOKEN) {
        Result g = run_op(dev, c, in, c.in, NI_PER_TOKEN, 0, true);
        Result r = run_op(dev, c, in, c.in, NI_PER_TOKEN, 0, false);
        report(nm + "/rec/launch_ok", g.rc == 0 && g.err_slot == 0);
        std::vector<float> go = gather_o(c, in, g.o, nm + "/rec"), ro = gather_o(c, in, r.o, nm + "/cpu_rec");
        check_close(nm + "/rec/o_vs_fp64", go.data(), R.o.data(), R.bo_rec.data(), on);
        check_close_f(nm + "/rec/o_vs_cpu", go.data(), ro.data(), scale(R.bo_rec, 2).data(), on);
        std::vector<int> written;
        for (int t = 0; t < T; t++) {
            written.push_back(t);
            std::vector<double> b = colb(c, &R.bs_rec[(size_t)t * c.nv * c.dv]);
            const float *gs = g.state.data() + t * in.slot_stride;
            check_close(nm + "/rec/slot" + std::to_string(t) + "_vs_fp64", gs, &R.st[(size_t)t * hsz], b.data(), hsz);
            check_close_f(nm + "/rec/slot" + std::to_string(t) + "_vs_cpu", gs, r.state.data() + t * in.slot_stride,
                          scale(b, 2).data(), hsz);
        }
        check_untouched(nm + "/rec", c, in, g.state, written);
        return;
    }

    /* recurrent */
    Result g = run_op(dev, c, in, c.in, c.out, 0, true);
    Result r = run_op(dev, c, in, c.in, c.out, 0, false);
    report(nm + "/rec/launch_ok", g.rc == 0 && g.err_slot == 0, "rc %g err %g", g.rc, g.err_slot);
    std::vector<float> go = gather_o(c, in, g.o, nm + "/rec"), ro = gather_o(c, in, r.o, nm + "/cpu_rec");
    std::vector<double> bsr = T > 0 ? colb(c, &R.bs_rec[(size_t)(T - 1) * c.nv * c.dv]) : std::vector<double>(hsz, 0);
    std::vector<double> sref = T > 0 ? std::vector<double>(R.st.begin() + (size_t)(T - 1) * hsz, R.st.begin() + (size_t)T * hsz)
                                     : R.s_in;
    const float *gsr = g.state.data() + c.out * in.slot_stride;
    if (T > 0) {
        check_close(nm + "/rec/o_vs_fp64", go.data(), R.o.data(), R.bo_rec.data(), on);
        check_close_f(nm + "/rec/o_vs_cpu", go.data(), ro.data(), scale(R.bo_rec, 2).data(), on);
    }
    check_close(nm + "/rec/state_vs_fp64", gsr, sref.data(), bsr.data(), hsz);
    check_close_f(nm + "/rec/state_vs_cpu", gsr, r.state.data() + c.out * in.slot_stride, scale(bsr, 2).data(), hsz);
    check_untouched(nm + "/rec", c, in, g.state, {c.out});

    /* chunked */
    Result gc = run_op(dev, c, in, c.in, c.out, 1, true);
    Result rc = run_op(dev, c, in, c.in, c.out, 1, false);
    report(nm + "/ck/launch_ok", gc.rc == 0 && gc.err_slot == 0, "rc %g err %g", gc.rc, gc.err_slot);
    std::vector<float> gco = gather_o(c, in, gc.o, nm + "/ck"), rco = gather_o(c, in, rc.o, nm + "/cpu_ck");
    const std::vector<double> &bo_g = ck_rec ? R.bo_rec : R.bo_ck; /* bound of the CUDA chunked route */
    const std::vector<double> bs_g = ck_rec ? bsr : R.bs_ck;
    const float *gsc = gc.state.data() + c.out * in.slot_stride;
    if (T > 0) {
        check_close(nm + "/ck/o_vs_fp64", gco.data(), R.o.data(), bo_g.data(), on);
        check_close_f(nm + "/ck/o_vs_cpu_ck", gco.data(), rco.data(), add(bo_g, R.bo_ck).data(), on);
        check_close_f(nm + "/ck/o_vs_cuda_rec", gco.data(), go.data(), add(bo_g, R.bo_rec).data(), on);
    }
    check_close(nm + "/ck/state_vs_fp64", gsc, sref.data(), bs_g.data(), hsz);
    check_close_f(nm + "/ck/state_vs_cpu_ck", gsc, rc.state.data() + c.out * in.slot_stride, add(bs_g, R.bs_ck).data(),
                  hsz);
    check_close_f(nm + "/ck/state_vs_cuda_rec", gsc, gsr, add(bs_g, bsr).data(), hsz);
    check_untouched(nm + "/ck", c, in, gc.state, {c.out});
}

/* A bad input slot: counted once per op, nothing written. */
static void run_bad_slot(Dev &dev, const Case &c, int bad) {
    Inputs in;
    make_inputs(c, in);
    for (int form = 0; form < 2; form++) {
        for (int out : {c.out, NI_PER_TOKEN}) {
            if (form == 1 && out == NI_PER_TOKEN) continue;
            Result g = run_op(dev, c, in, bad, out, form, true);
            std::string nm = c.name + (form ? "/ck" : "/rec") + "/bad_slot" + std::to_string(bad) +
                             (out == NI_PER_TOKEN ? "_per_token" : "");
            report(nm + "/counted_once", g.rc == 0 && g.err_slot == 1, "rc %g count %g", g.rc, g.err_slot);
            check_bits(nm + "/state_untouched", g.state.data(), in.state0.data(), in.state0.size());
            std::vector<float> o0(in.olen, 1234.5f);
            check_bits(nm + "/o_untouched", g.o.data(), o0.data(), o0.size());
        }
    }
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_rng = seed;
    printf("test_delta seed %llu\n", (unsigned long long)seed);
    Dev dev;
    int code = 0;
    char err[256];
    dev.cx = ni_cuda_ctx_new(0, &code, err, sizeof err);
    if (!dev.cx) {
        printf("ni_cuda_ctx_new: %s\n0 passed, 1 failed\n", err);
        return 1;
    }
    dev.cpu = ni_ctx_new(1, ni_cpu_best_isa());

    std::vector<Case> cases;
    /* name, T, nk, nv, dk, dv, gmode, strided, slots, in, out, slot_pad, ostrided, seg */
    for (int T : {1, 2, 5, 63, 64, 65, 130})
        cases.push_back({"go_like_T" + std::to_string(T), T, 2, 4, 16, 24, 0, 0, 3, 1, 2, 0, 0, 0});
    cases.push_back({"gqa2_odd_slices_inplace", 65, 2, 4, 32, 32, 0, 1, 2, 0, 0, 3, 1, 0});
    cases.push_back({"aligned_slices_strong_decay", 130, 1, 2, 64, 64, 1, 2, 3, 2, 1, 0, 0, 0});
    cases.push_back({"g_near_0", 64, 2, 2, 32, 16, 2, 0, 2, 1, 0, 0, 0, 0});
    cases.push_back({"tails_dk18_dv13_hs", 66, 1, 2, 18, 13, 0, 3, 2, 0, 1, 1, 1, 0});
    cases.push_back({"tails_dk96_dv40", 70, 2, 2, 96, 40, 0, 1, 2, 1, 1, 0, 0, 0});
    cases.push_back({"segments_of_1_inplace", 130, 1, 2, 16, 32, 0, 2, 2, 1, 1, 0, 0, 1});
    cases.push_back({"segments_of_2", 200, 2, 2, 16, 16, 0, 0, 3, 0, 2, 0, 0, 2});
    cases.push_back({"T0_copy", 0, 1, 2, 16, 24, 0, 0, 3, 0, 2, 0, 0, 0});
    cases.push_back({"dk200_route_fallback", 5, 1, 1, 200, 24, 0, 0, 2, 0, 1, 0, 0, 0});
    cases.push_back({"dk128_dv128", 65, 1, 2, 128, 128, 0, 2, 2, 1, 1, 0, 0, 0});
    /* per-token slots: Go's shape; and slot 0 = the input slot */
    for (int T : {1, 4}) cases.push_back({"per_token_T" + std::to_string(T), T, 2, 4, 16, 24, 0, 0, 6, 5, NI_PER_TOKEN, 0, 0, 0});
    cases.push_back({"per_token_inplace_dk128", 3, 1, 2, 128, 40, 0, 1, 4, 0, NI_PER_TOKEN, 0, 0, 0});

    for (const Case &c : cases) {
        int f0 = g_fail;
        clock_t t0 = clock();
        run_case(dev, c);
        printf("%-32s %s (%.1f s)\n", c.name.c_str(), g_fail == f0 ? "ok" : "FAILED",
               (double)(clock() - t0) / CLOCKS_PER_SEC);
    }
    {
        Case c = {"bad_slot", 5, 1, 2, 16, 24, 0, 0, 6, 0, 1, 0, 0, 0};
        run_bad_slot(dev, c, c.slots);
        run_bad_slot(dev, c, -1);
    }
    ni_ctx_free(dev.cpu);
    ni_cuda_ctx_free(dev.cx);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail == 0 ? 0 : 1;
}
