/*
 * ninfer_ops.h — the contract of every ninfer compute op.
 *
 * Each op is documented with its formula. All activations are fp32 and are
 * described by ni_rows: element (t, h, d) lives at p[t*ld + h*hs + d].
 * Accumulation is fp32 throughout. Every backend (CPU now, CUDA later)
 * implements exactly these formulas; the Go package pkg/backend is the only
 * caller. Control values (positions, token ids, state slot indices) are
 * passed as pointers into backend buffers so that a decode step can be
 * captured as one graph and replayed with new control values.
 *
 * Notation: T tokens, H heads, D per-head width, N output rows, K reduction.
 * silu(x) = x / (1 + e^-x), sigmoid(x) = 1 / (1 + e^-x),
 * softplus(x) = log(1 + e^x) (x for x > 20).
 */
#ifndef NINFER_OPS_H
#define NINFER_OPS_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- execution context ------------------------------------------------ */

/* Ordered levels: each includes the one below (a kernel without a body at a
 * level runs the next lower one). */
enum { NI_ISA_SCALAR = 0, NI_ISA_AVX2 = 1, NI_ISA_AVX512 = 2 };

typedef struct ni_ctx ni_ctx;

/* Creates a context with a persistent pool of `threads` workers (≥ 1,
 * including the caller) running instruction set `isa`. Returns NULL on
 * failure. */
ni_ctx *ni_ctx_new(int threads, int isa);
void ni_ctx_free(ni_ctx *c);
/* Ops whose estimated work is below `work` element-operations run on the
 * calling thread only (default NI_SERIAL_WORK; 0 = always use the pool). */
void ni_ctx_set_serial_work(ni_ctx *c, int64_t work);
/* How long an idle pool helper spins for the next op before it sleeps, and
 * how long the caller spins for the helpers before it yields, in ns (default
 * NI_SPIN_NS = 200 µs when the pool has no more threads than the CPUs the
 * process may use, else 0; 0 = sleep at once, as a condition-variable pool). */
void ni_ctx_set_spin(ni_ctx *c, int64_t ns);
/* Runs one empty op of ntasks tasks on the pool (the fork/join cost of an
 * op) and returns how many tasks ran (= ntasks). */
int ni_ctx_roundtrip(ni_ctx *c, int ntasks);
/* Best instruction set this CPU supports (runtime dispatch). */
int ni_cpu_best_isa(void);
/* Bytes of per-thread scratch the context holds (grows on first use of a
 * shape, stable afterwards). */
int64_t ni_ctx_scratch_bytes(const ni_ctx *c);

/* ---- tensors ------------------------------------------------------------ */

typedef struct {
    float *p;
    int32_t t, h, d; /* tokens, heads, per-head width */
    int64_t ld, hs;  /* element strides between tokens and between heads */
} ni_rows;

/* Weight formats (pkg/format): */
enum {
    NI_W_F32 = 0,   /* fp32 contiguous [N,K] */
    NI_W_BF16 = 1,  /* bf16 contiguous [N,K] */
    NI_W_Q4 = 2,    /* q4_g64_fp16  row_split_k128_v1: w = f16 scale · code, code ∈ [-8,7] */
    NI_W_Q5 = 3,    /* q5_g64_fp16  code ∈ [-16,15], 5th bit in the high plane */
    NI_W_Q6 = 4,    /* q6_g64_fp16  code ∈ [-32,31], bits 4..5 in the high plane */
    NI_W_Q8 = 5,    /* q8_g32_fp16  int8 code ∈ [-127,127] */
    NI_W_NVFP4 = 6, /* block_scale_k16_m128x4_v1: w = e2m1(c) · e4m3(s[n,k/16]) / d_w */
    NI_W_FP8ROW = 7 /* row_scale_v1: w = e4m3(c) · bf16(s[n]) */
};

typedef struct {
    int32_t fmt;
    int64_t n, k;
    const uint8_t *data;
    /* geometry, filled by ni_weight_init */
    int64_t bytes, kpad, gpr, group, base_bytes, high_bytes, bits;
    int64_t high_off, scale_off, div_off;
    float inv_div;
} ni_weight;

/* Fills the geometry of an [n,k] weight in format fmt at data. Returns 0, or
 * -1 for a bad shape/format, or -2 when `bytes` differs from the exact
 * encoded size. */
int ni_weight_init(ni_weight *w, int fmt, int64_t n, int64_t k, const void *data, int64_t bytes);

/* Rows [r0, r1) of w as a weight of their own (out): the same planes, the
 * plane offsets moved by r0 rows, so every kernel computes each of those
 * rows exactly as it does in w. For fp32, bf16 and q4–q8 weights (0);
 * -1 for other formats or a bad range. */
