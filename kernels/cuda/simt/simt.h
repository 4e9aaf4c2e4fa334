/*
 * simt.h — host SIMT harness: lets CUDA kernel bodies (.cuh) compile with
 * g++ -std=c++17 -DNI_SIMT and run on the CPU (README.md in this folder).
 *
 * Included by kernels/cuda/common.cuh when NI_SIMT is defined. Provides the
 * CUDA keywords, built-in variables, vector types, warp collectives, atomics
 * and intrinsics that kernels use, plus the host launch API simt::launch.
 *
 * Threads of a block are fibers that switch only at __syncthreads and warp
 * collectives; blocks run on up to NI_SIMT_WORKERS OS threads.
 */
#ifndef NI_SIMT_H
#define NI_SIMT_H

#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#error "simt.h is the host harness; do not include it from nvcc"
#endif

#include <assert.h> /* device code may call assert and printf without includes */
#include <cmath>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- keywords ----------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ /* empty: libstdc++ spells __attribute__((__noinline__)) */
#define __launch_bounds__(...)
/* GNU form, not alignas: `__shared__ __align__(16) float x[]` puts the
 * alignment between decl-specifiers, where alignas is ill-formed. */
#define __align__(n) __attribute__((aligned(n)))
/* __restrict__ is a native g++ keyword. */

/* Kernel-scope shared arrays: one instance per OS thread, and each OS thread
 * runs one block at a time, so this is per block. No initialisers. */
#define __shared__ static thread_local

/* The block's dynamic shared memory (16-byte aligned, `smem` bytes of the
 * launch). Kernel scope only. */
#define NI_DYN_SMEM(name) unsigned char *name = ::simt::detail::t_blk->dsmem

/* ---- vector types --------------------------------------------------------- */

#define NI_SIMT_VEC2(T, name, al) \
    struct __attribute__((aligned(al))) name { T x, y; }; \
    static __inline__ name make_##name(T x, T y) { name v; v.x = x; v.y = y; return v; }
#define NI_SIMT_VEC3(T, name) \
    struct name { T x, y, z; }; \
    static __inline__ name make_##name(T x, T y, T z) { name v; v.x = x; v.y = y; v.z = z; return v; }
#define NI_SIMT_VEC4(T, name, al) \
    struct __attribute__((aligned(al))) name { T x, y, z, w; }; \
    static __inline__ name make_##name(T x, T y, T z, T w) { name v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }

NI_SIMT_VEC2(signed char, char2, 2)
NI_SIMT_VEC2(unsigned char, uchar2, 2)
NI_SIMT_VEC4(signed char, char4, 4)
NI_SIMT_VEC4(unsigned char, uchar4, 4)
NI_SIMT_VEC2(short, short2, 4)
NI_SIMT_VEC2(unsigned short, ushort2, 4)
NI_SIMT_VEC4(short, short4, 8)
NI_SIMT_VEC4(unsigned short, ushort4, 8)
NI_SIMT_VEC2(int, int2, 8)
NI_SIMT_VEC3(int, int3)
NI_SIMT_VEC4(int, int4, 16)
NI_SIMT_VEC2(unsigned int, uint2, 8)
NI_SIMT_VEC3(unsigned int, uint3)
NI_SIMT_VEC4(unsigned int, uint4, 16)
NI_SIMT_VEC2(float, float2, 8)
NI_SIMT_VEC3(float, float3)
NI_SIMT_VEC4(float, float4, 16)
NI_SIMT_VEC2(long long, longlong2, 16)
NI_SIMT_VEC2(unsigned long long, ulonglong2, 16)
NI_SIMT_VEC2(double, double2, 16)
#undef NI_SIMT_VEC2
#undef NI_SIMT_VEC3
#undef NI_SIMT_VEC4

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 layout");
static_assert(sizeof(uint2) == 8 && alignof(uint2) == 8, "uint2 layout");
static_assert(sizeof(uint3) == 12, "uint3 layout");

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

static constexpr int warpSize = 32;

/* ---- harness internals visible to kernels -------------------------------- */

