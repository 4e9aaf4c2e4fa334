/* Internal helpers of the CPU kernels: context, thread pool, scratch, SIMD
 * primitives with a scalar and an AVX2+FMA implementation. */
#ifndef NI_CPU_H
#define NI_CPU_H

#include "../ninfer_ops.h"
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <xmmintrin.h>

#define NI_MAX_THREADS 256

typedef void (*ni_task_fn)(void *arg, int task, int tid);

typedef struct {
    float *p;
    int64_t cap; /* floats */
} ni_scratch;

/* One thread's share of an op's tasks: [next, end), next taken by atomic
 * increment, by its owner first and by the other threads once their own
 * share is done. A cache line each, so a thread taking its own tasks does
 * not pull a line the others write. */
typedef struct {
    int next; /* atomic */
    int end;
} __attribute__((aligned(64))) ni_task_range;

/* The pool. Fields that different threads write sit on separate cache
 * lines (pool.c: with one shared task counter beside the job fields, every
 * task taken moved that line between the cores). Allocated 64-byte
 * aligned (ni_ctx_new). */
struct ni_ctx {
    int threads, isa;
    int64_t serial_work; /* below this estimated work an op runs on the caller */
    pthread_t th[NI_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t start_cv;
    int stop;        /* atomic */
    int sleepers;    /* atomic: helpers waiting on start_cv */
    int64_t spin_ns; /* how long an idle helper (or the waiting caller) spins */
    /* the job: written by the caller once per ni_parallel, then only read */
    uint64_t gen __attribute__((aligned(64))); /* atomic: job generation, bumped per ni_parallel */
    ni_task_fn fn;
    void *arg;
    int ntasks;
    int active __attribute__((aligned(64))); /* atomic: helpers still running the current job */
    ni_task_range range[NI_MAX_THREADS];     /* each thread's share of the job's tasks */
    ni_scratch scratch[NI_MAX_THREADS];
    ni_scratch shared; /* one op's cross-task buffer (e.g. split-KV partials) */
};

/* Runs fn(arg, task, tid) for task in [0, ntasks) on the pool. `work` is a
 * rough element-operation count: below NI_SERIAL_WORK the tasks run on the
 * caller (waking the pool costs more than the op). */
#define NI_SERIAL_WORK 32768
/* Default spin of an idle helper before it sleeps (pool.c). */
#define NI_SPIN_NS 200000
void ni_parallel(ni_ctx *c, int ntasks, ni_task_fn fn, void *arg, int64_t work);
/* Per-thread scratch of at least n floats (64-byte aligned). */
float *ni_tmp(ni_ctx *c, int tid, int64_t n);
/* Scratch shared by all tasks of one op, at least n floats. Call it before
 * ni_parallel. */
float *ni_shared(ni_ctx *c, int64_t n);

/* SIMD primitives, dispatched on isa. */
float ni_dot(int isa, const float *a, const float *b, int64_t n);
/* out[j] = dot(w, x_j) for 4 vectors x_j at x + j*ldx. */
void ni_dot4(int isa, const float *w, const float *x, int64_t ldx, int64_t n, float *out);
void ni_axpy(int isa, float a, const float *x, float *y, int64_t n); /* y += a·x */
/* m axpys in order, y += a[j]·X[j] for j = 0 … m−1 (row j at X + j·ldx),
 * bit-identical to m ni_axpy calls, with y held in registers across them. */
void ni_axpy_rows(int isa, const float *a, int m, const float *X, int64_t ldx, float *y, int64_t n);
void ni_scal(int isa, float a, float *y, int64_t n);                  /* y *= a */
/* The two row passes of a gated delta-rule step over one head's state S
 * [dk][dv] (delta.c), each one sweep of S with its vector result in
 * registers:
 *   ni_gdn_decay_kv:  for each row i in order: S_i ← decay·S_i, then
 *                     kv += k[i]·S_i (kv starts at 0; so kv = Sᵀk);
 *   ni_gdn_update_o:  for each row i in order: S_i += k[i]·δ, then
 *                     o += q[i]·S_i (o starts at 0; so o = Sᵀq).
 * Per element the same operations in the same order as ni_scal / ni_axpy
 * row by row (bit-identical to them at every ISA level). */
void ni_gdn_decay_kv(int isa, float *S, int dk, int64_t dv, float decay, const float *k, float *kv);
/* The row-by-row reference of both passes (the scalar level's bodies; a
 * pass runs when its output, kv or o, is not NULL). */
void ni_gdn_step_rows_ref(int isa, float *S, int dk, int64_t dv, float decay, const float *k, const float *delta,
                          const float *q, float *kv, float *o);
void ni_gdn_update_o(int isa, float *S, int dk, int64_t dv, const float *k, const float *delta, const float *q,
                     float *o);
/* y[i] = silu(x[i]) = x[i] / (1 + exp(−x[i])); x and y may alias. AVX2 and
 * up use a polynomial exp of about 1 ulp (avx2.c exp256), scalar expf. */
void ni_silu_vec(int isa, const float *x, float *y, int64_t n);
float ni_sumsq(int isa, const float *x, int64_t n);
float ni_dot_bf16(int isa, const uint16_t *w, const float *x, int64_t n);
void ni_bf16_to_f32_row(int isa, const uint16_t *w, float *out, int64_t n);

/* AVX2 bodies (avx2.c). */
float ni_dot_avx2(const float *a, const float *b, int64_t n);
void ni_dot4_avx2(const float *w, const float *x, int64_t ldx, int64_t n, float *out);
void ni_axpy_avx2(float a, const float *x, float *y, int64_t n);
void ni_axpy_rows_avx2(const float *a, int m, const float *X, int64_t ldx, float *y, int64_t n);
void ni_scal_avx2(float a, float *y, int64_t n);
void ni_gdn_decay_kv_avx2(float *S, int dk, int64_t dv, float decay, const float *k, float *kv);
void ni_gdn_update_o_avx2(float *S, int dk, int64_t dv, const float *k, const float *delta, const float *q, float *o);
void ni_silu_avx2(const float *x, float *y, int64_t n);
float ni_sumsq_avx2(const float *x, int64_t n);
float ni_dot_bf16_avx2(const uint16_t *w, const float *x, int64_t n);
void ni_bf16_to_f32_row_avx2(const uint16_t *w, float *out, int64_t n);
/* Decodes one whole group (64 lanes for 4/5/6 bits, 32 for 8) of a
 * row_split_k128_v1 weight: out[i] = s · code_i. */
void ni_dec_group_avx2(int bits, const uint8_t *base, const uint8_t *high, float s, float *out);
/* Σ over ngroups consecutive whole groups of one row of scale_g · code · x
 * (fused decode + dot for the T = 1 GEMV). */
float ni_dot_groups_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales, int64_t ngroups,
                         const float *x);