int ni_weight_rows(const ni_weight *w, int64_t r0, int64_t r1, ni_weight *out);

/* Decodes row r of w into out[0..k) (fp32). */
void ni_weight_decode_row(const ni_weight *w, int64_t r, float *out);

/* ---- ops ---------------------------------------------------------------- */

/* Embedding gather: out[t, :] = decode(w row ids[t]) for t < out.t.
 * Returns the number of out-of-range ids (their rows are zero-filled). */
int ni_embed(ni_ctx *c, const ni_weight *w, const int32_t *ids, ni_rows out);

/* Matmul Y[T,N] = X[T,K] · W[N,K]ᵀ (+ Y when accumulate), any weight format.
 * x: t=T, h=1, d=K; y: t=T, h=1, d=N. Three regimes: T=1 GEMV, small T
 * (≤ NI_SMALL_T: for q4–q8, bf16, nvfp4 and fp8-row on AVX2 a fused
 * multi-token GEMV that decodes each weight block once in registers for a
 * block of up to 4 tokens, bit-identical per token to the T=1 GEMV;
 * otherwise one decoded row reused across T), large T (AVX2: K-sliced,
 * register-blocked 6×16 fp32 GEMM over decoded, packed weight panels, summed
 * in sub-blocks of K/8 terms; scalar: decoded tile of rows × token blocks). */
#define NI_SMALL_T 16
void ni_matmul(ni_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int accumulate);

/* Activation precision of ni_matmul_act. */
enum { NI_ACT_F32 = 0, NI_ACT_Q8 = 1 };
/* ni_matmul with activation mode act. NI_ACT_F32 is ni_matmul. NI_ACT_Q8
 * applies to q4–q8 weights at T ≤ NI_SMALL_T, and at larger T where
 * ni_cpu_q8_gemm(isa, bits) says the int8 prefill GEMM runs (every other format,
 * and larger T elsewhere, run ni_matmul unchanged): each token row is first quantized in blocks b
 * of B values, B = the weight group (64 for q4/q5/q6, 32 for q8; columns
 * Bb .. Bb+B−1, the last block zero-padded past K):
 *   a_b = max_{k∈b} |x_k|,  s_x[b] = fl(a_b / 127),  id = s_x[b] > 0 ? fl(1 / s_x[b]) : 0,
 *   q_x[k] = clamp(rne(fl(x_k · id)), −127, 127)
 * (a non-finite value in a block makes s_x[b] = NaN), then
 *   y_n = Σ_g s_w[n,g] · s_x[g] · Σ_{k∈g} q_w[n,k] · q_x[k]
 * with the inner sums exact in int32 (any split of a group's sum into
 * exact partial sums, e.g. per 32 values, is allowed: they are scaled by
 * the same s_x) and the rest in fp32 in any order
 * (AVX2: maddubs + madd; AVX-512: BW maddubs + madd, or VNNI dpbusd when
 * the CPU has AVX512_VNNI — ni_cpu_has_vnni). The quantization is
 * bit-identical at every ISA level; results differ across levels only in
 * the fp32 summation order. */
void ni_matmul_act(ni_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int accumulate, int act);
/* 1 when NI_ACT_Q8 at T > NI_SMALL_T on weights of `bits` runs the int8
 * prefill GEMM (packed 32-row panels, gemm_q8.c): at NI_ISA_AVX512 with
 * AVX512_VNNI (6-token × 32-row tiles); at NI_ISA_AVX2 with AVX-VNNI (unless
 * NINFER_CPU_AVXVNNI=0), else for q4–q6 by maddubs (2-token × 16-row
 * tiles); never with NINFER_CPU_PREFILL=fp32 (per matmul). */
int ni_cpu_q8_gemm(int isa, int bits);
/* 1 when the NI_ISA_AVX512 level runs AVX512_VNNI (dpbusd) bodies. */
int ni_cpu_has_vnni(void);
/* 1 when the NI_ISA_AVX512 level takes the q5/q6 high bits of its permuted
 * GEMVs by AVX512_VBMI (vpmultishiftqb) instead of BMI2 pext; same codes,
 * bit-identical results. NINFER_CPU_VBMI=0 turns it off (per matmul). */
int ni_cpu_has_vbmi(void);
/* 1 on an Intel CPU: its q8 GEMV at T = 1 streams faster on int8 than on
 * fp32 activations at NI_ISA_AVX512 (the backend's activation mode auto
 * picks by it), and the multi-row GEMVs prefetch into L2 (PREFETCHT1). */
