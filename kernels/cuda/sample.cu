/*
 * sample.cu — launcher and entry point of device sampling: ni_cuda_sample
 * (the kernel and why its tokens equal pkg/sample's: sample.cuh).
 */
#include "ctx.cuh"
#include "sample.cuh"

extern "C" void ni_cuda_sample(ni_cuda_ctx *c, ni_rows x, int32_t *out, int32_t *counts, const uint8_t *seen,
                               ni_sample_cfg cfg, int64_t *rng_pos) {
    if (x.t != 1 || x.d <= 0) {
        ni_cuda_record(c, 1, "sample: want one row of at least one logit, got %d rows of %d", (int)x.t, (int)x.d);
        return;
    }
    const int64_t V = x.d;
    /* Scratch: xs float64[V] | cp float64[V] | cid int32[V]. */
    unsigned char *sc = (unsigned char *)ni_cuda_scratch(c, 20 * V + 256);
    if (!sc) return;
    double *xs = (double *)sc, *cp = (double *)(sc + 8 * V);
    int32_t *cid = (int32_t *)(sc + 16 * V);
    /* Route: one block per row; small vocabularies use fewer warps. */
    const int threads = V >= NI_SMP_THREADS ? NI_SMP_THREADS : (int)ni_round_up(V, 32);
    ni_launch(c, "sample", sample_kernel, dim3(1), dim3(threads), 0, x, out, counts, seen, cfg, rng_pos, xs, cp, cid);
}
