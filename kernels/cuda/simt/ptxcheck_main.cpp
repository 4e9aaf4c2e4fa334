/*
 * ptxcheck — the host SIMT harness's PTX emulations (mma.sync m16n8k16 bf16,
 * ldmatrix x2/x4[.trans], cp.async 16 B [+zfill] with commit/wait_group)
 * against the real instructions, and both against an independent scalar
 * reading of the PTX ISA fragment layouts written here (README.md,
 * "ptxcheck").
 *
 *   ptxcheck [--seed N] [--sim-only]
 *
 * Default: needs a GPU; runs every kernel of ptxcheck_kernels.cuh under the
 * harness and on device 0, and compares. --sim-only: harness vs the scalar
 * reading only (no GPU needed). Prints one line per family and
 * "N passed, M failed"; exit 0 iff all pass, 1 on a failure, 2 when no GPU
 * is usable (without --sim-only), 64 on bad arguments.
 *
 * The reading accumulates each mma element with the model NINFER_SIMT_MMA
 * selects (tcmodel.h; ieee: the fmaf chain acc = fmaf(a_k, b_k, acc)), the
 * same model the harness runs, so sim vs reading checks the fragment
 * layouts bit for bit; the arithmetic itself is tested by tcmodel_test.cpp.
 * On a GPU, "gpu == sim bit-for-bit" measures the model against hardware.
 *
 * Built with -ffp-contract=off: the reading's fp32 arithmetic must be exactly
 * the calls written.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ptxcheck.h"
#include "tcmodel.h"

#ifdef PTXC_SIM_ONLY
/* Built without CUDA (build-ptxcheck.sh --sim-only): no GPU side. */
extern "C" {
int ptxc_gpu_probe(char *msg, size_t n) {
    snprintf(msg, n, "this ptxcheck was built without CUDA (build-ptxcheck.sh --sim-only)");
    return 0;
}
const char *ptxc_gpu_error(void) { return "built without CUDA"; }
int ptxc_gpu_mma_frag(int, const uint32_t *, const uint32_t *, const float *, float *) { return 1; }
int ptxc_gpu_mma_ldm(int, int, const uint16_t *, const uint16_t *, const float *, float *) { return 1; }
int ptxc_gpu_ldm_raw(int, const uint16_t *, const int32_t *, uint32_t *) { return 1; }
int ptxc_gpu_cp_async(int, const uint8_t *, size_t, const int32_t *, const int32_t *, uint8_t *) { return 1; }
}
#endif

