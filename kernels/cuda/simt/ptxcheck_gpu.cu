/*
 * ptxcheck_gpu.cu — the ptxcheck kernels on a real GPU (nvcc): the real
 * mma.sync / ldmatrix / cp.async instructions. Interface: ptxcheck.h,
 * prefix ptxc_gpu_. Built by build-ptxcheck.sh; needs sm_80+ (ptx.cuh).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "ptxcheck_kernels.cuh"

namespace {

char g_err[512];

int fail(const char *what, cudaError_t e) {
    snprintf(g_err, sizeof g_err, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
}

/* Device buffers of one call, freed on return. */
struct Bufs {
    void *p[8] = {};
    int n = 0;
    ~Bufs() {
        for (int i = 0; i < n; i++) cudaFree(p[i]);
    }
    /* Allocates `bytes` (filled from init, else with 0xff so that an
     * unwritten output cannot pass as zeros); returns nullptr on failure. */
    template <class T> T *get(size_t bytes, const void *init, cudaError_t *err) {
        void *d = nullptr;
        cudaError_t e = cudaMalloc(&d, bytes);
        if (e == cudaSuccess) {
            p[n++] = d;
            e = init ? cudaMemcpy(d, init, bytes, cudaMemcpyHostToDevice) : cudaMemset(d, 0xff, bytes);
        }
        if (e != cudaSuccess) {
            *err = e;
            return nullptr;
        }
        return static_cast<T *>(d);
    }
};

int finish(const char *kernel, void *host, const void *dev, size_t bytes) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return fail(kernel, e);
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return fail(kernel, e);
    e = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return fail("cudaMemcpy D2H", e);
    return 0;
}

} // namespace

extern "C" {

const char *ptxc_gpu_error(void) { return g_err; }

int ptxc_gpu_probe(char *msg, size_t n) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        /* The static runtime reports a missing libcuda.so.1 as an old driver. */
        const char *hint = e == cudaErrorInsufficientDriver
                               ? ": no NVIDIA driver (libcuda.so.1) was found, or it is older than this CUDA 13 runtime"
                               : "";
        snprintf(msg, n, "cudaGetDeviceCount: %s (%s)%s", cudaGetErrorString(e), cudaGetErrorName(e), hint);
        return 0;
    }
    if (count <= 0) {
        snprintf(msg, n, "cudaGetDeviceCount: no CUDA device");
        return 0;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        snprintf(msg, n, "cudaGetDeviceProperties(0): %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return 0;
    }
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    snprintf(msg, n, "%s, sm_%d%d, %d device(s), runtime %d, driver %d", prop.name, prop.major, prop.minor, count, rt,
             drv);
    if (prop.major < 8) {
        snprintf(msg, n, "device 0 (%s) is sm_%d%d: cp.async and bf16 mma.sync need sm_80+", prop.name, prop.major,
                 prop.minor);
        return 0;
    }
    return count;
}

int ptxc_gpu_mma_frag(int ntiles, const uint32_t *a, const uint32_t *b, const float *c, float *d) {
    const size_t n = (size_t)ntiles * 32;
    Bufs B;
    cudaError_t e = cudaSuccess;
    const uint32_t *da = B.get<const uint32_t>(n * 16, a, &e), *db = B.get<const uint32_t>(n * 8, b, &e);
    const float *dc = B.get<const float>(n * 16, c, &e);
    float *dd = B.get<float>(n * 16, nullptr, &e);
    if (e != cudaSuccess) return fail("cudaMalloc/cudaMemcpy", e);
    ptxc_k_mma_frag<<<ntiles, 32>>>(da, db, dc, dd);
    return finish("ptxc_k_mma_frag", d, dd, n * 16);
}

int ptxc_gpu_mma_ldm(int ntiles, int mode, const uint16_t *A, const uint16_t *Bm, const float *C, float *D) {
    const size_t n = (size_t)ntiles * 256;
    Bufs B;
    cudaError_t e = cudaSuccess;
    const uint16_t *dA = B.get<const uint16_t>(n * 2, A, &e), *dB = B.get<const uint16_t>(n * 2, Bm, &e);
    const float *dC = B.get<const float>(n * 4, C, &e);
    float *dD = B.get<float>(n * 4, nullptr, &e);
    if (e != cudaSuccess) return fail("cudaMalloc/cudaMemcpy", e);
    ptxc_k_mma_ldm<<<ntiles, 32>>>(mode, dA, dB, dC, dD);
    return finish("ptxc_k_mma_ldm", D, dD, n * 4);
}

int ptxc_gpu_ldm_raw(int ntiles, const uint16_t *tiles, const int32_t *rowsel, uint32_t *out) {
    const size_t nt = (size_t)ntiles;
    Bufs B;
    cudaError_t e = cudaSuccess;
    const uint16_t *dt = B.get<const uint16_t>(nt * 512 * 2, tiles, &e);
    const int32_t *dr = B.get<const int32_t>(nt * 32 * 4, rowsel, &e);
    uint32_t *dout = B.get<uint32_t>(nt * 4 * 32 * 4 * 4, nullptr, &e);
    if (e != cudaSuccess) return fail("cudaMalloc/cudaMemcpy", e);
    ptxc_k_ldm_raw<<<ntiles, 32>>>(dt, dr, dout);
    return finish("ptxc_k_ldm_raw", out, dout, nt * 4 * 32 * 4 * 4);
}

int ptxc_gpu_cp_async(int nblocks, const uint8_t *src, size_t src_bytes, const int32_t *off, const int32_t *sz,
                      uint8_t *out) {
    const size_t nc = (size_t)nblocks * PTXC_CP_COPIES * PTXC_CP_THREADS;
    Bufs B;
    cudaError_t e = cudaSuccess;
    const uint8_t *ds = B.get<const uint8_t>(src_bytes, src, &e);
    const int32_t *doff = B.get<const int32_t>(nc * 4, off, &e), *dsz = B.get<const int32_t>(nc * 4, sz, &e);
    uint8_t *dout = B.get<uint8_t>((size_t)nblocks * PTXC_CP_OUT_BYTES, nullptr, &e);
    if (e != cudaSuccess) return fail("cudaMalloc/cudaMemcpy", e);
    ptxc_k_cp_async<<<nblocks, PTXC_CP_THREADS>>>(ds, doff, dsz, dout);
    return finish("ptxc_k_cp_async", out, dout, (size_t)nblocks * PTXC_CP_OUT_BYTES);
}

} // extern "C"