/* Small-T fused GEMV: out[j] for nt ∈ [1, NI_MT_TOKENS] token rows x + j·ldx,
 * each group decoded once in registers and used by all nt tokens. Token j's
 * result is bit-identical to ni_dot_groups_avx2(…, x + j·ldx) for every nt. */
#define NI_MT_TOKENS 4
void ni_dot_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                              int64_t ngroups, const float *x, int64_t ldx, int nt, float *out);
/* Likewise for a bf16 row: out[j] bit-identical to ni_dot_bf16_avx2(w, x + j·ldx, n). */
void ni_dot_bf16_multi_avx2(const uint16_t *w, const float *x, int64_t ldx, int64_t n, int nt, float *out);
/* nvfp4 / fp8-row fused GEMV for nt ∈ [1, NI_MT_TOKENS] token rows x + j·ldx
 * (avx2_fp.c); token j's result is bit-identical for every nt.
 * nvfp4: one row of ngroups = K/64 groups, codes = the row's K/2 code bytes,
 * scales = its first block-scale byte (group g's 4 bytes at scales + 512·g),
 * div = the weight divisor d_w. fp8: the row's k codes and its bf16 scale. */
void ni_dot_nvfp4_multi_avx2(const uint8_t *codes, const uint8_t *scales, int64_t ngroups, float div,
                             const float *x, int64_t ldx, int nt, float *out);
