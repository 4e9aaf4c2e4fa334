/*
 * ctx.cu — context, device memory and error reporting of the CUDA backend
 * (the analogue of kernels/cpu/pool.c). Under -DNI_SIMT the same functions
 * run on the host SIMT harness: device memory is guard-paged host memory,
 * copies are memcpy, the stream is implicit.
 */
#include "ctx.cuh"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_msg(char *dst, int len, const char *src) {
    if (dst && len > 0) {
        strncpy(dst, src, (size_t)len - 1);
        dst[len - 1] = 0;
    }
}

void ni_cuda_record(ni_cuda_ctx *c, int code, const char *fmt, ...) {
    if (c->capturing) { /* the op was not queued: the capture fails with its reason */
        if (c->capture_code) return;
        c->capture_code = code ? code : 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->capture_msg, sizeof c->capture_msg, fmt, ap);
        va_end(ap);
        return;
    }
    if (c->first_error) return;
    c->first_error = code ? code : 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
}

/* Whether the op scratch may grow to `bytes`: not into a bound region (the
 * plan's term is too small: an error naming both sizes) and not during a
 * capture (the capture fails). */
static bool scratch_may_grow(ni_cuda_ctx *c, int64_t bytes) {
    if (c->scratch_bound) {
        ni_cuda_record(c, 2,
                       "op scratch: an op needs %lld bytes, the workspace's op-scratch term holds %lld "
                       "(pkg/layout CUDAOpScratch does not cover this shape)",
                       (long long)bytes, (long long)c->scratch_bytes);
        return false;
    }
    if (c->capturing) {
        ni_cuda_capture_fail(c, "op scratch would grow from %lld to %lld bytes during graph capture (run the step eagerly once first)",
                             (long long)c->scratch_bytes, (long long)bytes);
        return false;
    }
    return true;
}

/* Dry-run state (ni_cuda_dry_run): the launch log, the scratch the logged
 * launches asked for, and the device facts to restore at the end. */
struct ni_cuda_dry {
    ni_cuda_launch *log;
    int64_t n, cap;
    int64_t scratch_bytes;
    int sm_count;
    int64_t max_smem_optin;
};

#if defined(NI_SIMT)

/* The launch limits of sm_70 and later (H200 included): the checks
 * cudaLaunchKernel makes before it runs anything. */
void ni_cuda_dry_record(ni_cuda_ctx *c, const char *name, dim3 grid, dim3 block, size_t smem) {
    struct ni_cuda_dry *d = c->dry;
    if (d->n == d->cap) {
        int64_t cap = d->cap ? 2 * d->cap : 1024;
        ni_cuda_launch *p = (ni_cuda_launch *)realloc(d->log, (size_t)cap * sizeof *p);
        if (!p) {
            ni_cuda_record(c, 2, "dry run: out of host memory for the launch log");
            return;
        }
        d->log = p;
        d->cap = cap;
    }
    ni_cuda_launch *l = &d->log[d->n++];
    l->kernel = name;
    l->grid[0] = grid.x, l->grid[1] = grid.y, l->grid[2] = grid.z;
    l->block[0] = block.x, l->block[1] = block.y, l->block[2] = block.z;
    l->smem = (int64_t)smem;
    l->skipped = grid.x == 0 || grid.y == 0 || grid.z == 0; /* ni_launch returns before launching */
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    const char *why = NULL;
    if (threads < 1 || threads > 1024) why = "block threads outside [1,1024]";
    else if (block.x > 1024 || block.y > 1024 || block.z > 64) why = "block dimension above (1024,1024,64)";
    else if (!l->skipped && (grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u))
        why = "grid dimension above (2^31-1,65535,65535)";
    else if ((int64_t)smem > c->info.max_smem_optin) why = "dynamic shared memory above the opt-in limit";
    l->invalid = why != NULL && !l->skipped;
    if (l->invalid)
        ni_cuda_record(c, 9, "dry run: kernel %s grid (%u,%u,%u) block (%u,%u,%u) smem %zu (limit %lld): %s", name,
                       grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, (long long)c->info.max_smem_optin, why);
}

