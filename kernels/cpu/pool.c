#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
/* Persistent pthread pool: the caller is worker 0, threads−1 helpers take
 * tasks with an atomic counter. A decode step is ~100 ops of 10–200 µs, so
 * waking helpers through a condition variable for each op (futex wake-up:
 * tens of µs on a VM) costs as much as the ops. Helpers therefore spin on
 * the job generation for up to c->spin_ns after their last job (a pause
 * loop, one clock read per 64 spins), then sleep on the condition variable;
 * the caller waits for the helpers by spinning (yielding after spin_ns).
 * Publishing a job: fn/arg/ntasks/next/active, then gen (release); a
 * sleeper count (both sides sequentially consistent) tells the caller
 * whether a broadcast is needed: a helper increments it and re-checks gen
 * under the mutex before waiting, the caller stores gen and then reads it,
 * so either the helper sees the new gen or the caller sees the sleeper and
 * broadcasts under the mutex. spin_ns is 0 (sleep at once) when the pool
 * has more threads than the CPUs this process may run on: spinning
 * helpers would take the CPU from the ones doing the work. */
#include "ni_cpu.h"
#include <cpuid.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Thread tid's share of the tasks first, then what is left of the others'
 * (in turn from the next thread on): each share is a contiguous run of
 * tasks, taken in order, so a thread streams its rows of a matmul as one
 * run and the threads touch a shared counter only at the end of an op. */
static void run_tasks(ni_ctx *c, int tid) {
    const int n = c->threads;
    for (int i = 0; i < n; i++) {
        ni_task_range *r = &c->range[(tid + i) % n];
        for (;;) {
            int t = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED);
            if (t >= r->end) break;
            c->fn(c->arg, t, tid);
        }
    }
}

typedef struct {
    ni_ctx *c;
    int tid;
} worker_arg;

/* Waits until c->gen differs from seen (or stop) and returns it. */
static uint64_t wait_job(ni_ctx *c, uint64_t seen) {
    uint64_t g;
    int64_t deadline = 0;
    for (int spins = 0;; spins++) {
        g = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
        if (g != seen || __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) return g;
        if ((spins & 63) == 0) {
            int64_t t = now_ns();
            if (deadline == 0) deadline = t + c->spin_ns;
            if (t >= deadline) break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&c->mu);
    __atomic_fetch_add(&c->sleepers, 1, __ATOMIC_SEQ_CST);
    while ((g = __atomic_load_n(&c->gen, __ATOMIC_SEQ_CST)) == seen && !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST))
        pthread_cond_wait(&c->start_cv, &c->mu);
    __atomic_fetch_sub(&c->sleepers, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&c->mu);
    return g;
}

static void *worker(void *p) {
    worker_arg *wa = (worker_arg *)p;
    ni_ctx *c = wa->c;
    int tid = wa->tid;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        seen = wait_job(c, seen);
        if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) break;
        run_tasks(c, tid);
        __atomic_fetch_sub(&c->active, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* CPUs this process may run on (affinity mask; 1 when unknown). */
static int usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
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

/* The answer is cached once found (CPUID and XGETBV exit a VM on every
 * call: asked per matmul they cost ~7 % of a decode step, docs/PERF.md). */
static int g_best_isa = -1;
int ni_cpu_best_isa(void) {
    int v = __atomic_load_n(&g_best_isa, __ATOMIC_RELAXED);
    if (v >= 0) return v;
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
        v = NI_ISA_SCALAR;
    else v = has_avx512() ? NI_ISA_AVX512 : NI_ISA_AVX2;
    __atomic_store_n(&g_best_isa, v, __ATOMIC_RELAXED);
    return v;
}

ni_ctx *ni_ctx_new(int threads, int isa) {
    if (threads < 1) threads = 1;
    if (threads > NI_MAX_THREADS) threads = NI_MAX_THREADS;
    if (isa > ni_cpu_best_isa()) return NULL;
    ni_ctx *c = NULL;
    if (posix_memalign((void **)&c, 64, sizeof(ni_ctx)) != 0) return NULL;
    memset(c, 0, sizeof(ni_ctx));
    c->threads = threads;
    c->isa = isa;
    c->serial_work = NI_SERIAL_WORK;
    c->spin_ns = threads <= usable_cpus() ? NI_SPIN_NS : 0;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->start_cv, NULL);
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
    __atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&c->start_cv);
    pthread_mutex_unlock(&c->mu);
    for (int i = 1; i < c->threads; i++) pthread_join(c->th[i], NULL);
    for (int i = 0; i < NI_MAX_THREADS; i++) free(c->scratch[i].p);
    free(c->shared.p);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->start_cv);
    free(c);
}

void ni_parallel(ni_ctx *c, int ntasks, ni_task_fn fn, void *arg, int64_t work) {
    if (ntasks <= 0) return;
    if (c->threads == 1 || ntasks == 1 || work < c->serial_work) {
        for (int t = 0; t < ntasks; t++) fn(arg, t, 0);
        return;
    }
    c->fn = fn;
    c->arg = arg;
    c->ntasks = ntasks;
    for (int i = 0; i < c->threads; i++) {
        c->range[i].next = (int)((int64_t)ntasks * i / c->threads);
        c->range[i].end = (int)((int64_t)ntasks * (i + 1) / c->threads);
    }
    __atomic_store_n(&c->active, c->threads - 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->gen, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&c->mu);
        pthread_cond_broadcast(&c->start_cv);
        pthread_mutex_unlock(&c->mu);
    }
    run_tasks(c, 0);
    int64_t deadline = 0;
    for (int spins = 0; __atomic_load_n(&c->active, __ATOMIC_ACQUIRE) > 0; spins++) {
        if ((spins & 63) == 0) {
            int64_t t = now_ns();
            if (deadline == 0) deadline = t + c->spin_ns;
            if (t >= deadline) {
                sched_yield(); /* a helper is descheduled: give it the CPU */
                continue;
            }
        }
        cpu_relax();
    }
}

void ni_ctx_set_spin(ni_ctx *c, int64_t ns) { c->spin_ns = ns < 0 ? 0 : ns; }

static void noop_task(void *arg, int task, int tid) {
    (void)task;
    __atomic_fetch_add((int *)arg, tid >= 0 ? 1 : 0, __ATOMIC_RELAXED);
}

int ni_ctx_roundtrip(ni_ctx *c, int ntasks) {
    int ran = 0;
    ni_parallel(c, ntasks, noop_task, &ran, INT64_MAX);
    return ran;
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