void ni_dot_fp8row_multi_avx2(const uint8_t *codes, float scale, int64_t k, const float *x, int64_t ldx, int nt,
                              float *out);

/* AVX-512 F/BW/DQ/VL bodies (avx512.c), same contracts as the AVX2 ones
 * above (results differ from them only in summation order; the GEMM equals
 * the AVX2 GEMM bit for bit). ni_dot_bf16_avx512 is the nt = 1 case of
 * ni_dot_bf16_multi_avx512. */
float ni_dot_avx512(const float *a, const float *b, int64_t n);
void ni_dot4_avx512(const float *w, const float *x, int64_t ldx, int64_t n, float *out);
void ni_axpy_avx512(float a, const float *x, float *y, int64_t n);
void ni_axpy_rows_avx512(const float *a, int m, const float *X, int64_t ldx, float *y, int64_t n);
void ni_scal_avx512(float a, float *y, int64_t n);
void ni_gdn_decay_kv_avx512(float *S, int dk, int64_t dv, float decay, const float *k, float *kv);
void ni_gdn_update_o_avx512(float *S, int dk, int64_t dv, const float *k, const float *delta, const float *q,
                            float *o);
float ni_sumsq_avx512(const float *x, int64_t n);
float ni_dot_bf16_avx512(const uint16_t *w, const float *x, int64_t n);
void ni_bf16_to_f32_row_avx512(const uint16_t *w, float *out, int64_t n);
void ni_dot_groups_multi_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                int64_t ngroups, const float *x, int64_t ldx, int nt, float *out);
/* The same on the permuted activation layout (even lanes of each 64-value
 * group first, ni_matmul_act): q4/q5/q6 only, needs BMI2. */
void ni_dot_groups_perm_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                               int64_t ngroups, const float *xp, int64_t ldx, int nt, float *out);
/* The same with the q5/q6 high bits by AVX-512 VBMI (perm_high.h); needs
 * AVX512_VBMI, bit-identical to the BMI2 body. */
void ni_dot_groups_perm_vbmi(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                             int64_t ngroups, const float *xp, int64_t ldx, int nt, float *out);
void ni_dot_bf16_multi_avx512(const uint16_t *w, const float *x, int64_t ldx, int64_t n, int nt, float *out);
void ni_dot_nvfp4_multi_avx512(const uint8_t *codes, const uint8_t *scales, int64_t ngroups, float div,
                               const float *x, int64_t ldx, int nt, float *out);
void ni_dot_fp8row_multi_avx512(const uint8_t *codes, float scale, int64_t k, const float *x, int64_t ldx, int nt,
                                float *out);

/* NI_ACT_Q8 (int8 activations): quantization of one blk-value block (blk =
 * 32 for q8 weights, 64 for q4–q6: the weight group) of n ≤ blk values
 * (weights.c, the scalar reference; lanes ≥ n get code 0; its scale written
 * blk/32 times), of a whole row into kpad codes and kpad/32 scales (AVX2,
 * bit-identical to the reference), and the fused small-T GEMV of one q4–q8 row against nt ≤
 * NI_MT_TOKENS quantized token rows (codes xq + j·ldq, block scales expanded
 * to 8 lanes each at xe + j·lde, xe[8b + i] = s_x[b]):
 * AVX2 maddubs/madd, AVX-512 BW maddubs/madd, AVX-512 VNNI dpbusd. */
/* Test hook: enables (when the CPU has it) or disables the VNNI bodies;
 * returns the previous setting. Not safe while a matmul runs. */
int ni_cpu_set_vnni(int on);
void ni_q8_quantize_block(const float *x, int n, int blk, int8_t *q, float *s);
void ni_q8_quantize_avx2(const float *x, int64_t k, int64_t kpad, int blk, int8_t *q, float *s);
void ni_q8_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                             int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde, int nt,
                             float *out);
void ni_q8_groups_multi_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                               int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde, int nt,
                               float *out);
/* The same on the permuted layout (weights.c q8_perm): q4 at AVX2, q4/q5/q6
 * at AVX-512 (BMI2 pext for the q5/q6 high bits). */
