/* Row-wise ops: norms, RoPE, gates, SwiGLU, residual add, argmax, GDN gating,
 * causal conv1d. Parallel over tokens (rows) or channels. */
#include "ni_cpu.h"

typedef struct {
    ni_ctx *c;
    ni_rows x, y, z;
    const float *w;
    float eps, scale;
    int mode;
    const int32_t *pos;
    int rot;
    double theta;
} row_args;

/* ---- norms ---- */

static void rmsnorm_task(void *a_, int t, int tid) {
    (void)tid;
    row_args *a = (row_args *)a_;
    int D = a->x.d;
    for (int h = 0; h < a->x.h; h++) {
        const float *x = ni_row(a->x, t, h);
        float *y = ni_row(a->y, t, h);
        float r = 1.0f / sqrtf(ni_sumsq(a->c->isa, x, D) / (float)D + a->eps);
        if (a->mode)
            for (int d = 0; d < D; d++) y[d] = x[d] * r * (1.0f + a->w[d]);
        else
            for (int d = 0; d < D; d++) y[d] = x[d] * r * a->w[d];
    }
}

void ni_rmsnorm(ni_ctx *c, ni_rows x, ni_rows y, const float *w, float eps, int zero_centred) {
    row_args a = {.c = c, .x = x, .y = y, .w = w, .eps = eps, .mode = zero_centred};
    ni_parallel(c, x.t, rmsnorm_task, &a, (int64_t)x.t * x.h * x.d * 4);
}

static void gated_task(void *a_, int t, int tid) {
    row_args *a = (row_args *)a_;
    int D = a->x.d;
    float *g = ni_tmp(a->c, tid, D); /* silu(z): y may alias o or z */
    for (int h = 0; h < a->x.h; h++) {
        const float *o = ni_row(a->x, t, h), *z = ni_row(a->z, t, h);
        float *y = ni_row(a->y, t, h);
        float r = 1.0f / sqrtf(ni_sumsq(a->c->isa, o, D) / (float)D + a->eps);
        ni_silu_vec(a->c->isa, z, g, D);
        for (int d = 0; d < D; d++) y[d] = a->w[d] * (o[d] * r) * g[d];
    }
}

void ni_gated_rmsnorm(ni_ctx *c, ni_rows o, ni_rows z, ni_rows y, const float *w, float eps) {
    row_args a = {.c = c, .x = o, .y = y, .z = z, .w = w, .eps = eps};
    ni_parallel(c, o.t, gated_task, &a, (int64_t)o.t * o.h * o.d * 8);
}

static void l2_task(void *a_, int t, int tid) {
    (void)tid;
    row_args *a = (row_args *)a_;
    int D = a->x.d;
    for (int h = 0; h < a->x.h; h++) {
        const float *x = ni_row(a->x, t, h);
        float *y = ni_row(a->y, t, h);
        float r = a->scale / sqrtf(ni_sumsq(a->c->isa, x, D) + 1e-6f);
        for (int d = 0; d < D; d++) y[d] = x[d] * r;
    }
}

void ni_l2norm(ni_ctx *c, ni_rows x, ni_rows y, float scale) {
    row_args a = {.c = c, .x = x, .y = y, .scale = scale};
    ni_parallel(c, x.t, l2_task, &a, (int64_t)x.t * x.h * x.d * 4);
}

/* ---- RoPE ---- */

static void rope_task(void *a_, int t, int tid) {
    (void)tid;
    row_args *a = (row_args *)a_;
    int half = a->rot / 2;
    double p = (double)a->pos[t];
    float cs[512], sn[512]; /* rot ≤ 1024 */
    for (int j = 0; j < half; j++) {
        double ang = p * pow(a->theta, -2.0 * j / a->rot);
        cs[j] = (float)cos(ang);
        sn[j] = (float)sin(ang);
    }
    for (int h = 0; h < a->x.h; h++) {
        float *x = ni_row(a->x, t, h);
        for (int j = 0; j < half; j++) {
            float u = x[j], v = x[j + half];
            x[j] = u * cs[j] - v * sn[j];
            x[j + half] = v * cs[j] + u * sn[j];
        }
    }
}

