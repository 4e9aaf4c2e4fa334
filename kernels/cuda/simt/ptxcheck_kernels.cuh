/*
 * ptxcheck_kernels.cuh — test kernels for the inline-PTX wrappers of
 * ../ptx.cuh, compiled twice: by nvcc (ptxcheck_gpu.cu, the real
 * instructions) and by g++ -DNI_SIMT (ptxcheck_sim.cpp, the harness's
 * emulations). ptxcheck.h gives the buffer layouts. Device code only.
 * Everything is static: both translation units link into one program.
 */
#ifndef NI_PTXCHECK_KERNELS_CUH
#define NI_PTXCHECK_KERNELS_CUH

#include "ptx.cuh"
#include "ptxcheck.h"

/* mma.m16n8k16 on raw register fragments: no layout knowledge here. */
static __global__ void ptxc_k_mma_frag(const uint32_t *a, const uint32_t *b, const float *c, float *d) {
    const unsigned l = threadIdx.x;
    const size_t base = (size_t)blockIdx.x * 32 + l;
    uint32_t ra[4], rb[2];
    float rc[4], rd[4];
    for (int i = 0; i < 4; i++) ra[i] = a[base * 4 + i];
    for (int i = 0; i < 2; i++) rb[i] = b[base * 2 + i];
    for (int i = 0; i < 4; i++) rc[i] = c[base * 4 + i];
    ni_mma_bf16_16816(rd, ra, rb, rc);
    for (int i = 0; i < 4; i++) d[base * 4 + i] = rd[i];
}

/* D = A·B + C for one 16x16x16 tile per block, operands through ldmatrix.
 * Shared rows are padded to 24 b16 (48 bytes: 16-byte aligned, not 32). */
#define PTXC_LD 24
static __global__ void ptxc_k_mma_ldm(int mode, const uint16_t *A, const uint16_t *B, const float *C, float *D) {
    __shared__ __align__(16) uint16_t As[16 * PTXC_LD];
    __shared__ __align__(16) uint16_t Bs[16 * PTXC_LD];
    const unsigned l = threadIdx.x;
    const size_t t = blockIdx.x;
    for (unsigned e = l; e < 256; e += 32) {
        As[(e / 16) * PTXC_LD + e % 16] = A[t * 256 + e];
        Bs[(e / 16) * PTXC_LD + e % 16] = B[t * 256 + e];
    }
    __syncthreads();
    const unsigned g = l >> 2, tq = l & 3;
    uint32_t a[4];
    /* matrices: rows 0-7 k 0-7, rows 8-15 k 0-7, rows 0-7 k 8-15, rows 8-15 k 8-15 */
    ni_ldmatrix_x4(a, &As[(l % 16) * PTXC_LD + 8 * (l / 16)]);
    uint32_t b[2][2];
    if (mode == 0) { /* Bs[n][k]: non-transposed x2 per n-half */
        for (int j = 0; j < 2; j++)
            ni_ldmatrix_x2(b[j], &Bs[(8 * j + l % 8) * PTXC_LD + 8 * ((l / 8) % 2)]);
    } else if (mode == 1) { /* Bs[k][n]: one x4.trans, matrices (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15) */
        uint32_t r[4];
        ni_ldmatrix_x4_trans(r, &Bs[(l % 8 + 8 * ((l / 8) % 2)) * PTXC_LD + 8 * (l / 16)]);
        b[0][0] = r[0];
        b[0][1] = r[1];
        b[1][0] = r[2];
        b[1][1] = r[3];
    } else { /* Bs[k][n]: x2.trans per n-half */
        for (int j = 0; j < 2; j++) ni_ldmatrix_x2_trans(b[j], &Bs[(l % 16) * PTXC_LD + 8 * j]);
    }
    for (int j = 0; j < 2; j++) {
        float c[4], d[4];
        for (int q = 0; q < 4; q++) c[q] = C[t * 256 + (g + 8 * (q / 2)) * 16 + 8 * j + 2 * tq + q % 2];
        ni_mma_bf16_16816(d, a, b[j], c);
        for (int q = 0; q < 4; q++) D[t * 256 + (g + 8 * (q / 2)) * 16 + 8 * j + 2 * tq + q % 2] = d[q];
    }
}

/* Raw ldmatrix fragments of every variant; lanes 16-31 pass addresses too,
 * which .x2 must ignore. */
