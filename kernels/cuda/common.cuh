/*
 * common.cuh — device helpers shared by every kernel family: the host/device
 * qualifier macro, number conversions, warp and block reductions and the
 * dynamic shared memory declaration. Device code only: no runtime API calls
 * and no <<<>>> here (the harness compiles this with g++ -DNI_SIMT).
 */
#ifndef NI_CUDA_COMMON_CUH
#define NI_CUDA_COMMON_CUH

#include <stdint.h>
#include <stddef.h>

#if defined(NI_SIMT)
#include "simt/simt.h"
#else
#include <cuda_runtime.h>
#endif

#include "../ninfer_ops.h"

/* NI_HD marks helpers usable on host and device (geometry shared by the
 * launcher and the kernel). */
#if defined(__CUDACC__)
#define NI_HD __host__ __device__ __forceinline__
#else
#define NI_HD inline
#endif

#if !defined(NI_SIMT)
/* The block's dynamic shared memory as bytes (16-byte aligned). */
#define NI_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

NI_HD int64_t ni_div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }
NI_HD int64_t ni_round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/* ---- number conversions (exact; identical to kernels/cpu/weights.c; the
 * ni_cu_ prefix keeps them apart from the host ni_* functions of
 * ninfer_ops.h, which live in the same binary) ---- */

__device__ __forceinline__ float ni_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* fp32 → bf16 bits, round to nearest even (NaN stays NaN). */
__device__ __forceinline__ uint16_t ni_f32_to_bf16(float f) {
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

__device__ __forceinline__ float ni_cu_f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
#else
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* 2^-24 */
        return s ? -v : v;
    }
    uint32_t u = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112) << 23) | (m << 13));
    return __uint_as_float(u);
#endif
}

/* fp32 → fp16 bits, round to nearest even, overflow to inf. */
__device__ __forceinline__ uint16_t ni_cu_f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    uint32_t x = __float_as_uint(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00 : 0x7c00);
    if (x >= 0x477ff000u) return sign | 0x7c00;
    if (x < 0x38800000u) return sign | (uint16_t)__float2int_rn(__uint_as_float(x) * 16777216.0f);
    uint32_t mant = x & 0x7fffffu, h = (((x >> 23) - 112) << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return sign | (uint16_t)h;
#endif
}

/* e4m3 (fn: no inf, 0x7f/0xff NaN) → fp32. */
__device__ __forceinline__ float ni_cu_e4m3_to_f32(uint8_t b) {
    uint32_t e = (b >> 3) & 15, m = b & 7, s = (uint32_t)(b & 0x80) << 24;
    if (e == 15 && m == 7) return __uint_as_float(0x7fc00000u);
    if (e == 0) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f)); /* m · 2^-9 */
    return __uint_as_float(s | ((e + 120) << 23) | (m << 20));
}

/* fp32 → e4m3, round to nearest even, saturating at ±448 (NaN → 0x7f). */
__device__ __forceinline__ uint8_t ni_cu_f32_to_e4m3(float f) {
    uint32_t x = __float_as_uint(f);
    uint8_t sign = (uint8_t)((x >> 24) & 0x80);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7f;
    float a = fabsf(f);
    if (a > 448.0f) a = 448.0f;
    if (a < 0.015625f) return sign | (uint8_t)__float2int_rn(a * 512.0f); /* subnormal: m · 2^-9 */
    uint32_t u = __float_as_uint(a);
    int E = (int)(u >> 23) - 127;                     /* a = 1.f · 2^E, E ∈ [-6, 8] */
    uint32_t mant = u & 0x7fffffu, m = mant >> 20, rem = mant & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (m & 1u))) m++;
    if (m == 8) {
        m = 0;
        E++;
    }
    return sign | (uint8_t)(((E + 7) << 3) | m);
}

/* e2m1 code (4 bits) → fp32. */
__device__ __forceinline__ float ni_e2m1_to_f32(uint32_t c) {
    const float mag = (c & 7) < 2 ? 0.5f * (float)(c & 7) : (float)(1u << (((c & 7) >> 1) - 1)) * (1.0f + 0.5f * (float)(c & 1));
    return (c & 8) ? -mag : mag;
}

/* ---- math as in kernels/cpu (same formulas) ---- */
__device__ __forceinline__ float ni_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float ni_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float ni_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* ---- reductions ---- */
__device__ __forceinline__ float ni_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float ni_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, ≤ 1024); every thread
 * gets the result. `red` is a __shared__ float[32] of the caller. */
__device__ __forceinline__ float ni_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ni_warp_sum(v);
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return ni_warp_sum(v);
}
__device__ __forceinline__ float ni_block_max(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ni_warp_max(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return ni_warp_max(v);
}

/* Element pointer of ni_rows (t, h, d). */
__device__ __forceinline__ float *ni_at(const ni_rows &r, int64_t t, int64_t h, int64_t d) {
    return r.p + t * r.ld + h * r.hs + d;
}

#endif