void ni_rope(ni_ctx *c, ni_rows x, const int32_t *pos, int rot, double theta) {
    if (rot > 1024 || rot > x.d) return;
    row_args a = {.c = c, .x = x, .pos = pos, .rot = rot, .theta = theta};
    ni_parallel(c, x.t, rope_task, &a, (int64_t)x.t * (x.h * rot + rot * 16));
}

/* ---- elementwise ---- */

static void ew_task(void *a_, int t, int tid) {
    row_args *a = (row_args *)a_;
    int D = a->x.d;
    for (int h = 0; h < a->x.h; h++) {
        const float *x = ni_row(a->x, t, h), *z = ni_row(a->z, t, h);
        float *y = ni_row(a->y, t, h);
        switch (a->mode) {
        case 0:
            for (int d = 0; d < D; d++) y[d] = x[d] * ni_sigmoid(z[d]);
            break;
        case 1: {
            float *g = ni_tmp(a->c, tid, D); /* silu(x): y may alias x or z */
            ni_silu_vec(a->c->isa, x, g, D);
            for (int d = 0; d < D; d++) y[d] = g[d] * z[d];
            break;
        }
        default:
            for (int d = 0; d < D; d++) y[d] = x[d] + z[d];
        }
    }
}

void ni_sigmoid_mul(ni_ctx *c, ni_rows x, ni_rows g, ni_rows y) {
    row_args a = {.c = c, .x = x, .z = g, .y = y, .mode = 0};
    ni_parallel(c, x.t, ew_task, &a, (int64_t)x.t * x.h * x.d * 8);
}

void ni_swiglu(ni_ctx *c, ni_rows g, ni_rows u, ni_rows y) {
    row_args a = {.c = c, .x = g, .z = u, .y = y, .mode = 1};
    ni_parallel(c, g.t, ew_task, &a, (int64_t)g.t * g.h * g.d * 8);
}

void ni_add(ni_ctx *c, ni_rows x, ni_rows b, ni_rows y) {
    row_args a = {.c = c, .x = x, .z = b, .y = y, .mode = 2};
    ni_parallel(c, x.t, ew_task, &a, (int64_t)x.t * x.h * x.d * 8);
}

typedef struct {
    ni_rows x;
    int32_t *out;
} argmax_args;

static void argmax_task(void *a_, int t, int tid) {
    (void)tid;
    argmax_args *a = (argmax_args *)a_;
    const float *x = ni_row(a->x, t, 0);
    int32_t best = -1;
    float bv = 0;
    for (int d = 0; d < a->x.d; d++) {
        float v = x[d];
        if (v != v) continue;
        if (best < 0 || v > bv) {
            best = d;
            bv = v;
        }
    }
    a->out[t] = best < 0 ? 0 : best;
}

void ni_argmax(ni_ctx *c, ni_rows x, int32_t *out) {
    argmax_args a = {x, out};
    ni_parallel(c, x.t, argmax_task, &a, (int64_t)x.t * x.d);
}

/* ---- GDN gating ---- */

void ni_gdn_gate(ni_ctx *c, ni_rows a, ni_rows b, const float *a_log, const float *dt_bias, ni_rows g,
                 ni_rows beta) {
    (void)c;
    for (int t = 0; t < a.t; t++)
        for (int j = 0; j < a.h; j++) {
            float x = ni_row(a, t, j)[0] + dt_bias[j];
            float sp = x > 20.0f ? x : log1pf(expf(x));
            ni_row(g, t, j)[0] = -expf(a_log[j]) * sp;
            ni_row(beta, t, j)[0] = ni_sigmoid(ni_row(b, t, j)[0]);
        }
}

/* ---- causal conv1d + SiLU ---- */

