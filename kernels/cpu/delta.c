/* Gated delta rule: recurrent (decode/verify, optional per-token state
 * slots) and chunked WY form (prefill). One task per value head; the state
 * is copied to per-thread scratch first so input and output slots may
 * differ (a recurrent step whose output slot is its input slot updates the
 * head in place). */
#include "ni_cpu.h"

typedef struct {
    ni_ctx *c;
    ni_rows q, k, v, g, beta, o;
    float *state;
    int64_t slot_stride;
    int32_t in_slot;
    int out_slot;
} gdn_args;

static void gdn_rec_task(void *a_, int j, int tid) {
    gdn_args *a = (gdn_args *)a_;
    int isa = a->c->isa;
    int dk = a->k.d, dv = a->v.d, kh = j / (a->v.h / a->k.h);
    int64_t hsz = (int64_t)dk * dv;
    /* A decode step (out_slot == in_slot) updates the slot's head in place;
     * otherwise the head is copied to scratch first (the input slot stays
     * as it was). The same operations in the same order either way. */
    const int inplace = a->out_slot == a->in_slot;
    float *S = ni_tmp(a->c, tid, hsz + dv);
    float *kv = S + hsz;
    if (inplace) S = a->state + a->slot_stride * a->in_slot + j * hsz;
    else memcpy(S, a->state + a->slot_stride * a->in_slot + j * hsz, (size_t)hsz * 4);
    for (int t = 0; t < a->v.t; t++) {
        const float *q = ni_row(a->q, t, kh), *k = ni_row(a->k, t, kh), *v = ni_row(a->v, t, j);
        float decay = expf(ni_row(a->g, t, j)[0]), b = ni_row(a->beta, t, j)[0];
        ni_gdn_decay_kv(isa, S, dk, dv, decay, k, kv);           /* S ← decay·S; kv = Sᵀk */
        for (int d = 0; d < dv; d++) kv[d] = b * (v[d] - kv[d]); /* δ */
        ni_gdn_update_o(isa, S, dk, dv, k, kv, q, ni_row(a->o, t, j)); /* S += k δᵀ; o = Sᵀq */
        if (a->out_slot == NI_PER_TOKEN) memcpy(a->state + a->slot_stride * t + j * hsz, S, (size_t)hsz * 4);
    }
    if (a->out_slot != NI_PER_TOKEN && !inplace)
        memcpy(a->state + a->slot_stride * a->out_slot + j * hsz, S, (size_t)hsz * 4);
}

void ni_gdn_recurrent(ni_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                      int64_t slot_stride, const int32_t *in_slot, int out_slot, ni_rows o) {
    gdn_args a = {c, q, k, v, g, beta, o, state, slot_stride, *in_slot, out_slot};
    ni_parallel(c, v.h, gdn_rec_task, &a, (int64_t)(v.t + 1) * v.h * k.d * v.d * 4);
}