int ni_cuda_dry_run(ni_cuda_ctx *c, int on, int sm_count, int64_t max_smem_optin) {
    if (on && !c->dry) {
        struct ni_cuda_dry *d = (struct ni_cuda_dry *)calloc(1, sizeof *d);
        if (!d) return -1;
        d->scratch_bytes = 0;
        d->sm_count = c->info.sm_count;
        d->max_smem_optin = c->info.max_smem_optin;
        c->dry = d;
    } else if (on) {
        c->dry->n = 0; /* restart: empty log, no scratch requested yet */
        c->dry->scratch_bytes = 0;
    } else if (c->dry) {
        c->info.sm_count = c->dry->sm_count;
        c->info.max_smem_optin = c->dry->max_smem_optin;
        free(c->dry->log);
        free(c->dry);
        c->dry = NULL;
        return 0;
    } else {
        return 0;
    }
    if (sm_count > 0) c->info.sm_count = sm_count;
    if (max_smem_optin > 0) c->info.max_smem_optin = max_smem_optin;
    return 0;
}

int64_t ni_cuda_dry_run_count(const ni_cuda_ctx *c) { return c->dry ? c->dry->n : 0; }

int ni_cuda_dry_run_get(const ni_cuda_ctx *c, int64_t i, ni_cuda_launch *out) {
    if (!c->dry || i < 0 || i >= c->dry->n) return -1;
    *out = c->dry->log[i];
    return 0;
}

int ni_cuda_probe(int *devices, int *driver_version, int *runtime_version, char *err, int errlen) {
    (void)err;
    (void)errlen;
    *devices = 1;
    *driver_version = 13000;
    *runtime_version = 13000;
    return 0;
}

ni_cuda_ctx *ni_cuda_ctx_new(int device, int *code, char *err, int errlen) {
    if (device != 0) {
        *code = 101; /* cudaErrorInvalidDevice */
        copy_msg(err, errlen, "simt: only device 0 exists");
        return NULL;
    }
    ni_cuda_ctx *c = (ni_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) {
        *code = 2;
        copy_msg(err, errlen, "out of host memory");
        return NULL;
    }
    c->d_err = (int32_t *)simt::device_malloc(NI_CUDA_ERR_N * sizeof(int32_t), "error counters");
    if (!c->d_err) {
        free(c);
        *code = 2;
        copy_msg(err, errlen, "simt: cannot allocate the error counters");
        return NULL;
    }
    /* The H200 facts the launchers size their routes from. */
    snprintf(c->info.name, sizeof c->info.name, "simt (host SIMT harness, H200 limits)");
    c->info.sm_major = 9;
    c->info.sm_minor = 0;
    c->info.sm_count = 132;
    c->info.runtime_version = 13000;
    c->info.driver_version = 13000;
    c->info.total_mem = (int64_t)141 << 30;
    c->info.max_smem_optin = 232448;
    c->info.l2_bytes = (int64_t)50 << 20;
    *code = 0;
    return c;
}

void ni_cuda_ctx_free(ni_cuda_ctx *c) {
    if (!c) return;
    ni_cuda_graphs_release(c);
    ni_cuda_dry_run(c, 0, 0, 0);
    if (c->scratch && !c->scratch_bound) simt::device_free(c->scratch);
    simt::device_free(c->d_err);
    free(c);
}

int ni_cuda_sync(ni_cuda_ctx *c, int32_t counters[NI_CUDA_ERR_N], char *err, int errlen) {
    if (c->capturing) {
        memset(counters, 0, NI_CUDA_ERR_N * sizeof(int32_t));
        return ni_cuda_capture_reject(c, "ni_cuda_sync (a stream synchronisation)", err, errlen);
    }
    for (int i = 0; i < NI_CUDA_ERR_N; i++) {
        counters[i] = c->d_err[i];
        c->d_err[i] = 0;
    }
    int code = c->first_error;
    if (code) copy_msg(err, errlen, c->errmsg);
    c->first_error = 0;
    c->errmsg[0] = 0;
    return code;
}

