/* Paged KV cache (bf16, int8-group64, fp8-e4m3-row) and causal GQA
 * attention with an online softmax in fp32. */
#include "ni_cpu.h"

int64_t ni_kv_vec_bytes(int fmt, int hd) {
    if (fmt == NI_KV_F32) return 4 * (int64_t)hd;
    return fmt == NI_KV_BF16 ? 2 * (int64_t)hd : hd;
}

int64_t ni_kv_scale_count(int fmt, int hd) {
    if (fmt == NI_KV_I8G64) return (hd + 63) / 64;
    if (fmt == NI_KV_FP8ROW) return 1;
    return 0;
}

static void store_vec(int fmt, int hd, uint8_t *plane, uint16_t *sp, int64_t vi, const float *x) {
    if (fmt == NI_KV_F32) {
        memcpy((float *)plane + vi * hd, x, (size_t)hd * 4);
        return;
    }
    if (fmt == NI_KV_BF16) {
        uint16_t *o = (uint16_t *)plane + vi * hd;
        for (int d = 0; d < hd; d++) o[d] = ni_to_bf16(x[d]);
        return;
    }
    int8_t *o = (int8_t *)plane + vi * hd;
    if (fmt == NI_KV_I8G64) {
        int ng = (hd + 63) / 64;
        for (int g = 0; g < ng; g++) {
            int d0 = g * 64, d1 = d0 + 64 < hd ? d0 + 64 : hd;
            float am = 0;
            for (int d = d0; d < d1; d++) am = fmaxf(am, fabsf(x[d]));
            uint16_t s16 = ni_f32_to_f16(am / 127.0f);
            float s = ni_f16_to_f32(s16);
            sp[vi * ng + g] = s16;
            float inv = s > 0 ? 1.0f / s : 0;
            for (int d = d0; d < d1; d++) {
                float q = nearbyintf(x[d] * inv);
                o[d] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
            }
        }
        return;
    }
    float am = 0;
    for (int d = 0; d < hd; d++) am = fmaxf(am, fabsf(x[d]));
    uint16_t s16 = ni_f32_to_f16(am / 448.0f);
    float s = ni_f16_to_f32(s16);
    sp[vi] = s16;
    for (int d = 0; d < hd; d++) ((uint8_t *)o)[d] = s > 0 ? ni_f32_to_e4m3(x[d] / s) : 0;
}

static void load_vec(int isa, int fmt, int hd, const uint8_t *plane, const uint16_t *sp, int64_t vi, float *out) {
    if (fmt == NI_KV_F32) {
        memcpy(out, (const float *)plane + vi * hd, (size_t)hd * 4);
        return;
    }
    if (fmt == NI_KV_BF16) {
        ni_bf16_to_f32_row(isa, (const uint16_t *)plane + vi * hd, out, hd);
        return;
    }
    if (fmt == NI_KV_I8G64) {
        const int8_t *p = (const int8_t *)plane + vi * hd;
        int ng = (hd + 63) / 64;
        for (int g = 0; g < ng; g++) {
            float s = ni_f16_to_f32(sp[vi * ng + g]);
            int d1 = g * 64 + 64 < hd ? g * 64 + 64 : hd;
            for (int d = g * 64; d < d1; d++) out[d] = (float)p[d] * s;
        }
        return;
    }
    const uint8_t *p = plane + vi * hd;
    float s = ni_f16_to_f32(sp[vi]);
    for (int d = 0; d < hd; d++) out[d] = ni_e4m3_to_f32(p[d]) * s;
}

/* Vector slot of (position, head), or −1 when the position is unmapped. */
static inline int64_t kv_slot(const ni_kv *kv, int32_t pos, int h) {
    if (pos < 0) return -1;
    int32_t lp = pos / NI_KV_PAGE;
    if (lp >= kv->table_len) return -1;
    int32_t pp = kv->block_table[lp];
    if (pp < 0 || pp >= kv->pages) return -1;
    return ((int64_t)pp * kv->kvh + h) * NI_KV_PAGE + pos % NI_KV_PAGE;
}

int ni_kv_append(ni_ctx *c, ni_kv kv, ni_rows k, ni_rows v, const int32_t *pos) {
    (void)c;
    int bad = 0;
    for (int t = 0; t < k.t; t++)
        for (int h = 0; h < kv.kvh; h++) {
            int64_t vi = kv_slot(&kv, pos[t], h);
            if (vi < 0) {
                bad++;
                continue;
            }
            store_vec(kv.fmt, kv.hd, kv.k, kv.ks, vi, ni_row(k, t, h));
            store_vec(kv.fmt, kv.hd, kv.v, kv.vs, vi, ni_row(v, t, h));
        }
    return bad;
}

typedef struct {
    ni_ctx *c;
    ni_rows q, out;
    ni_kv kv;
    const int32_t *pos;
    float scale;
    int bad, tblocks;
} attn_args;

