/*
 * sample.cuh — token sampling on the device: the pipeline of pkg/sample
 * (penalties, temperature, top-k, float64 softmax, min-p, top-p, the
 * counter-based RNG draw and the inverse-CDF pick), one block per row, so a
 * decode step needs no host round trip but the token id. Device code only;
 * the launcher and ni_cuda_sample are in sample.cu.
 *
 * The order of the steps, the tie rules and the special values are those of
 * pkg/sample/sample.go (the reference):
 *  1. x = float64(logit), NaN → -Inf; repetition penalty on ids seen in the
 *     prompt or generated (x > 0: x / r, else x · r); then
 *     x -= presence + frequency · count for generated ids (count > 0);
 *  2. no x > -Inf: token -1; greedy (T = 0): the lowest id of the largest x;
 *  3. any x = +Inf: the +Inf ids share the mass equally;
 *  4. top-k: the k largest finite x, ties to the lower id;
 *  5. p = exp((x - max)/T) / Σ (float64); min-p: drop p < min_p · max p and
 *     renormalize; top-p: keep the shortest prefix of (p desc, id asc) whose
 *     mass is ≥ top_p, renormalize;
 *  6. u = Uniform(seed, pos, PurposeSample) (three SplitMix64 rounds); the
 *     token is the first id, in id order, whose cumulative mass exceeds
 *     u · total (the last positive id if rounding leaves none).
 *
 * Why the tokens equal the CPU's. Every decision that is made on the
 * penalized logits is bit-exact: the penalty arithmetic is the same IEEE
 * float64 expression evaluated without contraction (__dmul_rn/__dadd_rn
 * under nvcc, plain double arithmetic on x86-64 under the harness, and Go
 * on amd64 does not fuse either), so greedy, the +Inf case (the CPU's sums
 * of equal terms are replayed sequentially here), the NaN/-Inf rules and
 * the top-k set (integer radix select over the order-preserving bit pattern
 * of x, ties by id) are identical. What differs are the float64 sums (the
 * softmax denominator, the renormalizations, the top-p prefix masses and
 * the CDF are block reductions in a fixed tree order here, sequential in id
 * or sorted order on the CPU) and exp (CUDA's double exp and Go's math.Exp
 * are both within 1 ulp, not necessarily equal). Each of these perturbs a
 * probability or a partial sum by a relative O(n·2^-53) (n ≤ vocab), so a
 * different token needs u · total, a min-p threshold, or a top-p prefix
 * mass to lie within that distance of a decision boundary: for random u
 * (and logits not constructed to sit on a boundary) the chance is
 * ≤ ~vocab · 2^-44 per step, a measure-zero event in practice; the tests
 * (pkg/backend sample_test.go) compare thousands of steps token by token.
 *
 * The kernel is deterministic run to run: every reduction has a fixed
 * order (thread-contiguous chunks, xor butterflies, fixed warp order) and
 * the only atomics are integer histogram counts.
 */
#ifndef NI_CUDA_SAMPLE_CUH
#define NI_CUDA_SAMPLE_CUH

#include "common.cuh"
#include "ni_cuda.h"

/* Threads of the sampling block (the top-p pass keeps 16 float64
 * accumulators per thread: 512 threads leave room for them in registers;
 * __launch_bounds__(…, 1): without the min-blocks hint ptxas caps the
 * kernel at 64 registers and spills). */
#define NI_SMP_THREADS 512