namespace simt {
namespace detail {

struct ThreadCtx { /* first member of the per-thread fiber record */
    uint3 tid;
    unsigned int lin; /* linear thread index, x fastest */
};
struct BlockCtx {
    uint3 bid;
    dim3 bdim;
    dim3 gdim;
    unsigned char *dsmem;
};

extern __thread ThreadCtx *t_thr __attribute__((tls_model("initial-exec")));
extern __thread BlockCtx *t_blk __attribute__((tls_model("initial-exec")));

/* Block barrier; op: 0 plain, 1 count, 2 and, 3 or. Returns the reduction. */
int barrier(int op, int pred);
/* Warp collectives (implemented as a warp rendezvous). */
enum ShflMode { SHFL_IDX = 0, SHFL_UP = 1, SHFL_DOWN = 2, SHFL_XOR = 3 };
uint64_t shfl(int mode, unsigned mask, uint64_t v, int size, int arg, int width);
unsigned vote(int op, unsigned mask, int pred); /* 0 ballot, 1 any, 2 all */
void syncwarp(unsigned mask);
unsigned activemask();
/* op: 0 add, 1 min, 2 max, 3 and, 4 or, 5 xor; sgn: signed compare */
unsigned reduce(int op, int sgn, unsigned mask, unsigned v);
[[noreturn]] void trap(const char *what);

/* PTX emulations (ptx.cuh calls these). */
void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);
void ldmatrix(uint32_t *r, int num, int trans, const void *row);
void cp_async(void *smem, const void *gmem, int cp_bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int n);
void cp_async_wait_all();

typedef void (*Invoke)(void *frame);
int launch_raw(const char *name, dim3 grid, dim3 block, size_t smem, void *frame, Invoke inv);

template <class T> static __inline__ uint64_t to_bits(const T &v) {
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    return u;
}
template <class T> static __inline__ T from_bits(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof(T));
    return v;
}
template <class T> struct shfl_ok {
    static constexpr bool value = std::is_trivially_copyable<T>::value && (sizeof(T) == 4 || sizeof(T) == 8);
};

} // namespace detail

/* ---- launch API ------------------------------------------------------------ */

/* Runs kernel k over grid×block with `smem` bytes of dynamic shared memory.
 * Returns 0, or nonzero after recording a one-line message (kernel name,
 * block, thread, what went wrong) retrievable by last_error(). */
template <class... P, class... A>
int launch(const char *name, dim3 grid, dim3 block, size_t smem, void (*k)(P...), A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "simt::launch: argument count differs from the kernel's");
    struct Frame {
        void (*k)(P...);
        std::tuple<P...> a;
    };
    Frame f{k, std::tuple<P...>(std::forward<A>(args)...)};
    return detail::launch_raw(name, grid, block, smem, &f, [](void *p) {
        Frame *fr = static_cast<Frame *>(p);
        std::apply(fr->k, fr->a);
    });
}
const char *last_error();
/* Guard-paged, zeroed, 256-byte aligned; nullptr on failure. */
void *device_malloc(size_t bytes, const char *name);
void device_free(void *p);
size_t device_bytes_in_use();
/* Number of worker OS threads launches use (NI_SIMT_WORKERS). */
int workers();
/* The mma.sync accumulation model in use (NINFER_SIMT_MMA, tcmodel.h):
 * "ieee", "a100", "h100" or "b200". */
const char *mma_model();
/* Fiber switches performed so far (for speed reports). */
unsigned long long fiber_switches();

} // namespace simt

/* ---- built-in variables --------------------------------------------------- */

#define threadIdx (::simt::detail::t_thr->tid)
#define blockIdx (::simt::detail::t_blk->bid)
#define blockDim (::simt::detail::t_blk->bdim)
#define gridDim (::simt::detail::t_blk->gdim)

/* ---- synchronisation ------------------------------------------------------ */

