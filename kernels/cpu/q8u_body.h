/* The offset-binary q4–q6 int8 GEMV bodies of the AVX2 level (avx2.c),
 * included once per integer dot product: Q8U_ATTR is the function target,
 * Q8U_N(name) the variant's name for name, and Q8U_GROUP_P(u0, u1, x0, x1,
 * xo) a group's int32 lanes: xo + Σ of each lane's four products in each
 * block (u0·x0 and u1·x1), exact. Both variants compute the same int32
 * lanes and the same fp32 steps: bit-identical results. */

/* Group g of the offset-binary codes (u0 = its block 2g, u1 = block 2g + 1,
 * one activation scale: NI_ACT_Q8 quantizes q4–q6 activations in blocks of
 * 64, so token j's block scales xs[j·ldx + 2g] = xs[j·ldx + 2g + 1]) into
 * acc[j]: the group's int32 lanes Q8U_GROUP_P, one conversion and one FMA
 * by the group's combined scale s_w·s_x (one fp32 product, the same value
 * in every body of this file). */
Q8U_ATTR static inline __attribute__((always_inline)) void Q8U_N(q8u_group_nt)(__m256i u0, __m256i u1, __m256 sw,
                                                                const int8_t *xq, int64_t ldq, const int32_t *xo,
                                                                int64_t ldo, const float *xs, int64_t ldx, int64_t g,
                                                                const int NT, __m256 *acc) {
    for (int j = 0; j < NT; j++) {
        const int8_t *xj = xq + j * ldq + 64 * g;
        __m256i p = Q8U_GROUP_P(u0, u1, _mm256_loadu_si256((const __m256i *)xj),
                                _mm256_loadu_si256((const __m256i *)(xj + 32)),
                                _mm256_loadu_si256((const __m256i *)(xo + j * ldo + 8 * g)));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw, _mm256_broadcast_ss(xs + j * ldx + 2 * g)),
                                 acc[j]);
    }
}

Q8U_ATTR static inline __attribute__((always_inline)) void Q8U_N(q8u_groups_nt)(const int bits, const uint8_t *base,
                                                                 const uint8_t *high, const uint8_t *scales,
                                                                 int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                                 const int32_t *xo, int64_t ldo, const float *xs,
                                                                 int64_t ldx, const int NT, ni_pf pf, ni_row_block rb,
                                                                 float *out) {
    const int64_t hb = bits == 5 ? 8 : 16;
    const uint8_t *pb = base + pf.rows * rb.base, *ph = high + pf.rows * rb.high, *ps = scales + pf.rows * rb.scales;
    __m256 acc[NI_MT_MAX];
    for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
#define NI_Q8U_GROUP(G, SW)                                                                                           \
    {                                                                                                                 \
        ni_prefetch_step(pf, 1, G, pb, 32, ph, hb, ps, 2);                                                            \
        __m256i u[2];                                                                                                 \
        if (bits == 6) dec_r6(base + 32 * (G), high + hb * (G), u);                                                   \
        else dec_s5(base + 32 * (G), high + hb * (G), u);                                                             \
        Q8U_N(q8u_group_nt)(u[0], u[1], SW, xq, ldq, xo, ldo, xs, ldx, G, NT, acc);                                   \
    }
    NI_Q8U_SCALES8(NI_Q8U_GROUP)
#undef NI_Q8U_GROUP
    for (int j = 0; j < NT; j++) out[j] = hsum(acc[j]);
}

/* q4, permuted layout (q8p_q4_nt below): the low nibbles of a group's 32
 * base bytes are its even lanes (activation chunk 2g), the high nibbles its
 * odd lanes (chunk 2g + 1); both nibbles' top bits flipped by one xor
 * before the split. */
Q8U_ATTR static inline __attribute__((always_inline)) void Q8U_N(q8pu_q4_nt)(const uint8_t *base, const uint8_t *scales,
                                                              int64_t ngroups, const int8_t *xq, int64_t ldq,
                                                              const int32_t *xo, int64_t ldo, const float *xs,
                                                              int64_t ldx, const int NT, ni_pf pf, ni_row_block rb,
                                                              float *out) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), s88 = _mm256_set1_epi8((char)0x88);
    const uint8_t *pb = base + pf.rows * rb.base, *ps = scales + pf.rows * rb.scales;
    __m256 acc[NI_MT_MAX];
    for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