void *ni_cuda_malloc(ni_cuda_ctx *c, int64_t bytes, const char *name, int *code) {
    if (c->capturing) {
        *code = ni_cuda_capture_reject(c, "a device allocation", NULL, 0);
        return NULL;
    }
    void *p = bytes > 0 ? simt::device_malloc((size_t)bytes, name) : NULL;
    *code = p ? 0 : 2; /* cudaErrorMemoryAllocation */
    return p;
}
void ni_cuda_free(ni_cuda_ctx *c, void *p) {
    if (!p) return;
    if (c->capturing) {
        ni_cuda_capture_defer_free(c, p);
        return;
    }
    simt::device_free(p);
    c->mem_gen++;
}
int ni_cuda_h2d(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    if (c->capturing) return ni_cuda_capture_reject(c, "a host-to-device copy", NULL, 0);
    memcpy(dst, src, (size_t)n);
    return 0;
}
int ni_cuda_d2h(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    if (c->capturing) return ni_cuda_capture_reject(c, "a device-to-host copy", NULL, 0);
    memcpy(dst, src, (size_t)n);
    return 0;
}
int ni_cuda_d2d(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    if (c->capturing) {
        ni_cuda_capture_op(c, "device copy", false, [=]() {
            memmove(dst, src, (size_t)n);
            return 0;
        });
        return 0;
    }
    memmove(dst, src, (size_t)n);
    return 0;
}
int ni_cuda_memset(ni_cuda_ctx *c, void *dst, int v, int64_t n) {
    if (c->capturing) {
        ni_cuda_capture_op(c, "memset", false, [=]() {
            memset(dst, v, (size_t)n);
            return 0;
        });
        return 0;
    }
    memset(dst, v, (size_t)n);
    return 0;
}
void *ni_cuda_host_alloc(int64_t bytes) { return malloc((size_t)bytes); }
void ni_cuda_host_free(void *p) { free(p); }
int ni_cuda_h2d_async(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) { return ni_cuda_h2d(c, dst, src, n); }

void *ni_cuda_scratch(ni_cuda_ctx *c, int64_t bytes) {
    if (c->dry) { /* kernels do not run: a fake, aligned, never dereferenced address */
        if (bytes > c->dry->scratch_bytes) c->dry->scratch_bytes = bytes; /* exact: checked against pkg/layout */
        return (void *)(uintptr_t)0x7d0000000000ull;
    }
    if (bytes <= c->scratch_bytes) return c->scratch;
    if (!scratch_may_grow(c, bytes)) return NULL;
    int64_t n = ni_round_up(bytes, 1 << 16);
    void *p = simt::device_malloc((size_t)n, "op scratch");
    if (!p) {
        ni_cuda_record(c, 2, "op scratch: cannot allocate %lld bytes", (long long)n);
        return NULL;
    }
    if (c->scratch) simt::device_free(c->scratch);
    c->scratch = p;
    c->scratch_bytes = n;
    c->mem_gen++;
    return p;
}

/* Frees the context's own op scratch (kernels run synchronously here). */
static void scratch_release_own(ni_cuda_ctx *c) {
    if (c->scratch && !c->scratch_bound) simt::device_free(c->scratch);
}

#else /* real CUDA */

int ni_cuda_dry_run(ni_cuda_ctx *c, int on, int sm_count, int64_t max_smem_optin) {
    (void)c;
    (void)sm_count;
    (void)max_smem_optin;
    return on ? -1 : 0;
}
int64_t ni_cuda_dry_run_count(const ni_cuda_ctx *c) {
    (void)c;
    return 0;
}
int ni_cuda_dry_run_get(const ni_cuda_ctx *c, int64_t i, ni_cuda_launch *out) {
    (void)c;
    (void)i;
    (void)out;
    return -1;
}

static int rt_fail(cudaError_t e, const char *what, char *err, int errlen) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s: %s (CUDA error %d %s)", what, cudaGetErrorString(e), (int)e, cudaGetErrorName(e));
    copy_msg(err, errlen, buf);
    return (int)e;
}