static __inline__ void __syncthreads() { ::simt::detail::barrier(0, 0); }
static __inline__ int __syncthreads_count(int p) { return ::simt::detail::barrier(1, p); }
static __inline__ int __syncthreads_and(int p) { return ::simt::detail::barrier(2, p); }
static __inline__ int __syncthreads_or(int p) { return ::simt::detail::barrier(3, p); }
static __inline__ void __syncwarp(unsigned mask = 0xffffffffu) { ::simt::detail::syncwarp(mask); }
static __inline__ void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __inline__ void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __inline__ void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static __inline__ void __nanosleep(unsigned) {}
[[noreturn]] static __inline__ void __trap() { ::simt::detail::trap("__trap()"); }
[[noreturn]] static __inline__ void __brkpt() { ::simt::detail::trap("__brkpt()"); }

/* ---- warp collectives ----------------------------------------------------- */

template <class T> static __inline__ T __shfl_sync(unsigned mask, T v, int srcLane, int width = 32) {
    static_assert(::simt::detail::shfl_ok<T>::value, "__shfl_sync: T must be trivially copyable, 4 or 8 bytes");
    return ::simt::detail::from_bits<T>(::simt::detail::shfl(::simt::detail::SHFL_IDX, mask, ::simt::detail::to_bits(v), (int)sizeof(T), srcLane, width));
}
template <class T> static __inline__ T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    static_assert(::simt::detail::shfl_ok<T>::value, "__shfl_up_sync: T must be trivially copyable, 4 or 8 bytes");
    return ::simt::detail::from_bits<T>(::simt::detail::shfl(::simt::detail::SHFL_UP, mask, ::simt::detail::to_bits(v), (int)sizeof(T), (int)delta, width));
}
template <class T> static __inline__ T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    static_assert(::simt::detail::shfl_ok<T>::value, "__shfl_down_sync: T must be trivially copyable, 4 or 8 bytes");
    return ::simt::detail::from_bits<T>(::simt::detail::shfl(::simt::detail::SHFL_DOWN, mask, ::simt::detail::to_bits(v), (int)sizeof(T), (int)delta, width));
}
template <class T> static __inline__ T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
    static_assert(::simt::detail::shfl_ok<T>::value, "__shfl_xor_sync: T must be trivially copyable, 4 or 8 bytes");
    return ::simt::detail::from_bits<T>(::simt::detail::shfl(::simt::detail::SHFL_XOR, mask, ::simt::detail::to_bits(v), (int)sizeof(T), laneMask, width));
}
static __inline__ unsigned __ballot_sync(unsigned mask, int pred) { return ::simt::detail::vote(0, mask, pred); }
static __inline__ int __any_sync(unsigned mask, int pred) { return (int)::simt::detail::vote(1, mask, pred); }
static __inline__ int __all_sync(unsigned mask, int pred) { return (int)::simt::detail::vote(2, mask, pred); }
static __inline__ unsigned __activemask() { return ::simt::detail::activemask(); }
static __inline__ int __reduce_add_sync(unsigned mask, int v) { return (int)::simt::detail::reduce(0, 1, mask, (unsigned)v); }
static __inline__ unsigned __reduce_add_sync(unsigned mask, unsigned v) { return ::simt::detail::reduce(0, 0, mask, v); }
static __inline__ int __reduce_min_sync(unsigned mask, int v) { return (int)::simt::detail::reduce(1, 1, mask, (unsigned)v); }
static __inline__ unsigned __reduce_min_sync(unsigned mask, unsigned v) { return ::simt::detail::reduce(1, 0, mask, v); }
static __inline__ int __reduce_max_sync(unsigned mask, int v) { return (int)::simt::detail::reduce(2, 1, mask, (unsigned)v); }
static __inline__ unsigned __reduce_max_sync(unsigned mask, unsigned v) { return ::simt::detail::reduce(2, 0, mask, v); }
static __inline__ unsigned __reduce_and_sync(unsigned mask, unsigned v) { return ::simt::detail::reduce(3, 0, mask, v); }
static __inline__ unsigned __reduce_or_sync(unsigned mask, unsigned v) { return ::simt::detail::reduce(4, 0, mask, v); }
static __inline__ unsigned __reduce_xor_sync(unsigned mask, unsigned v) { return ::simt::detail::reduce(5, 0, mask, v); }