#define NI_Q8U_GROUP(G, SW)                                                                                           \
    {                                                                                                                 \
        ni_prefetch_step(pf, 1, G, pb, 32, NULL, 0, ps, 2);                                                           \
        __m256i b = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(base + 32 * (G))), s88);                    \
        Q8U_N(q8u_group_nt)(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_srli_epi16(b, 4), m4), SW, xq,           \
                            ldq, xo, ldo, xs, ldx, G, NT, acc);                                                       \
    }
    NI_Q8U_SCALES8(NI_Q8U_GROUP)
#undef NI_Q8U_GROUP
    for (int j = 0; j < NT; j++) out[j] = hsum(acc[j]);
}

/* NR ≤ NI_Q8UR_ROWS consecutive rows of q8u_groups_nt (q5/q6) or
 * q8pu_q4_nt (q4) at one token, each row computed exactly as alone (the same
 * decode, int32 lanes, conversion, combined scale s_w·s_x and one FMA chain
 * a row): the token's codes and offset lanes are loaded once a group for
 * all NR rows; the combined scales of 8 groups are formed once for each row
 * (one conversion, one product) and broadcast from memory (a load, not a
 * shuffle: at AVX2's 16 registers the 4 rows' scale vectors spilled), and
 * the NR rows pf rows further on are prefetched, one cache line per 64
 * bytes of each plane consumed (consecutive rows are one contiguous range of
 * each plane; pf = 0: no prefetch). The 8-group loop is not unrolled:
 * unrolled, GCC kept the rows' pointers and scale vectors on the stack
 * (docs/PERF.md "Thirteenth session"). */
#ifndef NI_Q8UR_ROWS
#define NI_Q8UR_ROWS 4
#endif
Q8U_ATTR static inline __attribute__((always_inline)) void Q8U_N(q8ur)(const int bits, const int NR, const uint8_t *base,
                                                        const uint8_t *high, const uint8_t *scales, ni_row_block rb,
                                                        int64_t ngroups, const int8_t *xq, const int32_t *xo,
                                                        const float *xs, ni_pf pf, float *out) {
    const int64_t hb = bits == 5 ? 8 : bits == 6 ? 16 : 0;
    const __m256i m4 = _mm256_set1_epi8(0x0f), s88 = _mm256_set1_epi8((char)0x88);
    const uint8_t *pb = base + pf.rows * rb.base, *ph = high + pf.rows * rb.high, *ps = scales + pf.rows * rb.scales;
    __m256 acc[NI_Q8UR_ROWS];
    float csw[NI_Q8UR_ROWS * 8] __attribute__((aligned(32))); /* row r, group g8 + i: csw[8r + i] */
    for (int r = 0; r < NR; r++) acc[r] = _mm256_setzero_ps();
#define NI_Q8UR_GROUP(G, I)                                                                                           \
    {                                                                                                                 \
        const int64_t g = (G);                                                                                        \
        ni_prefetch_step(pf, NR, g, pb, 32, ph, hb, ps, 2);                                                           \
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xq + 64 * g));                                        \
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xq + 64 * g + 32));                                   \
        const __m256i o = _mm256_loadu_si256((const __m256i *)(xo + 8 * g));                                          \
        for (int r = 0; r < NR; r++) {                                                                                \
            const uint8_t *br = base + r * rb.base + 32 * g;                                                          \
            __m256i u[2];                                                                                             \
            if (bits == 4) {                                                                                          \
                __m256i b = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)br), s88);                           \
                u[0] = _mm256_and_si256(b, m4);                                                                       \
                u[1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);                                                 \
            } else if (bits == 6)                                                                                     \
                dec_r6(br, high + r * rb.high + hb * g, u);                                                           \
            else                                                                                                      \
                dec_s5(br, high + r * rb.high + hb * g, u);                                                           \
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Q8U_GROUP_P(u[0], u[1], x0, x1, o)),                          \
                                     _mm256_broadcast_ss(csw + 8 * r + (I)), acc[r]);                                 \
        }                                                                                                             \
    }
    int64_t g8 = 0;
    for (; g8 + 8 <= ngroups; g8 += 8) {
        /* the 8 groups' activation scales: the even ones of their 16 block scales */
        const __m256 ev = _mm256_shuffle_ps(_mm256_loadu_ps(xs + 2 * g8), _mm256_loadu_ps(xs + 2 * g8 + 8), 0x88);
        const __m256 sx = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8));
        q8_csw8(csw, NR, scales, rb.scales, g8, sx);
        _Pragma("GCC unroll 1") for (int i = 0; i < 8; i++) NI_Q8UR_GROUP(g8 + i, i)
    }
    for (; g8 < ngroups; g8++) {
        for (int r = 0; r < NR; r++)
            csw[8 * r] = q8_scale1(scales + r * rb.scales, g8) * xs[2 * g8];
        NI_Q8UR_GROUP(g8, 0)
    }
