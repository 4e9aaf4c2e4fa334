/*
 * ctx.cuh — the CUDA context (internal to the .cu files) and ni_launch, the
 * one way every launcher starts a kernel: `kernel<<<>>>` under nvcc, the
 * SIMT harness under -DNI_SIMT. Launch errors are recorded in the context
 * (first error wins) and reported by ni_cuda_sync.
 */
#ifndef NI_CUDA_CTX_CUH
#define NI_CUDA_CTX_CUH

#include "common.cuh"
#include "ni_cuda.h"

#if defined(NI_SIMT)
#include <functional>
typedef void *ni_stream_t;
#else
typedef cudaStream_t ni_stream_t;
#endif

struct ni_cuda_ctx {
    int device;
    ni_stream_t stream;
    int32_t *d_err;  /* NI_CUDA_ERR_N device counters */
    void *scratch;   /* op scratch (device) */
    int64_t scratch_bytes;
    int scratch_bound; /* 1: scratch is the caller's region (ni_cuda_bind_scratch), never grown or freed here */
    int first_error; /* first launch/runtime error code (0 = none) */
    char errmsg[512];
    ni_cuda_info info;
    struct ni_cuda_dry *dry; /* dry-run state (ni_cuda_dry_run; harness only), NULL when off */
    /* Graphs (ni_cuda.h, graph.cuh). */
    uint64_t mem_gen;      /* bumped on op scratch reallocation and on every free */
    int capturing;         /* between ni_cuda_capture_begin and _end */
    int capture_code;      /* why the capture in progress fails (0 = it does not) */
    char capture_msg[512];
    ni_cuda_graph *cap;    /* the graph being recorded */
    ni_cuda_graph *graphs; /* live graphs (doubly linked) */
    void **deferred;       /* frees asked for during the capture */
    int ndeferred, capdeferred;
    /* Test knob (ni_cuda_set_gdn_segment): when > 0 the chunked delta rule
     * processes at most this many chunks per segment. */
    int gdn_seg_chunks;
};

/* Capture helpers (graph.cuh). ni_cuda_capture_fail fails the capture in
 * progress (first reason wins); ni_cuda_capture_reject does that for a call
 * that cannot be captured, copies "<what> during graph capture" to err and
 * returns NI_CUDA_CAPTURE_ERROR; ni_cuda_capture_defer_free fails it and
 * frees p at its end; ni_cuda_graphs_release (ni_cuda_ctx_free) releases
 * the device side of every graph of the context. */
void ni_cuda_capture_fail(ni_cuda_ctx *c, const char *fmt, ...);
int ni_cuda_capture_reject(ni_cuda_ctx *c, const char *what, char *err, int errlen);
void ni_cuda_capture_defer_free(ni_cuda_ctx *c, void *p);
void ni_cuda_graphs_release(ni_cuda_ctx *c);
#if defined(NI_SIMT)
/* Under the harness a launch, memset or device copy queued during a capture
 * is recorded as a closure (arguments copied) instead of running; it returns
 * 0, or nonzero for a failed kernel launch (simt::last_error() says why). */
void ni_cuda_capture_op(ni_cuda_ctx *c, const char *name, bool kernel, std::function<int()> fn);
#endif

/* Records the first error of the context (printf-style message). */
void ni_cuda_record(ni_cuda_ctx *c, int code, const char *fmt, ...);

/* Device scratch of at least `bytes` (256-aligned). With a bound region
 * (ni_cuda_bind_scratch: the engine's planned workspace term) it is that
 * region, and a larger request is an error; unbound, the context grows its
 * own buffer on demand. NULL (with an error recorded) when it cannot be
 * had, or when it would have to grow during a graph capture (the capture
 * fails). Valid until the next ni_cuda_scratch call that grows it or the
 * next bind (either bumps the memory generation). */
void *ni_cuda_scratch(ni_cuda_ctx *c, int64_t bytes);

#if defined(NI_SIMT)
/* Dry run: checks the configuration and logs it (ctx.cu). */
void ni_cuda_dry_record(ni_cuda_ctx *c, const char *name, dim3 grid, dim3 block, size_t smem);
#endif

/* Dynamic shared memory above the 48 KiB default needs an opt-in. */
#define NI_SMEM_DEFAULT (48 * 1024)

template <class... P, class... A>
static inline void ni_launch(ni_cuda_ctx *c, const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
                             size_t smem, A... args) {
#if defined(NI_SIMT)
    if (c->dry) {
        ni_cuda_dry_record(c, name, grid, block, smem);
        return;
    }
#endif
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return; /* empty shape: nothing to do */
#if defined(NI_SIMT)
    (void)c->stream;
    if (c->capturing) { /* recorded with its arguments; ni_cuda_graph_launch runs it */
        ni_cuda_capture_op(c, name, true, [=]() { return simt::launch(name, grid, block, smem, kernel, ((P)args)...); });
        return;
    }
    if (simt::launch(name, grid, block, smem, kernel, ((P)args)...) != 0)
        ni_cuda_record(c, 1, "kernel %s: %s", name, simt::last_error());
#else
    if (smem > NI_SMEM_DEFAULT) {
        cudaError_t e = cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) {
            ni_cuda_record(c, (int)e, "kernel %s: %zu bytes of shared memory: %s", name, smem, cudaGetErrorString(e));
            return;
        }
    }
    kernel<<<grid, block, smem, c->stream>>>(((P)args)...);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        ni_cuda_record(c, (int)e, "kernel %s grid (%u,%u,%u) block (%u,%u,%u) smem %zu: %s", name, grid.x, grid.y,
                       grid.z, block.x, block.y, block.z, smem, cudaGetErrorString(e));
#endif
}

#endif