int ni_cuda_probe(int *devices, int *driver_version, int *runtime_version, char *err, int errlen) {
    *devices = 0;
    *driver_version = 0;
    *runtime_version = 0;
    cudaRuntimeGetVersion(runtime_version);
    cudaDriverGetVersion(driver_version); /* 0 when no driver is installed */
    cudaError_t e = cudaGetDeviceCount(devices);
    if (e != cudaSuccess) {
        *devices = 0;
        return rt_fail(e, "cudaGetDeviceCount", err, errlen);
    }
    return 0;
}

ni_cuda_ctx *ni_cuda_ctx_new(int device, int *code, char *err, int errlen) {
    int n = 0, drv = 0, rt = 0;
    if ((*code = ni_cuda_probe(&n, &drv, &rt, err, errlen)) != 0) return NULL;
    if (device < 0 || device >= n) {
        *code = (int)cudaErrorInvalidDevice;
        char buf[128];
        snprintf(buf, sizeof buf, "device %d does not exist (%d CUDA devices)", device, n);
        copy_msg(err, errlen, buf);
        return NULL;
    }
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        *code = rt_fail(e, "cudaSetDevice", err, errlen);
        return NULL;
    }
    ni_cuda_ctx *c = (ni_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) {
        *code = (int)cudaErrorMemoryAllocation;
        copy_msg(err, errlen, "out of host memory");
        return NULL;
    }
    c->device = device;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->d_err, NI_CUDA_ERR_N * sizeof(int32_t))) != cudaSuccess ||
        (e = cudaMemset(c->d_err, 0, NI_CUDA_ERR_N * sizeof(int32_t))) != cudaSuccess) {
        *code = rt_fail(e, "context setup", err, errlen);
        ni_cuda_ctx_free(c);
        return NULL;
    }
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, device)) != cudaSuccess) {
        *code = rt_fail(e, "cudaGetDeviceProperties", err, errlen);
        ni_cuda_ctx_free(c);
        return NULL;
    }
    snprintf(c->info.name, sizeof c->info.name, "%s", p.name);
    c->info.device = device;
    c->info.sm_major = p.major;
    c->info.sm_minor = p.minor;
    c->info.sm_count = p.multiProcessorCount;
    c->info.runtime_version = rt;
    c->info.driver_version = drv;
    c->info.total_mem = (int64_t)p.totalGlobalMem;
    c->info.max_smem_optin = (int64_t)p.sharedMemPerBlockOptin;
    c->info.l2_bytes = (int64_t)p.l2CacheSize;
    *code = 0;
    return c;
}

void ni_cuda_ctx_free(ni_cuda_ctx *c) {
    if (!c) return;
    ni_cuda_graphs_release(c);
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->scratch && !c->scratch_bound) cudaFree(c->scratch);
    if (c->d_err) cudaFree(c->d_err);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

int ni_cuda_sync(ni_cuda_ctx *c, int32_t counters[NI_CUDA_ERR_N], char *err, int errlen) {
    if (c->capturing) {
        memset(counters, 0, NI_CUDA_ERR_N * sizeof(int32_t));
        return ni_cuda_capture_reject(c, "ni_cuda_sync (a stream synchronisation)", err, errlen);
    }
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) ni_cuda_record(c, (int)e, "stream: %s (CUDA error %d %s)", cudaGetErrorString(e), (int)e, cudaGetErrorName(e));
    memset(counters, 0, NI_CUDA_ERR_N * sizeof(int32_t));
    if (e == cudaSuccess) {
        cudaMemcpy(counters, c->d_err, NI_CUDA_ERR_N * sizeof(int32_t), cudaMemcpyDeviceToHost);
        cudaMemset(c->d_err, 0, NI_CUDA_ERR_N * sizeof(int32_t));
    }
    int code = c->first_error;
    if (code) copy_msg(err, errlen, c->errmsg);
    c->first_error = 0;
    c->errmsg[0] = 0;
    return code;
}