/* Queries per task: a block of ATT_TB tokens × the kv head's query heads
 * (nq rows) shares every K/V vector it reads. Keys go in blocks of ATT_KB,
 * decoded once per task into fp32 rows, as register-tiled matrix products
 * (matprod.c): S = Q Kᵀ for the block, then per query row the online
 * softmax (running max m, sum l; the accumulator rescaled once per block
 * when the max grows) and acc += P V. */
#define ATT_TB 16
#define ATT_KB 64

static void attn_task(void *a_, int task, int tid) {
    attn_args *a = (attn_args *)a_;
    int isa = a->c->isa;
    int kvh = a->kv.kvh, hd = a->kv.hd, grp = a->q.h / kvh;
    int tb = task / kvh, h = task % kvh;
    int t0 = tb * ATT_TB, nt = a->q.t - t0 < ATT_TB ? a->q.t - t0 : ATT_TB;
    int nq = nt * grp; /* (token, head) pairs of this task: row i = j·grp + g */
    unsigned csr = ni_ftz_begin(); /* e^{s−m} of far-off scores is subnormal */
    int64_t np = ni_matprod_pack_floats(ATT_KB, hd);
    if (ni_matprod_pack_floats(hd, ATT_KB) > np) np = ni_matprod_pack_floats(hd, ATT_KB);
    float *P = ni_tmp(a->c, tid, np + (int64_t)hd * (2 * nq + 2 * ATT_KB) + (int64_t)nq * ATT_KB + 2 * nq);
    float *qb = P + np, *acc = qb + (int64_t)nq * hd, *kb = acc + (int64_t)nq * hd, *vb = kb + (int64_t)ATT_KB * hd;
    float *sb = vb + (int64_t)ATT_KB * hd, *m = sb + (int64_t)nq * ATT_KB, *l = m + nq;
    for (int j = 0; j < nt; j++)
        for (int g = 0; g < grp; g++) memcpy(qb + (int64_t)(j * grp + g) * hd, ni_row(a->q, t0 + j, h * grp + g), (size_t)hd * 4);
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    memset(acc, 0, (size_t)nq * hd * 4);
    int32_t last = -1;
    for (int j = 0; j < nt; j++)
        if (a->pos[t0 + j] > last) last = a->pos[t0 + j];
    int stop = 0;
    for (int32_t s0 = 0; s0 <= last && !stop; s0 += ATT_KB) {
        int nk = last + 1 - s0 < ATT_KB ? last + 1 - s0 : ATT_KB;
        for (int s = 0; s < nk; s++) {
            int64_t vi = kv_slot(&a->kv, s0 + s, h);
            if (vi < 0) {
                __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
                nk = s, stop = 1;
                break;
            }
            load_vec(isa, a->kv.fmt, hd, a->kv.k, a->kv.ks, vi, kb + (int64_t)s * hd);
            load_vec(isa, a->kv.fmt, hd, a->kv.v, a->kv.vs, vi, vb + (int64_t)s * hd);
        }
        if (nk == 0) break;
        ni_matprod_pack(nk, hd, kb, hd, 1, P);
        ni_matprod(isa, nq, nk, hd, qb, hd, P, sb, ATT_KB, 0, 0);
        for (int i = 0; i < nq; i++) {
            float *si = sb + (int64_t)i * ATT_KB, *ai = acc + (int64_t)i * hd;
            int32_t p = a->pos[t0 + i / grp];
            int nv = p - s0 + 1 < nk ? p - s0 + 1 : nk; /* causal: keys ≤ pos */
            if (nv < 0) nv = 0;
            float mx = m[i];
            for (int s = 0; s < nv; s++) {
                si[s] *= a->scale;
                if (si[s] > mx) mx = si[s];
            }
            if (mx > m[i]) {
                float corr = expf(m[i] - mx);
                l[i] *= corr;
                ni_scal(isa, corr, ai, hd);
                m[i] = mx;
            }
            for (int s = 0; s < nv; s++) {
                si[s] = expf(si[s] - mx);
                l[i] += si[s];
            }
            for (int s = nv; s < nk; s++) si[s] = 0;
        }
        ni_matprod_pack(hd, nk, vb, hd, 0, P);
        ni_matprod(isa, nq, hd, nk, sb, ATT_KB, P, acc, hd, 1, 0);
    }
    for (int j = 0; j < nt; j++)
        for (int g = 0; g < grp; g++) {
            int i = j * grp + g;
            float *o = ni_row(a->out, t0 + j, h * grp + g), inv = l[i] > 0 ? 1.0f / l[i] : 0;
            for (int d = 0; d < hd; d++) o[d] = acc[(int64_t)i * hd + d] * inv;
        }
    ni_ftz_end(csr);
}

/* Split-KV decode: for few query tokens and a long context, task
 * (split, kv head) covers key positions [split·len, (split+1)·len) for every
 * query token and writes partial (m, l, acc) rows; a second pass merges the
 * splits: M = max m_s, out = Σ_s e^{m_s−M} acc_s / Σ_s e^{m_s−M} l_s. */
