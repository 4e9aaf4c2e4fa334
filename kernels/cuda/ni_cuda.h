/*
 * ni_cuda.h — C entry points of the CUDA backend.
 *
 * Every ni_cuda_<op> implements the op of the same name in ../ninfer_ops.h
 * (same formula, same argument structs; every pointer is a device pointer,
 * the ni_weight/ni_kv structs are passed by value with device data). The
 * ops are asynchronous on the context's stream; ni_cuda_sync waits and
 * reports the first launch error and the error counters the kernels raised
 * (out-of-range ids, unmapped positions, bad slots), which the CPU backend
 * returns directly.
 *
 * The same sources build two ways: with nvcc for a real GPU (build tag
 * `cuda`), and with g++ -DNI_SIMT under the host SIMT harness (simt/), where
 * device memory is guard-paged host memory and kernels run as fibers.
 */
#ifndef NI_CUDA_H
#define NI_CUDA_H

#include "../ninfer_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ni_cuda_ctx ni_cuda_ctx;

/* Error counters (kernels atomically add to them; ni_cuda_sync returns them). */
enum {
    NI_CUDA_ERR_EMBED_IDS = 0, /* embedding ids outside [0, n) (rows zero-filled) */
    NI_CUDA_ERR_KV_POS = 1,    /* kv_append positions outside the block table (skipped) */
    NI_CUDA_ERR_ATTN_POS = 2,  /* attention tasks that met an unmapped position */
    NI_CUDA_ERR_SLOT = 3,      /* state input slot outside [0, slots) (op skipped) */
    NI_CUDA_ERR_N = 8
};

/* Device facts (filled by ni_cuda_ctx_new). */
typedef struct {
    char name[256];
    int device, sm_major, sm_minor, sm_count;
    int runtime_version, driver_version;
    int64_t total_mem, max_smem_optin, l2_bytes;
} ni_cuda_info;

/* Probes the driver and devices without creating a context. Returns 0 and
 * the device count, or the CUDA error code with a message in err. */
int ni_cuda_probe(int *devices, int *driver_version, int *runtime_version, char *err, int errlen);

/* Creates a context (one stream, error counters) on `device`. Returns NULL
 * with the CUDA error code in *code and a message in err on failure. */
ni_cuda_ctx *ni_cuda_ctx_new(int device, int *code, char *err, int errlen);
void ni_cuda_ctx_free(ni_cuda_ctx *c);
void ni_cuda_ctx_info(const ni_cuda_ctx *c, ni_cuda_info *out);
/* Bytes of op scratch available to the context's ops (split-KV partials,
 * chunked-GDN records, conv halos, sampling buffers): the bound region's
 * size, or the context's own buffer (grown on first use of a shape, stable
 * afterwards). In a dry run: the largest request since the run started. */
int64_t ni_cuda_scratch_bytes(const ni_cuda_ctx *c);
/* Binds the op scratch to the caller's device region [p, p+bytes) (p
 * 256-aligned): the ops use it and never allocate; a request larger than
 * bytes is an error naming both sizes. The engine binds the workspace
 * arena's op-scratch term (pkg/layout CUDAOpScratch), so every device byte
 * of a step lies in a planned arena. p = NULL unbinds (the context grows its
 * own buffer again). Frees the context's own buffer, bumps the memory
 * generation (graphs captured before are stale). Not during a capture:
 * returns NI_CUDA_CAPTURE_ERROR and fails the capture. */
int ni_cuda_bind_scratch(ni_cuda_ctx *c, void *p, int64_t bytes);

/* Waits for the stream. Returns 0 or the first CUDA/launch error code (its
 * message in err) and copies then clears the error counters. */
int ni_cuda_sync(ni_cuda_ctx *c, int32_t counters[NI_CUDA_ERR_N], char *err, int errlen);

/* Device memory. */
void *ni_cuda_malloc(ni_cuda_ctx *c, int64_t bytes, const char *name, int *code);
void ni_cuda_free(ni_cuda_ctx *c, void *p);
int ni_cuda_h2d(ni_cuda_ctx *c, void *dst, const void *src, int64_t bytes);
int ni_cuda_d2h(ni_cuda_ctx *c, void *dst, const void *src, int64_t bytes);
int ni_cuda_d2d(ni_cuda_ctx *c, void *dst, const void *src, int64_t bytes);
int ni_cuda_memset(ni_cuda_ctx *c, void *dst, int value, int64_t bytes);
/* Pinned host staging memory (plain host memory under the harness). */
void *ni_cuda_host_alloc(int64_t bytes);
void ni_cuda_host_free(void *p);
/* Asynchronous upload from pinned memory on the context's stream. */
int ni_cuda_h2d_async(ni_cuda_ctx *c, void *dst, const void *pinned_src, int64_t bytes);