/* ---- atomics (CUDA semantics: return the old value; relaxed) --------------- */

namespace simt {
namespace detail {
template <class T, class F> static __inline__ T atomic_rmw(T *p, F f) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <class F> static __inline__ float atomic_rmw_f(float *p, F f) {
    uint32_t *u = reinterpret_cast<uint32_t *>(p);
    uint32_t old = __atomic_load_n(u, __ATOMIC_RELAXED);
    for (;;) {
        float o, n;
        memcpy(&o, &old, 4);
        n = f(o);
        uint32_t nu;
        memcpy(&nu, &n, 4);
        if (__atomic_compare_exchange_n(u, &old, nu, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return o;
    }
}
template <class F> static __inline__ double atomic_rmw_d(double *p, F f) {
    uint64_t *u = reinterpret_cast<uint64_t *>(p);
    uint64_t old = __atomic_load_n(u, __ATOMIC_RELAXED);
    for (;;) {
        double o, n;
        memcpy(&o, &old, 8);
        n = f(o);
        uint64_t nu;
        memcpy(&nu, &n, 8);
        if (__atomic_compare_exchange_n(u, &old, nu, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return o;
    }
}
} // namespace detail
} // namespace simt

#define NI_SIMT_ATOMIC_INT(T)                                                                                    \
    static __inline__ T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }             \
    static __inline__ T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }             \
    static __inline__ T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }           \
    static __inline__ T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }             \
    static __inline__ T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }               \
    static __inline__ T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }             \
    static __inline__ T atomicMax(T *p, T v) {                                                                  \
        return ::simt::detail::atomic_rmw(p, [v](T o) { return o < v ? v : o; });                               \
    }                                                                                                           \
    static __inline__ T atomicMin(T *p, T v) {                                                                  \
        return ::simt::detail::atomic_rmw(p, [v](T o) { return v < o ? v : o; });                               \
    }                                                                                                           \
    static __inline__ T atomicCAS(T *p, T cmp, T v) {                                                           \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                     \
        return cmp;                                                                                             \
    }
NI_SIMT_ATOMIC_INT(int)
NI_SIMT_ATOMIC_INT(unsigned int)
NI_SIMT_ATOMIC_INT(long long)
NI_SIMT_ATOMIC_INT(unsigned long long)
#undef NI_SIMT_ATOMIC_INT

static __inline__ float atomicAdd(float *p, float v) {
    return ::simt::detail::atomic_rmw_f(p, [v](float o) { return o + v; });
}
static __inline__ double atomicAdd(double *p, double v) {
    return ::simt::detail::atomic_rmw_d(p, [v](double o) { return o + v; });
}
static __inline__ float atomicExch(float *p, float v) {
    return ::simt::detail::atomic_rmw_f(p, [v](float) { return v; });
}
/* ((old >= v) ? 0 : old + 1) and (((old == 0) || (old > v)) ? v : old - 1) */
static __inline__ unsigned atomicInc(unsigned *p, unsigned v) {
    return ::simt::detail::atomic_rmw(p, [v](unsigned o) { return o >= v ? 0u : o + 1u; });
}
static __inline__ unsigned atomicDec(unsigned *p, unsigned v) {
    return ::simt::detail::atomic_rmw(p, [v](unsigned o) { return (o == 0u || o > v) ? v : o - 1u; });
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicCAS_block atomicCAS

/* ---- math and bit intrinsics ---------------------------------------------- */

namespace simt {
namespace detail {
static __inline__ float f_exp(float x) { return ::expf(x); }
static __inline__ float f_log(float x) { return ::logf(x); }
static __inline__ float f_log2(float x) { return ::log2f(x); }
static __inline__ float f_log10(float x) { return ::log10f(x); }
static __inline__ float f_exp10(float x) { return ::powf(10.0f, x); }
static __inline__ float f_pow(float x, float y) { return ::powf(x, y); }
static __inline__ float f_sin(float x) { return ::sinf(x); }
static __inline__ float f_cos(float x) { return ::cosf(x); }
static __inline__ float f_tan(float x) { return ::tanf(x); }
} // namespace detail
} // namespace simt
/* glibc's <math.h> already declares __expf, __logf, ... (internal aliases),
 * so these are macros rather than overloads. */
#define __expf(x) ::simt::detail::f_exp(x)
#define __logf(x) ::simt::detail::f_log(x)
#define __log2f(x) ::simt::detail::f_log2(x)
#define __log10f(x) ::simt::detail::f_log10(x)
#define __exp10f(x) ::simt::detail::f_exp10(x)
#define __powf(x, y) ::simt::detail::f_pow(x, y)
#define __sinf(x) ::simt::detail::f_sin(x)
#define __cosf(x) ::simt::detail::f_cos(x)
#define __tanf(x) ::simt::detail::f_tan(x)
#define __exp2f(x) ::exp2f(x) /* not a CUDA intrinsic; kernels should call exp2f */

static __inline__ float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static __inline__ double rsqrt(double x) { return 1.0 / sqrt(x); }
static __inline__ float __fdividef(float a, float b) { return a / b; }
static __inline__ float fdividef(float a, float b) { return a / b; }
static __inline__ float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; } /* NaN -> 0 */
static __inline__ float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static __inline__ float __fadd_rn(float a, float b) { return a + b; }
static __inline__ float __fsub_rn(float a, float b) { return a - b; }
static __inline__ float __fmul_rn(float a, float b) { return a * b; }
static __inline__ float __fdiv_rn(float a, float b) { return a / b; }
static __inline__ float __frcp_rn(float x) { return 1.0f / x; }
static __inline__ float __fsqrt_rn(float x) { return sqrtf(x); }
static __inline__ double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static __inline__ float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }

