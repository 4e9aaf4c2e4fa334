/* Number conversions, weight geometry, row decoding, embedding gather and
 * the quantized matmul (all weight formats). */
#include "ni_cpu.h"
#include <stdlib.h>

static float g_e4m3[256];
static const float g_e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
static int g_tables_ready;

float ni_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return s ? -v : v;
    }
    if (e == 31) u = s | 0x7f800000u | (m << 13);
    else u = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t ni_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00 : 0x7c00);
    if (x >= 0x477ff000u) return sign | 0x7c00; /* ≥ 65520 rounds to inf */
    if (x < 0x38800000u) {                       /* below 2^-14: subnormal half */
        float a;
        memcpy(&a, &x, 4);
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    uint32_t mant = x & 0x7fffffu, h = (((x >> 23) - 112) << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
}

float ni_e4m3_to_f32(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    float v = e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
    return (b & 0x80) ? -v : v;
}

uint8_t ni_f32_to_e4m3(float f) {
    if (isnan(f)) return 0x7f;
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (a > 448.0f) a = 448.0f; /* saturate */
    if (a < 0.015625f) return sign | (uint8_t)nearbyintf(a * 512.0f);
    int e;
    frexpf(a, &e);
    int E = e - 1;
    int m = (int)nearbyintf(ldexpf(a, 3 - E)) - 8;
    if (m == 8) {
        E++;
        m = 0;
    }
    return sign | (uint8_t)(((E + 7) << 3) | m);
}

/* The lane stored at position l of a 64-value group in layout perm
 * (q8_perm): 1 even lanes first; 2 r-order (avx2.c dec_r6): position
 * 32o + 16h + 8ρ + p holds lane 32h + 4p + 2ρ + o; 3 s-order (avx2.c
 * dec_s5): position 32o + 16h + 4d + j holds lane 32h + 8j + 2d + o. */
static int q8_perm_lane(int perm, int l) {
    if (perm == 1) return l < 32 ? 2 * l : 2 * (l - 32) + 1;
    if (perm == 3) return 32 * ((l >> 4) & 1) + 8 * (l & 3) + 2 * ((l >> 2) & 3) + (l >> 5);
    int o = l >> 5, h = (l >> 4) & 1, rho = (l >> 3) & 1, p = l & 7;
    return 32 * h + 4 * p + 2 * rho + o;
}

/* q8_perm_lane as a table: g_perm_lane[perm][l] (perm 1..3). */
static uint8_t g_perm_lane[4][64];

static void init_tables(void) {
    if (__atomic_load_n(&g_tables_ready, __ATOMIC_ACQUIRE)) return;
    for (int i = 0; i < 256; i++) g_e4m3[i] = ni_e4m3_to_f32((uint8_t)i);
    for (int p = 1; p < 4; p++)
        for (int l = 0; l < 64; l++) g_perm_lane[p][l] = (uint8_t)q8_perm_lane(p, l);
    __atomic_store_n(&g_tables_ready, 1, __ATOMIC_RELEASE);
}

static int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

int ni_weight_init(ni_weight *w, int fmt, int64_t n, int64_t k, const void *data, int64_t bytes) {
    init_tables();
    memset(w, 0, sizeof(*w));
    w->fmt = fmt;
    w->n = n;
    w->k = k;
    w->data = (const uint8_t *)data;
    if (n <= 0 || k <= 0) return -1;
    switch (fmt) {
    case NI_W_F32: w->bytes = n * k * 4; break;
    case NI_W_BF16: w->bytes = n * k * 2; break;
    case NI_W_Q4:
    case NI_W_Q5:
    case NI_W_Q6:
    case NI_W_Q8: {
        int bits = fmt == NI_W_Q4 ? 4 : fmt == NI_W_Q5 ? 5 : fmt == NI_W_Q6 ? 6 : 8;
        w->bits = bits;
        w->group = bits == 8 ? 32 : 64;
        w->base_bytes = 32;
        w->high_bytes = bits == 5 ? 8 : bits == 6 ? 16 : 0;
        w->kpad = align_up(k, 128);
        w->gpr = w->kpad / w->group;
        int64_t groups = n * w->gpr;
        w->high_off = align_up(groups * w->base_bytes, 256);
        w->scale_off = w->high_off + align_up(groups * w->high_bytes, 256);
        w->bytes = w->scale_off + groups * 2;
        break;
    }
    case NI_W_NVFP4: {
        if (n % 128 || k % 64) return -1;
        w->scale_off = align_up(n * k / 2, 256);
        w->div_off = w->scale_off + n * (k / 16);
        w->bytes = w->div_off + 4;
        if (bytes == w->bytes && data) {
            float d;
            memcpy(&d, w->data + w->div_off, 4);
            if (!(d > 0) || isinf(d)) return -1;
            w->inv_div = 1.0f / d;
        }
        break;
    }
    case NI_W_FP8ROW:
        w->scale_off = align_up(n * k, 256);
        w->bytes = w->scale_off + 2 * n;
        break;
    default: return -1;
    }
    return bytes == w->bytes ? 0 : -2;
}

int ni_weight_rows(const ni_weight *w, int64_t r0, int64_t r1, ni_weight *out) {
    if (r0 < 0 || r1 > w->n || r0 >= r1) return -1;
    *out = *w;
    out->n = r1 - r0;
    switch (w->fmt) {
    case NI_W_F32: out->data = w->data + r0 * w->k * 4; break;
    case NI_W_BF16: out->data = w->data + r0 * w->k * 2; break;
    case NI_W_Q4:
    case NI_W_Q5:
    case NI_W_Q6:
    case NI_W_Q8: {
        const int64_t g0 = r0 * w->gpr, shift = g0 * w->base_bytes; /* data moves by the base plane's rows */
        out->data = w->data + shift;
        out->high_off = w->high_off + g0 * w->high_bytes - shift;
        out->scale_off = w->scale_off + g0 * 2 - shift;
        break;
    }
    default: return -1;
    }
    out->bytes = -1; /* a view: not an encoded payload of its own */
    return 0;
}

/* Decodes cnt lanes of grouped-integer group gi (scale · signed code). */
static void decode_group_int(int isa, const ni_weight *w, int64_t gi, int cnt, float *out) {
    const uint8_t *sp = w->data + w->scale_off + 2 * gi;
    float s = ni_f16_to_f32((uint16_t)(sp[0] | (sp[1] << 8)));
    const uint8_t *base = w->data + gi * w->base_bytes;
    const uint8_t *high = w->data + w->high_off + gi * w->high_bytes;
    if (isa >= NI_ISA_AVX2 && cnt == w->group) {
        ni_dec_group_avx2((int)w->bits, base, high, s, out);
        return;
    }
    switch (w->bits) {
    case 8:
        for (int i = 0; i < cnt; i++) out[i] = s * (float)(int8_t)base[i];
        break;
    case 4:
        for (int i = 0; i < cnt; i++) {
            int u = (base[i >> 1] >> ((i & 1) * 4)) & 15;
            out[i] = s * (float)((u ^ 8) - 8);
        }
        break;
    case 5:
        for (int i = 0; i < cnt; i++) {
            int u = ((base[i >> 1] >> ((i & 1) * 4)) & 15) | (((high[i >> 3] >> (i & 7)) & 1) << 4);
            out[i] = s * (float)((u ^ 16) - 16);
        }
        break;
    case 6:
        for (int i = 0; i < cnt; i++) {
            int u = ((base[i >> 1] >> ((i & 1) * 4)) & 15) | (((high[i >> 2] >> ((i & 3) * 2)) & 3) << 4);
            out[i] = s * (float)((u ^ 32) - 32);
        }
        break;
    }
}

static void decode_row_isa(int isa, const ni_weight *w, int64_t r, float *out);

void ni_weight_decode_row(const ni_weight *w, int64_t r, float *out) { decode_row_isa(NI_ISA_SCALAR, w, r, out); }

static void decode_row_isa(int isa, const ni_weight *w, int64_t r, float *out) {
    int64_t k = w->k;
    switch (w->fmt) {
    case NI_W_F32: memcpy(out, w->data + r * k * 4, (size_t)k * 4); break;
    case NI_W_BF16: ni_bf16_to_f32_row(isa, (const uint16_t *)(w->data + r * k * 2), out, k); break;
    case NI_W_Q4:
    case NI_W_Q5:
    case NI_W_Q6:
    case NI_W_Q8:
        for (int64_t g = 0; g < w->gpr; g++) {
            int64_t c0 = g * w->group;
            if (c0 >= k) break;
            int cnt = (int)(k - c0 < w->group ? k - c0 : w->group);
            decode_group_int(isa, w, r * w->gpr + g, cnt, out + c0);
        }
        break;
    case NI_W_NVFP4: {
        const uint8_t *codes = w->data + r * (k / 2);
        int64_t rt = r / 128, ri = r % 128, kt = k / 64;
        const uint8_t *sc = w->data + w->scale_off + rt * kt * 512 + (ri % 32) * 16 + (ri / 32) * 4;
        for (int64_t g = 0; g < k / 16; g++) {
            float s = g_e4m3[sc[(g / 4) * 512 + g % 4]] * w->inv_div;
            for (int i = 0; i < 16; i += 2) {
                uint8_t b = codes[(g * 16 + i) >> 1];
                out[g * 16 + i] = g_e2m1[b & 15] * s;
                out[g * 16 + i + 1] = g_e2m1[b >> 4] * s;
            }
        }
        break;
    }
    case NI_W_FP8ROW: {
        const uint8_t *codes = w->data + r * k;
        const uint8_t *sp = w->data + w->scale_off + 2 * r;
        float s = ni_bf16((uint16_t)(sp[0] | (sp[1] << 8)));
        for (int64_t i = 0; i < k; i++) out[i] = g_e4m3[codes[i]] * s;
        break;
    }
    }
}

/* ---- embedding ---- */

typedef struct {
    const ni_weight *w;
    const int32_t *ids;
    ni_rows out;
    int bad, isa;
} embed_args;

static void embed_task(void *a_, int t, int tid) {
    (void)tid;
    embed_args *a = (embed_args *)a_;
    float *o = ni_row(a->out, t, 0);
    int32_t id = a->ids[t];
    if (id < 0 || id >= a->w->n) {
        memset(o, 0, (size_t)a->w->k * 4);
        __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
        return;
    }
    decode_row_isa(a->isa, a->w, id, o);
}

int ni_embed(ni_ctx *c, const ni_weight *w, const int32_t *ids, ni_rows out) {
    embed_args a = {w, ids, out, 0, c->isa};
    ni_parallel(c, out.t, embed_task, &a, (int64_t)out.t * w->k);
    return a.bad;
}

/* ---- matmul ---- */

#define MM_TILE 8        /* rows per task granule */
#define MM_TILE_LARGE 32 /* max decoded rows reused across all T in the large-T regime */

typedef struct {
    ni_ctx *c;
    const ni_weight *w;
    ni_rows x, y;
    int acc, rows_per_task;
    int rowdecode; /* small T: legacy decode-row-then-dot route (NINFER_CPU_SMALLT=decode) */
    int gemm;      /* large T: packed-panel GEMM (mm_gemm); 0 = row tile route (NINFER_CPU_LARGET=tile) */
    const int8_t *xq; /* NI_ACT_Q8: token t's codes at xq + t·kpad, block scales at xs + t·(kpad/32); NULL = fp32 */
    const float *xs;
    const float *xe; /* the block scales expanded to 8 lanes: xe + t·(kpad/4), xe[8b + i] = s_x[b] */
    int perm;        /* xq, xe layout (q8_perm): 0 natural, 1 even lanes first, 2 r-order (AVX2 q6), 3 s-order (q5) */
    const float *xp; /* fp32 route, q4/q5/q6 at AVX-512: the rows' whole groups permuted (even lanes first), token t
                        at xp + t·ldp; NULL = not permuted */
    int64_t ldp;
    int vbmi;        /* permuted q5/q6 kernels: high bits by AVX-512 VBMI (perm_vbmi) */
    int avxvnni;     /* the avx2 level's offset-binary q4–q6 bodies take AVX-VNNI dpbusd (avx2_vnni) */
    int rows_vbmi;   /* the int8 VNNI+VBMI multi-row GEMV applies (ni_q8p_rows_vnni_vbmi: q5/q6 with VBMI high
                        bits, q4 on a CPU with AVX512_VBMI) */
    int rows_pair;   /* that route at T ≤ ROWS_MT_VBMI, once a token (q8p_rows_multi): each token's xq, xo, xe in
                        pair order (q8p_pair_order) */
    int pf_nt;       /* 2 ≤ T ≤ NI_SMALL_T on the offset-binary NT-token int8 bodies (q4–q6 at avx2, q4–q8 on
                        VNNI): their first token pass over a chunk of rows prefetches pf_rows ahead
                        (NINFER_CPU_PFNT=0: none) */
    int rows_mt;     /* 2 ≤ T at avx2, int8 q4 (T ≤ 4) and q8 (T ≤ 8): the one-token multi-row GEMVs run once a
                        token (q8p_rows_multi; at avx512 the VNNI+VBMI q4–q6 one: rows_pair) */
    int pf_rows;     /* GEMVs at T = 1 that take several rows per pass (int8 q4–q6 on VNNI+VBMI, fp32 q8 at
                        AVX-512, int8 q8 at AVX2), and the int8 routes at 2–16 tokens (rows_pair, rows_mt, pf_nt):
                        prefetch distance in rows; -1 = one row at a time (gemv_rows) */
    int pf_l2;       /* their prefetches fill L2 only (PREFETCHT1), else L1 too (prefetch_l2) */
    const int32_t *xo; /* permuted VNNI route: token t's group offset lanes at xo + t·(kpad/4) (ni_q8p_offsets_vnni);
                          the int8 prefill GEMM: token t's group offsets at xo + t·(kpad/group) */
    ni_q8_gemm_fn gq8; /* T > NI_SMALL_T on int8 activations: the int8 GEMM kernel on packed panels
                          (mm_gemm_q8, q8_gemm_kernel); NULL = another route */
} mm_args;

/* The prefetch distance for a multi-row pass over rows n … n + nr − 1: the
 * rows pf_rows further on when they are inside the weight, else 0 (none). */
static inline ni_pf mm_pf(const mm_args *a, int64_t n, int nr) {
    ni_pf pf = {n + nr + a->pf_rows <= a->w->n ? a->pf_rows : 0, a->pf_l2};
    return pf;
}

static inline void mm_store(const mm_args *a, int64_t t, int64_t n, float v) {
    float *p = a->y.p + t * a->y.ld + n;
    *p = a->acc ? *p + v : v;
}

/* Returns a pointer to row n as fp32: the weight memory itself for fp32,
 * else the row decoded into buf. */
static inline const float *mm_row(const mm_args *a, int64_t n, float *buf) {
    const ni_weight *w = a->w;
    if (w->fmt == NI_W_F32) return (const float *)(w->data + n * w->k * 4);
    if (w->fmt == NI_W_BF16) {
        ni_bf16_to_f32_row(a->c->isa, (const uint16_t *)(w->data + n * w->k * 2), buf, w->k);
        return buf;
    }
    decode_row_isa(a->c->isa, w, n, buf);
    return buf;
}

/* nvfp4 / fp8-row on AVX2 (avx2_fp.c): fused decode + dot of row n against
 * nt ≤ NI_MT_TOKENS token rows x + j·ld, for the T = 1 GEMV (nt = 1) and
 * small T; a token's value does not depend on nt. rowdecode (NINFER_CPU_FPGEMV
 * or NINFER_CPU_SMALLT = decode) selects the old decode-row route. */
static inline int mm_fp_fused(const mm_args *a) {
    return a->c->isa >= NI_ISA_AVX2 && !a->rowdecode && (a->w->fmt == NI_W_NVFP4 || a->w->fmt == NI_W_FP8ROW);
}

static void mm_fp_row(int isa, const ni_weight *w, int64_t n, const float *x, int64_t ld, int nt, float *out) {
    int64_t K = w->k;
    if (w->fmt == NI_W_NVFP4) {
        int64_t rt = n / 128, ri = n % 128;
        const uint8_t *sc = w->data + w->scale_off + rt * (K / 64) * 512 + (ri % 32) * 16 + (ri / 32) * 4;
        float d;
        memcpy(&d, w->data + w->div_off, 4);
        if (isa == NI_ISA_AVX512) ni_dot_nvfp4_multi_avx512(w->data + n * (K / 2), sc, K / 64, d, x, ld, nt, out);
        else ni_dot_nvfp4_multi_avx2(w->data + n * (K / 2), sc, K / 64, d, x, ld, nt, out);
        return;
    }
    const uint8_t *sp = w->data + w->scale_off + 2 * n;
    float s = ni_bf16((uint16_t)(sp[0] | (sp[1] << 8)));
    if (isa == NI_ISA_AVX512) ni_dot_fp8row_multi_avx512(w->data + n * K, s, K, x, ld, nt, out);
    else ni_dot_fp8row_multi_avx2(w->data + n * K, s, K, x, ld, nt, out);
}

static void mm_small_fp(const mm_args *a, int64_t n0, int64_t n1) {
    int64_t T = a->x.t, ld = a->x.ld;
    float out[NI_MT_TOKENS];
    for (int64_t n = n0; n < n1; n++)
        for (int64_t t0 = 0; t0 < T; t0 += NI_MT_TOKENS) {
            int nt = (int)(T - t0 < NI_MT_TOKENS ? T - t0 : NI_MT_TOKENS);
            mm_fp_row(a->c->isa, a->w, n, a->x.p + t0 * ld, ld, nt, out);
            for (int j = 0; j < nt; j++) mm_store(a, t0 + j, n, out[j]);
        }
}

/* The small-T routes stream each weight row once for a pass of up to
 * NI_MT_TOKENS tokens, and every row of the pass reads all of those tokens'
 * activations. When they outgrow L1 (the MLP down projection at the 2B
 * shape: K = 6144, 18 KB of int8 codes, offset lanes and scales a token,
 * 72 KB for a 4-token verify) every row refetches them from L2: measured
 * there, one thread, T = 4 cost 912 µs against 537 at T = 3. So the tokens
 * are split into balanced passes of at most MM_PASS_ACT bytes of int8
 * activations (MM_PASS_ACT_F32 of fp32 ones: measured, the fp32 routes lose
 * L1 earlier), each pass sweeping a chunk of rows whose weights (at most
 * MM_PASS_ROWS bytes) stay in L2 for the next pass. A token's result is the
 * same whatever the pass (the kernels compute each token on its own), so
 * this changes no result. */
#define MM_PASS_ACT (56 << 10)
#define MM_PASS_ACT_F32 (28 << 10) /* fp32 rows: [24576, 2048] q8 at T = 4, 32 KB a pass, 267–285 ns a row; in two passes 168–178 */
#define MM_PASS_ROWS (256 << 10)

static int mm_pass_tokens(int64_t T, int64_t token_bytes, int64_t budget) {
    int64_t passes = (T * token_bytes + budget - 1) / budget;
    if (passes < 1) passes = 1;
    int64_t nt = (T + passes - 1) / passes;
    return (int)(nt < 1 ? 1 : nt > NI_MT_TOKENS ? NI_MT_TOKENS : nt);
}

static int64_t mm_pass_rows(const ni_weight *w) {
    int64_t row = w->gpr * (w->base_bytes + w->high_bytes + 2);
    int64_t r = MM_PASS_ROWS / (row > 0 ? row : 1);
    return r < 1 ? 1 : r;
}

/* Row n's base codes, high bits and fp16 group scales (the q4–q8 planes). */
typedef struct {
    const uint8_t *base, *high, *scales;
} mm_planes;

static inline mm_planes mm_row_planes(const ni_weight *w, int64_t n) {
    int64_t gi = n * w->gpr;
    mm_planes r = {w->data + gi * w->base_bytes, w->data + w->high_off + gi * w->high_bytes,
                   w->data + w->scale_off + 2 * gi};
    return r;
}

/* The passes of a small-T route over rows [n0, n1): for each chunk of rows
 * [nc, ne), each pass of tokens [t0, t0 + nt). mm_pass_next advances to the
 * next one and returns 0 after the last. */
typedef struct {
    int64_t n1, T, rchunk, nc, ne, t0;
    int ntb, nt;
} mm_pass;

static mm_pass mm_pass_init(const ni_weight *w, int64_t n0, int64_t n1, int64_t T, int64_t token_bytes,
                            int64_t budget) {
    mm_pass p = {n1, T, mm_pass_rows(w), n0, n0, 0, mm_pass_tokens(T, token_bytes, budget), 0};
    p.ne = n0 + p.rchunk < n1 ? n0 + p.rchunk : n1;
    p.t0 = -p.ntb; /* the first mm_pass_next starts chunk n0 at token 0 */
    return p;
}

static int mm_pass_next(mm_pass *p) {
    p->t0 += p->ntb;
    if (p->t0 >= p->T) {
        p->nc = p->ne, p->t0 = 0;
        p->ne = p->nc + p->rchunk < p->n1 ? p->nc + p->rchunk : p->n1;
    }
    if (p->nc >= p->n1) return 0;
    p->nt = (int)(p->T - p->t0 < p->ntb ? p->T - p->t0 : p->ntb);
    return 1;
}

/* Small T, grouped-integer (AVX2) or bf16 weights: fused multi-token GEMV.
 * Each row is streamed once per block of NI_MT_TOKENS tokens (the row stays
 * in L1 between blocks); its codes are decoded in registers and feed every
 * token of the block. A token's value is bit-identical to the T = 1 GEMV. */
static void mm_small_fused(const mm_args *a, int64_t n0, int64_t n1, int tid) {
    const ni_weight *w = a->w;
    int64_t K = w->k, T = a->x.t, ld = a->x.ld;
    float out[NI_MT_TOKENS];
    if (w->fmt == NI_W_BF16) {
        for (int64_t n = n0; n < n1; n++) {
            const uint16_t *wr = (const uint16_t *)(w->data + n * K * 2);
            for (int64_t t0 = 0; t0 < T; t0 += NI_MT_TOKENS) {
                int nt = (int)(T - t0 < NI_MT_TOKENS ? T - t0 : NI_MT_TOKENS);
                if (a->c->isa == NI_ISA_AVX512) ni_dot_bf16_multi_avx512(wr, a->x.p + t0 * ld, ld, K, nt, out);
                else if (a->c->isa == NI_ISA_AVX2) ni_dot_bf16_multi_avx2(wr, a->x.p + t0 * ld, ld, K, nt, out);
                else /* scalar: the T = 1 dot per token (same rounding as the GEMV) */
                    for (int j = 0; j < nt; j++) out[j] = ni_dot_bf16(NI_ISA_SCALAR, wr, a->x.p + (t0 + j) * ld, K);
                for (int j = 0; j < nt; j++) mm_store(a, t0 + j, n, out[j]);
            }
        }
        return;
    }
    int64_t full = K / w->group;
    int tail = (int)(K - full * w->group);
    float *buf = ni_tmp(a->c, tid, w->group);
    for (mm_pass p = mm_pass_init(w, n0, n1, T, 4 * K, MM_PASS_ACT_F32); mm_pass_next(&p);) {
        const int64_t t0 = p.t0;
        const int nt = p.nt;
        for (int64_t n = p.nc; n < p.ne; n++) {
            const mm_planes rp = mm_row_planes(w, n);
            const uint8_t *base = rp.base, *high = rp.high, *scales = rp.scales;
            if (tail) decode_group_int(NI_ISA_AVX2, w, n * w->gpr + full, tail, buf);
            const float *x = a->x.p + t0 * ld;
            if (a->xp)
                (a->vbmi ? ni_dot_groups_perm_vbmi : ni_dot_groups_perm_avx512)((int)w->bits, base, high, scales, full,
                                                                                 a->xp + t0 * a->ldp, a->ldp, nt, out);
            else if (a->c->isa == NI_ISA_AVX512)
                ni_dot_groups_multi_avx512((int)w->bits, base, high, scales, full, x, ld, nt, out);
            else ni_dot_groups_multi_avx2((int)w->bits, base, high, scales, full, x, ld, nt, out);
            for (int j = 0; j < nt; j++) {
                float v = out[j];
                if (tail) v += ni_dot(a->c->isa, buf, x + j * ld + full * w->group, tail);
                mm_store(a, t0 + j, n, v);
            }
        }
    }
}

/* Large T on AVX2 (every format): register-blocked GEMM (avx2_gemm.c). For
 * each NI_GEMM_NC-row block of the task and each NI_GEMM_KC slice of K, the
 * block's rows are decoded once and transposed into NI_GEMM_NR-column panels
 * [kc][NR] (128 KiB, L2); then each NI_GEMM_MC-token block is swept over
 * each panel (16 KiB, L1) by the 6×16 micro-kernel, which reads the token
 * rows in place and adds its tile into y (the first slice stores unless
 * accumulating). NINFER_CPU_LARGET=tile selects the old row-tile route. */
static int mm_gemm_ok(const mm_args *a) {
    int f = a->w->fmt;
    return a->gemm && a->c->isa >= NI_ISA_AVX2 && a->x.t > NI_SMALL_T &&
           (f == NI_W_F32 || f == NI_W_BF16 || f == NI_W_Q4 || f == NI_W_Q5 || f == NI_W_Q6 || f == NI_W_Q8 ||
            f == NI_W_NVFP4 || f == NI_W_FP8ROW);
}

/* Decodes columns [k0, k0 + kc) of row n to out (k0 a multiple of the
 * group; for nvfp4 kc is a multiple of 16 since K % 64 == 0), with the same
 * arithmetic as decode_row_isa. */
static void decode_slice(const ni_weight *w, int64_t n, int64_t k0, int64_t kc, float *out) {
    int64_t K = w->k;
    if (w->fmt == NI_W_BF16) {
        ni_bf16_to_f32_row(NI_ISA_AVX2, (const uint16_t *)(w->data + (n * K + k0) * 2), out, kc);
        return;
    }
    if (w->fmt == NI_W_FP8ROW) {
        const uint8_t *codes = w->data + n * K + k0, *sp = w->data + w->scale_off + 2 * n;
        float s = ni_bf16((uint16_t)(sp[0] | (sp[1] << 8)));
        for (int64_t i = 0; i < kc; i++) out[i] = g_e4m3[codes[i]] * s;
        return;
    }
    if (w->fmt == NI_W_NVFP4) {
        const uint8_t *codes = w->data + n * (K / 2);
        int64_t rt = n / 128, ri = n % 128, kt = K / 64;
        const uint8_t *sc = w->data + w->scale_off + rt * kt * 512 + (ri % 32) * 16 + (ri / 32) * 4;
        for (int64_t g = k0 / 16; g < (k0 + kc) / 16; g++) {
            float s = g_e4m3[sc[(g / 4) * 512 + g % 4]] * w->inv_div;
            float *o = out + (g * 16 - k0);
            for (int i = 0; i < 16; i += 2) {
                uint8_t b = codes[(g * 16 + i) >> 1];
                o[i] = g_e2m1[b & 15] * s;
                o[i + 1] = g_e2m1[b >> 4] * s;
            }
        }
        return;
    }
    for (int64_t c0 = k0; c0 < k0 + kc; c0 += w->group) {
        int cnt = (int)(K - c0 < w->group ? K - c0 : w->group);
        decode_group_int(NI_ISA_AVX2, w, n * w->gpr + c0 / w->group, cnt, out + (c0 - k0));
    }
}

static void mm_gemm(const mm_args *a, int64_t n0, int64_t n1, int tid) {
    const ni_weight *w = a->w;
    int64_t K = w->k, T = a->x.t, ldx = a->x.ld, ldy = a->y.ld;
    int ks = ni_gemm_ks(K), wide = a->c->isa == NI_ISA_AVX512;
    /* scratch: packed weight panels, then decoded row slices */
    float *wp = ni_tmp(a->c, tid, NI_GEMM_NC * NI_GEMM_KC + NI_GEMM_NR * NI_GEMM_KC);
    float *dec = wp + NI_GEMM_NC * NI_GEMM_KC;
    for (int64_t nb = n0; nb < n1; nb += NI_GEMM_NC) {
        int64_t nn = n1 - nb < NI_GEMM_NC ? n1 - nb : NI_GEMM_NC;
        int npan = (int)((nn + NI_GEMM_NR - 1) / NI_GEMM_NR);
        for (int64_t k0 = 0; k0 < K; k0 += NI_GEMM_KC) {
            int64_t kc = K - k0 < NI_GEMM_KC ? K - k0 : NI_GEMM_KC;
            for (int p = 0; p < npan; p++) {
                int64_t r0 = nb + (int64_t)p * NI_GEMM_NR;
                int nr = (int)(nb + nn - r0 < NI_GEMM_NR ? nb + nn - r0 : NI_GEMM_NR);
                float *dst = wp + (int64_t)p * NI_GEMM_NR * NI_GEMM_KC;
                if (w->fmt == NI_W_F32) {
                    ni_gemm_pack_w_avx2((const float *)(w->data + (r0 * K + k0) * 4), K, nr, kc, dst);
                    continue;
                }
                for (int r = 0; r < nr; r++) decode_slice(w, r0 + r, k0, kc, dec + r * kc);
                ni_gemm_pack_w_avx2(dec, kc, nr, kc, dst);
            }
            int acc = a->acc || k0 > 0;
            for (int64_t tb = 0; tb < T; tb += NI_GEMM_MC) {
                int64_t te = T - tb < NI_GEMM_MC ? T : tb + NI_GEMM_MC;
                for (int p = 0; p < npan; p++) {
                    int64_t r0 = nb + (int64_t)p * NI_GEMM_NR;
                    if (wide && p + 1 < npan) { /* AVX-512: panels p and p + 1 in one 6×32 tile */
                        int nr2 = (int)(nb + nn - r0 < 2 * NI_GEMM_NR ? nb + nn - r0 : 2 * NI_GEMM_NR);
                        const float *wp0 = wp + (int64_t)p * NI_GEMM_NR * NI_GEMM_KC;
                        for (int64_t t0 = tb; t0 < te; t0 += NI_GEMM_MR) {
                            int mr = (int)(te - t0 < NI_GEMM_MR ? te - t0 : NI_GEMM_MR);
                            ni_gemm_6x32_avx512(a->x.p + t0 * ldx + k0, ldx, wp0, wp0 + NI_GEMM_NR * NI_GEMM_KC, kc, ks,
                                                a->y.p + t0 * ldy + r0, ldy, mr, nr2, acc);
                        }
                        p++;
                        continue;
                    }
                    int nr = (int)(nb + nn - r0 < NI_GEMM_NR ? nb + nn - r0 : NI_GEMM_NR);
                    for (int64_t t0 = tb; t0 < te; t0 += NI_GEMM_MR) {
                        int mr = (int)(te - t0 < NI_GEMM_MR ? te - t0 : NI_GEMM_MR);
                        ni_gemm_6x16_avx2(a->x.p + t0 * ldx + k0, ldx, wp + (int64_t)p * NI_GEMM_NR * NI_GEMM_KC, kc,
                                          ks, a->y.p + t0 * ldy + r0, ldy, mr, nr, acc);
                    }
                }
            }
        }
    }
}

/* ---- int8 activations (NI_ACT_Q8) ---- */

void ni_q8_quantize_block(const float *x, int n, int blk, int8_t *q, float *s) {
    float amax = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= 3.4028235e38f)) bad = 1;
        else if (a > amax) amax = a;
    }
    float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    if (bad) d = NAN, id = 0; /* a non-finite input poisons the outputs it feeds */
    for (int j = 0; j < blk / 32; j++) s[j] = d;
    for (int i = 0; i < blk; i++) {
        float v = i < n ? x[i] * id : 0.0f;
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        q[i] = (int8_t)nearbyintf(v); /* round to nearest even */
    }
}