int ni_cpu_intel(void);
/* 1 when the CPU has AVX-VNNI (VEX dpbusd): the NI_ISA_AVX2 level's int8
 * q4–q6 GEMVs use it (bit-identical to maddubs + madd) unless
 * NINFER_CPU_AVXVNNI=0 (per matmul). */
int ni_cpu_has_avxvnni(void);
/* The integer-dot extensions the int8 GEMVs of level isa use, as the
 * switches read now (NI_DOT_*: AVX512_VNNI and AVX512_VBMI at
 * NI_ISA_AVX512, AVX-VNNI at NI_ISA_AVX2 unless NINFER_CPU_AVXVNNI=0, VBMI
 * unless NINFER_CPU_VBMI=0). */
enum { NI_DOT_VNNI = 1, NI_DOT_VBMI = 2, NI_DOT_AVXVNNI = 4 };
int ni_cpu_int8_dots(int isa);

/* RMSNorm per (t,h) over D: y = x · rsqrt(mean(x²) + eps) · (zero_centred ? 1 + w : w).
 * x and y may alias. */
void ni_rmsnorm(ni_ctx *c, ni_rows x, ni_rows y, const float *w, float eps, int zero_centred);

/* Gated RMSNorm per (t,h) over D: y = w · (o · rsqrt(mean(o²) + eps)) · silu(z). */
void ni_gated_rmsnorm(ni_ctx *c, ni_rows o, ni_rows z, ni_rows y, const float *w, float eps);

/* L2 norm per (t,h) over D: y = x · rsqrt(Σx² + 1e-6) · scale. x, y may alias. */
void ni_l2norm(ni_ctx *c, ni_rows x, ni_rows y, float scale);

/* Partial NeoX RoPE in place on x[t,h,0..rot): for j < rot/2, with
 * a = x_j, b = x_{j+rot/2}, φ = pos[t] · theta^(−2j/rot):
 * x_j = a·cos φ − b·sin φ, x_{j+rot/2} = b·cos φ + a·sin φ. Dims ≥ rot pass. */
void ni_rope(ni_ctx *c, ni_rows x, const int32_t *pos, int rot, double theta);

/* y = x ⊙ sigmoid(g) (per (t,h,d)). */
void ni_sigmoid_mul(ni_ctx *c, ni_rows x, ni_rows g, ni_rows y);

/* SwiGLU: y = silu(g) ⊙ u. */
void ni_swiglu(ni_ctx *c, ni_rows g, ni_rows u, ni_rows y);

/* y = a + b. */
void ni_add(ni_ctx *c, ni_rows a, ni_rows b, ni_rows y);

/* out[t] = argmax_d x[t, 0, d]; the lowest index wins ties; NaN never wins. */
void ni_argmax(ni_ctx *c, ni_rows x, int32_t *out);

/* GDN gating per (t, j): beta = sigmoid(b[t,j]),
 * g = −exp(a_log[j]) · softplus(a[t,j] + dt_bias[j]). a, b, g, beta: h = nv, d = 1. */
void ni_gdn_gate(ni_ctx *c, ni_rows a, ni_rows b, const float *a_log, const float *dt_bias, ni_rows g,
                 ni_rows beta);

/* Causal depthwise conv1d (width kw) + SiLU per channel ch < x.d (h = 1),
 * computed in fp32:
 *   y[t,ch] = silu(w[ch*kw + kw−1] · x[t,ch] + Σ_{i<kw−1} w[ch*kw + i] · win_t[ch][i])
 * where win_t is the conv window before token t: the last kw−1 pre-conv
 * inputs, oldest first, taken from the state for τ < 0 and from x[τ,ch]
 * for earlier tokens of the call. The window is read from
 * state + slot_stride·(*in_slot) elements ([C, kw−1], row-major).
 * state_bf16 ≠ 0: the state elements are bf16 (uint16) and every input
 * enters the window rounded to bf16 (RNE) — in-call and stored alike, so a
 * chunked prefill and token-by-token decode compute the same values; the
 * current token's own term uses x[t,ch] unrounded. state_bf16 = 0: fp32
 * state, no rounding. When out_slot ≥ 0 the window after the last token is
 * written to slot out_slot; when out_slot == NI_PER_TOKEN the window after
 * token t goes to slot t. x and y may alias. */
#define NI_PER_TOKEN (-1)
void ni_conv1d_silu(ni_ctx *c, ni_rows x, ni_rows y, const float *w, int kw, void *state, int state_bf16,
                    int64_t slot_stride, const int32_t *in_slot, int out_slot);

