/* Small dense products for the prefill ops (the GDN chunk steps): C[m,n]
 * (+)= A[m,k] · op(B) with tiles in registers, on the prefill GEMM's
 * micro-kernels (avx2_gemm.c 6×16, avx512.c 6×32).
 *
 * op(B) is packed once into 16-column panels [k][16] (ni_matprod_pack) and
 * then swept by any number of products (ni_matprod), panel-outer so a panel
 * (8 KiB at k = 128) stays in L1 while the row tiles of A pass over it.
 * Every output is one sum over its k terms (sub-blocks of ni_gemm_ks(k)
 * FMAs added in order, then added to C when accumulating); the scalar level
 * runs the same sums in k order. */
#include "ni_cpu.h"

int64_t ni_matprod_pack_floats(int n, int k) {
    return (int64_t)(n + NI_GEMM_NR - 1) / NI_GEMM_NR * NI_GEMM_NR * k;
}

void ni_matprod_pack(int n, int k, const float *B, int64_t ldb, int bt, float *pack) {
    for (int j0 = 0; j0 < n; j0 += NI_GEMM_NR) {
        int nr = n - j0 < NI_GEMM_NR ? n - j0 : NI_GEMM_NR;
        float *dst = pack + (int64_t)j0 * k;
        if (bt) { /* B is [n][k]: panel column r is row j0 + r of B */
            ni_gemm_pack_w_avx2(B + (int64_t)j0 * ldb, ldb, nr, k, dst);
            continue;
        }
        for (int kk = 0; kk < k; kk++) {
            const float *s = B + (int64_t)kk * ldb + j0;
            float *d = dst + (int64_t)kk * NI_GEMM_NR;
            for (int r = 0; r < NI_GEMM_NR; r++) d[r] = r < nr ? s[r] : 0.0f;
        }
    }
}

/* One row tile's reduction length: k, or under NI_MP_LOWER_K only the
 * terms kk < i0 + mr (op(B) rows past the tile's last row weigh 0 in A). */
static inline int tile_k(int k, int flags, int i0, int mr) {
    return (flags & NI_MP_LOWER_K) && i0 + mr < k ? i0 + mr : k;
}

static void matprod_scalar(int m, int n, int k, const float *A, int64_t lda, const float *pack, float *C, int64_t ldc,
                           int acc, int flags) {
    for (int i = 0; i < m; i++) {
        int kk = tile_k(k, flags, i / NI_GEMM_MR * NI_GEMM_MR, NI_GEMM_MR);
        for (int j = 0; j < n; j++) {
            if ((flags & NI_MP_LOWER_OUT) && j > i) continue;
            const float *p = pack + (int64_t)(j / NI_GEMM_NR) * NI_GEMM_NR * k + j % NI_GEMM_NR;
            float s = 0;
            for (int t = 0; t < kk; t++) s += A[(int64_t)i * lda + t] * p[(int64_t)t * NI_GEMM_NR];
            float *c = C + (int64_t)i * ldc + j;
            *c = acc ? *c + s : s;
        }
    }
}

void ni_matprod(int isa, int m, int n, int k, const float *A, int64_t lda, const float *pack, float *C, int64_t ldc,
                int acc, int flags) {
    if (m <= 0 || n <= 0) return;
    if (isa < NI_ISA_AVX2) {
        matprod_scalar(m, n, k, A, lda, pack, C, ldc, acc, flags);
        return;
    }
    int wide = isa == NI_ISA_AVX512, step = wide ? 2 * NI_GEMM_NR : NI_GEMM_NR;
    for (int j0 = 0; j0 < n; j0 += step) {
        int nr = n - j0 < step ? n - j0 : step;
        const float *wp0 = pack + (int64_t)j0 * k;
        /* NI_MP_LOWER_OUT: the row tiles wholly above column j0 are skipped */
        int i0 = (flags & NI_MP_LOWER_OUT) ? j0 / NI_GEMM_MR * NI_GEMM_MR : 0;
        for (; i0 < m; i0 += NI_GEMM_MR) {
            int mr = m - i0 < NI_GEMM_MR ? m - i0 : NI_GEMM_MR;
            int kk = tile_k(k, flags, i0, mr);
            int ks = ni_gemm_ks(kk);
            const float *a = A + (int64_t)i0 * lda;
            float *c = C + (int64_t)i0 * ldc + j0;
            if (wide && nr > NI_GEMM_NR)
                ni_gemm_6x32_avx512(a, lda, wp0, wp0 + (int64_t)NI_GEMM_NR * k, kk, ks, c, ldc, mr, nr, acc);
            else ni_gemm_6x16_avx2(a, lda, wp0, kk, ks, c, ldc, mr, nr, acc);
        }
    }
}
