/* Gated delta rule: recurrent (decode/verify, optional per-token state
 * slots) and chunked WY form (prefill). One task per value head; the state
 * is copied to per-thread scratch first so input and output slots may
 * differ (a recurrent step whose output slot is its input slot updates the
 * head in place). Both forms flush subnormals to zero (ni_ftz_begin): the
 * decays e^Γ push state and coefficients into the subnormal range, where
 * every FMA takes a microcode assist on Intel CPUs. */
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
    unsigned csr = ni_ftz_begin();
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
    ni_ftz_end(csr);
}

void ni_gdn_recurrent(ni_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                      int64_t slot_stride, const int32_t *in_slot, int out_slot, ni_rows o) {
    gdn_args a = {c, q, k, v, g, beta, o, state, slot_stride, *in_slot, out_slot};
    ni_parallel(c, v.h, gdn_rec_task, &a, (int64_t)(v.t + 1) * v.h * k.d * v.d * 4);
}

/* One head's chunks. The products run as register-tiled matrix products
 * (matprod.c): Q Kᵀ and K Kᵀ, V' = U − W S, O = (Q ⊙ e^Γ) S + QK V' and the
 * state update; the forward substitution keeps its row recurrence (each row
 * held in registers across its axpys). */
static void gdn_chunk_task(void *a_, int j, int tid) {
    gdn_args *a = (gdn_args *)a_;
    unsigned csr = ni_ftz_begin();
    int isa = a->c->isa;
    const int C = NI_GDN_CHUNK;
    int dk = a->k.d, dv = a->v.d, kh = j / (a->v.h / a->k.h);
    int64_t hsz = (int64_t)dk * dv;
    int cw = dk > C ? dk : C; /* coefficient rows for ni_axpy_rows */
    int64_t np = ni_matprod_pack_floats(C, dk);
    if (ni_matprod_pack_floats(dv, dk) > np) np = ni_matprod_pack_floats(dv, dk);
    if (ni_matprod_pack_floats(dv, C) > np) np = ni_matprod_pack_floats(dv, C);
    float *P = ni_tmp(a->c, tid, np + hsz + (int64_t)C * (2 * C + 2 * dv + 3 * dk + 3) + cw);
    float *S = P + np;      /* packed op(B) first: 64-byte aligned */
    float *A = S + hsz;     /* [C][C] strictly lower (β K Kᵀ) ⊙ D */
    float *QK = A + C * C;  /* [C][C] (Q Kᵀ) ⊙ D, i ≥ j, 0 above */
    float *U = QK + C * C;  /* [C][dv] */
    float *W = U + C * dv;  /* [C][dk] held negated, −W (V' = U − W S takes it so) */
    float *VP = W + C * dk; /* [C][dv] */
    float *QE = VP + C * dv;         /* [C][dk] Q ⊙ e^Γ */
    float *KD = QE + (int64_t)C * dk; /* [dk][C] (K ⊙ e^{Γ_n − Γ})ᵀ */
    float *G = KD + (int64_t)C * dk; /* Γ */
    float *B = G + C;
    float *EG = B + C;
    float *cf = EG + C; /* per-row coefficients (the order of the axpys they replace) */
    memcpy(S, a->state + a->slot_stride * a->in_slot + j * hsz, (size_t)hsz * 4);
    int T = a->v.t;
    int64_t ldq = a->q.ld, ldk = a->k.ld, ldo = a->o.ld;
    for (int t0 = 0; t0 < T; t0 += C) {
        int n = T - t0 < C ? T - t0 : C;
        float acc = 0;
        for (int i = 0; i < n; i++) {
            acc += ni_row(a->g, t0 + i, j)[0];
            G[i] = acc;
            EG[i] = expf(acc);
            B[i] = ni_row(a->beta, t0 + i, j)[0];
        }
        const float *Qc = ni_row(a->q, t0, kh), *Kc = ni_row(a->k, t0, kh);
        float *Oc = ni_row(a->o, t0, j);
        /* Q Kᵀ and K Kᵀ (lower triangles), then ⊙ D (and β for A) */
        ni_matprod_pack(n, dk, Kc, ldk, 1, P);
        ni_matprod(isa, n, n, dk, Qc, ldq, P, QK, C, 0, NI_MP_LOWER_OUT);
        ni_matprod(isa, n, n, dk, Kc, ldk, P, A, C, 0, NI_MP_LOWER_OUT);
        for (int i = 0; i < n; i++) {
            for (int s = 0; s <= i; s++) {
                float dec = expf(G[i] - G[s]);
                QK[i * C + s] *= dec;
                if (s < i) A[i * C + s] = B[i] * A[i * C + s] * dec;
            }
            for (int s = i + 1; s < n; s++) QK[i * C + s] = 0;
        }
        /* forward substitution: U = L⁻¹ βV, −W = L⁻¹ (−βK ⊙ e^Γ) (negation is exact and
         * the substitution linear: the bits of −(L⁻¹ (βK ⊙ e^Γ))) */
        for (int i = 0; i < n; i++) {
            const float *vi = ni_row(a->v, t0 + i, j), *ki = ni_row(a->k, t0 + i, kh);
            float *ui = U + (int64_t)i * dv, *wi = W + (int64_t)i * dk;
            for (int d = 0; d < dv; d++) ui[d] = B[i] * vi[d];
            for (int d = 0; d < dk; d++) wi[d] = -(B[i] * EG[i] * ki[d]);
            for (int s = 0; s < i; s++) cf[s] = -A[i * C + s];
            ni_axpy_rows(isa, cf, i, U, dv, ui, dv);
            ni_axpy_rows(isa, cf, i, W, dk, wi, dk);
        }
        /* V' = U − W S; O = (Q ⊙ e^Γ) S + QK V' */
        for (int i = 0; i < n; i++) {
            const float *qi = ni_row(a->q, t0 + i, kh);
            for (int r = 0; r < dk; r++) QE[(int64_t)i * dk + r] = qi[r] * EG[i];
        }
        ni_matprod_pack(dv, dk, S, dv, 0, P);
        memcpy(VP, U, (size_t)n * dv * 4);
        ni_matprod(isa, n, dv, dk, W, dk, P, VP, dv, 1, 0);
        ni_matprod(isa, n, dv, dk, QE, dk, P, Oc, ldo, 0, 0);
        ni_matprod_pack(dv, n, VP, dv, 0, P);
        ni_matprod(isa, n, dv, n, QK, C, P, Oc, ldo, 1, NI_MP_LOWER_K);
        /* S ← e^{Γ_n} S + (K ⊙ e^{Γ_n − Γ})ᵀ V' */
        float gl = G[n - 1];
        ni_scal(isa, expf(gl), S, hsz);
        for (int i = 0; i < n; i++) {
            const float *ki = ni_row(a->k, t0 + i, kh);
            float e = expf(gl - G[i]);
            for (int r = 0; r < dk; r++) KD[(int64_t)r * C + i] = ki[r] * e;
        }
        ni_matprod(isa, dk, dv, n, KD, C, P, S, dv, 1, 0);
    }
    memcpy(a->state + a->slot_stride * a->out_slot + j * hsz, S, (size_t)hsz * 4);
    ni_ftz_end(csr);
}

void ni_gdn_chunked(ni_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                    int64_t slot_stride, const int32_t *in_slot, int out_slot, ni_rows o) {
    if (out_slot < 0) return;
    gdn_args a = {c, q, k, v, g, beta, o, state, slot_stride, *in_slot, out_slot};
    ni_parallel(c, v.h, gdn_chunk_task, &a, (int64_t)(v.t + 1) * v.h * k.d * v.d * 8);
}