/* Uncontracted float64 arithmetic (matches Go's evaluation on amd64). */
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ double ni_dadd(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double ni_dsub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double ni_dmul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double ni_ddiv(double a, double b) { return __ddiv_rn(a, b); }
#else
__device__ __forceinline__ double ni_dadd(double a, double b) { return a + b; }
__device__ __forceinline__ double ni_dsub(double a, double b) { return a - b; }
__device__ __forceinline__ double ni_dmul(double a, double b) { return a * b; }
__device__ __forceinline__ double ni_ddiv(double a, double b) { return a / b; }
#endif

/* pkg/sample/rng.go: SplitMix64 finalizer and Hash64/Uniform. */
__device__ __forceinline__ uint64_t ni_splitmix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ double ni_uniform(uint64_t seed, int64_t pos, uint64_t purpose) {
    uint64_t h = ni_splitmix64(seed);
    h = ni_splitmix64(h ^ (uint64_t)pos);
    h = ni_splitmix64(h ^ purpose);
    return (double)(h >> 11) * 0x1p-53;
}

/* Order-preserving map of a float64 to uint64 (larger value, larger key;
 * -0 and +0 map to one key, as they compare equal on the CPU). */
__device__ __forceinline__ uint64_t ni_dkey(double x) {
    if (x == 0.0) x = 0.0;
    const uint64_t u = (uint64_t)__double_as_longlong(x);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}

/* Shared scratch of the sampling block. */
struct ni_smp_shared {
    double d[32];
    double h16[16][32];
    long long l[32];
    int i[32];
    unsigned hist[256];
    int bcast[4];
    double bd[2];
};

/* ---- block helpers (every thread calls; every thread gets the result) ---- */

__device__ __forceinline__ double ni_smp_sum(double v, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) s.d[warp] = v;
    __syncthreads();
    v = lane < nw ? s.d[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double ni_smp_max(double v, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) s.d[warp] = v;
    __syncthreads();
    v = lane < nw ? s.d[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ long long ni_smp_sum_ll(long long v, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (lane == 0) s.l[warp] = v;
    __syncthreads();
    v = lane < nw ? s.l[lane] : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Min (mx = 0) or max (mx = 1) of an int over the block. */
__device__ __forceinline__ int ni_smp_minmax(int v, int mx, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const int w = __shfl_xor_sync(0xffffffffu, v, o);
        v = mx ? (w > v ? w : v) : (w < v ? w : v);
    }
    __syncthreads();
    if (lane == 0) s.i[warp] = v;
    __syncthreads();
    const int id = mx ? -2147483647 - 1 : 2147483647;
    v = lane < nw ? s.i[lane] : id;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const int w = __shfl_xor_sync(0xffffffffu, v, o);
        v = mx ? (w > v ? w : v) : (w < v ? w : v);
    }
    return v;
}

/* Exclusive prefix sum of an int over the threads in thread order. */
__device__ __forceinline__ int ni_smp_scan(int v, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int w = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += w;
    }
    __syncthreads();
    if (lane == 31) s.i[warp] = inc;
    __syncthreads();
    int base = 0;
    for (int w = 0; w < warp && w < nw; w++) base += s.i[w];
    return base + inc - v;
}

/* Exclusive prefix sum of a double over the threads in thread order
 * (a fixed order: deterministic). */
__device__ __forceinline__ double ni_smp_scan_d(double v, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const double w = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += w;
    }
    __syncthreads();
    if (lane == 31) s.d[warp] = inc;
    __syncthreads();
    double base = 0.0;
    for (int w = 0; w < warp; w++) base += s.d[w];
    /* exclusive: the lane's own prefix without its value, from the lane below */
    double below = __shfl_up_sync(0xffffffffu, inc, 1);
    return lane == 0 ? base : base + below;
}

/* (v, i) beats (bv, bi): i is a real candidate and v is larger, or ties
 * with a lower id. */