void ni_q8p_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                              int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde, int nt,
                              float *out);
void ni_q8p_groups_multi_avx512(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde, int nt,
                                float *out);
/* AVX2 on offset-binary codes (avx2.c): q4 on the permuted layout, q5 on
 * the s-order one (dec_s5), q6 on the r-order one (dec_r6), each group's
 * int32 lanes started from the token's offset lanes xo + j·ldo + 8g
 * (ni_q8u_offsets_avx2: −2^(bits−1)·Σ of the 8 activation codes of group g,
 * as stored, at each lane's positions in its two blocks). */
void ni_q8u_offsets_avx2(int bits, const int8_t *xq, int64_t ngroups, int32_t *xo);
/* rb.n consecutive weight rows (the planes of row r at base + r·rb.base,
 * high + r·rb.high, scales + r·rb.scales) in one call, each row computed
 * exactly as alone: out[r·NI_MT_TOKENS + j]. One call per block of rows
 * instead of per row (the per-call dispatch and the caller's loop were
 * ~6 % of decode samples). The rows pf.rows further on are prefetched one
 * line per 64 bytes of each plane consumed (pf.rows = 0: none). */
typedef struct {
    int n;
    int64_t base, high, scales; /* plane strides of one row, bytes */
} ni_row_block;
/* A multi-row GEMV's prefetch: the rows `rows` further on (0: none), into
 * L2 only (l2: PREFETCHT1) or into L1 (PREFETCHT0); weights.c mm_pf. */
typedef struct {
    int64_t rows;
    int l2;
} ni_pf;
/* The offset-binary bodies take token j's block scales unexpanded (xs +
 * j·ldx, q8_quantize's: group g's at xs[2g]) and scale each group by the
 * one fp32 product s_w·s_x. */
void ni_q8u_groups_multi_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                              ni_row_block rb, int64_t ngroups, const int8_t *xq, int64_t ldq, const int32_t *xo,
                              int64_t ldo, const float *xs, int64_t ldx, int nt, ni_pf pf, float *out);
/* The same with AVX-VNNI dpbusd (ymm) for maddubs + madd: bit-identical
 * (the same int32 lanes); on AVX2-level CPUs with AVX-VNNI (ni_cpu_has_avxvnni). */
void ni_q8u_groups_multi_avxvnni(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                 ni_row_block rb, int64_t ngroups, const int8_t *xq, int64_t ldq, const int32_t *xo,
                                 int64_t ldo, const float *xs, int64_t ldx, int nt, ni_pf pf, float *out);
/* The VNNI bodies take the codes unsigned and start each group's dot
 * products from the token's offset lanes xo + j·ldo + 16g
 * (ni_q8p_offsets_vnni: −2^(bits−1)·Σ of each 4 activation codes of group
 * g); _vbmi takes the q5/q6 high bits by AVX-512 VBMI (perm_high.h). */
void ni_q8p_offsets_vnni(int bits, const int8_t *xq, int64_t ngroups, int32_t *xo);
/* q8 weights (natural layout) on VNNI, offset-binary codes from the offset
 * lanes of ni_q8p_offsets_vnni(8, …) (xo + j·ldo + 16s for the step s of
 * groups 2s, 2s + 1); bit-identical to ni_q8_groups_multi_vnni(8, …). The
 * row pf.rows further on (row strides rb.base, rb.scales) is prefetched one
 * line per 64 bytes consumed (pf.rows = 0: none). */
void ni_q8w_multi_vnni(const uint8_t *base, const uint8_t *scales, int64_t ngroups, const int8_t *xq, int64_t ldq,
                       const int32_t *xo, int64_t ldo, const float *xe, int64_t lde, int nt, ni_pf pf,
                       ni_row_block rb, float *out);
/* (These two, like the AVX2 offset-binary bodies, take token j's block
 * scales unexpanded, xs + j·ldx, and scale each group by the one fp32
 * product s_w·s_x.) */
void ni_q8p_groups_multi_vnni(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                              ni_row_block rb, int64_t ngroups, const int8_t *xq, int64_t ldq, const int32_t *xo,
                              int64_t ldo, const float *xs, int64_t ldx, int nt, ni_pf pf, float *out);