/* ---- dry run (host SIMT harness only) -----------------------------------
 * While a dry run is on, ni_launch checks every launch configuration against
 * the device limits (block threads in [1,1024], block.x/y ≤ 1024, block.z ≤
 * 64, grid.x ≤ 2^31−1, grid.y/z ≤ 65535, dynamic shared memory ≤
 * info.max_smem_optin; static shared memory is not known to the harness) and
 * appends it to a log instead of running the kernel, so the ops may be given
 * fake device pointers; an invalid launch also records a context error.
 * ni_cuda_scratch then returns a fake pointer without allocating and
 * ni_cuda_scratch_bytes reports the scratch the logged launches would need.
 * The nvcc build has no dry run (ni_cuda_dry_run returns -1). */
typedef struct {
    const char *kernel;  /* the launcher's kernel name (static string) */
    uint32_t grid[3], block[3];
    int64_t smem;        /* dynamic shared memory bytes */
    int32_t skipped;     /* an empty grid: ni_launch launches nothing */
    int32_t invalid;     /* the configuration would fail to launch */
} ni_cuda_launch;

/* on = 1 starts a dry run with an empty log (sm_count / max_smem_optin > 0
 * replace those device facts for the launchers while it lasts); on = 0 ends
 * it and restores them. Returns 0, or -1 when unsupported. */
int ni_cuda_dry_run(ni_cuda_ctx *c, int on, int sm_count, int64_t max_smem_optin);
/* Launches logged since the dry run started; ni_cuda_dry_run_get copies
 * entry i (0 ≤ i < count) and returns 0, or -1 when out of range. */
int64_t ni_cuda_dry_run_count(const ni_cuda_ctx *c);
int ni_cuda_dry_run_get(const ni_cuda_ctx *c, int64_t i, ni_cuda_launch *out);

/* ---- graphs ----------------------------------------------------------------
 * A graph records the ops queued on the context's stream between
 * ni_cuda_capture_begin and ni_cuda_capture_end, without running them, and
 * ni_cuda_graph_launch replays them (same kernels, same arguments: control
 * values must live in device memory, uploaded before the launch). Real CUDA:
 * stream capture (cudaStreamCaptureModeThreadLocal: begin and end on one OS
 * thread) and an instantiated cudaGraphExec. Under the harness the launches,
 * memsets and device copies are recorded as closures and replayed in order.
 *
 * What cannot be captured fails the capture (ni_cuda_capture_end returns
 * NI_CUDA_CAPTURE_ERROR with the first reason): synchronous copies (h2d,
 * d2h, and the asynchronous upload), ni_cuda_sync, device allocation, and op
 * scratch growth (run a shape eagerly once before capturing it). A free
 * during capture fails it too (the memory is released at capture end).
 *
 * The context counts a memory generation, bumped whenever the op scratch is
 * reallocated or device memory is freed: a graph captured under an older
 * generation may hold freed addresses, so launching it returns
 * NI_CUDA_GRAPH_STALE and runs nothing (capture it again). Graphs are freed
 * with ni_cuda_graph_free (before or after the context: ni_cuda_ctx_free
 * releases the device side of every live graph and leaves the handles for
 * ni_cuda_graph_free). */
typedef struct ni_cuda_graph ni_cuda_graph;
enum {
    NI_CUDA_GRAPH_STALE = -1,    /* ni_cuda_graph_launch: recapture */
    NI_CUDA_CAPTURE_ERROR = 900, /* cudaErrorStreamCaptureUnsupported */
};
/* Starts a capture on the context's stream. 0, or an error (message in err). */
int ni_cuda_capture_begin(ni_cuda_ctx *c, char *err, int errlen);
/* Ends the capture: *out is the graph (0), or NULL with the error code and
 * the first reason the capture failed in err. */
int ni_cuda_capture_end(ni_cuda_ctx *c, ni_cuda_graph **out, char *err, int errlen);
/* Queues the graph on the stream: 0, NI_CUDA_GRAPH_STALE, or an error code
 * (message in err). Launch errors of its kernels surface at ni_cuda_sync. */
int ni_cuda_graph_launch(ni_cuda_ctx *c, ni_cuda_graph *g, char *err, int errlen);
/* Ops (kernel launches, memsets, copies) the graph holds. */
int ni_cuda_graph_nodes(const ni_cuda_graph *g);
void ni_cuda_graph_free(ni_cuda_graph *g);
/* The memory generation (see above). */
uint64_t ni_cuda_mem_generation(const ni_cuda_ctx *c);