__device__ __forceinline__ bool ni_smp_better(double v, int i, double bv, int bi) {
    return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

/* The block's argmax; every thread gets (bv, bi). */
__device__ __forceinline__ void ni_smp_argmax(double &bv, int &bi, ni_smp_shared &s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const double ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ni_smp_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    __syncthreads();
    if (lane == 0) {
        s.d[warp] = bv;
        s.i[warp] = bi;
    }
    __syncthreads();
    bv = lane < nw ? s.d[lane] : 0.0;
    bi = lane < nw ? s.i[lane] : -1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const double ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ni_smp_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
}

/* The thread's contiguous chunk [lo, hi) of n items. */
__device__ __forceinline__ void ni_smp_chunk(int n, int &lo, int &hi) {
    const int c = (int)((n + (int)blockDim.x - 1) / (int)blockDim.x);
    lo = (int)threadIdx.x * c;
    if (lo > n) lo = n;
    hi = lo + c < n ? lo + c : n;
}

/* The id of the r-th (0-based) item, in id order, among those with flag
 * set, where each thread counted `cnt` flagged items in its chunk; every
 * thread gets it (through s), -1 if there is no such item. */
template <class F>
__device__ __forceinline__ int ni_smp_nth(int n, int cnt, int r, F flag, ni_smp_shared &s) {
    const int before = ni_smp_scan(cnt, s);
    if (threadIdx.x == 0) s.bcast[3] = -1;
    __syncthreads();
    if (r >= before && r < before + cnt) {
        int lo, hi, k = before;
        ni_smp_chunk(n, lo, hi);
        for (int i = lo; i < hi; i++)
            if (flag(i)) {
                if (k == r) {
                    s.bcast[3] = i;
                    break;
                }
                k++;
            }
    }
    __syncthreads();
    return s.bcast[3];
}

/* Implements: ni_cuda_sample for one row x (x.t = 1, x.h = 1, x.d = V).
 * counts: int32[V] tokens generated so far (updated: counts[token]++);
 * seen: uint8[V] nonzero for prompt tokens; rng_pos: int64 RNG position
 * (read, then incremented). Scratch: xs float64[V] (penalized logits),
 * cp float64[V] and cid int32[V] (the candidate list in id order). */
__global__ void __launch_bounds__(NI_SMP_THREADS, 1)
    sample_kernel(ni_rows x, int32_t *out, int32_t *counts, const uint8_t *seen, ni_sample_cfg cfg, int64_t *rng_pos,
                  double *xs, double *cp, int32_t *cid) {
    __shared__ ni_smp_shared s;
    const int V = x.d;
    const float *lg = x.p;
    const int64_t pos = *rng_pos;
    const double NEG = -(double)INFINITY, POS = (double)INFINITY;
    const bool rep = cfg.repetition != 0.0 && cfg.repetition != 1.0;
    const bool pf = cfg.presence != 0.0 || cfg.frequency != 0.0;
    int lo, hi;
    int token = -1;

    /* 1. penalized logits, argmax, +Inf and finite counts */
    double bv = 0.0;
    int bi = -1, ninf = 0, nfin = 0;
    ni_smp_chunk(V, lo, hi);
    for (int i = lo; i < hi; i++) {
        const float f = lg[i];
        double v = f != f ? NEG : (double)f;
        const int32_t n = counts[i];
        if (rep && (seen[i] != 0 || n > 0)) v = v > 0.0 ? ni_ddiv(v, cfg.repetition) : ni_dmul(v, cfg.repetition);
        if (pf && n > 0) v = ni_dsub(v, ni_dadd(cfg.presence, ni_dmul(cfg.frequency, (double)n)));
        xs[i] = v;
        if (v != NEG) {
            nfin++;
            if (v == POS) ninf++;
            if (bi < 0 || v > bv) {
                bv = v;
                bi = i;
            }
        }
    }
    ni_smp_argmax(bv, bi, s);
    nfin = (int)ni_smp_sum_ll(nfin, s);
    ninf = (int)ni_smp_sum_ll(ninf, s);
    const bool greedy = cfg.temperature == 0.0;
    if (bi < 0 || greedy) {
        token = bi;
        goto done;
    }
    {
        const double u = ni_uniform(cfg.seed, pos, 1 /* PurposeSample */);
        if (bv == POS) {
            /* 3. +Inf ids share the mass: p = 1/n each (renorm of ones);
             * the CPU's total and cumulative sums of equal terms are
             * replayed sequentially (bit-exact). */
            if (threadIdx.x == 0) {
                const double q = ni_ddiv(1.0, (double)ninf);
                double total = 0.0;
                for (int j = 0; j < ninf; j++) total = ni_dadd(total, q);
                const double target = ni_dmul(u, total);
                double acc = 0.0;
                int k = ninf - 1; /* rounding: u·total at the very top */
                for (int j = 0; j < ninf; j++) {
                    acc = ni_dadd(acc, q);
                    if (acc > target) {
                        k = j;
                        break;
                    }
                }
                s.bcast[2] = k;
            }
            __syncthreads();
            const int r = s.bcast[2];
            int cnt = 0;
            for (int i = lo; i < hi; i++) cnt += xs[i] == POS;
            token = ni_smp_nth(V, cnt, r, [&](int i) { return xs[i] == POS; }, s);
            goto done;
        }

        const double top = bv, T = cfg.temperature;
        /* 4. top-k: the k-th largest key K by radix select (8-bit digits,
         * integer counts), then the r lowest ids among keys equal to K. */
        uint64_t K = 0;
        int idk = 2147483647;
        const bool topk = cfg.top_k > 0 && cfg.top_k < V && cfg.top_k < nfin;
        if (topk) {
            uint64_t prefix = 0, mask = 0;
            int r = cfg.top_k; /* rank (1-based) among keys matching prefix */
            for (int shift = 56; shift >= 0; shift -= 8) {
                for (int b = threadIdx.x; b < 256; b += blockDim.x) s.hist[b] = 0;
                __syncthreads();
                for (int i = lo; i < hi; i++) {
                    const double v = xs[i];
                    if (v == NEG) continue;
                    const uint64_t key = ni_dkey(v);
                    if ((key & mask) == prefix) atomicAdd(&s.hist[(key >> shift) & 255u], 1u);
                }
                __syncthreads();
                if (threadIdx.x == 0) {
                    int d = 255, rr = r;
                    for (; d > 0; d--) {
                        if (rr <= (int)s.hist[d]) break;
                        rr -= (int)s.hist[d];
                    }
                    s.bcast[0] = d;
                    s.bcast[1] = rr;
                }
                __syncthreads();
                prefix |= (uint64_t)s.bcast[0] << shift;
                mask |= (uint64_t)255u << shift;
                r = s.bcast[1];
                __syncthreads();
            }
            K = prefix;
            int cnt = 0;
            for (int i = lo; i < hi; i++) cnt += xs[i] != NEG && ni_dkey(xs[i]) == K;
            idk = ni_smp_nth(V, cnt, r - 1, [&](int i) { return xs[i] != NEG && ni_dkey(xs[i]) == K; }, s);
        }

        /* candidate list in id order: (cid, e) */
        auto cand = [&](int i) {
            const double v = xs[i];
            if (v == NEG) return false;
            if (!topk) return true;
            const uint64_t key = ni_dkey(v);
            return key > K || (key == K && i <= idk);
        };
        int cnt = 0;
        for (int i = lo; i < hi; i++) cnt += cand(i);
        const int base = ni_smp_scan(cnt, s);
        const int m = (int)ni_smp_sum_ll(cnt, s);
        {
            int w = base;
            for (int i = lo; i < hi; i++)
                if (cand(i)) {
                    cid[w] = i;
                    cp[w] = exp(ni_ddiv(ni_dsub(xs[i], top), T)); /* exponent ≤ 0 */
                    w++;
                }
        }
        __syncthreads();

        /* 5. softmax, min-p, top-p over the list */
        ni_smp_chunk(m, lo, hi);
        double part = 0.0;
        for (int j = lo; j < hi; j++) part += cp[j];
        const double sum = ni_smp_sum(part, s);
        double pm = 0.0;
        for (int j = lo; j < hi; j++) {
            cp[j] = ni_ddiv(cp[j], sum);
            pm = fmax(pm, cp[j]);
        }
        const double pmax = ni_smp_max(pm, s);
        if (cfg.min_p > 0.0) {
            const double thr = ni_dmul(cfg.min_p, pmax);
            part = 0.0;
            for (int j = lo; j < hi; j++) {
                if (cp[j] < thr) cp[j] = 0.0;
                part += cp[j];
            }
            const double s2 = ni_smp_sum(part, s);
            if (s2 > 0.0)
                for (int j = lo; j < hi; j++) cp[j] = ni_ddiv(cp[j], s2);
        }
        if (cfg.top_p > 0.0 && cfg.top_p < 1.0) {
            /* The threshold key K* = (p bits, ~id) of the last kept item:
             * the largest key whose mass at or above it is ≥ top_p, found
             * digit by digit (4 bits, 24 digits over 96 bits) from the mass
             * histograms of the items matching the digits so far; items
             * above the current prefix contribute A. If even the whole
             * matching set leaves A below top_p (rounding), every item is
             * kept: the walk takes the lowest non-empty digit. */
            const double tp = cfg.top_p;
            uint64_t pp = 0, pmk = 0;
            uint32_t ip = 0, imk = 0;
            double A = 0.0;
            for (int dg = 0; dg < 24; dg++) {
                double acc[16];
#pragma unroll
                for (int b = 0; b < 16; b++) acc[b] = 0.0;
                unsigned nonempty = 0;
                for (int j = lo; j < hi; j++) {
                    const double p = cp[j];
                    const uint64_t pb = (uint64_t)__double_as_longlong(p);
                    const uint32_t ib = 0xFFFFFFFFu - (uint32_t)cid[j];
                    if ((pb & pmk) != pp || (ib & imk) != ip) continue;
                    const unsigned d = dg < 16 ? (unsigned)(pb >> (60 - 4 * dg)) & 15u
                                               : (ib >> (28 - 4 * (dg - 16))) & 15u;
                    nonempty |= 1u << d;
#pragma unroll
                    for (int b = 0; b < 16; b++) acc[b] += d == (unsigned)b ? p : 0.0;
                }
                const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
                for (int b = 0; b < 16; b++) {
                    double v = acc[b];
#pragma unroll
                    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                    acc[b] = v;
                }
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) nonempty |= __shfl_xor_sync(0xffffffffu, nonempty, o);
                __syncthreads();
                if (lane == 0) {
#pragma unroll
                    for (int b = 0; b < 16; b++) s.h16[b][warp] = acc[b];
                    s.i[warp] = (int)nonempty;
                }
                __syncthreads();
                if (threadIdx.x == 0) {
                    unsigned ne = 0;
                    for (int w = 0; w < nw; w++) ne |= (unsigned)s.i[w];
                    int chosen = -1, lowest = -1;
                    double a = A, alow = A;
                    for (int b = 15; b >= 0; b--) {
                        if (!(ne >> b & 1u)) continue;
                        double h = 0.0;
                        for (int w = 0; w < nw; w++) h += s.h16[b][w];
                        if (a + h >= tp) {
                            chosen = b;
                            break;
                        }
                        alow = a;
                        lowest = b;
                        a += h;
                    }
                    if (chosen < 0) { /* keep everything that matches: the minimum key */
                        chosen = lowest;
                        a = alow;
                    }
                    s.bcast[0] = chosen;
                    s.bd[0] = a;
                }
                __syncthreads();
                const unsigned d = (unsigned)s.bcast[0];
                A = s.bd[0];
                if (dg < 16) {
                    pp |= (uint64_t)d << (60 - 4 * dg);
                    pmk |= (uint64_t)15u << (60 - 4 * dg);
                } else {
                    ip |= d << (28 - 4 * (dg - 16));
                    imk |= 15u << (28 - 4 * (dg - 16));
                }
                __syncthreads();
            }
            part = 0.0;
            for (int j = lo; j < hi; j++) {
                const uint64_t pb = (uint64_t)__double_as_longlong(cp[j]);
                const uint32_t ib = 0xFFFFFFFFu - (uint32_t)cid[j];
                if (!(pb > pp || (pb == pp && ib >= ip))) cp[j] = 0.0;
                part += cp[j];
            }
            const double s3 = ni_smp_sum(part, s);
            if (s3 > 0.0)
                for (int j = lo; j < hi; j++) cp[j] = ni_ddiv(cp[j], s3);
        }

        /* 6. the draw: first id whose cumulative mass exceeds u · total */
        part = 0.0;
        for (int j = lo; j < hi; j++) part += cp[j];
        const double total = ni_smp_sum(part, s);
        const double target = ni_dmul(u, total);
        double acc = ni_smp_scan_d(part, s);
        int first = 2147483647, last = -1;
        for (int j = lo; j < hi; j++) {
            const double p = cp[j];
            if (p <= 0.0) continue;
            acc += p;
            last = cid[j];
            if (acc > target) {
                first = cid[j];
                break;
            }
        }
        /* `last` of a thread that crossed is not its chunk's last positive
         * id, but a crossing exists then and `first` wins. */
        first = ni_smp_minmax(first, 0, s);
        last = ni_smp_minmax(last, 1, s);
        token = first != 2147483647 ? first : last;
        if (!(total > 0.0)) token = -1;
    }
done:
    __syncthreads(); /* every thread has read *rng_pos and counts */
    if (threadIdx.x == 0) {
        *out = token;
        if (token >= 0) counts[token] += 1;
        *rng_pos = pos + 1;
    }
}

#endif