void ni_q8p_groups_multi_vnni_vbmi(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                                   ni_row_block rb, int64_t ngroups, const int8_t *xq, int64_t ldq,
                                   const int32_t *xo, int64_t ldo, const float *xs, int64_t ldx, int nt, ni_pf pf,
                                   float *out);
/* The offsets of the cache lines of [len·s, len·(s + 1)) that start at a
 * multiple of 64, in increasing order, each passed to EMIT: the multi-row
 * GEMVs prefetch with consecutive steps s (the bytes of each plane one pass
 * consumes, offset to the rows pf further on), so every line of those rows
 * is fetched once, in order, ahead of use (TestPrefetchOffsetsEachLineOnce).
 * len is a compile-time constant at every call: a multiple of 64 gives
 * len/64 offsets and no branch, a len below 64 at most one (the range holds
 * a multiple of 64 iff (to − 1) rounded down to one is ≥ from); the loop
 * serves the rest. */
#define NI_PREFETCH_OFFSETS(S, LEN, EMIT)                                                                             \
    do {                                                                                                              \
        const int64_t from_ = (LEN) * (S), to_ = from_ + (LEN);                                                       \
        if ((LEN) % 64 == 0) {                                                                                        \
            for (int64_t k_ = 0; k_ < (LEN); k_ += 64) EMIT(from_ + k_);                                              \
        } else if ((LEN) < 64) {                                                                                      \
            const int64_t o_ = (to_ - 1) & ~(int64_t)63;                                                              \
            if (o_ >= from_) EMIT(o_);                                                                                \
        } else {                                                                                                      \
            for (int64_t o_ = (from_ + 63) & ~(int64_t)63; o_ < to_; o_ += 64) EMIT(o_);                              \
        }                                                                                                             \
    } while (0)

static inline __attribute__((always_inline)) void ni_prefetch_line(const uint8_t *p, int l2) {
    if (l2) _mm_prefetch((const char *)p, _MM_HINT_T1);
    else _mm_prefetch((const char *)p, _MM_HINT_T0);
}
/* Prefetches p's lines of step s (NI_PREFETCH_OFFSETS), into L2 only (l2) or L1. */
static inline __attribute__((always_inline)) void ni_prefetch_range(const uint8_t *p, int64_t s, int64_t len,
                                                                    int l2) {
#define NI_PF_EMIT(o) ni_prefetch_line(p + (o), l2)
    NI_PREFETCH_OFFSETS(s, len, NI_PF_EMIT);
#undef NI_PF_EMIT
}

/* One step of a multi-row GEMV's prefetch: nr rows consume bb base bytes,
 * hb high-bit bytes (0: none) and sb scale bytes each per step s, so the
 * step prefetches [nr·b·s, nr·b·(s + 1)) of each plane from pb, ph, ps (the
 * planes pf.rows rows further on); nothing when pf.rows is 0. */
static inline __attribute__((always_inline)) void ni_prefetch_step(ni_pf pf, int nr, int64_t s, const uint8_t *pb,
                                                                   int64_t bb, const uint8_t *ph, int64_t hb,
                                                                   const uint8_t *ps, int64_t sb) {
    if (!pf.rows) return;
    ni_prefetch_range(pb, s, nr * bb, pf.l2);
    if (hb) ni_prefetch_range(ph, s, nr * hb, pf.l2);
    ni_prefetch_range(ps, s, nr * sb, pf.l2);
}

/* rb.n rows of ni_q8u_groups_multi_{avx2,avxvnni} at one token (nt = 1),
 * each row's value bit-identical to it, 4 rows per pass with the rows pf
 * rows further on prefetched (ni_q8p_rows_vnni_vbmi's scheme):
 * out[r·NI_MT_TOKENS]. */
void ni_q8u_rows_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales, ni_row_block rb,
                      int64_t ngroups, const int8_t *xq, const int32_t *xo, const float *xs, ni_pf pf, float *out);
void ni_q8u_rows_avxvnni(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales, ni_row_block rb,
                         int64_t ngroups, const int8_t *xq, const int32_t *xo, const float *xs, ni_pf pf,
                         float *out);

