/* The 256-bit int8 prefill GEMM (gemm_q8.c), included once per integer
 * dot product: Q8G_ATTR is the function target, Q8G_N(name) the variant's
 * name for name, and Q8G_DOT2(acc, wa, xa, wb, xb) adds to the int32 lanes
 * acc (8 rows) the exact dots of two k-quads (codes wa, wb of 8 rows;
 * broadcast activation quads xa, xb). A tile is MR ≤ 2 tokens × 16 rows
 * (one half of a packed 32-row panel): 4 int32 accumulators for the
 * current group, 4 fp32 ones across the groups; the same terms and steps
 * per group as the AVX-512 tile (q8g_tile). */
Q8G_ATTR static inline __attribute__((always_inline)) void Q8G_N(q8g_tile)(
    const int MR, const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
    int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff, int64_t ldo, float *y, int64_t ldy,
    int acc) {
    __m256 f[2][2];
    for (int t = 0; t < MR; t++) f[t][0] = f[t][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ngroups; g++) {
        __m256i a[2][2];
        for (int t = 0; t < MR; t++) a[t][0] = a[t][1] = _mm256_setzero_si256();
        const uint8_t *pg = pw + g * gk * (4 * NI_Q8G_NR);
        const int8_t *xg = xq + g * gk * 4;
        for (int j = 0; j < gk; j += 2) {
            const uint8_t *pj = pg + j * (4 * NI_Q8G_NR);
            const __m256i wa0 = _mm256_loadu_si256((const __m256i *)pj);
            const __m256i wa1 = _mm256_loadu_si256((const __m256i *)(pj + 32));
            const __m256i wb0 = _mm256_loadu_si256((const __m256i *)(pj + 4 * NI_Q8G_NR));
            const __m256i wb1 = _mm256_loadu_si256((const __m256i *)(pj + 4 * NI_Q8G_NR + 32));
            for (int t = 0; t < MR; t++) {
                int32_t xa4, xb4;
                memcpy(&xa4, xg + t * ldq + 4 * j, 4);
                memcpy(&xb4, xg + t * ldq + 4 * j + 4, 4);
                const __m256i xa = _mm256_set1_epi32(xa4), xb = _mm256_set1_epi32(xb4);
                a[t][0] = Q8G_DOT2(a[t][0], wa0, xa, wb0, xb);
                a[t][1] = Q8G_DOT2(a[t][1], wa1, xa, wb1, xb);
            }
        }
        const __m256 s0 = _mm256_loadu_ps(ps + NI_Q8G_NR * g), s1 = _mm256_loadu_ps(ps + NI_Q8G_NR * g + 8);
        for (int t = 0; t < MR; t++) {
            const __m256i o = _mm256_set1_epi32(xoff[t * ldo + g]);
            const __m256 sx = _mm256_set1_ps(xs[t * lds + g * sstep]);
            f[t][0] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(a[t][0], o)), sx), s0, f[t][0]);
            f[t][1] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(a[t][1], o)), sx), s1, f[t][1]);
        }
    }
    for (int t = 0; t < MR; t++) {
        float r[16], *yt = y + t * ldy;
        _mm256_storeu_ps(r, f[t][0]);
        _mm256_storeu_ps(r + 8, f[t][1]);
        for (int i = 0; i < nr; i++) yt[i] = acc ? yt[i] + r[i] : r[i];
    }
}

/* All T tokens against one packed panel of nr ≤ NI_Q8G_NR rows, one
 * 16-row half at a time (as ni_q8_gemm_vnni). */
Q8G_ATTR void Q8G_N(ni_q8_gemm)(const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
                                int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff,
                                int64_t ldo, int T, float *y, int64_t ldy, int acc) {
    for (int h = 0; h < 2 && 16 * h < nr; h++) {
        const int nh = nr - 16 * h < 16 ? nr - 16 * h : 16;
        const uint8_t *ph = pw + 64 * h; /* rows 16h … 16h + 15 of every k-quad */
        const float *sh = ps + 16 * h;
        int t = 0;
        for (; t + 2 <= T; t += 2)
            Q8G_N(q8g_tile)(2, ph, sh, ngroups, gk, nh, xq + t * ldq, ldq, xs + t * lds, lds, sstep, xoff + t * ldo,
                            ldo, y + t * ldy + 16 * h, ldy, acc);
        if (t < T)
            Q8G_N(q8g_tile)(1, ph, sh, ngroups, gk, nh, xq + t * ldq, ldq, xs + t * lds, lds, sstep, xoff + t * ldo,
                            ldo, y + t * ldy + 16 * h, ldy, acc);
    }
}