/* One token row in blocks of blk = 32 (q8 weights) or 64 (q4–q6: one
 * block per weight group) values; s holds one scale per 32 values (a
 * 64-value block's scale twice). */
static void q8_quantize(int isa, const float *x, int64_t k, int64_t kpad, int blk, int8_t *q, float *s) {
    if (isa >= NI_ISA_AVX2) {
        ni_q8_quantize_avx2(x, k, kpad, blk, q, s);
        return;
    }
    for (int64_t b0 = 0; b0 < kpad; b0 += blk) {
        int64_t n = k - b0 < blk ? (k - b0 > 0 ? k - b0 : 0) : blk;
        ni_q8_quantize_block(x + b0, (int)n, blk, q + b0, s + b0 / 32);
    }
}

/* Signed code of lane i of grouped-integer group gi. */
static inline int q8_wcode(const ni_weight *w, int64_t gi, int i) {
    const uint8_t *base = w->data + gi * w->base_bytes, *high = w->data + w->high_off + gi * w->high_bytes;
    int u;
    switch (w->bits) {
    case 8: return (int8_t)base[i];
    case 4: u = (base[i >> 1] >> ((i & 1) * 4)) & 15; return (u ^ 8) - 8;
    case 5:
        u = ((base[i >> 1] >> ((i & 1) * 4)) & 15) | (((high[i >> 3] >> (i & 7)) & 1) << 4);
        return (u ^ 16) - 16;
    default:
        u = ((base[i >> 1] >> ((i & 1) * 4)) & 15) | (((high[i >> 2] >> ((i & 3) * 2)) & 3) << 4);
        return (u ^ 32) - 32;
    }
}