/* rb.n q8 rows of ni_q8_groups_multi_avx2(8, …) at one token (nt = 1),
 * each row's value bit-identical to it, 4 rows per pass, the rows pf rows
 * further on prefetched: out[r]. */
void ni_q8_rows_avx2(const uint8_t *base, const uint8_t *scales, ni_row_block rb, int64_t ngroups, const int8_t *xq,
                     const float *xs, ni_pf pf, float *out);
/* rb.n q8 rows of ni_q8w_multi_vnni at one token (nt = 1), each row's value
 * bit-identical to it, 4 rows per pass with the rows pf rows further on
 * prefetched (ni_q8p_rows_vnni_vbmi's scheme): out[r]. */
void ni_q8w_rows_vnni(const uint8_t *base, const uint8_t *scales, ni_row_block rb, int64_t ngroups, const int8_t *xq,
                      const int32_t *xo, const float *xs, ni_pf pf, float *out);
/* rb.n q8 rows of ni_dot_groups_multi_avx512 (fp32 token x, nt = 1), each
 * row's value bit-identical to it, 4 rows per pass with the rows pf rows
 * further on prefetched (ni_q8p_rows_vnni_vbmi's scheme): out[r]. */
void ni_dot_q8_rows_avx512(const uint8_t *base, const uint8_t *scales, ni_row_block rb, int64_t ngroups,
                           const float *x, ni_pf pf, float *out);
/* rb.n rows of ni_q8p_groups_multi_vnni_vbmi (q4: of
 * ni_q8p_groups_multi_vnni, the same for q4) at one token (nt = 1), each
 * row's value bit-identical to it (needs AVX512_VBMI for every format),
 * with the token's xq, xo in pair order (weights.c q8p_pair_order: two
 * groups a step, avx2.c q8pr_vnni_vbmi) and its block scales xs unexpanded: up
 * to 4 rows share each group's loads of the token, and the rows pf rows
 * further on (pf = 0: none; the caller keeps them inside the weight) are
 * prefetched as the planes are consumed. out[r·NI_MT_TOKENS]. */
void ni_q8p_rows_vnni_vbmi(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                           ni_row_block rb, int64_t ngroups, const int8_t *xq, const int32_t *xo, const float *xs,
                           ni_pf pf, float *out);
void ni_q8_groups_multi_vnni(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                             int64_t ngroups, const int8_t *xq, int64_t ldq, const float *xe, int64_t lde, int nt,
                             float *out);

/* Large-T GEMM (avx2_gemm.c): Y tiles of NI_GEMM_MR tokens × NI_GEMM_NR
 * columns from token rows read in place and a packed weight panel wp[kc][NR]
 * (32-byte aligned). weights.c (mm_gemm) blocks K by NI_GEMM_KC, decodes a
 * task's weights NI_GEMM_NC rows at a time and sweeps NI_GEMM_MC-token
 * blocks over each panel. */
/* The int8 prefill GEMM (gemm_q8.c): rows per packed panel, tokens per
 * register tile. */
#define NI_Q8G_NR 32
#define NI_Q8G_MR 6
void ni_q8_pack_panel_avx2(int bits, const uint8_t *base, const uint8_t *high, const uint8_t *scales,
                           ni_row_block rb, int64_t ngroups, uint8_t *pw, float *ps);
/* One int8 prefill GEMM kernel (gemm_q8.c): all T tokens against one packed panel. */
typedef void (*ni_q8_gemm_fn)(const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
                              int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff, int64_t ldo,
                              int T, float *y, int64_t ldy, int acc);
void ni_q8_gemm_vnni(const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
                     int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff, int64_t ldo, int T,
                     float *y, int64_t ldy, int acc);
void ni_q8_gemm_avxvnni(const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
                        int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff, int64_t ldo, int T,
                        float *y, int64_t ldy, int acc);
void ni_q8_gemm_avx2(const uint8_t *pw, const float *ps, int64_t ngroups, int gk, int nr, const int8_t *xq,
                     int64_t ldq, const float *xs, int64_t lds, int sstep, const int32_t *xoff, int64_t ldo, int T,
                     float *y, int64_t ldy, int acc);