namespace {

/* ---- random inputs ---------------------------------------------------------- */

struct Rng {
    uint64_t s;
    uint64_t next() { /* splitmix64 */
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    int range(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); } /* [lo, hi] */
};

float bf16_to_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t f_to_bf16_exact(float f) { /* f must be representable */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Normal bf16 with exponent in [-6, 6]: products are exact in fp32 and
 * stay far from subnormals and overflow. */
uint16_t rand_bf16(Rng &r) {
    uint32_t sign = (uint32_t)(r.next() & 1), exp = (uint32_t)(127 + r.range(-6, 6)), man = (uint32_t)(r.next() & 0x7f);
    return (uint16_t)(sign << 15 | exp << 7 | man);
}
/* Small integers: every partial sum of 16 products plus c is an exact fp32
 * integer, so any summation order gives the same bits. */
uint16_t rand_bf16_int(Rng &r) { return f_to_bf16_exact((float)r.range(-8, 8)); }

float rand_f32(Rng &r) {
    uint32_t sign = (uint32_t)(r.next() & 1), exp = (uint32_t)(127 + r.range(-4, 4)),
             man = (uint32_t)(r.next() & 0x7fffff);
    uint32_t u = sign << 31 | exp << 23 | man;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- the scalar reading of the PTX ISA ------------------------------------------
 * "Matrix Fragments for mma.m16n8k16 with floating point type": groupID =
 * %laneid >> 2, threadID_in_group = %laneid % 4. A (16x16, .bf16) is held as
 * elements a0..a7 in four .b32 registers (two per register, a0 in the low
 * half of the first); B (16x8) as b0..b3 in two registers; C/D (16x8, f32)
 * as c0..c3. Written per element i, as the ISA's tables give them. */
int a_row(int lane, int i) { return (lane >> 2) + ((i % 4) >= 2 ? 8 : 0); } /* a2,a3,a6,a7: +8 */
int a_col(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
int b_row(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
int b_col(int lane, int /*i*/) { return lane >> 2; }
int c_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
int c_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }
uint16_t half_of(uint32_t reg, int i) { return (uint16_t)(i & 1 ? reg >> 16 : reg & 0xffff); }

struct Tile { /* one mma.m16n8k16 in matrix form */
    float A[16][16], B[16][8], C[16][8];
};

void frags_to_tile(const uint32_t *a, const uint32_t *b, const float *c, Tile &T) {
    for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < 8; i++) T.A[a_row(lane, i)][a_col(lane, i)] = bf16_to_f(half_of(a[lane * 4 + i / 2], i));
        for (int i = 0; i < 4; i++) T.B[b_row(lane, i)][b_col(lane, i)] = bf16_to_f(half_of(b[lane * 2 + i / 2], i));
        for (int i = 0; i < 4; i++) T.C[c_row(lane, i)][c_col(lane, i)] = c[lane * 4 + i];
    }
}

/* The accumulation model the harness runs (README.md, "Arithmetic";
 * NINFER_SIMT_MMA, read once in main); plus the exact value and the
 * magnitude sum S = |c| + sum |a_k b_k| that the tolerance scales with. */
tcmodel::Mode g_mma_mode = tcmodel::IEEE;

struct Ref {
    float chain;
    double exact, mag;
};
Ref ref_element(const Tile &T, int m, int n) {
    Ref r;
    float col[16];
    double ex = T.C[m][n], mag = fabs((double)T.C[m][n]);
    for (int k = 0; k < 16; k++) {
        col[k] = T.B[k][n];
        double p = (double)T.A[m][k] * (double)T.B[k][n];
        ex += p;
        mag += fabs(p);
    }
    r.chain = tcmodel::mma_k16(g_mma_mode, T.A[m], col, T.C[m][n]);
    r.exact = ex;
    r.mag = mag;
    return r;
}

/* ldmatrix (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): for
 * .x1/.x2/.x4, threads 0-7 / 0-15 / 0-31 supply the addresses of the rows of
 * the matrices (thread 8i+j: row j of matrix i). Each matrix lands in one
 * register per thread in the m8n8 fragment layout: the thread with %laneid
 * holds row %laneid/4, elements 2*(%laneid%4) and +1 (low half first).
 * .trans reads the matrix in column-major order, so fragment element (r, c)
 * is stored element (c, r). */
uint32_t ldm_expect(const uint16_t *smem, const int32_t *rowsel, int mat, int lane, bool trans) {
    uint16_t h[2];
    for (int e = 0; e < 2; e++) {
        int fr = lane / 4, fc = 2 * (lane % 4) + e;
        int srow = trans ? fc : fr, scol = trans ? fr : fc;
        h[e] = smem[rowsel[8 * mat + srow] * 8 + scol];
    }
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/* ---- comparison helpers ----------------------------------------------------- */

int64_t ordered(float f) { /* monotone integer image of a float */
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}
int64_t ulp_diff(float x, float y) {
    int64_t d = ordered(x) - ordered(y);
    return d < 0 ? -d : d;
}
bool same_bits(float x, float y) { return memcmp(&x, &y, 4) == 0; }

/* Tolerance of a 17-term fp32 accumulation (16 exact products and c) in an
 * unspecified order, each step rounded or truncated (error <= 2u of the
 * partial sum, u = 2^-24): |d - exact| <= 17 * 2u * S. */
const double kTolUnits = 34.0; /* in u*S */
const double kU = 1.0 / 16777216.0;

/* |d - exact| in units of u*S; NaN and infinity give +inf. */
double err_units(float d, double exact, double mag) {
    if (!isfinite(d)) return INFINITY;
    double e = fabs((double)d - exact);
    if (mag == 0) return e == 0 ? 0 : INFINITY;
    return e / (kU * mag);
}

struct Line {
    bool pass;
    std::string text;
};

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

/* Statistics of one mma family's outputs against the reading. */
struct MmaStats {
    size_t n = 0, sim_chain_mismatch = 0, sim_tol_fail = 0;
    size_t gpu_tol_fail = 0, gpu_sim_same = 0, gpu_exact_mismatch = 0, gpu_nonfinite = 0;
    int64_t max_ulp = 0;
    double sim_err = 0, gpu_err = 0; /* max |d - exact| / (u S) */
    std::string first_bad;
    void note_bad(const std::string &s) {
        if (first_bad.empty()) first_bad = s;
    }
};

void mma_account(MmaStats &st, const Ref &r, float sim, const float *gpu, bool exact_ints, const std::string &where) {
    st.n++;
    if (!same_bits(sim, r.chain)) {
        st.sim_chain_mismatch++;
        st.note_bad(fmt("%s: sim %.9g, reading %.9g", where.c_str(), sim, r.chain));
    }
    double es = err_units(sim, r.exact, r.mag);
    if (!(es <= kTolUnits)) {
        st.sim_tol_fail++;
        st.note_bad(fmt("%s: sim %.9g, exact %.17g (%.3g u*S)", where.c_str(), sim, r.exact, es));
    }
    if (es > st.sim_err) st.sim_err = es;
    if (!gpu) return;
    double eg = err_units(*gpu, r.exact, r.mag);
    if (!(eg <= kTolUnits)) {
        st.gpu_tol_fail++;
        st.note_bad(fmt("%s: gpu %.9g, exact %.17g (%.3g u*S), sim %.9g", where.c_str(), *gpu, r.exact, eg, sim));
    }
    if (eg > st.gpu_err) st.gpu_err = eg;
    if (same_bits(*gpu, sim)) st.gpu_sim_same++;
    if (isfinite(*gpu) && isfinite(sim)) {
        int64_t u = ulp_diff(*gpu, sim);
        if (u > st.max_ulp) st.max_ulp = u;
    } else {
        st.gpu_nonfinite++;
    }
    if (exact_ints && !same_bits(*gpu, (float)r.exact)) {
        st.gpu_exact_mismatch++;
        st.note_bad(fmt("%s: gpu %.9g, exact integer %.17g", where.c_str(), *gpu, r.exact));
    }
}

Line mma_line(const char *name, const MmaStats &st, bool gpu, bool exact_ints) {
    bool pass = st.sim_chain_mismatch == 0 && st.sim_tol_fail == 0;
    std::string t = fmt("%s: %zu outputs; sim vs reading (model %s): %zu differ; sim max err %.2f u*S", name, st.n,
                        tcmodel::mode_name(g_mma_mode), st.sim_chain_mismatch, st.sim_err);
    if (gpu) {
        pass = pass && st.gpu_tol_fail == 0 && (!exact_ints || st.gpu_exact_mismatch == 0);
        t += fmt("; gpu max err %.2f u*S (tol %.0f u*S, %zu over)", st.gpu_err, kTolUnits, st.gpu_tol_fail);
        if (exact_ints) t += fmt("; gpu != exact integer: %zu", st.gpu_exact_mismatch);
        t += fmt("; gpu == sim bit-for-bit %zu/%zu, max ulp diff %lld", st.gpu_sim_same, st.n, (long long)st.max_ulp);
        if (st.gpu_nonfinite) t += fmt(" (finite pairs; %zu non-finite)", st.gpu_nonfinite);
    }
    if (!pass && !st.first_bad.empty()) t += "; first: " + st.first_bad;
    return Line{pass, t};
}

/* ---- families ------------------------------------------------------------------ */

struct Ctx {
    Rng rng;
    bool gpu;
};

Line fam_mma_frag(Ctx &cx, const char *name, int ntiles, bool ints) {
    const size_t n = (size_t)ntiles * 32;
    std::vector<uint32_t> a(n * 4), b(n * 2);
    std::vector<float> c(n * 4), ds(n * 4), dg(n * 4);
    for (auto &x : a) x = ints ? (uint32_t)rand_bf16_int(cx.rng) | (uint32_t)rand_bf16_int(cx.rng) << 16
                               : (uint32_t)rand_bf16(cx.rng) | (uint32_t)rand_bf16(cx.rng) << 16;
    for (auto &x : b) x = ints ? (uint32_t)rand_bf16_int(cx.rng) | (uint32_t)rand_bf16_int(cx.rng) << 16
                               : (uint32_t)rand_bf16(cx.rng) | (uint32_t)rand_bf16(cx.rng) << 16;
    for (auto &x : c) x = ints ? (float)cx.rng.range(-64, 64) : rand_f32(cx.rng);
    if (ntiles > 1 && !ints)
        for (size_t i = 0; i < 128; i++) c[n * 4 - 128 + i] = 0.0f; /* last tile: c = 0 */
    if (ptxc_sim_mma_frag(ntiles, a.data(), b.data(), c.data(), ds.data()))
        return Line{false, fmt("%s: sim: %s", name, ptxc_sim_error())};
    if (cx.gpu && ptxc_gpu_mma_frag(ntiles, a.data(), b.data(), c.data(), dg.data()))
        return Line{false, fmt("%s: gpu: %s", name, ptxc_gpu_error())};
    MmaStats st;
    for (int t = 0; t < ntiles; t++) {
        Tile T;
        frags_to_tile(&a[(size_t)t * 128], &b[(size_t)t * 64], &c[(size_t)t * 128], T);
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++) {
                size_t k = ((size_t)t * 32 + lane) * 4 + i;
                Ref r = ref_element(T, c_row(lane, i), c_col(lane, i));
                mma_account(st, r, ds[k], cx.gpu ? &dg[k] : nullptr, ints,
                            fmt("tile %d lane %d d%d", t, lane, i));
            }
    }
    return mma_line(name, st, cx.gpu, ints);
}

Line fam_mma_ldm(Ctx &cx, const char *name, int ntiles, int mode) {
    const size_t n = (size_t)ntiles * 256;
    std::vector<uint16_t> A(n), B(n);
    std::vector<float> C(n), Ds(n), Dg(n);
    for (auto &x : A) x = rand_bf16(cx.rng);
    for (auto &x : B) x = rand_bf16(cx.rng);
    for (auto &x : C) x = rand_f32(cx.rng);
    if (ptxc_sim_mma_ldm(ntiles, mode, A.data(), B.data(), C.data(), Ds.data()))
        return Line{false, fmt("%s: sim: %s", name, ptxc_sim_error())};
    if (cx.gpu && ptxc_gpu_mma_ldm(ntiles, mode, A.data(), B.data(), C.data(), Dg.data()))
        return Line{false, fmt("%s: gpu: %s", name, ptxc_gpu_error())};
    MmaStats st;
    for (int t = 0; t < ntiles; t++) {
        const size_t o = (size_t)t * 256;
        for (int j = 0; j < 2; j++) { /* n-half */
            Tile T;
            for (int m = 0; m < 16; m++)
                for (int k = 0; k < 16; k++) T.A[m][k] = bf16_to_f(A[o + m * 16 + k]);
            for (int k = 0; k < 16; k++)
                for (int nn = 0; nn < 8; nn++)
                    T.B[k][nn] = bf16_to_f(mode == 0 ? B[o + (8 * j + nn) * 16 + k] : B[o + k * 16 + 8 * j + nn]);
            for (int m = 0; m < 16; m++)
                for (int nn = 0; nn < 8; nn++) T.C[m][nn] = C[o + m * 16 + 8 * j + nn];
            for (int m = 0; m < 16; m++)
                for (int nn = 0; nn < 8; nn++) {
                    size_t k = o + m * 16 + 8 * j + nn;
                    mma_account(st, ref_element(T, m, nn), Ds[k], cx.gpu ? &Dg[k] : nullptr, false,
                                fmt("tile %d D[%d][%d]", t, m, 8 * j + nn));
                }
        }
    }
    return mma_line(name, st, cx.gpu, false);
}

/* All four ldmatrix variants from one run; returns one line per variant. */
std::vector<Line> fam_ldm_raw(Ctx &cx, int ntiles) {
    static const char *names[4] = {"ldmatrix.m8n8.x4", "ldmatrix.m8n8.x2", "ldmatrix.m8n8.x4.trans",
                                   "ldmatrix.m8n8.x2.trans"};
    const size_t nt = (size_t)ntiles, nout = nt * 4 * 32 * 4;
    std::vector<uint16_t> tiles(nt * 512);
    std::vector<int32_t> rowsel(nt * 32);
    std::vector<uint32_t> os(nout), og(nout);
    for (auto &x : tiles) x = (uint16_t)cx.rng.next();
    for (auto &x : rowsel) x = cx.rng.range(0, 63);
    std::vector<Line> out;
    if (ptxc_sim_ldm_raw(ntiles, tiles.data(), rowsel.data(), os.data())) {
        for (auto nm : names) out.push_back(Line{false, fmt("%s: sim: %s", nm, ptxc_sim_error())});
        return out;
    }
    if (cx.gpu && ptxc_gpu_ldm_raw(ntiles, tiles.data(), rowsel.data(), og.data())) {
        for (auto nm : names) out.push_back(Line{false, fmt("%s: gpu: %s", nm, ptxc_gpu_error())});
        return out;
    }
    for (int v = 0; v < 4; v++) {
        const int num = v % 2 == 0 ? 4 : 2;
        const bool trans = v >= 2;
        size_t words = 0, sim_bad = 0, gpu_bad = 0, gpu_sim_bad = 0;
        std::string first;
        for (size_t t = 0; t < nt; t++)
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++) {
                    size_t k = ((t * 4 + v) * 32 + lane) * 4 + i;
                    uint32_t want =
                        i < num ? ldm_expect(&tiles[t * 512], &rowsel[t * 32], i, lane, trans) : 0xffffffffu;
                    words++;
                    bool sb = os[k] != want, gb = cx.gpu && og[k] != want, xb = cx.gpu && og[k] != os[k];
                    sim_bad += sb;
                    gpu_bad += gb;
                    gpu_sim_bad += xb;
                    if ((sb || gb || xb) && first.empty())
                        first = cx.gpu ? fmt("tile %zu lane %d r%d: reading %08x sim %08x gpu %08x", t, lane, i, want,
                                             os[k], og[k])
                                       : fmt("tile %zu lane %d r%d: reading %08x sim %08x", t, lane, i, want, os[k]);
                }
        bool pass = sim_bad == 0 && gpu_bad == 0 && gpu_sim_bad == 0;
        std::string s = fmt("%s: %zu words (random row addresses); sim != reading: %zu", names[v], words, sim_bad);
        if (cx.gpu) s += fmt("; gpu != reading: %zu; gpu != sim: %zu (bit-identical required)", gpu_bad, gpu_sim_bad);
        if (!pass) s += "; first: " + first;
        out.push_back(Line{pass, s});
    }
    return out;
}

Line fam_cp_async(Ctx &cx, int nblocks) {
    const char *name = "cp.async.cg 16 B + zfill, commit_group/wait_group 2,1,0/wait_all";
    enum { T = PTXC_CP_THREADS };
    const size_t nchunks = 256, src_bytes = nchunks * 16, nc = (size_t)nblocks * PTXC_CP_COPIES * T;
    std::vector<uint8_t> src(src_bytes), os((size_t)nblocks * PTXC_CP_OUT_BYTES), og(os.size());
    std::vector<int32_t> off(nc), sz(nc);
    for (auto &x : src) x = (uint8_t)cx.rng.next();
    for (size_t i = 0; i < nc; i++) {
        off[i] = cx.rng.range(0, (int)nchunks - 1);
        sz[i] = cx.rng.next() & 1 ? -1 : cx.rng.range(0, 16);
    }
    sz[0] = 0; /* the edges at least once */
    sz[1] = 16;
    if (ptxc_sim_cp_async(nblocks, src.data(), src_bytes, off.data(), sz.data(), os.data()))
        return Line{false, fmt("%s: sim: %s", name, ptxc_sim_error())};
    if (cx.gpu && ptxc_gpu_cp_async(nblocks, src.data(), src_bytes, off.data(), sz.data(), og.data()))
        return Line{false, fmt("%s: gpu: %s", name, ptxc_gpu_error())};
    /* The reading: a copy with src-size s (16 without one) writes s bytes of
     * the source and zeros up to the copy size. */
    auto slot_expect = [&](size_t blk, int copy, int th, uint8_t out[16]) {
        size_t j = (blk * PTXC_CP_COPIES + copy) * T + th;
        int s = sz[j] < 0 ? 16 : sz[j];
        for (int e = 0; e < 16; e++) out[e] = e < s ? src[(size_t)off[j] * 16 + e] : 0;
    };
    size_t bytes = 0, sim_bad = 0, gpu_bad = 0, gpu_sim_bad = 0;
    std::string first;
    for (size_t blk = 0; blk < (size_t)nblocks; blk++)
        for (int part = 0; part < 9; part++)
            for (int th = 0; th < T; th++) {
                uint8_t want[16];
                if (part < 4)
                    slot_expect(blk, part, th, want); /* own slot `part` */
                else if (part < 8)
                    slot_expect(blk, part - 4, (th + 1) % T, want); /* neighbour's */
                else
                    slot_expect(blk, 4, th, want); /* slot 0 after copy 4 */
                size_t o = blk * PTXC_CP_OUT_BYTES + ((size_t)part * T + th) * 16;
                for (int e = 0; e < 16; e++) {
                    bool sb = os[o + e] != want[e], gb = cx.gpu && og[o + e] != want[e],
                         xb = cx.gpu && og[o + e] != os[o + e];
                    bytes++;
                    sim_bad += sb;
                    gpu_bad += gb;
                    gpu_sim_bad += xb;
                    if ((sb || gb || xb) && first.empty()) {
                        size_t j = (blk * PTXC_CP_COPIES + (part < 4 ? part : part < 8 ? part - 4 : 4)) * T +
                                   (part >= 4 && part < 8 ? (th + 1) % T : th);
                        first = fmt("block %zu part %d thread %d byte %d (src-size %d): reading %02x sim %02x", blk,
                                    part, th, e, sz[j], want[e], os[o + e]);
                        if (cx.gpu) first += fmt(" gpu %02x", og[o + e]);
                    }
                }
            }
    bool pass = sim_bad == 0 && gpu_bad == 0 && gpu_sim_bad == 0;
    std::string s = fmt("%s: %zu bytes; sim != reading: %zu", name, bytes, sim_bad);
    if (cx.gpu) s += fmt("; gpu != reading: %zu; gpu != sim: %zu (bit-identical required)", gpu_bad, gpu_sim_bad);
    if (!pass) s += "; first: " + first;
    return Line{pass, s};
}

int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--seed N] [--sim-only]\n", argv0);
    return 64;
}

} // namespace