static __inline__ unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
static __inline__ float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
static __inline__ int __float_as_int(float x) { int u; memcpy(&u, &x, 4); return u; }
static __inline__ float __int_as_float(int u) { float x; memcpy(&x, &u, 4); return x; }
static __inline__ long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }
static __inline__ double __longlong_as_double(long long u) { double x; memcpy(&x, &u, 8); return x; }

static __inline__ int __popc(unsigned x) { return __builtin_popcount(x); }
static __inline__ int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static __inline__ int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static __inline__ int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static __inline__ int __ffs(int x) { return __builtin_ffs(x); }
static __inline__ int __ffsll(long long x) { return __builtin_ffsll(x); }
static __inline__ unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static __inline__ unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static __inline__ unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
static __inline__ unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (sh & 31)) >> 32);
}
static __inline__ unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (sh > 32 ? 32 : sh)) >> 32);
}
static __inline__ unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (sh & 31));
}
static __inline__ unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned sh) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (sh > 32 ? 32 : sh));
}
static __inline__ unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static __inline__ int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static __inline__ unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static __inline__ int __mul24(int a, int b) { return (int)((a << 8) >> 8) * (int)((b << 8) >> 8); }
static __inline__ unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static __inline__ int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
    return c;
}
static __inline__ unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 4; i++) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
    return c;
}

/* Conversions: NaN -> 0, out of range saturates (CUDA cvt.*.sat semantics). */
namespace simt {
namespace detail {
static __inline__ int f2i_sat(double r) {
    if (r != r) return 0;
    if (r >= 2147483647.0) return 2147483647;
    if (r <= -2147483648.0) return (int)(-2147483647 - 1);
    return (int)r;
}
static __inline__ unsigned f2u_sat(double r) {
    if (r != r || r <= 0.0) return 0u;
    if (r >= 4294967295.0) return 4294967295u;
    return (unsigned)r;
}
} // namespace detail
} // namespace simt
static __inline__ int __float2int_rn(float x) { return ::simt::detail::f2i_sat(nearbyint((double)x)); }
static __inline__ int __float2int_rz(float x) { return ::simt::detail::f2i_sat(trunc((double)x)); }
static __inline__ int __float2int_rd(float x) { return ::simt::detail::f2i_sat(floor((double)x)); }
static __inline__ int __float2int_ru(float x) { return ::simt::detail::f2i_sat(ceil((double)x)); }
static __inline__ unsigned __float2uint_rn(float x) { return ::simt::detail::f2u_sat(nearbyint((double)x)); }
static __inline__ unsigned __float2uint_rz(float x) { return ::simt::detail::f2u_sat(trunc((double)x)); }
static __inline__ unsigned __float2uint_rd(float x) { return ::simt::detail::f2u_sat(floor((double)x)); }
static __inline__ unsigned __float2uint_ru(float x) { return ::simt::detail::f2u_sat(ceil((double)x)); }
static __inline__ float __int2float_rn(int x) { return (float)x; }
static __inline__ float __uint2float_rn(unsigned x) { return (float)x; }
static __inline__ float __ll2float_rn(long long x) { return (float)x; }
static __inline__ int __double2int_rn(double x) { return ::simt::detail::f2i_sat(nearbyint(x)); }
static __inline__ float __double2float_rn(double x) { return (float)x; }

