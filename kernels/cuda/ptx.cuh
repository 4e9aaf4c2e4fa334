/*
 * ptx.cuh — inline-PTX wrappers used by kernels.
 *
 * Each wrapper has a real inline-asm body under __CUDA_ARCH__ (sm_80+) and an
 * emulation call into the host SIMT harness under NI_SIMT
 * (kernels/cuda/simt/README.md says how each emulation reads the PTX ISA).
 * The nvcc host pass compiles the bodies away.
 *
 *   ni_mma_bf16_16816    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 *   ni_ldmatrix_x{2,4}[_trans]  ldmatrix.sync.aligned.m8n8.x{2,4}[.trans].shared.b16
 *   ni_cp_async_16[_zfill], ni_cp_async_commit, ni_cp_async_wait<N>,
 *   ni_cp_async_wait_all  cp.async.cg.shared.global 16 B + group control
 *
 * Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating
 * point type"; g = lane>>2, t = lane%4; low 16 bits = lower element index):
 *   a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]
 *   a[2] = A[g][2t+8..2t+9]  a[3] = A[g+8][2t+8..2t+9]     (A is 16x16, row)
 *   b[0] = B[2t..2t+1][g]    b[1] = B[2t+8..2t+9][g]        (B is 16x8, col)
 *   c/d[0..1] = C[g][2t..2t+1], c/d[2..3] = C[g+8][2t..2t+1] (C is 16x8, f32)
 */
#ifndef NI_PTX_CUH
#define NI_PTX_CUH

#if defined(NI_SIMT) && !defined(__CUDACC__)
#include "simt/simt.h"
#else
#include <stdint.h>
#endif

/* D = A·B + C for one warp (all 32 lanes must take part). */
__device__ __forceinline__ void ni_mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                  const float c[4]) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::mma_bf16_16816(d, a, b, c);
#endif
}

/* Lane L passes the shared-memory address of row L%8 of matrix L/8 (16-byte
 * aligned rows of 8 b16). For matrix i, lane L receives the 32-bit word of
 * row L>>2, columns 2*(L%4) and 2*(L%4)+1; .trans returns the transpose:
 * elements (2*(L%4), L>>2) and (2*(L%4)+1, L>>2). */
__device__ __forceinline__ void ni_ldmatrix_x4(uint32_t r[4], const void *smem_row) {
#if defined(__CUDA_ARCH__)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::ldmatrix(r, 4, 0, smem_row);
#endif
}

__device__ __forceinline__ void ni_ldmatrix_x2(uint32_t r[2], const void *smem_row) {
#if defined(__CUDA_ARCH__)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(s)
                 : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::ldmatrix(r, 2, 0, smem_row);
#endif
}

__device__ __forceinline__ void ni_ldmatrix_x4_trans(uint32_t r[4], const void *smem_row) {
#if defined(__CUDA_ARCH__)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s)
                 : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::ldmatrix(r, 4, 1, smem_row);
#endif
}

__device__ __forceinline__ void ni_ldmatrix_x2_trans(uint32_t r[2], const void *smem_row) {
#if defined(__CUDA_ARCH__)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(s)
                 : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::ldmatrix(r, 2, 1, smem_row);
#endif
}

/* 16-byte asynchronous global->shared copy (both addresses 16-byte aligned).
 * The data is visible only after a cp.async.wait that retires its group. */
__device__ __forceinline__ void ni_cp_async_16(void *smem, const void *gmem) {
#if defined(__CUDA_ARCH__)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::cp_async(smem, gmem, 16, 16);
#endif
}

/* As ni_cp_async_16, but reads only src_bytes (0..16) and zero-fills the
 * rest; src_bytes == 0 reads nothing (gmem may then be any address). */
__device__ __forceinline__ void ni_cp_async_16_zfill(void *smem, const void *gmem, int src_bytes) {
#if defined(__CUDA_ARCH__)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::cp_async(smem, gmem, 16, src_bytes);
#endif
}

__device__ __forceinline__ void ni_cp_async_commit() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::cp_async_commit();
#endif
}

/* Waits until at most N of this thread's most recent committed groups are
 * pending (cp.async.wait_group N). */
template <int N> __device__ __forceinline__ void ni_cp_async_wait() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::cp_async_wait(N);
#endif
}

/* Commits the open group and waits for all (cp.async.wait_all). */
__device__ __forceinline__ void ni_cp_async_wait_all() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#elif defined(NI_SIMT) && !defined(__CUDACC__)
    ::simt::detail::cp_async_wait_all();
#endif
}

#endif /* NI_PTX_CUH */