/* Scalar reference (the oracle's twin): per group g, per block b ⊂ g,
 * acc_g += s_x[b] · Σ q_w·q_x (int32), then y += s_w[g] · acc_g. */
static float q8_row_scalar(const ni_weight *w, int64_t n, int64_t ngroups, const int8_t *xq, const float *xs) {
    float y = 0;
    int nb = (int)(w->group / 32);
    for (int64_t g = 0; g < ngroups; g++) {
        int64_t gi = n * w->gpr + g;
        const uint8_t *sp = w->data + w->scale_off + 2 * gi;
        float sw = ni_f16_to_f32((uint16_t)(sp[0] | (sp[1] << 8))), acc = 0;
        for (int b = 0; b < nb; b++) {
            int64_t kb = g * nb + b;
            int32_t is = 0;
            for (int i = 0; i < 32; i++) is += q8_wcode(w, gi, 32 * b + i) * xq[32 * kb + i];
            acc += xs[kb] * (float)is;
        }
        y += sw * acc;
    }
    return y;
}

static int g_vnni = -1;
static int q8_vnni(void) {
    int v = __atomic_load_n(&g_vnni, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512vnni") ? 1 : 0;
        __atomic_store_n(&g_vnni, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* Whether the comparison switch `name` is set to 0 (off). */
static int env_off(const char *name) {
    const char *e = getenv(name);
    return e && strcmp(e, "0") == 0;
}

/* NINFER_CPU_AVX2Q=signed: q4–q6 weights at AVX2 take the sign-trick
 * bodies (ni_q8p_groups_multi_avx2, ni_q8_groups_multi_avx2) instead of the
 * offset-binary ones (ni_q8u_groups_multi_avx2; comparison and test switch;
 * bit-identical results for q4 and q5, q6 differs by fp32 rounding). */
static int avx2_signed(void) {
    const char *e = getenv("NINFER_CPU_AVX2Q");
    return e && strcmp(e, "signed") == 0;
}

/* Whether the offset-binary q4–q6 bodies at the avx2 level take AVX-VNNI
 * dpbusd (ni_q8u_groups_multi_avxvnni, bit-identical): where the CPU has
 * AVX-VNNI, unless NINFER_CPU_AVXVNNI=0 (comparison and test switch; an
 * AVX2-only CPU's route). __builtin_cpu_supports reads libgcc's cached
 * CPUID bits: no CPUID per call. */
static int avx2_vnni(void) {
    if (!ni_cpu_has_avxvnni()) return 0;
    return !env_off("NINFER_CPU_AVXVNNI");
}

int ni_cpu_has_avxvnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avxvnni") != 0;
}

/* Whether the AVX-512 permuted q5/q6 kernels take their high bits by
 * AVX512_VBMI: the CPU has it (ni_cpu_has_vbmi: cached CPUID bits, cheap per
 * matmul since ni_cpu_best_isa caches its answer), unless NINFER_CPU_VBMI=0. */
static int vbmi_on(void) {
    if (!ni_cpu_has_vbmi()) return 0;
    return !env_off("NINFER_CPU_VBMI");
}

int ni_cpu_int8_dots(int isa) {
    if (isa == NI_ISA_AVX512) return (q8_vnni() ? NI_DOT_VNNI : 0) | (vbmi_on() ? NI_DOT_VBMI : 0);
    if (isa == NI_ISA_AVX2) return avx2_vnni() ? NI_DOT_AVXVNNI : 0;
    return 0;
}

/* The activation layout of the int8 GEMV of bits-bit weights at isa
 * (avx2.c): 1 = even lanes first (q4 at AVX2, q4/q5/q6 at AVX-512 with
 * BMI2), 2 = r-order (q6 at AVX2 on offset-binary codes, dec_r6), 3 =
 * s-order (q5 at AVX2 on offset-binary codes, dec_s5), 0 = natural. */
static int q8_perm(int isa, int bits) {
    if (isa == NI_ISA_AVX2) return bits == 4 ? 1 : avx2_signed() ? 0 : bits == 6 ? 2 : bits == 5 ? 3 : 0;
    if (isa == NI_ISA_AVX512) {
        __builtin_cpu_init();
        return bits != 8 && __builtin_cpu_supports("bmi2");
    }
    return 0;
}

int ni_cpu_has_vnni(void) { return ni_cpu_best_isa() == NI_ISA_AVX512 && q8_vnni(); }

int ni_cpu_has_vbmi(void) {
    __builtin_cpu_init();
    return ni_cpu_best_isa() == NI_ISA_AVX512 && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("bmi2");
}

int ni_cpu_set_vnni(int on) {
    int old = q8_vnni();
    __builtin_cpu_init();
    __atomic_store_n(&g_vnni, on && __builtin_cpu_supports("avx512vnni") ? 1 : 0, __ATOMIC_RELAXED);
    return old;
}

/* A pass's nt tokens through a one-token multi-row GEMV, ONE (writing row
 * r of token j at o1[r·STRIDE], prefetching by pfj), on the block of rb.n
 * rows at n: the block streamed and prefetched for the first token, read
 * from cache for the others; token j's row r lands at ob[r·NI_MT_TOKENS + j]. */
#define MM_PER_TOKEN(ONE, STRIDE)                                                                                     \
    {                                                                                                                 \
        float o1[RB * NI_MT_TOKENS];                                                                                  \
        for (int j = 0; j < nt; j++) {                                                                                \
            const ni_pf pfj = j == 0 ? mm_pf(a, n, rb.n) : (ni_pf){0, 0};                                             \
            ONE;                                                                                                      \
            for (int r = 0; r < rb.n; r++) ob[r * NI_MT_TOKENS + j] = o1[r * (STRIDE)];                               \
        }                                                                                                             \
    }

/* T ≤ NI_SMALL_T, q4–q8 weights, quantized tokens: each row is streamed once
 * per block of NI_MT_TOKENS tokens; only the groups that hold columns < K
 * are visited (the quantized rows are zero past K). */
static void mm_q8(const mm_args *a, int64_t n0, int64_t n1) {
    const ni_weight *w = a->w;
    int64_t T = a->x.t, kpad = w->kpad, nbk = kpad / 32;
    int64_t ngroups = (w->k + w->group - 1) / w->group;
    int isa = a->c->isa, vnni = isa == NI_ISA_AVX512 && q8_vnni(), perm = a->perm;
    float out[NI_MT_TOKENS];
    const int64_t token_bytes = kpad * (a->xo ? 3 : 2); /* codes, expanded scales (and offset lanes) */
    /* the offset-binary VNNI and AVX2 bodies take blocks of rows per call */
    const int blocked = (perm && vnni) || (isa == NI_ISA_AVX2 && a->xo);
    for (mm_pass p = mm_pass_init(w, n0, n1, T, token_bytes, MM_PASS_ACT); mm_pass_next(&p);) {
        const int64_t t0 = p.t0;
        const int nt = p.nt;
        if (blocked) {
            enum { RB = 16 };
            float ob[RB * NI_MT_TOKENS];
            const int8_t *xq = a->xq + t0 * kpad;
            const int32_t *xo = a->xo + t0 * (kpad / 4);
            const float *xs = a->xs + t0 * nbk;
            for (int64_t n = p.nc; n < p.ne; n += RB) {
                const mm_planes rp = mm_row_planes(w, n);
                const ni_row_block rb = {(int)(p.ne - n < RB ? p.ne - n : RB), w->gpr * w->base_bytes,
                                         w->gpr * w->high_bytes, 2 * w->gpr};
                if (a->rows_pair)
                    MM_PER_TOKEN(ni_q8p_rows_vnni_vbmi((int)w->bits, rp.base, rp.high, rp.scales, rb, ngroups,
                                                       xq + j * kpad, xo + j * (kpad / 4), xs + j * nbk, pfj, o1),
                                 NI_MT_TOKENS)
                else if (isa == NI_ISA_AVX2 && (nt == 1 || a->rows_mt) && a->pf_rows >= 0)
                    MM_PER_TOKEN((a->avxvnni ? ni_q8u_rows_avxvnni : ni_q8u_rows_avx2)(
                                     (int)w->bits, rp.base, rp.high, rp.scales, rb, ngroups, xq + j * kpad,
                                     xo + j * (kpad / 4), xs + j * nbk, pfj, o1),
                                 NI_MT_TOKENS)
                else if (isa == NI_ISA_AVX2)
                    (a->avxvnni ? ni_q8u_groups_multi_avxvnni : ni_q8u_groups_multi_avx2)(
                        (int)w->bits, rp.base, rp.high, rp.scales, rb, ngroups, xq, kpad, xo, kpad / 4, xs, nbk, nt,
                        a->pf_nt && t0 == 0 ? mm_pf(a, n, rb.n) : (ni_pf){0, 0}, ob); /* later passes: cached */
                else
                    (a->vbmi ? ni_q8p_groups_multi_vnni_vbmi : ni_q8p_groups_multi_vnni)(
                        (int)w->bits, rp.base, rp.high, rp.scales, rb, ngroups, xq, kpad, xo, kpad / 4, xs, nbk, nt,
                        a->pf_nt && t0 == 0 ? mm_pf(a, n, rb.n) : (ni_pf){0, 0}, ob);
                for (int r = 0; r < rb.n; r++)
                    for (int j = 0; j < nt; j++) mm_store(a, t0 + j, n + r, ob[r * NI_MT_TOKENS + j]);
            }
            continue;
        }
        if (w->bits == 8 && (nt == 1 || a->rows_mt) && a->pf_rows >= 0 && (isa == NI_ISA_AVX2 || (vnni && a->xo))) {
            /* q8: rows of 4, prefetched */
            enum { RB = 16 };
            float ob[RB * NI_MT_TOKENS];
            const int8_t *xq = a->xq + t0 * kpad;
            const float *xs = a->xs + t0 * nbk;
            for (int64_t n = p.nc; n < p.ne; n += RB) {
                const mm_planes rp = mm_row_planes(w, n);
                const ni_row_block rb = {(int)(p.ne - n < RB ? p.ne - n : RB), w->gpr * w->base_bytes, 0, 2 * w->gpr};
                if (isa == NI_ISA_AVX2)
                    MM_PER_TOKEN(
                        ni_q8_rows_avx2(rp.base, rp.scales, rb, ngroups, xq + j * kpad, xs + j * nbk, pfj, o1), 1)
                else
                    MM_PER_TOKEN(ni_q8w_rows_vnni(rp.base, rp.scales, rb, ngroups, xq + j * kpad,
                                                  a->xo + (t0 + j) * (kpad / 4), xs + j * nbk, pfj, o1),
                                 1)
                for (int r = 0; r < rb.n; r++)
                    for (int j = 0; j < nt; j++) mm_store(a, t0 + j, n + r, ob[r * NI_MT_TOKENS + j]);
            }
            continue;
        }
        for (int64_t n = p.nc; n < p.ne; n++) {
            const mm_planes rp = mm_row_planes(w, n);
            const uint8_t *base = rp.base, *high = rp.high, *scales = rp.scales;
            const int8_t *xq = a->xq + t0 * kpad;
            const float *xs = a->xs + t0 * nbk, *xe = a->xe + t0 * 8 * nbk;
            if (perm && isa == NI_ISA_AVX512)
                ni_q8p_groups_multi_avx512((int)w->bits, base, high, scales, ngroups, xq, kpad, xe, 8 * nbk, nt, out);
            else if (perm)
                ni_q8p_groups_multi_avx2((int)w->bits, base, high, scales, ngroups, xq, kpad, xe, 8 * nbk, nt, out);
            else if (vnni && a->xo && w->bits == 8) {
                const ni_row_block rb1 = {1, w->gpr * w->base_bytes, 0, 2 * w->gpr};
                ni_q8w_multi_vnni(base, scales, ngroups, xq, kpad, a->xo + t0 * (kpad / 4), kpad / 4, xe, 8 * nbk, nt,
                                  a->pf_nt && t0 == 0 ? mm_pf(a, n, 1) : (ni_pf){0, 0}, rb1, out);
            } else if (vnni)
                ni_q8_groups_multi_vnni((int)w->bits, base, high, scales, ngroups, xq, kpad, xe, 8 * nbk, nt, out);
            else if (isa == NI_ISA_AVX512)
                ni_q8_groups_multi_avx512((int)w->bits, base, high, scales, ngroups, xq, kpad, xe, 8 * nbk, nt, out);
            else if (isa == NI_ISA_AVX2)
                ni_q8_groups_multi_avx2((int)w->bits, base, high, scales, ngroups, xq, kpad, xe, 8 * nbk, nt, out);
            else
                for (int j = 0; j < nt; j++) out[j] = q8_row_scalar(w, n, ngroups, xq + j * kpad, xs + j * nbk);
            for (int j = 0; j < nt; j++) mm_store(a, t0 + j, n, out[j]);
        }
    }
}

/* The int8 prefill GEMM's activations: token rows quantized in blocks of
 * the weight group G, and each group's offset ob·Σ x_q (ob = 2^(bits−1)),
 * Q8G_QUANT_TOKENS token rows a task. */
#define Q8G_QUANT_TOKENS 16
typedef struct {
    int isa;
    ni_rows x;
    int64_t k, kpad;
    int G;
    int32_t ob;
    int8_t *xq;
    float *xs;
    int32_t *xo;
} q8g_quant_args;

static void q8g_quant_task(void *a_, int task, int tid) {
    (void)tid;
    const q8g_quant_args *a = (const q8g_quant_args *)a_;
    const int64_t ng = a->kpad / a->G, t1 = (int64_t)(task + 1) * Q8G_QUANT_TOKENS;
    for (int64_t t = (int64_t)task * Q8G_QUANT_TOKENS; t < t1 && t < a->x.t; t++) {
        int8_t *qt = a->xq + t * a->kpad;
        q8_quantize(a->isa, a->x.p + t * a->x.ld, a->k, a->kpad, a->G, qt, a->xs + t * (a->kpad / 32));
        for (int64_t g = 0; g < ng; g++) {
            int32_t sum = 0;
            for (int i = 0; i < a->G; i++) sum += qt[g * a->G + i];
            a->xo[t * ng + g] = a->ob * sum;
        }
    }
}

/* The int8 prefill GEMM over rows [n0, n1): each panel of NI_Q8G_NR rows
 * packed once (ni_q8_pack_panel_avx2), then all tokens swept over it
 * (ni_q8_gemm_vnni, gemm_q8.c). */
static void mm_gemm_q8(const mm_args *a, int64_t n0, int64_t n1, int tid) {
    const ni_weight *w = a->w;
    const int G = (int)w->group;
    const int64_t ngroups = (w->k + G - 1) / G, kpad = w->kpad;
    const int64_t codes = (int64_t)NI_Q8G_NR * ngroups * G; /* bytes, a multiple of 64 */
    uint8_t *pw = (uint8_t *)ni_tmp(a->c, tid, codes / 4 + (int64_t)NI_Q8G_NR * ngroups);
    float *ps = (float *)(pw + codes);
    for (int64_t n = n0; n < n1; n += NI_Q8G_NR) {
        const mm_planes rp = mm_row_planes(w, n);
        const ni_row_block rb = {(int)(n1 - n < NI_Q8G_NR ? n1 - n : NI_Q8G_NR), w->gpr * w->base_bytes,
                                 w->gpr * w->high_bytes, 2 * w->gpr};
        ni_q8_pack_panel_avx2((int)w->bits, rp.base, rp.high, rp.scales, rb, ngroups, pw, ps);
        a->gq8(pw, ps, ngroups, G / 4, rb.n, a->xq, kpad, a->xs, kpad / 32, G / 32, a->xo, kpad / G, (int)a->x.t,
               a->y.p + n, a->y.ld, a->acc);
    }
}

static void mm_task(void *a_, int task, int tid) {
    mm_args *a = (mm_args *)a_;
    const ni_weight *w = a->w;
    int isa = a->c->isa;
    int64_t K = w->k, T = a->x.t;
    int64_t n0 = (int64_t)task * a->rows_per_task, n1 = n0 + a->rows_per_task;
    if (n1 > w->n) n1 = w->n;
    if (a->gq8) {
        mm_gemm_q8(a, n0, n1, tid);
        return;
    }
    if (a->xq) {
        mm_q8(a, n0, n1);
        return;
    }
    if (T == 1) { /* GEMV: stream each row once */
        const float *x = a->x.p;
        float *buf = ni_tmp(a->c, tid, K);
        if (isa == NI_ISA_AVX512 && w->bits == 8 && a->pf_rows >= 0) { /* q8: rows of 4 per pass, prefetched */
            enum { RB = 16 };
            const int64_t full = K / w->group;
            float ob[RB];
            for (int64_t n = n0; n < n1; n += RB) {
                const mm_planes rp = mm_row_planes(w, n);
                const ni_row_block rb = {(int)(n1 - n < RB ? n1 - n : RB), w->gpr * w->base_bytes, 0, 2 * w->gpr};
                ni_dot_q8_rows_avx512(rp.base, rp.scales, rb, full, x, mm_pf(a, n, rb.n), ob);
                for (int r = 0; r < rb.n; r++) {
                    float v = ob[r];
                    if (full * w->group < K) {
                        int cnt = (int)(K - full * w->group);
                        decode_group_int(isa, w, (n + r) * w->gpr + full, cnt, buf);
                        v += ni_dot(isa, buf, x + full * w->group, cnt);
                    }
                    mm_store(a, 0, n + r, v);
                }
            }
            return;
        }
        for (int64_t n = n0; n < n1; n++) {
            float v;
            if (w->fmt == NI_W_F32) v = ni_dot(isa, (const float *)(w->data + n * K * 4), x, K);
            else if (w->fmt == NI_W_BF16) v = ni_dot_bf16(isa, (const uint16_t *)(w->data + n * K * 2), x, K);
            else if (isa >= NI_ISA_AVX2 && w->bits) { /* fused decode + dot over whole groups */
                int64_t full = K / w->group, gi = n * w->gpr;
                const uint8_t *base = w->data + gi * w->base_bytes, *high = w->data + w->high_off + gi * w->high_bytes,
                              *scales = w->data + w->scale_off + 2 * gi;
                if (a->xp)
                    (a->vbmi ? ni_dot_groups_perm_vbmi : ni_dot_groups_perm_avx512)((int)w->bits, base, high, scales,
                                                                                     full, a->xp, 0, 1, &v);
                else if (isa == NI_ISA_AVX512)
                    ni_dot_groups_multi_avx512((int)w->bits, base, high, scales, full, x, 0, 1, &v);
                else v = ni_dot_groups_avx2((int)w->bits, base, high, scales, full, x);
                if (full * w->group < K) {
                    int cnt = (int)(K - full * w->group);
                    decode_group_int(isa, w, gi + full, cnt, buf);
                    v += ni_dot(isa, buf, x + full * w->group, cnt);
                }
            } else if (mm_fp_fused(a)) {
                mm_fp_row(isa, w, n, x, 0, 1, &v);
            } else {
                decode_row_isa(isa, w, n, buf);
                v = ni_dot(isa, buf, x, K);
            }
            mm_store(a, 0, n, v);
        }
        return;
    }
    if (T <= NI_SMALL_T && mm_fp_fused(a)) {
        mm_small_fp(a, n0, n1);
        return;
    }
    if (T <= NI_SMALL_T && !a->rowdecode && ((isa >= NI_ISA_AVX2 && w->bits) || w->fmt == NI_W_BF16)) {
        mm_small_fused(a, n0, n1, tid);
        return;
    }
    if (T <= NI_SMALL_T) { /* small T: decode a row once, reuse it over T */
        float *buf = ni_tmp(a->c, tid, K);
        for (int64_t n = n0; n < n1; n++) {
            const float *wr = mm_row(a, n, buf);
            for (int64_t t = 0; t < T; t++) mm_store(a, t, n, ni_dot(isa, wr, a->x.p + t * a->x.ld, K));
        }
        return;
    }
    if (mm_gemm_ok(a)) {
        mm_gemm(a, n0, n1, tid);
        return;
    }
    /* large T, old route (NINFER_CPU_LARGET=tile, and the scalar ISA):
     * decode a tile of MM_TILE_LARGE rows once, sweep all tokens
     * over it in blocks of 4 (one weight load feeds 4 FMAs) */
    int64_t rt = 65536 / K; /* keep the decoded tile ≤ 256 KiB (L2) */
    if (rt < 4) rt = 4;
    if (rt > MM_TILE_LARGE) rt = MM_TILE_LARGE;
    float *buf = ni_tmp(a->c, tid, K * rt);
    const float *rows[MM_TILE_LARGE];
    for (int64_t nb = n0; nb < n1; nb += rt) {
        int nr = (int)(n1 - nb < rt ? n1 - nb : rt);
        for (int r = 0; r < nr; r++) rows[r] = mm_row(a, nb + r, buf + r * K);
        int64_t t = 0;
        float out4[4];
        for (; t + 4 <= T; t += 4) {
            const float *xt = a->x.p + t * a->x.ld;
            for (int r = 0; r < nr; r++) {
                ni_dot4(isa, rows[r], xt, a->x.ld, K, out4);
                for (int j = 0; j < 4; j++) mm_store(a, t + j, nb + r, out4[j]);
            }
        }
        for (; t < T; t++)
            for (int r = 0; r < nr; r++) mm_store(a, t, nb + r, ni_dot(isa, rows[r], a->x.p + t * a->x.ld, K));
    }
}

/* NINFER_CPU_Q8W=legacy: q8 weights on VNNI take the sign-trick body
 * (ni_q8_groups_multi_vnni) instead of ni_q8w_multi_vnni (comparison and
 * test switch; bit-identical results). */
static int q8w_legacy(void) {
    const char *e = getenv("NINFER_CPU_Q8W");
    return e && strcmp(e, "legacy") == 0;
}

/* Whether the permuted q5/q6 kernels take their high bits by AVX-512 VBMI
 * (perm_high.h; bit-identical to BMI2 pext): at AVX-512 on a CPU with
 * AVX512_VBMI, unless NINFER_CPU_VBMI=0 (comparison and test switch). */
static int perm_vbmi(int isa, const ni_weight *w) {
    return isa == NI_ISA_AVX512 && (w->bits == 5 || w->bits == 6) && vbmi_on();
}

/* Whether the fp32-activation T ≤ 16 route of w runs on permuted activation
 * rows (ni_dot_groups_perm_avx512): q4/q5/q6 with at least one whole group
 * at AVX-512 with BMI2, unless NINFER_CPU_FP32PERM=0 (comparison switch). */
static int fp32_perm(int isa, const ni_weight *w) {
    if (isa != NI_ISA_AVX512 || (w->bits != 4 && w->bits != 5 && w->bits != 6) || w->k < w->group) return 0;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("bmi2")) return 0;
    return !env_off("NINFER_CPU_FP32PERM");
}

/* The int8 prefill GEMM (mm_gemm_q8) at T > NI_SMALL_T on int8
 * activations, as the kernel it runs (NULL = none: the fp32 GEMM on fp32
 * activations): AVX-512 with VNNI; at the avx2 level with AVX-VNNI (unless
 * NINFER_CPU_AVXVNNI=0), else maddubs for q4–q6 (q8 codes overflow its
 * int16 pairs); never with NINFER_CPU_PREFILL=fp32 (comparison and test
 * switch). */
static ni_q8_gemm_fn q8_gemm_kernel(int isa, int bits) {
    const char *e = getenv("NINFER_CPU_PREFILL");
    if (e && strcmp(e, "fp32") == 0) return NULL;
    if (isa == NI_ISA_AVX512) return q8_vnni() ? ni_q8_gemm_vnni : NULL;
    if (isa != NI_ISA_AVX2) return NULL;
    if (avx2_vnni()) return ni_q8_gemm_avxvnni;
    return bits >= 4 && bits <= 6 ? ni_q8_gemm_avx2 : NULL;
}

int ni_cpu_q8_gemm(int isa, int bits) { return q8_gemm_kernel(isa, bits) != NULL; }

/* The multi-row T = 1 GEMVs (ni_q8p_rows_vnni_vbmi, ni_dot_q8_rows_avx512,
 * ni_q8_rows_avx2) and their prefetch distance in rows: NINFER_CPU_MULTIROW=0 keeps one row
 * at a time (-1; a comparison switch, bit-identical),
 * NINFER_CPU_PREFETCH_ROWS=<rows> sets the distance (default 8; 0 = no
 * prefetch). */
static int gemv_rows(void) {
    if (env_off("NINFER_CPU_MULTIROW")) return -1;
    const char *d = getenv("NINFER_CPU_PREFETCH_ROWS");
    int v = d ? atoi(d) : 8;
    return v > 0 ? v : 0;
}

/* Whether the multi-row GEMVs prefetch into L2 only (PREFETCHT1) rather
 * than into L1 (PREFETCHT0): on Intel CPUs, where a 2-core Xeon (AVX-512,
 * 2026-12-07) streamed q8 decode 11 % faster with T1 (more misses in flight
 * than L1's fill buffers allow); T0 elsewhere (measured on Zen 4/5; Zen 4's
 * T1/T2 hints are reported to be dropped at times). NINFER_CPU_PREFETCH=l1|l2
 * forces one (comparison switch; results unchanged). */
int ni_cpu_intel(void) {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
}

static int prefetch_l2(void) {
    const char *e = getenv("NINFER_CPU_PREFETCH");
    if (e && strcmp(e, "l2") == 0) return 1;
    if (e && strcmp(e, "l1") == 0) return 0;
    return ni_cpu_intel();
}

/* The int8 route's per-token arrays (expanded scales, codes, offset lanes)
 * have token rows kpad bytes apart, a multiple of 2 KiB at the usual K, so
 * at a common 4 KiB phase every token row of all three would fall on the
 * same two L1 set offsets: 12 streams at T = 4 (measured, [24576, 2048] q6,
 * one thread: T = 4 at 126–129 ns a row, 107–109 with the arrays at
 * different phases). q8_phase(off, ph) is the first offset ≥ off (in
 * floats) at phase ph mod 4 KiB. */
#define Q8_PHASE 336 /* floats: 1344 bytes, 21 cache lines */
static int64_t q8_phase(int64_t off, int64_t ph) {
    const int64_t page = 1024; /* floats */
    int64_t d = ((ph - off) % page + page) % page;
    return off + d;
}

/* Pair order of one token's int8 arrays for ni_q8p_rows_vnni_vbmi: in each
 * pair of 64-value groups (2g, 2g + 1) of the permuted layout, the codes
 * (64 bytes a group) and offset lanes (16 lanes a group)
 * go from [g0 lo, g0 hi, g1 lo, g1 hi] to [g0 lo, g1 lo, g0 hi, g1 hi] in
 * 32-byte halves: the lanes a 64-byte load of both groups' nibbles meets
 * after one and (low nibbles) or shift + and (high nibbles). An unpaired
 * last group of the ngroups stays as it is. */
static void q8p_pair_order(int8_t *xq, int32_t *xo, int64_t ngroups) {
    uint8_t *arr[2] = {(uint8_t *)xq, (uint8_t *)xo};
    for (int i = 0; i < 2; i++)
        for (int64_t g = 0; g + 2 <= ngroups; g += 2) {
            uint8_t tmp[32], *p = arr[i] + 64 * g;
            memcpy(tmp, p + 32, 32);
            memmove(p + 32, p + 64, 32);
            memcpy(p + 64, tmp, 32);
        }
}

/* Whether T tokens take a one-token multi-row GEMV once a token (mm_q8):
 * T = 1 always; 2 ≤ T ≤ tmax unless NINFER_CPU_ROWSMT=0 (comparison
 * switch; the same values either way: the NT-token bodies are
 * bit-identical to the one-token ones). tmax is where it stopped paying
 * (pp4–pp16 at the 0.8B shape, docs/PERF.md "Twelfth session"): past it
 * the rows are cache-resident across the passes and the NT-token body's
 * decode once for four tokens wins. */
#define ROWS_MT_VBMI 12    /* int8 q4–q6 at avx512 with VNNI + VBMI */
#define ROWS_MT_AVX2_Q8 8  /* int8 q8 at avx2 */
#define ROWS_MT_AVX2_Q4 4  /* int8 q4 at avx2 */
static int q8p_rows_multi(int64_t T, int64_t tmax) {
    if (T == 1) return 1;
    if (T > tmax) return 0;
    return !env_off("NINFER_CPU_ROWSMT");
}

void ni_matmul(ni_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int accumulate) {
    ni_matmul_act(c, w, x, y, accumulate, NI_ACT_F32);
}

void ni_matmul_act(ni_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int accumulate, int act) {
    int64_t per = (w->n + (int64_t)c->threads * 8 - 1) / ((int64_t)c->threads * 8);
    per = (per + MM_TILE - 1) / MM_TILE * MM_TILE;
    if (per < MM_TILE) per = MM_TILE;
    mm_args a = {c, w, x, y, accumulate, (int)per, 0};
    a.pf_rows = x.t == 1 ? gemv_rows() : -1;
    a.pf_l2 = a.pf_rows > 0 && prefetch_l2();
    ni_q8_gemm_fn gq8 = act == NI_ACT_Q8 && w->bits && x.t > NI_SMALL_T ? q8_gemm_kernel(c->isa, (int)w->bits) : NULL;
    if (gq8) {
        /* every token row quantized once (blocks of the weight group), its
         * group offsets 2^(bits−1)·Σ x_q, then panels of NI_Q8G_NR rows */
        const int64_t kpad = w->kpad, nbk = kpad / 32, G = w->group, ng = kpad / G;
        const int64_t nxs = x.t * nbk, nxq = (x.t * kpad + 3) / 4, nxo = x.t * ng;
        float *sh = ni_shared(c, nxs + nxq + nxo);
        float *xs = sh;
        int8_t *xq = (int8_t *)(sh + nxs);
        int32_t *xo = (int32_t *)(sh + nxs + nxq);
        q8g_quant_args qa = {c->isa, x, w->k, kpad, (int)G, 1 << (w->bits - 1), xq, xs, xo};
        ni_parallel(c, (int)((x.t + Q8G_QUANT_TOKENS - 1) / Q8G_QUANT_TOKENS), q8g_quant_task, &qa, x.t * kpad * 8);
        a.xq = xq;
        a.xs = xs;
        a.xo = xo;
        a.gq8 = gq8;
        per = (w->n + (int64_t)c->threads * 4 - 1) / ((int64_t)c->threads * 4);
        per = (per + NI_Q8G_NR - 1) / NI_Q8G_NR * NI_Q8G_NR;
        a.rows_per_task = (int)per;
        ni_parallel(c, (int)((w->n + per - 1) / per), mm_task, &a, w->n * w->k * (int64_t)x.t);
        return;
    }
    if (act == NI_ACT_Q8 && w->bits && x.t <= NI_SMALL_T) { /* quantize each token row once */
        int64_t kpad = w->kpad, nbk = kpad / 32;
        /* xs, then the expanded scales, codes and offset lanes, each of
         * the last three starting 1344 bytes further in the 4 KiB page
         * phase than the one before (q8_phase) */
        const int64_t oxe = x.t * nbk, nxe = 8 * x.t * nbk, nxq = (x.t * kpad + 3) / 4, nxo = x.t * kpad / 4;
        const int64_t oxq = q8_phase(oxe + nxe, oxe + Q8_PHASE), oxo = q8_phase(oxq + nxq, oxe + 2 * Q8_PHASE);
        float *sh = ni_shared(c, oxo + nxo);
        float *xs = sh, *xe = sh + oxe;
        int8_t *xq = (int8_t *)(sh + oxq);
        int32_t *xo = (int32_t *)(sh + oxo);
        const int blk = w->bits == 8 ? 32 : 64; /* the weight group */
        for (int64_t t = 0; t < x.t; t++)
            q8_quantize(c->isa, x.p + t * x.ld, w->k, kpad, blk, xq + t * kpad, xs + t * nbk);
        a.perm = q8_perm(c->isa, (int)w->bits);
        a.vbmi = a.perm && perm_vbmi(c->isa, w);
        a.rows_vbmi = a.vbmi || (a.perm && w->bits == 4 && c->isa == NI_ISA_AVX512 && q8_vnni() && ni_cpu_has_vbmi());
        for (int64_t i = 0; i < x.t * nbk; i += 2) /* kpad/32 is even: blocks come in pairs */
            for (int l = 0; l < 16; l++) xe[8 * i + l] = xs[i + (a.perm ? (l >> 2) & 1 : l >> 3)];
        if (a.perm) { /* each 64-value group's codes in the layout's lane order */
            const uint8_t *pl = g_perm_lane[a.perm];
            int8_t tmp[64];
            for (int64_t i = 0; i < x.t * kpad; i += 64) {
                for (int l = 0; l < 64; l++) tmp[l] = xq[i + pl[l]];
                memcpy(xq + i, tmp, 64);
            }
        }
        if (c->isa == NI_ISA_AVX512 && q8_vnni() && (a.perm || (w->bits == 8 && !q8w_legacy()))) {
            /* the offset-binary VNNI bodies' offset lanes */
            for (int64_t t = 0; t < x.t; t++) ni_q8p_offsets_vnni((int)w->bits, xq + t * kpad, kpad / 64, xo + t * (kpad / 4));
            a.xo = xo;
        } else if (c->isa == NI_ISA_AVX2 && w->bits != 8 && !avx2_signed()) {
            /* the offset-binary AVX2 bodies' offset lanes */
            a.avxvnni = avx2_vnni();
            for (int64_t t = 0; t < x.t; t++) ni_q8u_offsets_avx2((int)w->bits, xq + t * kpad, kpad / 64, xo + t * (kpad / 4));
            a.xo = xo;
        }
        /* 2 ≤ T ≤ NI_SMALL_T: once a token on the one-token multi-row GEMVs where that measured faster (VNNI+VBMI
         * q4–q6 and, at avx2, the cheap q4 and q8 decodes; the avx2 q5/q6 NT-token body decodes a group once
         * for all its tokens and stays: docs/PERF.md "Twelfth session"), elsewhere the NT-token bodies with
         * their first pass prefetched */
        const int rows = gemv_rows();
        a.rows_pair = a.rows_vbmi && a.xo && c->isa == NI_ISA_AVX512 && rows >= 0 && q8p_rows_multi(x.t, ROWS_MT_VBMI);
        a.rows_mt = x.t > 1 && rows >= 0 && c->isa == NI_ISA_AVX2 &&
                    ((w->bits == 4 && q8p_rows_multi(x.t, ROWS_MT_AVX2_Q4)) ||
                     (w->bits == 8 && q8p_rows_multi(x.t, ROWS_MT_AVX2_Q8)));
        a.pf_nt = x.t > 1 && rows > 0 && !env_off("NINFER_CPU_PFNT") &&
                  (c->isa == NI_ISA_AVX2 || (c->isa == NI_ISA_AVX512 && a.xo && (w->bits == 8 || a.perm)));
        if (a.rows_pair || a.rows_mt || a.pf_nt) a.pf_rows = rows, a.pf_l2 = rows > 0 && prefetch_l2();
        if (a.rows_pair) /* the once-a-token route takes each token in pair order */
            for (int64_t t = 0; t < x.t; t++)
                q8p_pair_order(xq + t * kpad, xo + t * (kpad / 4), (w->k + w->group - 1) / w->group);
        a.xq = xq;
        a.xs = xs;
        a.xe = xe;
        ni_parallel(c, (int)((w->n + per - 1) / per), mm_task, &a, w->n * w->k * (int64_t)x.t);
        return;
    }
    if (x.t > NI_SMALL_T) { /* comparison switch for the old large-T route */
        const char *e = getenv("NINFER_CPU_LARGET");
        a.gemm = !(e && strcmp(e, "tile") == 0);
        if (mm_gemm_ok(&a)) { /* whole 16-column panels per task */
            per = (w->n + (int64_t)c->threads * 8 - 1) / ((int64_t)c->threads * 8);
            per = (per + NI_GEMM_NR - 1) / NI_GEMM_NR * NI_GEMM_NR;
            a.rows_per_task = (int)per;
        }
    }
    if (x.t > 1 && x.t <= NI_SMALL_T) { /* comparison switch for the old small-T route */
        const char *e = getenv("NINFER_CPU_SMALLT");
        a.rowdecode = e && strcmp(e, "decode") == 0;
    }
    if (x.t <= NI_SMALL_T && !a.rowdecode && fp32_perm(c->isa, w)) { /* permute the whole groups once (avx512.c) */
        int64_t full = w->k / w->group;
        a.ldp = full * w->group;
        float *xp = ni_shared(c, x.t * a.ldp);
        for (int64_t t = 0; t < x.t; t++)
            for (int64_t i = 0; i < a.ldp; i += 64) {
                const float *src = x.p + t * x.ld + i;
                float *dst = xp + t * a.ldp + i;
                for (int l = 0; l < 32; l++) dst[l] = src[2 * l], dst[32 + l] = src[2 * l + 1];
            }
        a.xp = xp;
        a.vbmi = perm_vbmi(c->isa, w);
    }
    if (x.t <= NI_SMALL_T && (w->fmt == NI_W_NVFP4 || w->fmt == NI_W_FP8ROW)) { /* old nvfp4/fp8 route, T = 1..16 */
        const char *e = getenv("NINFER_CPU_FPGEMV");
        if (e && strcmp(e, "decode") == 0) a.rowdecode = 1;
    }
    ni_parallel(c, (int)((w->n + per - 1) / per), mm_task, &a, w->n * w->k * (int64_t)x.t);
}