static __global__ void ptxc_k_ldm_raw(const uint16_t *tiles, const int32_t *rowsel, uint32_t *out) {
    __shared__ __align__(16) uint16_t S[64 * 8];
    const unsigned l = threadIdx.x;
    const size_t t = blockIdx.x;
    for (unsigned e = l; e < 512; e += 32) S[e] = tiles[t * 512 + e];
    __syncthreads();
    const uint16_t *row = &S[rowsel[t * 32 + l] * 8];
    uint32_t *o = out + t * 4 * 32 * 4;
    uint32_t r[4];
    ni_ldmatrix_x4(r, row);
    for (int i = 0; i < 4; i++) o[(0 * 32 + l) * 4 + i] = r[i];
    ni_ldmatrix_x2(r, row);
    for (int i = 0; i < 4; i++) o[(1 * 32 + l) * 4 + i] = i < 2 ? r[i] : 0xffffffffu;
    ni_ldmatrix_x4_trans(r, row);
    for (int i = 0; i < 4; i++) o[(2 * 32 + l) * 4 + i] = r[i];
    ni_ldmatrix_x2_trans(r, row);
    for (int i = 0; i < 4; i++) o[(3 * 32 + l) * 4 + i] = i < 2 ? r[i] : 0xffffffffu;
}

/* Copies 16 shared bytes to global with 32-bit loads (no vector types). */
static __device__ __forceinline__ void ptxc_put16(uint8_t *dst, const uint8_t *smem) {
    const uint32_t *s = (const uint32_t *)smem;
    uint32_t *d = (uint32_t *)dst;
    for (int i = 0; i < 4; i++) d[i] = s[i];
}

static __device__ __forceinline__ void ptxc_issue(uint8_t *slot, const uint8_t *src, int32_t off, int32_t sz) {
    if (sz < 0)
        ni_cp_async_16(slot, src + (size_t)off * 16);
    else
        ni_cp_async_16_zfill(slot, src + (size_t)off * 16, sz);
}

static __global__ void ptxc_k_cp_async(const uint8_t *src, const int32_t *off, const int32_t *sz, uint8_t *out) {
    enum { T = PTXC_CP_THREADS };
    __shared__ __align__(16) uint8_t S[PTXC_CP_SLOTS * T * 16];
    const unsigned i = threadIdx.x;
    const size_t blk = blockIdx.x;
    const int32_t *bo = off + blk * PTXC_CP_COPIES * T, *bs = sz + blk * PTXC_CP_COPIES * T;
    uint8_t *o = out + blk * PTXC_CP_OUT_BYTES;
    for (unsigned e = i; e < PTXC_CP_SLOTS * T * 16 / 4; e += T) ((uint32_t *)S)[e] = 0xa5a5a5a5u;
    __syncthreads();
#define PTXC_SLOT(s, th) (&S[((s) * T + (th)) * 16])
    ptxc_issue(PTXC_SLOT(0, i), src, bo[0 * T + i], bs[0 * T + i]);
    ni_cp_async_commit();
    ptxc_issue(PTXC_SLOT(1, i), src, bo[1 * T + i], bs[1 * T + i]);
    ni_cp_async_commit();
    ptxc_issue(PTXC_SLOT(2, i), src, bo[2 * T + i], bs[2 * T + i]);
    ptxc_issue(PTXC_SLOT(3, i), src, bo[3 * T + i], bs[3 * T + i]);
    ni_cp_async_commit();
    ni_cp_async_wait<2>(); /* group {0} is complete */
    ptxc_put16(o + (0 * T + i) * 16, PTXC_SLOT(0, i));
    ni_cp_async_wait<1>(); /* {1} */
    ptxc_put16(o + (1 * T + i) * 16, PTXC_SLOT(1, i));
    ni_cp_async_wait<0>(); /* {2,3} */
    ptxc_put16(o + (2 * T + i) * 16, PTXC_SLOT(2, i));
    ptxc_put16(o + (3 * T + i) * 16, PTXC_SLOT(3, i));
    __syncthreads(); /* every thread's copies are visible to the block */
    const unsigned nb = (i + 1) % T;
    for (int s = 0; s < 4; s++) ptxc_put16(o + ((4 + s) * T + i) * 16, PTXC_SLOT(s, nb));
    __syncthreads(); /* the neighbour has read slot 0 before it is overwritten */
    ptxc_issue(PTXC_SLOT(0, i), src, bo[4 * T + i], bs[4 * T + i]);
    ni_cp_async_wait_all();
    ptxc_put16(o + (8 * T + i) * 16, PTXC_SLOT(0, i));
#undef PTXC_SLOT
}

#endif /* NI_PTXCHECK_KERNELS_CUH */