#define ATT_SPLIT_MAX_T 4
#define ATT_SPLIT_MIN 64

typedef struct {
    attn_args *a;
    float *part; /* [split][t][head][hd + 2] */
    int nsplit, len;
} split_args;

static void split_task(void *p_, int task, int tid) {
    split_args *sa = (split_args *)p_;
    attn_args *a = sa->a;
    int isa = a->c->isa;
    int kvh = a->kv.kvh, hd = a->kv.hd, nh = a->q.h, grp = nh / kvh, T = a->q.t;
    int sp = task / kvh, h = task % kvh;
    int32_t s0 = sp * sa->len, s1 = s0 + sa->len;
    unsigned csr = ni_ftz_begin();
    float *buf = ni_tmp(a->c, tid, 2 * (int64_t)hd);
    float *kb = buf, *vb = buf + hd;
    for (int t = 0; t < T; t++)
        for (int g = 0; g < grp; g++) {
            float *r = sa->part + (((int64_t)sp * T + t) * nh + h * grp + g) * (hd + 2);
            r[0] = -INFINITY;
            r[1] = 0;
            memset(r + 2, 0, (size_t)hd * 4);
        }
    for (int32_t s = s0; s < s1; s++) {
        int any = 0;
        for (int t = 0; t < T; t++) any |= s <= a->pos[t];
        if (!any) break;
        int64_t vi = kv_slot(&a->kv, s, h);
        if (vi < 0) {
            __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
            break;
        }
        load_vec(isa, a->kv.fmt, hd, a->kv.k, a->kv.ks, vi, kb);
        load_vec(isa, a->kv.fmt, hd, a->kv.v, a->kv.vs, vi, vb);
        for (int t = 0; t < T; t++) {
            if (s > a->pos[t]) continue;
            for (int g = 0; g < grp; g++) {
                float *r = sa->part + (((int64_t)sp * T + t) * nh + h * grp + g) * (hd + 2);
                float sc = a->scale * ni_dot(isa, ni_row(a->q, t, h * grp + g), kb, hd);
                if (sc > r[0]) {
                    float corr = expf(r[0] - sc);
                    r[1] *= corr;
                    ni_scal(isa, corr, r + 2, hd);
                    r[0] = sc;
                }
                float p = expf(sc - r[0]);
                r[1] += p;
                ni_axpy(isa, p, vb, r + 2, hd);
            }
        }
    }
    ni_ftz_end(csr);
}

static void merge_task(void *p_, int task, int tid) {
    (void)tid;
    split_args *sa = (split_args *)p_;
    attn_args *a = sa->a;
    int hd = a->kv.hd, nh = a->q.h, T = a->q.t;
    int t = task / nh, hh = task % nh;
    float M = -INFINITY, L = 0;
    for (int sp = 0; sp < sa->nsplit; sp++) {
        float m = sa->part[(((int64_t)sp * T + t) * nh + hh) * (hd + 2)];
        if (m > M) M = m;
    }
    float *o = ni_row(a->out, t, hh);
    memset(o, 0, (size_t)hd * 4);
    for (int sp = 0; sp < sa->nsplit; sp++) {
        const float *r = sa->part + (((int64_t)sp * T + t) * nh + hh) * (hd + 2);
        if (r[1] == 0) continue;
        float w = expf(r[0] - M);
        L += w * r[1];
        ni_axpy(a->c->isa, w, r + 2, o, hd);
    }
    if (L > 0) ni_scal(a->c->isa, 1.0f / L, o, hd);
}

int ni_attention(ni_ctx *c, ni_rows q, ni_kv kv, const int32_t *pos, float scale, ni_rows out) {
    if (q.t <= 0) return 0;
    int32_t last = 0;
    for (int t = 0; t < q.t; t++)
        if (pos[t] > last) last = pos[t];
    int64_t work = (int64_t)q.t * q.h * kv.hd * 4 * (last + 1);
    int tblocks = (q.t + ATT_TB - 1) / ATT_TB;
    attn_args a = {c, q, out, kv, pos, scale, 0, tblocks};
    int nsplit = (last + ATT_SPLIT_MIN) / ATT_SPLIT_MIN;
    if (nsplit > 4 * c->threads) nsplit = 4 * c->threads;
    if (q.t > ATT_SPLIT_MAX_T || nsplit < 2 || c->threads == 1 || work < c->serial_work) {
        ni_parallel(c, tblocks * kv.kvh, attn_task, &a, work);
        return a.bad;
    }
    int len = (last + nsplit) / nsplit; /* ceil((last+1)/nsplit) */
    nsplit = (last + len) / len;
    split_args sa = {&a, ni_shared(c, (int64_t)nsplit * q.t * q.h * (kv.hd + 2)), nsplit, len};
    if (!sa.part) return q.t;
    ni_parallel(c, nsplit * kv.kvh, split_task, &sa, work);
    ni_parallel(c, q.t * q.h, merge_task, &sa, work);
    return a.bad;
}