/* ---- ops (formulas: ../ninfer_ops.h) ------------------------------------ */
/* Implements ni_embed. Bad ids → NI_CUDA_ERR_EMBED_IDS. */
void ni_cuda_embed(ni_cuda_ctx *c, const ni_weight *w, const int32_t *ids, ni_rows out);
/* Implements ni_matmul (T=1 GEMV, small-T fused GEMV, large-T tensor-core GEMM). */
void ni_cuda_matmul(ni_cuda_ctx *c, const ni_weight *w, ni_rows x, ni_rows y, int accumulate);
void ni_cuda_rmsnorm(ni_cuda_ctx *c, ni_rows x, ni_rows y, const float *w, float eps, int zero_centred);
void ni_cuda_gated_rmsnorm(ni_cuda_ctx *c, ni_rows o, ni_rows z, ni_rows y, const float *w, float eps);
void ni_cuda_l2norm(ni_cuda_ctx *c, ni_rows x, ni_rows y, float scale);
void ni_cuda_rope(ni_cuda_ctx *c, ni_rows x, const int32_t *pos, int rot, double theta);
void ni_cuda_sigmoid_mul(ni_cuda_ctx *c, ni_rows x, ni_rows g, ni_rows y);
void ni_cuda_swiglu(ni_cuda_ctx *c, ni_rows g, ni_rows u, ni_rows y);
void ni_cuda_add(ni_cuda_ctx *c, ni_rows a, ni_rows b, ni_rows y);
void ni_cuda_argmax(ni_cuda_ctx *c, ni_rows x, int32_t *out);
void ni_cuda_gdn_gate(ni_cuda_ctx *c, ni_rows a, ni_rows b, const float *a_log, const float *dt_bias, ni_rows g,
                      ni_rows beta);
/* Implements ni_conv1d_silu; in_slot is a device pointer; a bad slot →
 * NI_CUDA_ERR_SLOT and the op writes nothing. */
void ni_cuda_conv1d_silu(ni_cuda_ctx *c, ni_rows x, ni_rows y, const float *w, int kw, void *state, int state_bf16,
                         int64_t slot_stride, int32_t slots, const int32_t *in_slot, int out_slot);
void ni_cuda_gdn_recurrent(ni_cuda_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                           int64_t slot_stride, int32_t slots, const int32_t *in_slot, int out_slot, ni_rows o);
void ni_cuda_gdn_chunked(ni_cuda_ctx *c, ni_rows q, ni_rows k, ni_rows v, ni_rows g, ni_rows beta, float *state,
                         int64_t slot_stride, int32_t slots, const int32_t *in_slot, int out_slot, ni_rows o);
/* Test knob: when n > 0 the chunked form processes at most n chunks per
 * scratch segment (exercises the segment hand-over at small T); 0 = off. */
void ni_cuda_set_gdn_segment(ni_cuda_ctx *c, int n);
/* Implements ni_kv_append; positions outside the table → NI_CUDA_ERR_KV_POS. */
void ni_cuda_kv_append(ni_cuda_ctx *c, ni_kv kv, ni_rows k, ni_rows v, const int32_t *pos);
/* Implements ni_attention; unmapped positions → NI_CUDA_ERR_ATTN_POS. */
void ni_cuda_attention(ni_cuda_ctx *c, ni_rows q, ni_kv kv, const int32_t *pos, float scale, ni_rows out);

/* Sampling parameters of ni_cuda_sample (pkg/sample.Config). */
typedef struct {
    double temperature, top_p, min_p, presence, frequency, repetition;
    int32_t top_k;
    uint64_t seed;
} ni_sample_cfg;

/* Samples one token from the logits row x (x.t = 1, x.h = 1, x.d = vocab)
 * as pkg/sample does (penalties, temperature, top-k, float64 softmax,
 * min-p, top-p, Uniform(seed, *rng_pos, PurposeSample) inverse-CDF draw;
 * greedy when temperature = 0), writes the id (-1: no finite logit) to
 * *out, then counts[id] += 1 and *rng_pos += 1 on the device. counts:
 * int32[vocab] generated tokens; seen: uint8[vocab] nonzero for prompt
 * tokens (repetition penalty). */
void ni_cuda_sample(ni_cuda_ctx *c, ni_rows x, int32_t *out, int32_t *counts, const uint8_t *seen, ni_sample_cfg cfg,
                    int64_t *rng_pos);

#ifdef __cplusplus
}
#endif
#endif
