/*
 * ptxcheck.h — the host-side interface of ptxcheck (README.md, "ptxcheck"):
 * the same test kernels (ptxcheck_kernels.cuh) run under the SIMT harness
 * (ptxcheck_sim.cpp, g++ -DNI_SIMT, prefix ptxc_sim_) and on a GPU
 * (ptxcheck_gpu.cu, nvcc, prefix ptxc_gpu_). Plain C: no CUDA or harness
 * headers, so ptxcheck_main.cpp compiles with a bare g++.
 *
 * Every pointer is host memory; each call allocates device buffers, copies
 * in, launches, copies out and frees. Returns 0, or nonzero with a one-line
 * message from ptxc_*_error(). Buffer layouts (u16 = bf16 bits):
 *
 *   mma_frag  grid ntiles, one warp each: lane l of tile t passes
 *             a[t][l][0..3], b[t][l][0..1], c[t][l][0..3] to mma.m16n8k16 and
 *             writes d[t][l][0..3].
 *   mma_ldm   tile t: A[t] 16x16 row-major (m,k); B[t] 16x16, mode 0 n-major
 *             (B[n][k], loaded with ldmatrix .x2), modes 1 and 2 k-major
 *             (B[k][n], loaded with .x4.trans / .x2.trans); C[t], D[t] 16x16
 *             row-major f32 (m,n). A goes through ldmatrix .x4; two mma per
 *             tile (n 0..7, 8..15).
 *   ldm_raw   tile t: 64 rows of 8 u16 (tiles[t][64][8]) in shared memory;
 *             lane l passes the address of row rowsel[t][l]; out[t][v][l][0..3]
 *             for v = 0 x4, 1 x2, 2 x4.trans, 3 x2.trans (the x2 slots 2..3
 *             hold 0xffffffff).
 *   cp_async  PTXC_CP_THREADS threads per block; thread i of block blk owns
 *             PTXC_CP_SLOTS 16-byte shared slots (slot s at
 *             (s*PTXC_CP_THREADS + i)*16), pre-filled with 0xa5. Copy j
 *             (j = 0..PTXC_CP_COPIES-1) reads src + 16*off[blk][j][i] into slot
 *             j (copy 4 into slot 0 again), as a plain 16-byte cp.async when
 *             sz[blk][j][i] < 0, else zfill with src-size sz. Groups: {0} {1}
 *             {2,3}, then wait_group 2/1/0 with the thread reading its own
 *             slot 0 / 1 / 2,3 after each; __syncthreads; each thread reads
 *             its neighbour's (i+1) slots 0..3; __syncthreads; copy 4 to
 *             slot 0, wait_all (no commit of its own), read own slot 0.
 *             out[blk] = part 0 [4][threads][16] (own, after the waits),
 *             part 1 [4][threads][16] (neighbour's, indexed by the reader),
 *             part 2 [threads][16] (own slot 0 after copy 4).
 */
#ifndef NI_PTXCHECK_H
#define NI_PTXCHECK_H

#include <stddef.h>
#include <stdint.h>

#define PTXC_CP_THREADS 64
#define PTXC_CP_SLOTS 4
#define PTXC_CP_COPIES 5
#define PTXC_CP_OUT_BYTES (9 * PTXC_CP_THREADS * 16) /* per block */

#ifdef __cplusplus
extern "C" {
#endif

#define PTXC_DECLARE(p)                                                                                       \
    int p##_mma_frag(int ntiles, const uint32_t *a, const uint32_t *b, const float *c, float *d);             \
    int p##_mma_ldm(int ntiles, int mode, const uint16_t *A, const uint16_t *B, const float *C, float *D);    \
    int p##_ldm_raw(int ntiles, const uint16_t *tiles, const int32_t *rowsel, uint32_t *out);                 \
    int p##_cp_async(int nblocks, const uint8_t *src, size_t src_bytes, const int32_t *off, const int32_t *sz, \
                     uint8_t *out);                                                                           \
    const char *p##_error(void);

PTXC_DECLARE(ptxc_sim)
PTXC_DECLARE(ptxc_gpu)

/* Number of CUDA devices (> 0), or 0 with the reason in msg. When > 0, msg
 * holds the name and compute capability of device 0, which the checks use. */
int ptxc_gpu_probe(char *msg, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* NI_PTXCHECK_H */
