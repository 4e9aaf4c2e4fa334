/*
 * optest.h — helpers shared by the C++ op tests of the CUDA kernels under
 * the host SIMT harness (test_<family>.cpp): the splitmix64 random source
 * (seeded through g_rng, printed by each test), and device buffers on the
 * test's context G.
 */
#ifndef NI_SIMT_OPTEST_H
#define NI_SIMT_OPTEST_H

#include "ni_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

static ni_cuda_ctx *G;  /* the context under test */
static uint64_t g_rng;  /* splitmix64 state (the test's seed) */

static inline uint64_t rnd() {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1) with 53 random bits. */
static inline double uni() { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

/* A device copy of h (at least one element is allocated); exits on failure. */
template <class T>
static inline T *dev_put(const std::vector<T> &h) {
    int code = 0;
    T *p = (T *)ni_cuda_malloc(G, (int64_t)(h.size() ? h.size() : 1) * sizeof(T), "test", &code);
    if (!p) {
        fprintf(stderr, "ni_cuda_malloc failed (%d)\n", code);
        exit(2);
    }
    if (h.size()) ni_cuda_h2d(G, p, h.data(), (int64_t)h.size() * sizeof(T));
    return p;
}
template <class T>
static inline std::vector<T> dev_get(const T *p, size_t n) {
    std::vector<T> h(n);
    if (n) ni_cuda_d2h(G, h.data(), p, (int64_t)n * sizeof(T));
    return h;
}
static inline void dev_free(void *p) { ni_cuda_free(G, p); }

/* Syncs; returns false (and reports) on a launch error. cnt, when given,
 * receives the NI_CUDA_ERR_N error counters. */
static inline bool dsync(const char *what, int32_t *cnt) {
    char err[512] = {0};
    int32_t c[NI_CUDA_ERR_N];
    int rc = ni_cuda_sync(G, c, err, sizeof err);
    if (cnt) memcpy(cnt, c, sizeof c);
    if (rc) {
        printf("  %s: ni_cuda_sync %d: %s\n", what, rc, err);
        return false;
    }
    return true;
}

#endif