void *ni_cuda_malloc(ni_cuda_ctx *c, int64_t bytes, const char *name, int *code) {
    (void)name;
    if (c->capturing) {
        *code = ni_cuda_capture_reject(c, "a device allocation", NULL, 0);
        return NULL;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)bytes);
    *code = (int)e;
    if (e != cudaSuccess) return NULL;
    if ((e = cudaMemset(p, 0, (size_t)bytes)) != cudaSuccess) {
        cudaFree(p);
        *code = (int)e;
        return NULL;
    }
    return p;
}
void ni_cuda_free(ni_cuda_ctx *c, void *p) {
    if (!p) return;
    if (c->capturing) {
        ni_cuda_capture_defer_free(c, p);
        return;
    }
    cudaStreamSynchronize(c->stream);
    cudaFree(p);
    c->mem_gen++;
}
static int copy(ni_cuda_ctx *c, void *dst, const void *src, int64_t n, cudaMemcpyKind kind) {
    cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)n, kind, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return (int)e;
}
int ni_cuda_h2d(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    if (c->capturing) return ni_cuda_capture_reject(c, "a host-to-device copy", NULL, 0);
    return copy(c, dst, src, n, cudaMemcpyHostToDevice);
}
int ni_cuda_d2h(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    if (c->capturing) return ni_cuda_capture_reject(c, "a device-to-host copy", NULL, 0);
    return copy(c, dst, src, n, cudaMemcpyDeviceToHost);
}
int ni_cuda_d2d(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    return (int)cudaMemcpyAsync(dst, src, (size_t)n, cudaMemcpyDeviceToDevice, c->stream);
}
int ni_cuda_memset(ni_cuda_ctx *c, void *dst, int v, int64_t n) { return (int)cudaMemsetAsync(dst, v, (size_t)n, c->stream); }
void *ni_cuda_host_alloc(int64_t bytes) {
    void *p = NULL;
    return cudaMallocHost(&p, (size_t)bytes) == cudaSuccess ? p : NULL;
}
void ni_cuda_host_free(void *p) {
    if (p) cudaFreeHost(p);
}
int ni_cuda_h2d_async(ni_cuda_ctx *c, void *dst, const void *src, int64_t n) {
    if (c->capturing) return ni_cuda_capture_reject(c, "a host-to-device copy", NULL, 0);
    return (int)cudaMemcpyAsync(dst, src, (size_t)n, cudaMemcpyHostToDevice, c->stream);
}

void *ni_cuda_scratch(ni_cuda_ctx *c, int64_t bytes) {
    if (bytes <= c->scratch_bytes) return c->scratch;
    if (!scratch_may_grow(c, bytes)) return NULL;
    int64_t n = ni_round_up(bytes, 1 << 16);
    void *p = NULL;
    cudaStreamSynchronize(c->stream);
    cudaError_t e = cudaMalloc(&p, (size_t)n);
    if (e != cudaSuccess) {
        ni_cuda_record(c, (int)e, "op scratch: cannot allocate %lld bytes: %s", (long long)n, cudaGetErrorString(e));
        return NULL;
    }
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = p;
    c->scratch_bytes = n;
    c->mem_gen++;
    return p;
}

/* Frees the context's own op scratch once queued kernels are done with it. */
static void scratch_release_own(ni_cuda_ctx *c) {
    if (c->scratch && !c->scratch_bound) {
        cudaStreamSynchronize(c->stream);
        cudaFree(c->scratch);
    }
}

#endif

int ni_cuda_bind_scratch(ni_cuda_ctx *c, void *p, int64_t bytes) {
    if (c->capturing) {
        ni_cuda_capture_fail(c, "op scratch bound during graph capture");
        return NI_CUDA_CAPTURE_ERROR;
    }
    scratch_release_own(c);
    c->scratch = p;
    c->scratch_bytes = p ? bytes : 0;
    c->scratch_bound = p != NULL;
    c->mem_gen++;
    return 0;
}

void ni_cuda_ctx_info(const ni_cuda_ctx *c, ni_cuda_info *out) { *out = c->info; }
int64_t ni_cuda_scratch_bytes(const ni_cuda_ctx *c) { return c->dry ? c->dry->scratch_bytes : c->scratch_bytes; }

/* Graphs: capture and replay (ni_cuda.h). */
#include "graph.cuh"