#define NI_GEMM_MR 6
#define NI_GEMM_NR 16
#define NI_GEMM_KC 256
#define NI_GEMM_NC 128
#define NI_GEMM_MC 96
/* dst[k·NR + r] = src[r·lds + k] for r < nr (columns nr..NR−1 zero), k < kc. */
void ni_gemm_pack_w_avx2(const float *src, int64_t lds, int nr, int64_t kc, float *dst);
/* c[i·ldc + j] (+ c when acc) = Σ_k x[i·ldx + k] · wp[k·NR + j] for i < mr ≤ MR,
 * j < nr ≤ NR, k < kc, each sum in sub-blocks of ks ∈ {8, 16, 32, 64} k steps
 * added in order; ni_gemm_ks(K) picks ks (≤ K/8, so no FMA chain is longer
 * than the old route's 8-lane dot). */
void ni_gemm_6x16_avx2(const float *x, int64_t ldx, const float *wp, int64_t kc, int ks, float *c, int64_t ldc,
                       int mr, int nr, int acc);
int ni_gemm_ks(int64_t k);
/* AVX-512: the 6×16 tile of two adjacent panels at once, wp0 (columns
 * 0..15) and wp1 (16..31), nr ≤ 32; each output computed exactly as
 * ni_gemm_6x16_avx2 computes it. */
void ni_gemm_6x32_avx512(const float *x, int64_t ldx, const float *wp0, const float *wp1, int64_t kc, int ks,
                         float *c, int64_t ldc, int mr, int nr, int acc);

/* A backend buffer of n bytes, zeroed (mem.c): 64-byte aligned; from 2 MiB
 * on 2 MiB-aligned and advised MADV_HUGEPAGE (NINFER_CPU_HUGEPAGES=0: not).
 * NULL on failure; free() releases it. */
void *ni_alloc(int64_t n);

/* Flush-to-zero for the calling thread until ni_ftz_end (MXCSR FTZ | DAZ:
 * subnormal fp32 inputs read as 0, subnormal results written as 0): ops
 * whose values decay into the subnormal range (the GDN decays, softmax
 * weights) run their tasks this way, since each subnormal operand or result
 * costs an FMA a microcode assist on Intel CPUs (GDN prefill at 45 % of
 * pp512 on a Xeon, 2026-12-07). The error is below 2⁻¹²⁶ absolute per
 * operation. Restores the caller's mode: nothing outside the task sees it. */
static inline unsigned ni_ftz_begin(void) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);
    return csr;
}
static inline void ni_ftz_end(unsigned csr) { _mm_setcsr(csr); }

/* Small dense products (matprod.c): C[m,n] = (acc ? C : 0) + A[m,k]·op(B),
 * op(B) = B[k,n] (row stride ldb) or, with bt, Bᵀ for B[n,k]. op(B) is
 * packed first into ni_matprod_pack_floats(n, k) floats (a multiple of 16;
 * the pack 32-byte aligned),
 * 16-column panels [k][16], zero-padded; one pack serves any number of
 * products. Flags: NI_MP_LOWER_K — A is lower triangular beyond its
 * diagonal tile: row tile [i0, i0 + 6) sums only k < i0 + 6;
 * NI_MP_LOWER_OUT — only outputs j ≤ i are wanted (those above the diagonal
 * are unspecified). Every output is one sum of its k terms (FMA sub-blocks
 * of ni_gemm_ks(k) added in order), added to C when acc. */
#define NI_MP_LOWER_K 1
#define NI_MP_LOWER_OUT 2
int64_t ni_matprod_pack_floats(int n, int k);
void ni_matprod_pack(int n, int k, const float *B, int64_t ldb, int bt, float *pack);
void ni_matprod(int isa, int m, int n, int k, const float *A, int64_t lda, const float *pack, float *C, int64_t ldc,
                int acc, int flags);

static inline float ni_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t ni_to_bf16(float f) { /* RNE */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float ni_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float ni_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float *ni_row(ni_rows r, int64_t t, int64_t h) { return r.p + t * r.ld + h * r.hs; }

#endif