typedef struct {
    ni_rows x, y;
    const float *w;
    int kw;
    void *state;
    int bf16; /* state elements are bf16 (else fp32) */
    int64_t slot_stride;
    int32_t in_slot;
    int out_slot, per;
    int isa;
    int noconv1; /* NINFER_CPU_CONV1=0: decode through the staged path (comparison switch) */
} conv_args;

#define CONV_CH 64

/* Channel c's window in the state (sw values at element at) to and from
 * the task's structure-of-arrays window win[i][c]. Strided on the window
 * side, so no memcpy call per channel (which -O3 makes of a contiguous copy
 * loop; those calls were ~1.5 % of decode samples). */
static void conv_load(const conv_args *a, int64_t at, float (*win)[CONV_CH], int c, int sw) {
    if (a->bf16) {
        const uint16_t *s = (const uint16_t *)a->state + at;
        for (int i = 0; i < sw; i++) win[i][c] = ni_bf16(s[i]);
    } else {
        const float *s = (const float *)a->state + at;
        for (int i = 0; i < sw; i++) win[i][c] = s[i];
    }
}

static void conv_store(const conv_args *a, int64_t at, float (*win)[CONV_CH], int c, int sw) {
    if (a->bf16) {
        uint16_t *s = (uint16_t *)a->state + at;
        for (int i = 0; i < sw; i++) s[i] = ni_to_bf16(win[i][c]); /* exact: win holds bf16 values */
    } else {
        float *s = (float *)a->state + at;
        for (int i = 0; i < sw; i++) s[i] = win[i][c];
    }
}

/* One token of a kw = 4 conv over nc channels (structure-of-arrays taps
 * and windows): s = w3·x + w0·win0 + w1·win1 + w2·win2 in that order, then
 * the window shifts in x (bf16-rounded for a bf16 state). x and y may be
 * the same row (an in-place conv): no restrict on them. */
static void conv_step3(float (*restrict wt)[CONV_CH], float (*restrict win)[CONV_CH], const float *xt,
                       float *yt, int nc, int bf16) {
    for (int c = 0; c < nc; c++) {
        float xin = xt[c];
        float s = wt[3][c] * xin;
        s += wt[0][c] * win[0][c];
        s += wt[1][c] * win[1][c];
        s += wt[2][c] * win[2][c];
        win[0][c] = win[1][c];
        win[1][c] = win[2][c];
        win[2][c] = xin;
        yt[c] = s;
    }
    if (bf16)
        for (int c = 0; c < nc; c++) win[2][c] = ni_bf16(ni_to_bf16(win[2][c]));
}

/* One task: CONV_CH channels over all tokens. The taps and the windows are
 * held as structures of arrays over the task's channels (wt[i][c],
 * win[i][c]), so the token loop reads and writes contiguous channels of
 * each token row (the row stride is the whole channel count); per channel
 * the arithmetic is unchanged: s = w[sw]·x, then s += w[i]·win[i] for
 * i = 0 … sw−1, in that order. */
/* Window element at of the state, as fp32, and its store (bf16-rounded
 * for a bf16 state). */
static inline float conv_win(const conv_args *a, int64_t at) {
    return a->bf16 ? ni_bf16(((const uint16_t *)a->state)[at]) : ((const float *)a->state)[at];
}

static inline void conv_set_win(const conv_args *a, int64_t at, float v) {
    if (a->bf16) ((uint16_t *)a->state)[at] = ni_to_bf16(v);
    else ((float *)a->state)[at] = v;
}

/* One token of a kw = 4 conv (decode) over channels [c0, c1), read and
 * written in place in the state's channel-major windows: no staging
 * through the structure-of-arrays windows, whose transposes cost more than
 * the arithmetic at one token. Per channel the operations of conv_step3:
 * s = w3·x + w0·win0 + w1·win1 + w2·win2 in that order (no FMA: this file
 * is built without it), then win ← (win1, win2, x), x bf16-rounded for a
 * bf16 state. The window is read whole before it is written, so the in and
 * out slots may be the same. */