/* Gated delta rule, recurrent form, per v-head j < v.h with k-head
 * kh = j / (v.h / k.h); q, k already L2-normalised (q also scaled by dk^-1/2).
 * State S_j ∈ ℝ^{dk×dv} (row-major [dk][dv]) at state + slot_stride·slot + j·dk·dv:
 *   S ← e^{g_t} S;  δ = β_t (v_t − Sᵀk_t);  S ← S + k_t δᵀ;  o_t = Sᵀ q_t.
 * Initial state from slot *in_slot; output slots as ni_conv1d_silu. */
void ni_gdn_recurrent(ni_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                      int64_t slot_stride, const int32_t *in_slot, int out_slot, ni_rows o);

/* Gated delta rule, chunked (WY/UT) form with chunk NI_GDN_CHUNK; same
 * result as ni_gdn_recurrent up to rounding. Per chunk (Γ = cumsum g,
 * D_ij = e^{Γi−Γj} for i ≥ j):
 *   L = I + strictly_lower((diag(β)K Kᵀ) ⊙ D); U = L⁻¹ diag(β) V;
 *   W = L⁻¹ (diag(β)K ⊙ e^Γ);  V' = U − W S;
 *   O = (Q ⊙ e^Γ) S + ((Q Kᵀ) ⊙ D) V';  S ← e^{Γ_C} S + (K ⊙ e^{Γ_C − Γ})ᵀ V'.
 * out_slot must be ≥ 0 (no per-token states in this form). CPU: the
 * products run as register-tiled matrix products, and both delta-rule forms
 * flush subnormal fp32 values to zero (error < 2⁻¹²⁶ absolute per
 * operation; the decays reach that range, where Intel CPUs take a
 * microcode assist per FMA). */
#define NI_GDN_CHUNK 64
void ni_gdn_chunked(ni_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                    int64_t slot_stride, const int32_t *in_slot, int out_slot, ni_rows o);

/* ---- paged KV cache and attention ---------------------------------------- */

enum {
    NI_KV_BF16 = 0,   /* bf16 vectors */
    NI_KV_I8G64 = 1,  /* int8 codes + one fp16 scale per 64 dims: s = f16(absmax/127), code = clamp(rne(x·(1/s)), ±127) */
    NI_KV_FP8ROW = 2, /* e4m3 codes + one fp16 scale per head vector: s = f16(absmax/448), code = e4m3(x/s) */
    NI_KV_F32 = 3     /* fp32 vectors (exact; reference and test runs) */
};
#define NI_KV_PAGE 64

/* One layer's K and V planes. Vector (page, kv_head, off) of a plane lives at
 * ((page·kvh + head)·64 + off) vector slots; scale planes likewise with
 * hd/64 (int8) or 1 (fp8) fp16 scales per vector. Logical page p of the
 * sequence maps to physical page block_table[p]. */
typedef struct {
    int32_t fmt, kvh, hd, pages; /* pages: physical pages in the planes */
    uint8_t *k, *v;
    uint16_t *ks, *vs;
    const int32_t *block_table;
    int32_t table_len;
} ni_kv;

/* Bytes of one vector slot in the code plane / scale plane. */
int64_t ni_kv_vec_bytes(int fmt, int hd);
int64_t ni_kv_scale_count(int fmt, int hd);

/* Appends k[t], v[t] (t = kvh heads × hd) at position pos[t]. Returns the
 * number of positions outside the block table (skipped). */
int ni_kv_append(ni_ctx *c, ni_kv kv, ni_rows k, ni_rows v, const int32_t *pos);

/* Causal GQA attention over the cache: query (t, h) uses kv head
 * h / (q.h / kvh) and keys at positions 0..pos[t]:
 *   out[t,h] = Σ_s softmax_s(scale · q[t,h]·K_s) V_s.
 * Routes: query blocks × kv heads; split-KV + merge for T ≤ 4 at long context.
 * CPU: subnormal fp32 values (softmax weights of far-off scores) are
 * flushed to zero (< 2⁻¹²⁶ absolute per operation).
 * Returns the number of tasks that met an unmapped position. */
int ni_attention(ni_ctx *c, ni_rows q, ni_kv kv, const int32_t *pos, float scale, ni_rows out);

/* ---- scalar conversions (exposed for tests) ------------------------------- */
float ni_f16_to_f32(uint16_t h);
uint16_t ni_f32_to_f16(float f);
float ni_e4m3_to_f32(uint8_t b);
uint8_t ni_f32_to_e4m3(float f);

#ifdef __cplusplus
}
#endif
#endif