#undef NI_Q8UR_GROUP
    for (int r = 0; r < NR; r++) out[r * NI_MT_TOKENS] = hsum(acc[r]);
}

#define NI_Q8UR(B, R)                                                                                                 \
    Q8U_N(q8ur)(B, R, base + r0 * rb.base, high + r0 * rb.high, scales + r0 * rb.scales, rb, ngroups, xq, xo, xs, pf,  \
                out + r0 * NI_MT_TOKENS)
#define NI_Q8UR_NR(B)                                                                                                 \
    switch (nr) {                                                                                                     \
    case 1: NI_Q8UR(B, 1); break;                                                                                     \
    case 2: NI_Q8UR(B, 2); break;                                                                                     \
    case 3: NI_Q8UR(B, 3); break;                                                                                     \
    default: NI_Q8UR(B, 4); break;                                                                                    \
    }
Q8U_ATTR void Q8U_N(ni_q8u_rows)(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                 ni_row_block rb, int64_t ngroups, const int8_t *xq, const int32_t *xo,
                                 const float *xs, ni_pf pf, float *out) {
    for (int r0 = 0; r0 < rb.n; r0 += NI_Q8UR_ROWS) {
        const int nr = rb.n - r0 < NI_Q8UR_ROWS ? rb.n - r0 : NI_Q8UR_ROWS;
        switch (bits) {
        case 4: NI_Q8UR_NR(4); break;
        case 5: NI_Q8UR_NR(5); break;
        default: NI_Q8UR_NR(6); break;
        }
    }
}
#undef NI_Q8UR
#undef NI_Q8UR_NR

Q8U_ATTR void Q8U_N(ni_q8u_groups_multi)(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                   ni_row_block rb, int64_t ngroups, const int8_t *xq, int64_t ldq,
                                   const int32_t *xo, int64_t ldo, const float *xs, int64_t ldx, int nt, ni_pf pf,
                                   float *out) {
#undef NI_Q8_NT
#define NI_Q8_NT(B, NT)                                                                                               \
    for (int r = 0; r < rb.n; r++) {                                                                                  \
        const uint8_t *br = base + r * rb.base, *hr = high + r * rb.high, *sr = scales + r * rb.scales;              \
        if ((B) == 4)                                                                                                 \
            Q8U_N(q8pu_q4_nt)(br, sr, ngroups, xq, ldq, xo, ldo, xs, ldx, NT, pf, rb, out + r * NI_MT_TOKENS);       \
        else                                                                                                          \
            Q8U_N(q8u_groups_nt)(B, br, hr, sr, ngroups, xq, ldq, xo, ldo, xs, ldx, NT, pf, rb,                      \
                                 out + r * NI_MT_TOKENS);                                                             \
    }
    switch (bits) {
    case 4: NI_Q8_BITS(4);
    case 5: NI_Q8_BITS(5);
    default: NI_Q8_BITS(6);
    }
}