static void conv_token4(const conv_args *a, int c0, int c1) {
    const float *x = a->x.p, *w = a->w;
    float *y = a->y.p;
    const int64_t rd = a->slot_stride * a->in_slot, wr = a->slot_stride * (a->per ? 0 : a->out_slot);
    for (int c = c0; c < c1; c++) {
        const float *wc = w + 4 * (int64_t)c;
        float xin = x[c], w0 = conv_win(a, rd + 3 * c), w1 = conv_win(a, rd + 3 * c + 1),
              w2 = conv_win(a, rd + 3 * c + 2);
        float s = wc[3] * xin;
        s += wc[0] * w0;
        s += wc[1] * w1;
        s += wc[2] * w2;
        conv_set_win(a, wr + 3 * c, w1);
        conv_set_win(a, wr + 3 * c + 1, w2);
        conv_set_win(a, wr + 3 * c + 2, xin); /* bf16-rounded for a bf16 state */
        y[c] = s;
    }
    ni_silu_vec(a->isa, y + c0, y + c0, c1 - c0);
}

static void conv_task(void *a_, int task, int tid) {
    (void)tid;
    conv_args *a = (conv_args *)a_;
    int C = a->x.d, kw = a->kw, sw = kw - 1;
    int c0 = task * CONV_CH, c1 = c0 + CONV_CH < C ? c0 + CONV_CH : C, nc = c1 - c0;
    if (a->x.t == 1 && kw == 4 && !a->noconv1) {
        conv_token4(a, c0, c1);
        return;
    }
    float wt[16][CONV_CH], win[16][CONV_CH];
    for (int c = 0; c < nc; c++) {
        const float *wc = a->w + (int64_t)(c0 + c) * kw;
        for (int i = 0; i < kw; i++) wt[i][c] = wc[i];
        conv_load(a, a->slot_stride * a->in_slot + (int64_t)(c0 + c) * sw, win, c, sw);
    }
    for (int t = 0; t < a->x.t; t++) {
        const float *xt = a->x.p + t * a->x.ld + c0;
        float *yt = a->y.p + t * a->y.ld + c0;
        if (sw == 3) /* kw = 4 (every Qwen3.5 shape): the same operations, unrolled so the compiler vectorises them */
            conv_step3(wt, win, xt, yt, nc, a->bf16);
        else
        for (int c = 0; c < nc; c++) {
            float xin = xt[c];
            float s = wt[sw][c] * xin;
            for (int i = 0; i < sw; i++) s += wt[i][c] * win[i][c];
            for (int i = 0; i + 1 < sw; i++) win[i][c] = win[i + 1][c];
            /* With bf16 state the window holds bf16-rounded inputs in every
             * path (in-chunk and stored), so chunked prefill and decode agree. */
            if (sw > 0) win[sw - 1][c] = a->bf16 ? ni_bf16(ni_to_bf16(xin)) : xin;
            yt[c] = s;
        }
        ni_silu_vec(a->isa, yt, yt, nc);
        if (a->per)
            for (int c = 0; c < nc; c++) conv_store(a, a->slot_stride * t + (int64_t)(c0 + c) * sw, win, c, sw);
    }
    if (!a->per)
        for (int c = 0; c < nc; c++) conv_store(a, a->slot_stride * a->out_slot + (int64_t)(c0 + c) * sw, win, c, sw);
}

void ni_conv1d_silu(ni_ctx *c, ni_rows x, ni_rows y, const float *w, int kw, void *state, int state_bf16,
                    int64_t slot_stride, const int32_t *in_slot, int out_slot) {
    if (kw < 1 || kw > 16) return;
    const char *e = getenv("NINFER_CPU_CONV1");
    conv_args a = {x,        y,     w, kw, state, state_bf16 != 0, slot_stride, *in_slot, out_slot,
                   out_slot == NI_PER_TOKEN, c->isa, e && strcmp(e, "0") == 0};
    ni_parallel(c, (x.d + CONV_CH - 1) / CONV_CH, conv_task, &a, (int64_t)x.t * x.d * kw * 4);
}