/* Cached / streaming loads and stores: plain memory accesses here. */
template <class T> static __inline__ T __ldg(const T *p) { return *p; }
template <class T> static __inline__ T __ldcg(const T *p) { return *p; }
template <class T> static __inline__ T __ldca(const T *p) { return *p; }
template <class T> static __inline__ T __ldcs(const T *p) { return *p; }
template <class T> static __inline__ T __ldlu(const T *p) { return *p; }
template <class T> static __inline__ T __ldcv(const T *p) { return *p; }
template <class T> static __inline__ void __stcg(T *p, T v) { *p = v; }
template <class T> static __inline__ void __stcs(T *p, T v) { *p = v; }
template <class T> static __inline__ void __stwb(T *p, T v) { *p = v; }
template <class T> static __inline__ void __stwt(T *p, T v) { *p = v; }

/* Generic -> shared-window address: kernels only pass it to ptx.cuh. */
static __inline__ size_t __cvta_generic_to_shared(const void *p) { return (size_t)p; }

/* min/max overloads as in CUDA's math_functions.hpp (device code calls them
 * unqualified). */
static __inline__ int min(int a, int b) { return a < b ? a : b; }
static __inline__ int max(int a, int b) { return a > b ? a : b; }
static __inline__ unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static __inline__ unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static __inline__ unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static __inline__ unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static __inline__ unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static __inline__ unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static __inline__ long min(long a, long b) { return a < b ? a : b; }
static __inline__ long max(long a, long b) { return a > b ? a : b; }
static __inline__ unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static __inline__ unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static __inline__ unsigned long min(long a, unsigned long b) { return min((unsigned long)a, b); }
static __inline__ unsigned long max(long a, unsigned long b) { return max((unsigned long)a, b); }
static __inline__ unsigned long min(unsigned long a, long b) { return min(a, (unsigned long)b); }
static __inline__ unsigned long max(unsigned long a, long b) { return max(a, (unsigned long)b); }
static __inline__ long long min(long long a, long long b) { return a < b ? a : b; }
static __inline__ long long max(long long a, long long b) { return a > b ? a : b; }
static __inline__ unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static __inline__ unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static __inline__ unsigned long long min(long long a, unsigned long long b) { return min((unsigned long long)a, b); }
static __inline__ unsigned long long max(long long a, unsigned long long b) { return max((unsigned long long)a, b); }
static __inline__ unsigned long long min(unsigned long long a, long long b) { return min(a, (unsigned long long)b); }
static __inline__ unsigned long long max(unsigned long long a, long long b) { return max(a, (unsigned long long)b); }
static __inline__ float min(float a, float b) { return fminf(a, b); }
static __inline__ float max(float a, float b) { return fmaxf(a, b); }
static __inline__ double min(double a, double b) { return fmin(a, b); }
static __inline__ double max(double a, double b) { return fmax(a, b); }
static __inline__ double min(float a, double b) { return fmin((double)a, b); }
static __inline__ double max(float a, double b) { return fmax((double)a, b); }
static __inline__ double min(double a, float b) { return fmin(a, (double)b); }
static __inline__ double max(double a, float b) { return fmax(a, (double)b); }

#endif /* NI_SIMT_H */
