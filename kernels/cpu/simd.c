/* Scalar reference primitives and ISA dispatch (AVX-512 bodies in avx512.c,
 * AVX2 in avx2.c). */
#include "ni_cpu.h"

static float dot_scalar(const float *a, const float *b, int64_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

float ni_dot(int isa, const float *a, const float *b, int64_t n) {
    if (isa == NI_ISA_AVX512) return ni_dot_avx512(a, b, n);
    if (isa == NI_ISA_AVX2) return ni_dot_avx2(a, b, n);
    return dot_scalar(a, b, n);
}

void ni_dot4(int isa, const float *w, const float *x, int64_t ldx, int64_t n, float *out) {
    if (isa == NI_ISA_AVX512) {
        ni_dot4_avx512(w, x, ldx, n, out);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_dot4_avx2(w, x, ldx, n, out);
        return;
    }
    for (int j = 0; j < 4; j++) out[j] = dot_scalar(w, x + j * ldx, n);
}

void ni_axpy(int isa, float a, const float *x, float *y, int64_t n) {
    if (isa == NI_ISA_AVX512) {
        ni_axpy_avx512(a, x, y, n);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_axpy_avx2(a, x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void ni_axpy_rows(int isa, const float *a, int m, const float *X, int64_t ldx, float *y, int64_t n) {
    if (isa == NI_ISA_AVX512) {
        ni_axpy_rows_avx512(a, m, X, ldx, y, n);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_axpy_rows_avx2(a, m, X, ldx, y, n);
        return;
    }
    for (int j = 0; j < m; j++) ni_axpy(isa, a[j], X + (int64_t)j * ldx, y, n);
}

void ni_silu_vec(int isa, const float *x, float *y, int64_t n) {
    if (isa >= NI_ISA_AVX2) {
        ni_silu_avx2(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = ni_silu(x[i]);
}

void ni_scal(int isa, float a, float *y, int64_t n) {
    if (isa == NI_ISA_AVX512) {
        ni_scal_avx512(a, y, n);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_scal_avx2(a, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

void ni_gdn_step_rows_ref(int isa, float *S, int dk, int64_t dv, float decay, const float *k, const float *delta,
                          const float *q, float *kv, float *o) {
    if (kv) {
        memset(kv, 0, (size_t)dv * 4);
        for (int i = 0; i < dk; i++) {
            ni_scal(isa, decay, S + (int64_t)i * dv, dv);
            ni_axpy(isa, k[i], S + (int64_t)i * dv, kv, dv);
        }
    }
    if (o) {
        memset(o, 0, (size_t)dv * 4);
        for (int i = 0; i < dk; i++) {
            ni_axpy(isa, k[i], delta, S + (int64_t)i * dv, dv);
            ni_axpy(isa, q[i], S + (int64_t)i * dv, o, dv);
        }
    }
}

void ni_gdn_decay_kv(int isa, float *S, int dk, int64_t dv, float decay, const float *k, float *kv) {
    if (isa == NI_ISA_AVX512) {
        ni_gdn_decay_kv_avx512(S, dk, dv, decay, k, kv);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_gdn_decay_kv_avx2(S, dk, dv, decay, k, kv);
        return;
    }
    ni_gdn_step_rows_ref(isa, S, dk, dv, decay, k, NULL, NULL, kv, NULL);
}

void ni_gdn_update_o(int isa, float *S, int dk, int64_t dv, const float *k, const float *delta, const float *q,
                     float *o) {
    if (isa == NI_ISA_AVX512) {
        ni_gdn_update_o_avx512(S, dk, dv, k, delta, q, o);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_gdn_update_o_avx2(S, dk, dv, k, delta, q, o);
        return;
    }
    ni_gdn_step_rows_ref(isa, S, dk, dv, 0, k, delta, q, NULL, o);
}

float ni_sumsq(int isa, const float *x, int64_t n) {
    if (isa == NI_ISA_AVX512) return ni_sumsq_avx512(x, n);
    if (isa == NI_ISA_AVX2) return ni_sumsq_avx2(x, n);
    return dot_scalar(x, x, n);
}

float ni_dot_bf16(int isa, const uint16_t *w, const float *x, int64_t n) {
    if (isa == NI_ISA_AVX512) return ni_dot_bf16_avx512(w, x, n);
    if (isa == NI_ISA_AVX2) return ni_dot_bf16_avx2(w, x, n);
    float s0 = 0, s1 = 0;
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        s0 += ni_bf16(w[i]) * x[i];
        s1 += ni_bf16(w[i + 1]) * x[i + 1];
    }
    for (; i < n; i++) s0 += ni_bf16(w[i]) * x[i];
    return s0 + s1;
}

void ni_bf16_to_f32_row(int isa, const uint16_t *w, float *out, int64_t n) {
    if (isa == NI_ISA_AVX512) {
        ni_bf16_to_f32_row_avx512(w, out, n);
        return;
    }
    if (isa == NI_ISA_AVX2) {
        ni_bf16_to_f32_row_avx2(w, out, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = ni_bf16(w[i]);
}
