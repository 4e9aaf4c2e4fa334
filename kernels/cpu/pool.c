/* Persistent pthread pool: the caller is worker 0, threads−1 helpers wait on a
 * condition variable for the next job; tasks are taken with an atomic
 * counter. */
#include "ni_cpu.h"
#include <cpuid.h>
#include <stdlib.h>

static void run_tasks(ni_ctx *c, int tid) {
    for (;;) {
        int t = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (t >= c->ntasks) break;
        c->fn(c->arg, t, tid);
    }
}

typedef struct {
    ni_ctx *c;
    int tid;
} worker_arg;

static void *worker(void *p) {
    worker_arg *wa = (worker_arg *)p;
    ni_ctx *c = wa->c;
    int tid = wa->tid;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->gen == seen && !c->stop) pthread_cond_wait(&c->start_cv, &c->mu);
        if (c->stop) break;
        seen = c->gen;
        pthread_mutex_unlock(&c->mu);
        run_tasks(c, tid);
        pthread_mutex_lock(&c->mu);
        if (--c->active == 0) pthread_cond_signal(&c->done_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* AVX-512 F/BW/DQ/VL in CPUID leaf 7 and ZMM state enabled by the OS:
 * XCR0 must have the SSE, AVX, opmask, ZMM_Hi256 and Hi16_ZMM bits (0xE6);
 * a kernel may hide AVX-512 from processes by leaving them clear. */
static int has_avx512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned need = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
    if ((b & need) != need) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6u) == 0xe6u;
}

int ni_cpu_best_isa(void) {
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
        return NI_ISA_SCALAR;
    return has_avx512() ? NI_ISA_AVX512 : NI_ISA_AVX2;
}

ni_ctx *ni_ctx_new(int threads, int isa) {
    if (threads < 1) threads = 1;
    if (threads > NI_MAX_THREADS) threads = NI_MAX_THREADS;
    if (isa > ni_cpu_best_isa()) return NULL;
    ni_ctx *c = (ni_ctx *)calloc(1, sizeof(ni_ctx));
    if (!c) return NULL;
    c->threads = threads;
    c->isa = isa;
    c->serial_work = NI_SERIAL_WORK;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->start_cv, NULL);
    pthread_cond_init(&c->done_cv, NULL);
    for (int i = 1; i < threads; i++) {
        worker_arg *wa = (worker_arg *)malloc(sizeof(worker_arg));
        wa->c = c;
        wa->tid = i;
        if (pthread_create(&c->th[i], NULL, worker, wa) != 0) {
            free(wa);
            c->threads = i;
            break;
        }
    }
    return c;
}

void ni_ctx_free(ni_ctx *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->start_cv);
    pthread_mutex_unlock(&c->mu);
    for (int i = 1; i < c->threads; i++) pthread_join(c->th[i], NULL);
    for (int i = 0; i < NI_MAX_THREADS; i++) free(c->scratch[i].p);
    free(c->shared.p);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->start_cv);
    pthread_cond_destroy(&c->done_cv);
    free(c);
}

void ni_parallel(ni_ctx *c, int ntasks, ni_task_fn fn, void *arg, int64_t work) {
    if (ntasks <= 0) return;
    if (c->threads == 1 || ntasks == 1 || work < c->serial_work) {
        for (int t = 0; t < ntasks; t++) fn(arg, t, 0);
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->fn = fn;
    c->arg = arg;
    c->ntasks = ntasks;
    c->next = 0;
    c->active = c->threads - 1;
    c->gen++;
    pthread_cond_broadcast(&c->start_cv);
    pthread_mutex_unlock(&c->mu);
    run_tasks(c, 0);
    pthread_mutex_lock(&c->mu);
    while (c->active > 0) pthread_cond_wait(&c->done_cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static float *grow(ni_scratch *s, int64_t n) {
    if (s->cap < n) {
        free(s->p);
        int64_t cap = (n + 15) & ~(int64_t)15;
        if (posix_memalign((void **)&s->p, 64, (size_t)cap * sizeof(float)) != 0) {
            s->p = NULL;
            s->cap = 0;
            return NULL;
        }
        s->cap = cap;
    }
    return s->p;
}

float *ni_tmp(ni_ctx *c, int tid, int64_t n) { return grow(&c->scratch[tid], n); }

float *ni_shared(ni_ctx *c, int64_t n) { return grow(&c->shared, n); }

int64_t ni_ctx_scratch_bytes(const ni_ctx *c) {
    int64_t b = c->shared.cap * 4;
    for (int i = 0; i < NI_MAX_THREADS; i++) b += c->scratch[i].cap * 4;
    return b;
}

void ni_ctx_set_serial_work(ni_ctx *c, int64_t work) { c->serial_work = work; }