static void gdn_chunk_task(void *a_, int j, int tid) {
    gdn_args *a = (gdn_args *)a_;
    int isa = a->c->isa;
    const int C = NI_GDN_CHUNK;
    int dk = a->k.d, dv = a->v.d, kh = j / (a->v.h / a->k.h);
    int64_t hsz = (int64_t)dk * dv;
    int cw = dk > C ? dk : C; /* coefficient rows for ni_axpy_rows */
    float *S = ni_tmp(a->c, tid, hsz + (int64_t)C * (3 * C + 2 * dv + dk + 4) + 2 * cw);
    float *A = S + hsz;     /* [C][C] strictly lower (β K Kᵀ) ⊙ D */
    float *QK = A + C * C;  /* [C][C] (Q Kᵀ) ⊙ D, i ≥ j */
    float *U = QK + C * C;  /* [C][dv] */
    float *W = U + C * dv;  /* [C][dk] */
    float *VP = W + C * dk; /* [C][dv] */
    float *G = VP + C * dv; /* Γ */
    float *B = G + C;
    float *EG = B + C;
    float *cf = EG + C, *cf2 = cf + cw; /* per-row coefficients (the order of the axpys they replace) */
    memcpy(S, a->state + a->slot_stride * a->in_slot + j * hsz, (size_t)hsz * 4);
    int T = a->v.t;
    for (int t0 = 0; t0 < T; t0 += C) {
        int n = T - t0 < C ? T - t0 : C;
        float acc = 0;
        for (int i = 0; i < n; i++) {
            acc += ni_row(a->g, t0 + i, j)[0];
            G[i] = acc;
            EG[i] = expf(acc);
            B[i] = ni_row(a->beta, t0 + i, j)[0];
        }
        for (int i = 0; i < n; i++) {
            const float *ki = ni_row(a->k, t0 + i, kh), *qi = ni_row(a->q, t0 + i, kh);
            for (int s = 0; s <= i; s++) {
                const float *ks = ni_row(a->k, t0 + s, kh);
                float dec = expf(G[i] - G[s]);
                QK[i * C + s] = ni_dot(isa, qi, ks, dk) * dec;
                if (s < i) A[i * C + s] = B[i] * ni_dot(isa, ki, ks, dk) * dec;
            }
        }
        /* forward substitution: U = L⁻¹ βV, W = L⁻¹ (βK ⊙ e^Γ) */
        for (int i = 0; i < n; i++) {
            const float *vi = ni_row(a->v, t0 + i, j), *ki = ni_row(a->k, t0 + i, kh);
            float *ui = U + (int64_t)i * dv, *wi = W + (int64_t)i * dk;
            for (int d = 0; d < dv; d++) ui[d] = B[i] * vi[d];
            for (int d = 0; d < dk; d++) wi[d] = B[i] * EG[i] * ki[d];
            for (int s = 0; s < i; s++) cf[s] = -A[i * C + s];
            ni_axpy_rows(isa, cf, i, U, dv, ui, dv);
            ni_axpy_rows(isa, cf, i, W, dk, wi, dk);
        }
        /* V' = U − W S; O = (Q ⊙ e^Γ) S + QK V' */
        for (int i = 0; i < n; i++) {
            float *vp = VP + (int64_t)i * dv, *o = ni_row(a->o, t0 + i, j);
            const float *wi = W + (int64_t)i * dk, *qi = ni_row(a->q, t0 + i, kh);
            memcpy(vp, U + (int64_t)i * dv, (size_t)dv * 4);
            memset(o, 0, (size_t)dv * 4);
            for (int r = 0; r < dk; r++) cf[r] = -wi[r], cf2[r] = qi[r] * EG[i];
            ni_axpy_rows(isa, cf, dk, S, dv, vp, dv);
            ni_axpy_rows(isa, cf2, dk, S, dv, o, dv);
        }
        for (int i = 0; i < n; i++) {
            float *o = ni_row(a->o, t0 + i, j);
            ni_axpy_rows(isa, QK + i * C, i + 1, VP, dv, o, dv);
        }
        /* S ← e^{Γ_n} S + (K ⊙ e^{Γ_n − Γ})ᵀ V' */
        float gl = G[n - 1];
        for (int r = 0; r < dk; r++) ni_scal(isa, expf(gl), S + (int64_t)r * dv, dv);
        for (int i = 0; i < n; i++) cf2[i] = expf(gl - G[i]);
        for (int r = 0; r < dk; r++) { /* row r over the chunk's tokens in order */
            for (int i = 0; i < n; i++) cf[i] = ni_row(a->k, t0 + i, kh)[r] * cf2[i];
            ni_axpy_rows(isa, cf, n, VP, dv, S + (int64_t)r * dv, dv);
        }
    }
    memcpy(a->state + a->slot_stride * a->out_slot + j * hsz, S, (size_t)hsz * 4);
}

void ni_gdn_chunked(ni_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                    int64_t slot_stride, const int32_t *in_slot, int out_slot, ni_rows o) {
    if (out_slot < 0) return;
    gdn_args a = {c, q, k, v, g, beta, o, state, slot_stride, *in_slot, out_slot};
    ni_parallel(c, v.h, gdn_chunk_task, &a, (int64_t)(v.t + 1) * v.h * k.d * v.d * 8);
}