int main(int argc, char **argv) {
    bool sim_only = false, have_seed = false;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = nullptr;
        if (!strcmp(a, "--sim-only")) {
            sim_only = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(argv[0]);
            return 0;
        }
        if (!strcmp(a, "--seed")) {
            if (++i >= argc) return usage(argv[0]);
            v = argv[i];
        } else if (!strncmp(a, "--seed=", 7)) {
            v = a + 7;
        } else {
            v = a; /* a bare seed */
        }
        char *end = nullptr;
        seed = strtoull(v, &end, 0);
        if (!*v || *end) return usage(argv[0]);
        have_seed = true;
    }
    if (!have_seed) seed = (uint64_t)time(nullptr) * 1000003u ^ (uint64_t)getpid();
    g_mma_mode = tcmodel::mode_from_env();
    printf("ptxcheck: seed %llu, mma model %s (replay: NINFER_SIMT_MMA=%s ptxcheck --seed %llu%s)\n",
           (unsigned long long)seed, tcmodel::mode_name(g_mma_mode), tcmodel::mode_name(g_mma_mode),
           (unsigned long long)seed, sim_only ? " --sim-only" : "");
    Ctx cx{Rng{seed}, !sim_only};
    if (cx.gpu) {
        char msg[512];
        if (ptxc_gpu_probe(msg, sizeof msg) <= 0) {
            printf("ptxcheck: no usable GPU: %s\n", msg);
            printf("ptxcheck: nothing compared with hardware; `ptxcheck --sim-only` checks the emulations against "
                   "the scalar reading only\n");
            fflush(stdout);
            return 2;
        }
        printf("ptxcheck: device 0: %s\n", msg);
        printf("ptxcheck: compares hardware, the harness emulation (sim) and a scalar reading of the PTX ISA\n");
    } else {
        printf("ptxcheck: --sim-only: the harness emulation (sim) against a scalar reading of the PTX ISA; "
               "nothing is compared with hardware\n");
    }
    fflush(stdout);

    std::vector<Line> lines;
    lines.push_back(fam_mma_frag(cx, "mma.m16n8k16.bf16 fragments, random bf16", 64, false));
    lines.push_back(fam_mma_frag(cx, "mma.m16n8k16.bf16 fragments, small integers (exact in any order)", 16, true));
    lines.push_back(fam_mma_ldm(cx, "ldmatrix.x4 (A) + ldmatrix.x2 (B n-major) -> mma", 16, 0));
    lines.push_back(fam_mma_ldm(cx, "ldmatrix.x4 (A) + ldmatrix.x4.trans (B k-major) -> mma", 16, 1));
    lines.push_back(fam_mma_ldm(cx, "ldmatrix.x4 (A) + ldmatrix.x2.trans (B k-major) -> mma", 16, 2));
    for (Line &l : fam_ldm_raw(cx, 32)) lines.push_back(l);
    lines.push_back(fam_cp_async(cx, 8));

    int pass = 0, fail = 0;
    for (const Line &l : lines) {
        printf("%s %s\n", l.pass ? "PASS" : "FAIL", l.text.c_str());
        (l.pass ? pass : fail)++;
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
