/*
 * simt.cpp — host SIMT harness runtime: fibers, block scheduling, barriers,
 * warp rendezvous, PTX emulations, guard-paged device allocator and the
 * out-of-bounds fault handler. See simt.h and README.md.
 */
#include "simt.h"
#include "tcmodel.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__) || defined(NI_SIMT_UCONTEXT)
#include <ucontext.h>
#define NI_SIMT_USE_UCONTEXT 1
#endif

namespace simt {
namespace detail {

__thread ThreadCtx *t_thr __attribute__((tls_model("initial-exec"))) = nullptr;
__thread BlockCtx *t_blk __attribute__((tls_model("initial-exec"))) = nullptr;

void install_fault_handlers();
void after_fork_alloc();

namespace {

/* ======================================================================== */
/* Context switch                                                            */
/* ======================================================================== */

#ifndef NI_SIMT_USE_UCONTEXT
/* void ni_simt_switch(void **save_sp, void *load_sp): saves the callee-saved
 * general registers on the current stack, stores rsp in *save_sp, switches to
 * load_sp and restores the same set from there. No system calls (the signal
 * mask is per OS thread and never changes). MXCSR and the x87 control word are
 * not switched: every fiber of an OS thread runs under that thread's values
 * (their sticky exception flags are shared too; nothing reads them),
 * which nothing in the harness or a kernel changes (CUDA has no rounding-mode
 * state; fiber_entry fails a thread that returns with them changed). Saving
 * them cost ~80 % of a switch (stmxcsr/fldcw are microcoded), a fifth of the
 * run time of the warp-heavy sampling kernel. */
extern "C" void ni_simt_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .p2align 4
    .globl ni_simt_switch
    .hidden ni_simt_switch
    .type ni_simt_switch,@function
ni_simt_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ni_simt_switch, .-ni_simt_switch
)");

struct Ctx {
    void *sp;
};
static inline void ctx_switch(Ctx *from, Ctx *to) { ni_simt_switch(&from->sp, to->sp); }
static void ctx_init(Ctx *c, char *lo, size_t size, void (*entry)()) {
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    uintptr_t *s = (uintptr_t *)top;
    s[-1] = 0;                 /* fake return address of entry (never returns) */
    s[-2] = (uintptr_t)entry;  /* `ret` target; rsp ≡ 8 (mod 16) at entry */
    for (int i = 3; i <= 8; i++) s[-i] = 0; /* rbp rbx r12 r13 r14 r15 */
    c->sp = &s[-8];
}
#else
struct Ctx {
    ucontext_t uc;
};
static inline void ctx_switch(Ctx *from, Ctx *to) { swapcontext(&from->uc, &to->uc); }
static void ctx_init(Ctx *c, char *lo, size_t size, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = lo;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
}
#endif

/* ======================================================================== */
/* Data structures                                                           */
/* ======================================================================== */

enum : uint8_t { ST_RUN = 0, ST_BAR = 1, ST_WARP = 2, ST_EXIT = 3 };
enum : uint8_t {
    OP_SHFL = 1, /* sub = mode */
    OP_VOTE,     /* sub = 0 ballot, 1 any, 2 all */
    OP_SYNCWARP,
    OP_REDUCE, /* sub = op | sgn<<3 */
    OP_MMA,
    OP_LDM /* sub = num | trans<<4 */
};

constexpr unsigned kMaxThreads = 1024;

struct Lane { /* one lane's slot in a warp rendezvous */
    uint8_t op, sub, size;
    unsigned mask;
    int arg, width;
    uint64_t in[5];
    uint64_t out[2];
};

struct CpOp {
    void *dst;
    const void *src;
    int bytes, src_bytes;
    unsigned group;
};

struct Fiber : ThreadCtx {
    Ctx ctx;
    char *stack_lo;
    uint8_t state;
    Lane col;
    std::vector<CpOp> cp;
    size_t cp_head;
    unsigned cp_committed;
};

struct Warp {
    unsigned exists, exited, waiting, mask0;
    bool mixed;
};

struct Launch {
    const char *name;
    dim3 grid, block;
    size_t smem;
    void *frame;
    Invoke inv;
    unsigned nthreads;
    unsigned long long nblocks;
    unsigned long long id;
    std::atomic<unsigned long long> next;
    std::atomic<int> failed;
    char err[1024];
};

struct Exec;
struct Block : BlockCtx {
    Exec *ex;
    Launch *L;
    unsigned n, nwarps, nexited;
    unsigned bar_arrived, bar_gen;
    int bar_op, bar_acc, bar_res[2];
    Warp warps[kMaxThreads / 32];
};
constexpr size_t kMaxSmem = 232448;
constexpr size_t kPage = 4096;
constexpr size_t kStackGuard = 16 * 1024; /* below each fiber stack */
/* Fiber stacks are slots of a multiple of kStaggerSpan bytes, and the top of
 * fiber i's stack sits (i * 17 mod 1024) cache lines above its nominal top, so
 * the stack tops of up to 1024 fibers fall in distinct L2 sets (and spread
 * over every L1 set). Without it every stack top had the same offset within
 * 4 KiB and 64 KiB: all 512 fibers of a block shared one L1 set and four L2
 * sets, and a context switch missed to L3. */
constexpr size_t kStaggerSpan = 64 * 1024;
static inline size_t stack_stagger(unsigned i) { return (size_t)(i * 17u % 1024u) * 64; }

struct Exec {
    int id;
    Fiber *fib;           /* kMaxThreads records */
    unsigned ready;       /* fibers whose guard page is set up */
    char *stack_region;   /* kMaxThreads slots of (guard page + stack) */
    size_t slot, stack_size;
    char *smem_region;    /* dynamic smem, guard page at its end */
    size_t smem_map;
    Ctx sched;
    Block blk;
    unsigned rq[kMaxThreads + 1];
    unsigned rq_head, rq_tail;
    unsigned short barw[kMaxThreads];
    unsigned long long launch_id; /* launch the fibers are set up for */
    unsigned long long switches;
    pthread_t thread;
    bool has_thread;
    unsigned long long epoch0;
};

/* ======================================================================== */
/* Globals                                                                   */
/* ======================================================================== */

constexpr int kMaxExec = 64;

struct Pool {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    unsigned long long epoch;
    int needed, joined; /* workers wanted / workers inside the current launch */
    bool closed;        /* the caller finished its share: no more joiners */
    Launch *L;
    int nexec;
    Exec *ex[kMaxExec];
    bool started;
};

Pool g_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, true, nullptr, 0, {}, false};
pthread_mutex_t g_launch_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
std::atomic<Launch *> g_cur_launch{nullptr};
char g_last_error[1024];
unsigned long long g_launch_seq = 0;
size_t g_stack_kb = 128;
bool g_poison = false;

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

static inline Fiber *cur() { return static_cast<Fiber *>(t_thr); }
static inline Block *blk() { return static_cast<Block *>(t_blk); }

[[noreturn]] static void die_outside(const char *what) {
    fprintf(stderr, "simt: %s called outside a kernel launched by simt::launch\n", what);
    abort();
}

static void record(Launch *L, const char *prefix, const char *fmt, va_list ap) {
    int expected = 0;
    if (!L->failed.compare_exchange_strong(expected, 1)) return;
    int n = snprintf(L->err, sizeof L->err, "%s", prefix);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof L->err) vsnprintf(L->err + n, sizeof L->err - n, fmt, ap);
}

[[noreturn]] static void abandon_block() {
    Fiber *f = cur();
    Block *b = blk();
    b->ex->switches++;
    ctx_switch(&f->ctx, &b->ex->sched);
    __builtin_unreachable();
}

[[noreturn]] __attribute__((format(printf, 1, 2))) static void fail_thread(const char *fmt, ...) {
    Fiber *f = cur();
    Block *b = blk();
    char prefix[256];
    snprintf(prefix, sizeof prefix, "simt: kernel %s block (%u,%u,%u) thread (%u,%u,%u): ", b->L->name, b->bid.x,
             b->bid.y, b->bid.z, f->tid.x, f->tid.y, f->tid.z);
    va_list ap;
    va_start(ap, fmt);
    record(b->L, prefix, fmt, ap);
    va_end(ap);
    abandon_block();
}

[[noreturn]] __attribute__((format(printf, 2, 3))) static void fail_warp(unsigned w, const char *fmt, ...) {
    Block *b = blk();
    char prefix[256];
    snprintf(prefix, sizeof prefix, "simt: kernel %s block (%u,%u,%u) warp %u: ", b->L->name, b->bid.x, b->bid.y,
             b->bid.z, w);
    va_list ap;
    va_start(ap, fmt);
    record(b->L, prefix, fmt, ap);
    va_end(ap);
    abandon_block();
}

[[noreturn]] __attribute__((format(printf, 1, 2))) static void fail_block(const char *fmt, ...) {
    Block *b = blk();
    char prefix[256];
    snprintf(prefix, sizeof prefix, "simt: kernel %s block (%u,%u,%u): ", b->L->name, b->bid.x, b->bid.y, b->bid.z);
    va_list ap;
    va_start(ap, fmt);
    record(b->L, prefix, fmt, ap);
    va_end(ap);
    abandon_block();
}

/* The mma accumulation model (tcmodel.h), read from NINFER_SIMT_MMA once. */
static tcmodel::Mode mma_mode() {
    static const tcmodel::Mode m = tcmodel::mode_from_env();
    return m;
}

static const char *op_name(uint8_t op, uint8_t sub) {
    switch (op) {
    case OP_SHFL: {
        static const char *n[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"};
        return n[sub & 3];
    }
    case OP_VOTE: {
        static const char *n[] = {"__ballot_sync", "__any_sync", "__all_sync"};
        return n[sub < 3 ? sub : 0];
    }
    case OP_SYNCWARP: return "__syncwarp";
    case OP_REDUCE: {
        static const char *n[] = {"__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                                  "__reduce_and_sync", "__reduce_or_sync",  "__reduce_xor_sync"};
        return n[(sub & 7) < 6 ? (sub & 7) : 0];
    }
    case OP_MMA: return "mma.sync.m16n8k16.bf16";
    case OP_LDM: {
        static const char *n[] = {"ldmatrix.x1", "ldmatrix.x2", "ldmatrix.x4", "ldmatrix.x1.trans",
                                  "ldmatrix.x2.trans", "ldmatrix.x4.trans"};
        int num = sub & 15, i = num == 1 ? 0 : num == 2 ? 1 : 2;
        return n[i + ((sub >> 4) ? 3 : 0)];
    }
    }
    return "?";
}

/* ======================================================================== */
/* Scheduling                                                                */
/* ======================================================================== */

static inline void rq_push(Exec *ex, unsigned i) {
    ex->rq[ex->rq_tail] = i;
    ex->rq_tail = ex->rq_tail == kMaxThreads ? 0 : ex->rq_tail + 1;
}
static inline Fiber *rq_pop(Exec *ex) {
    if (ex->rq_head == ex->rq_tail) return nullptr;
    unsigned i = ex->rq[ex->rq_head];
    ex->rq_head = ex->rq_head == kMaxThreads ? 0 : ex->rq_head + 1;
    return &ex->fib[i];
}

static inline void switch_to(Fiber *from, Fiber *to) {
    t_thr = to;
    blk()->ex->switches++;
    ctx_switch(&from->ctx, &to->ctx);
}

static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
    if (*len > cap) *len = cap;
}

[[noreturn]] static void deadlock() {
    Block *b = blk();
    Exec *ex = b->ex;
    char msg[768];
    size_t len = 0;
    append(msg, sizeof msg, &len, "deadlock: no thread can proceed;");
    if (b->bar_arrived) {
        Fiber *f0 = &ex->fib[ex->barw[0]];
        append(msg, sizeof msg, &len, " %u of %u live threads wait at __syncthreads (first thread (%u,%u,%u));",
               b->bar_arrived, b->n - b->nexited, f0->tid.x, f0->tid.y, f0->tid.z);
    }
    int shown = 0;
    for (unsigned w = 0; w < b->nwarps && shown < 3; w++) {
        Warp &W = b->warps[w];
        if (!W.waiting) continue;
        unsigned l = (unsigned)__builtin_ctz(W.waiting);
        Lane &c = ex->fib[w * 32 + l].col;
        unsigned missing = c.mask & ~W.waiting;
        unsigned atbar = 0;
        for (unsigned j = 0; j < 32; j++)
            if ((missing >> j & 1) && ex->fib[w * 32 + j].state == ST_BAR) atbar |= 1u << j;
        append(msg, sizeof msg, &len, " warp %u lanes 0x%08x wait in %s (mask 0x%08x) for lanes 0x%08x%s;", w, W.waiting,
               op_name(c.op, c.sub), c.mask, missing, atbar ? " (waiting at __syncthreads)" : "");
        shown++;
    }
    if (len && msg[len - 1] == ';') msg[len - 1] = 0;
    fail_block("%s", msg);
}

static inline void block_and_switch(Fiber *f) {
    Fiber *next = rq_pop(blk()->ex);
    if (!next) deadlock();
    switch_to(f, next);
}

[[noreturn]] static void thread_exit(Fiber *f) {
    Block *b = blk();
    Exec *ex = b->ex;
    f->state = ST_EXIT;
    b->nexited++;
    unsigned w = f->lin >> 5, l = f->lin & 31, me = 1u << l;
    Warp &W = b->warps[w];
    W.exited |= me;
    if (W.waiting) {
        for (unsigned j = 0; j < 32; j++) {
            if (!(W.waiting >> j & 1)) continue;
            Lane &c = ex->fib[w * 32 + j].col;
            if (c.mask & me)
                fail_warp(w, "lane %u exited while lanes 0x%08x wait for it in %s (mask 0x%08x)", l, W.waiting,
                          op_name(c.op, c.sub), c.mask);
        }
    }
    if (b->bar_arrived)
        fail_thread("exited while %u other thread(s) wait at __syncthreads: a barrier not reached by all threads of the "
                    "block",
                    b->bar_arrived);
    f->cp.clear();
    Fiber *next = rq_pop(ex);
    if (next) {
        switch_to(f, next);
    } else if (b->nexited == b->n) {
        ex->switches++;
        ctx_switch(&f->ctx, &ex->sched);
    } else {
        deadlock();
    }
    __builtin_unreachable();
}

struct FpControl { /* MXCSR's control bits and the x87 control word (not switched between fibers) */
    uint32_t mxcsr; /* bits 6-15: DAZ, exception masks, rounding, FTZ; the sticky flags 0-5 are left out */
    uint16_t x87;
    bool operator!=(const FpControl &o) const { return mxcsr != o.mxcsr || x87 != o.x87; }
};
static inline FpControl fp_control() {
    FpControl c{0, 0};
#ifdef __x86_64__
    asm volatile("stmxcsr %0" : "=m"(c.mxcsr));
    asm volatile("fnstcw %0" : "=m"(c.x87));
    c.mxcsr &= ~0x3fu;
#endif
    return c;
}
static inline void set_fp_control(const FpControl &c) {
#ifdef __x86_64__
    uint32_t m;
    asm volatile("stmxcsr %0" : "=m"(m));
    m = (m & 0x3fu) | c.mxcsr; /* keep the sticky flags */
    asm volatile("ldmxcsr %0" ::"m"(m));
    asm volatile("fldcw %0" ::"m"(c.x87));
#else
    (void)c;
#endif
}

static void fiber_entry() {
    Block *b = blk();
    FpControl at_entry = fp_control();
    b->L->inv(b->L->frame);
    if (FpControl now = fp_control(); now != at_entry) {
        set_fp_control(at_entry); /* the other fibers and later launches run under the thread's own */
        fail_thread("returned with the floating-point control state changed (MXCSR control bits 0x%04x -> 0x%04x, "
                    "x87 control word 0x%04x -> 0x%04x); fibers share their OS thread's, so a kernel must not change it",
                    at_entry.mxcsr, now.mxcsr, at_entry.x87, now.x87);
    }
    thread_exit(cur());
}

/* ======================================================================== */
/* Executors                                                                 */
/* ======================================================================== */

static void *map_or_die(size_t bytes, int prot) {
    void *p = mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "simt: mmap of %zu bytes failed: %s\n", bytes, strerror(errno));
        abort();
    }
    return p;
}

static Exec *exec_new(int id) {
    Exec *ex = new Exec();
    ex->id = id;
    ex->fib = new Fiber[kMaxThreads]();
    ex->stack_size = g_stack_kb * 1024;
    ex->slot = (ex->stack_size + kStackGuard + kStaggerSpan + kStaggerSpan - 1) / kStaggerSpan * kStaggerSpan;
    ex->stack_region = (char *)map_or_die(ex->slot * kMaxThreads, PROT_READ | PROT_WRITE);
    ex->ready = 0;
    ex->smem_map = ((kMaxSmem + 64 + kPage - 1) / kPage) * kPage + kPage;
    ex->smem_region = (char *)map_or_die(ex->smem_map, PROT_READ | PROT_WRITE);
    if (mprotect(ex->smem_region + ex->smem_map - kPage, kPage, PROT_NONE) != 0) abort();
    ex->launch_id = ~0ull;
    return ex;
}

static void exec_prepare(Exec *ex, Launch *L) {
    unsigned n = L->nthreads;
    while (ex->ready < n) {
        Fiber &f = ex->fib[ex->ready];
        char *slot = ex->stack_region + (size_t)ex->ready * ex->slot;
        if (mprotect(slot, kStackGuard, PROT_NONE) != 0) abort(); /* guard below the stack */
        f.stack_lo = slot + kStackGuard;
        f.cp.reserve(16);
        ex->ready++;
    }
    unsigned bx = L->block.x, by = L->block.y;
    for (unsigned i = 0; i < n; i++) {
        Fiber &f = ex->fib[i];
        f.lin = i;
        f.tid.x = i % bx;
        f.tid.y = (i / bx) % by;
        f.tid.z = i / (bx * by);
    }
    Block &b = ex->blk;
    b.ex = ex;
    b.L = L;
    b.bdim = L->block;
    b.gdim = L->grid;
    b.n = n;
    b.nwarps = (n + 31) / 32;
    size_t sm = (L->smem + 15) & ~(size_t)15;
    b.dsmem = (unsigned char *)(ex->smem_region + ex->smem_map - kPage - sm);
    ex->launch_id = L->id;
}

static void run_block(Exec *ex, Launch *L, unsigned long long idx) {
    Block &b = ex->blk;
    unsigned long long gx = L->grid.x, gy = L->grid.y;
    b.bid.x = (unsigned)(idx % gx);
    b.bid.y = (unsigned)((idx / gx) % gy);
    b.bid.z = (unsigned)(idx / (gx * gy));
    b.nexited = 0;
    b.bar_arrived = 0;
    b.bar_gen = 0;
    unsigned n = b.n;
    for (unsigned w = 0; w < b.nwarps; w++) {
        Warp &W = b.warps[w];
        unsigned lanes = n - w * 32 >= 32 ? 32 : n - w * 32;
        W.exists = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
        W.exited = 0;
        W.waiting = 0;
        W.mixed = false;
    }
    for (unsigned i = 0; i < n; i++) {
        Fiber &f = ex->fib[i];
        f.state = ST_RUN;
        f.cp.clear();
        f.cp_head = 0;
        f.cp_committed = 0;
        ctx_init(&f.ctx, f.stack_lo, ex->stack_size + stack_stagger(i), fiber_entry);
    }
    if (g_poison && L->smem) memset(b.dsmem, 0xff, L->smem);
    ex->rq_head = 0;
    ex->rq_tail = 0;
    for (unsigned i = 1; i < n; i++) rq_push(ex, i);
    t_thr = &ex->fib[0];
    ex->switches++;
    ctx_switch(&ex->sched, &ex->fib[0].ctx);
    t_thr = nullptr;
}

static void run_blocks(Exec *ex, Launch *L) {
    if (ex->launch_id != L->id) exec_prepare(ex, L);
    t_blk = &ex->blk;
    for (;;) {
        if (L->failed.load(std::memory_order_relaxed)) break;
        unsigned long long idx = L->next.fetch_add(1, std::memory_order_relaxed);
        if (idx >= L->nblocks) break;
        run_block(ex, L, idx);
    }
    t_blk = nullptr;
    t_thr = nullptr;
}

static void install_altstack() {
    stack_t old;
    if (sigaltstack(nullptr, &old) == 0 && !(old.ss_flags & SS_DISABLE)) return;
    stack_t ss;
    ss.ss_size = 64 * 1024;
    ss.ss_sp = map_or_die(ss.ss_size, PROT_READ | PROT_WRITE);
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
}

static void *worker_main(void *arg) {
    Exec *ex = (Exec *)arg;
    install_altstack();
    pthread_mutex_lock(&g_pool.mu);
    unsigned long long seen = ex->epoch0; /* epoch when the thread was created */
    for (;;) {
        while (g_pool.epoch == seen) pthread_cond_wait(&g_pool.cv_work, &g_pool.mu);
        seen = g_pool.epoch;
        if (ex->id > g_pool.needed || g_pool.closed) continue; /* late: the caller did the work */
        g_pool.joined++;
        Launch *L = g_pool.L;
        pthread_mutex_unlock(&g_pool.mu);
        run_blocks(ex, L);
        pthread_mutex_lock(&g_pool.mu);
        if (--g_pool.joined == 0 && g_pool.closed) pthread_cond_signal(&g_pool.cv_done);
    }
    return nullptr;
}

static void start_workers() { /* called with g_launch_mu held */
    if (g_pool.started) return;
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGTRAP);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 1; i < g_pool.nexec; i++) {
        Exec *ex = g_pool.ex[i];
        ex->epoch0 = g_pool.epoch; /* read under g_launch_mu: no launch in flight */
        ex->has_thread = pthread_create(&ex->thread, nullptr, worker_main, ex) == 0;
        if (!ex->has_thread) {
            g_pool.nexec = i;
            break;
        }
        pthread_detach(ex->thread);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    g_pool.started = true;
}

static void after_fork_child() {
    /* Only the forking thread survives: workers must be started again. */
    pthread_mutex_init(&g_pool.mu, nullptr);
    pthread_cond_init(&g_pool.cv_work, nullptr);
    pthread_cond_init(&g_pool.cv_done, nullptr);
    pthread_mutex_init(&g_launch_mu, nullptr);
    g_pool.started = false;
    g_pool.joined = 0;
    g_pool.closed = true;
    for (int i = 1; i < g_pool.nexec; i++) g_pool.ex[i]->has_thread = false;
}

static void after_fork_all() {
    after_fork_child();
    after_fork_alloc();
}

static void global_init() {
    const char *e = getenv("NI_SIMT_STACK_KB");
    if (e && atoi(e) >= 16) g_stack_kb = (size_t)atoi(e);
    e = getenv("NI_SIMT_POISON");
    g_poison = e && *e && *e != '0';
    long hw = sysconf(_SC_NPROCESSORS_ONLN);
    int n = hw < 2 ? 1 : 2;
    e = getenv("NI_SIMT_WORKERS");
    if (e && atoi(e) >= 1) n = atoi(e);
    if (n > kMaxExec) n = kMaxExec;
    g_pool.nexec = n;
    for (int i = 0; i < n; i++) g_pool.ex[i] = exec_new(i);
    install_fault_handlers();
    pthread_atfork(nullptr, nullptr, after_fork_all);
}

} // namespace

/* ======================================================================== */
/* Barrier                                                                   */
/* ======================================================================== */

int barrier(int op, int pred) {
    Fiber *f = cur();
    if (!f) die_outside("__syncthreads");
    Block *b = blk();
    Exec *ex = b->ex;
    int p = pred != 0;
    if (b->bar_arrived == 0) {
        b->bar_op = op;
        b->bar_acc = op == 2 ? 1 : 0;
    } else if (b->bar_op != op) {
        static const char *n[] = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or"};
        fail_thread("reached %s while other threads wait at %s", n[op & 3], n[b->bar_op & 3]);
    }
    switch (op) {
    case 1: b->bar_acc += p; break;
    case 2: b->bar_acc &= p; break;
    case 3: b->bar_acc |= p; break;
    default: break;
    }
    unsigned live = b->n - b->nexited;
    if (b->bar_arrived + 1 == live) {
        int res = b->bar_acc;
        b->bar_gen++;
        b->bar_res[b->bar_gen & 1] = res;
        for (unsigned i = 0; i < b->bar_arrived; i++) {
            Fiber &w = ex->fib[ex->barw[i]];
            w.state = ST_RUN;
            rq_push(ex, ex->barw[i]);
        }
        b->bar_arrived = 0;
        return res;
    }
    ex->barw[b->bar_arrived++] = (unsigned short)f->lin;
    f->state = ST_BAR;
    unsigned gen = b->bar_gen;
    block_and_switch(f);
    return b->bar_res[(gen + 1) & 1];
}

/* ======================================================================== */
/* Warp rendezvous                                                           */
/* ======================================================================== */

namespace {

static void combine(Block *b, unsigned w, unsigned m, Lane &c0);

/* The calling fiber has filled f->col; waits until every lane of its mask
 * arrived, then returns with f->col.out filled. */
static void coll_sync(Fiber *f) {
    Block *b = blk();
    Exec *ex = b->ex;
    unsigned w = f->lin >> 5, l = f->lin & 31, me = 1u << l;
    Warp &W = b->warps[w];
    Lane &c = f->col;
    unsigned m = c.mask;
    if (!(m & me))
        fail_thread("%s: mask 0x%08x does not include the calling lane %u", op_name(c.op, c.sub), m, l);
    if (m & ~W.exists)
        fail_warp(w, "%s by lane %u: mask 0x%08x names lanes 0x%08x that do not exist (block of %u threads)",
                  op_name(c.op, c.sub), l, m, m & ~W.exists, b->n);
    if (m & W.exited)
        fail_warp(w, "%s by lane %u: mask 0x%08x names lanes 0x%08x that have exited", op_name(c.op, c.sub), l, m,
                  m & W.exited);
    if (W.waiting == 0) {
        W.mask0 = m;
        W.mixed = false;
    } else if (m != W.mask0) {
        W.mixed = true;
    }
    W.waiting |= me;
    if ((W.waiting & m) == m) {
        /* complete: check that every lane of the group agrees */
        for (unsigned j = 0; j < 32; j++) {
            if (!(m >> j & 1)) continue;
            Lane &o = ex->fib[w * 32 + j].col;
            if (o.mask != m || o.op != c.op || o.sub != c.sub || o.size != c.size)
                fail_warp(w, "lanes disagree: lane %u is in %s (mask 0x%08x) while lane %u is in %s (mask 0x%08x)", l,
                          op_name(c.op, c.sub), m, j, op_name(o.op, o.sub), o.mask);
        }
        combine(b, w, m, c);
        W.waiting &= ~m;
        for (unsigned j = 0; j < 32; j++) {
            if (!(m >> j & 1) || j == l) continue;
            Fiber &o = ex->fib[w * 32 + j];
            o.state = ST_RUN;
            rq_push(ex, w * 32 + j);
        }
        return;
    }
    if (W.mixed) {
        for (unsigned j = 0; j < 32; j++) {
            if (!(W.waiting >> j & 1) || j == l) continue;
            Lane &o = ex->fib[w * 32 + j].col;
            if ((W.waiting & o.mask) == o.mask)
                fail_warp(w, "lanes disagree: lane %u is in %s (mask 0x%08x) while lane %u is in %s (mask 0x%08x)", l,
                          op_name(c.op, c.sub), m, j, op_name(o.op, o.sub), o.mask);
        }
    }
    f->state = ST_WARP;
    block_and_switch(f);
}

static inline uint16_t ld16(const void *p, unsigned i) {
    uint16_t v;
    memcpy(&v, (const char *)p + 2 * i, 2);
    return v;
}
static inline float bf16f(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

static void combine(Block *b, unsigned w, unsigned m, Lane &c0) {
    Fiber *fl = &b->ex->fib[w * 32];
    switch (c0.op) {
    case OP_SHFL: {
        uint64_t poison = c0.size == 8 ? ~0ull : 0xffffffffull;
        for (unsigned j = 0; j < 32; j++) {
            if (!(m >> j & 1)) continue;
            Lane &c = fl[j].col;
            int width = c.width;
            if (width < 1 || width > 32 || (width & (width - 1)))
                fail_warp(w, "%s by lane %u: width %d is not a power of two in [1,32]", op_name(c.op, c.sub), j, width);
            int segmask = ~(width - 1) & 31;
            int lane = (int)j, minLane = lane & segmask;
            int maxLane = minLane | ((c.sub == SHFL_UP ? 0 : 31) & ~segmask);
            int src;
            bool ok;
            switch (c.sub) {
            case SHFL_IDX: src = minLane | (c.arg & 31 & ~segmask); ok = src <= maxLane; break;
            case SHFL_UP: src = lane - c.arg; ok = src >= maxLane; break;
            case SHFL_DOWN: src = lane + c.arg; ok = src <= maxLane; break;
            default: src = lane ^ c.arg; ok = src <= maxLane; break;
            }
            if (!ok) src = lane;
            if (src < 0 || src > 31 || !(m >> src & 1))
                c.out[0] = poison; /* source lane not in the mask: undefined on HW */
            else
                c.out[0] = fl[src].col.in[0];
        }
        break;
    }
    case OP_VOTE: {
        unsigned ballot = 0;
        for (unsigned j = 0; j < 32; j++)
            if ((m >> j & 1) && fl[j].col.in[0]) ballot |= 1u << j;
        unsigned r = c0.sub == 0 ? ballot : c0.sub == 1 ? (ballot != 0) : (ballot == m);
        for (unsigned j = 0; j < 32; j++)
            if (m >> j & 1) fl[j].col.out[0] = r;
        break;
    }
    case OP_SYNCWARP: break;
    case OP_REDUCE: {
        int op = c0.sub & 7, sgn = c0.sub >> 3;
        bool first = true;
        unsigned acc = 0;
        for (unsigned j = 0; j < 32; j++) {
            if (!(m >> j & 1)) continue;
            unsigned v = (unsigned)fl[j].col.in[0];
            if (first) {
                acc = v;
                first = false;
                continue;
            }
            switch (op) {
            case 0: acc += v; break;
            case 1: acc = sgn ? ((int)v < (int)acc ? v : acc) : (v < acc ? v : acc); break;
            case 2: acc = sgn ? ((int)v > (int)acc ? v : acc) : (v > acc ? v : acc); break;
            case 3: acc &= v; break;
            case 4: acc |= v; break;
            default: acc ^= v; break;
            }
        }
        for (unsigned j = 0; j < 32; j++)
            if (m >> j & 1) fl[j].col.out[0] = acc;
        break;
    }
    case OP_MMA: {
        /* PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point
         * type": groupID = lane>>2, tig = lane%4; element i of a register
         * pair: low half first. */
        float A[16][16], B[16][8], C[16][8];
        for (unsigned j = 0; j < 32; j++) {
            const Lane &c = fl[j].col;
            uint32_t a[4], bb[2];
            float cc[4];
            memcpy(a, &c.in[0], 16);
            memcpy(bb, &c.in[2], 8);
            memcpy(cc, &c.in[3], 16);
            unsigned g = j >> 2, t = j & 3;
            for (int h = 0; h < 2; h++) {
                A[g][2 * t + h] = bf16f((a[0] >> (16 * h)) & 0xffff);
                A[g + 8][2 * t + h] = bf16f((a[1] >> (16 * h)) & 0xffff);
                A[g][2 * t + 8 + h] = bf16f((a[2] >> (16 * h)) & 0xffff);
                A[g + 8][2 * t + 8 + h] = bf16f((a[3] >> (16 * h)) & 0xffff);
                B[2 * t + h][g] = bf16f((bb[0] >> (16 * h)) & 0xffff);
                B[2 * t + 8 + h][g] = bf16f((bb[1] >> (16 * h)) & 0xffff);
                C[g][2 * t + h] = cc[h];
                C[g + 8][2 * t + h] = cc[2 + h];
            }
        }
        for (unsigned j = 0; j < 32; j++) {
            unsigned g = j >> 2, t = j & 3;
            float d[4];
            for (int q = 0; q < 4; q++) {
                unsigned row = g + (q >= 2 ? 8 : 0), col = 2 * t + (q & 1);
                float bcol[16];
                for (int k = 0; k < 16; k++) bcol[k] = B[k][col];
                d[q] = tcmodel::mma_k16(mma_mode(), A[row], bcol, C[row][col]);
            }
            memcpy(fl[j].col.out, d, 16);
        }
        break;
    }
    case OP_LDM: {
        int num = c0.sub & 15, trans = c0.sub >> 4;
        for (unsigned j = 0; j < 32; j++) {
            uint32_t r[4] = {0, 0, 0, 0};
            unsigned g = j >> 2, t = j & 3;
            for (int i = 0; i < num; i++) {
                if (!trans) {
                    const char *row = (const char *)(uintptr_t)fl[i * 8 + g].col.in[0];
                    memcpy(&r[i], row + 4 * t, 4);
                } else {
                    const void *r0 = (const void *)(uintptr_t)fl[i * 8 + 2 * t].col.in[0];
                    const void *r1 = (const void *)(uintptr_t)fl[i * 8 + 2 * t + 1].col.in[0];
                    r[i] = (uint32_t)ld16(r0, g) | ((uint32_t)ld16(r1, g) << 16);
                }
            }
            memcpy(fl[j].col.out, r, 16);
        }
        break;
    }
    }
}

static inline Fiber *need_fiber(const char *what) {
    Fiber *f = cur();
    if (!f) die_outside(what);
    return f;
}

} // namespace

uint64_t shfl(int mode, unsigned mask, uint64_t v, int size, int arg, int width) {
    Fiber *f = need_fiber("__shfl*_sync");
    Lane &c = f->col;
    c.op = OP_SHFL;
    c.sub = (uint8_t)mode;
    c.size = (uint8_t)size;
    c.mask = mask;
    c.arg = arg;
    c.width = width;
    c.in[0] = v;
    coll_sync(f);
    return c.out[0];
}

unsigned vote(int op, unsigned mask, int pred) {
    Fiber *f = need_fiber("__ballot_sync/__any_sync/__all_sync");
    Lane &c = f->col;
    c.op = OP_VOTE;
    c.sub = (uint8_t)op;
    c.size = 4;
    c.mask = mask;
    c.in[0] = pred != 0;
    coll_sync(f);
    return (unsigned)c.out[0];
}

void syncwarp(unsigned mask) {
    Fiber *f = need_fiber("__syncwarp");
    Lane &c = f->col;
    c.op = OP_SYNCWARP;
    c.sub = 0;
    c.size = 0;
    c.mask = mask;
    coll_sync(f);
}

unsigned activemask() {
    Fiber *f = need_fiber("__activemask");
    Warp &W = blk()->warps[f->lin >> 5];
    return W.exists & ~W.exited;
}

unsigned reduce(int op, int sgn, unsigned mask, unsigned v) {
    Fiber *f = need_fiber("__reduce_*_sync");
    Lane &c = f->col;
    c.op = OP_REDUCE;
    c.sub = (uint8_t)(op | (sgn << 3));
    c.size = 4;
    c.mask = mask;
    c.in[0] = v;
    coll_sync(f);
    return (unsigned)c.out[0];
}

void trap(const char *what) {
    if (!cur()) die_outside(what);
    fail_thread("%s", what);
}

/* ======================================================================== */
/* PTX emulations                                                            */
/* ======================================================================== */

void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    Fiber *f = need_fiber("mma.sync");
    Lane &s = f->col;
    s.op = OP_MMA;
    s.sub = 0;
    s.size = 0;
    s.mask = 0xffffffffu;
    memcpy(&s.in[0], a, 16);
    memcpy(&s.in[2], b, 8);
    memcpy(&s.in[3], c, 16);
    coll_sync(f);
    memcpy(d, s.out, 16);
}

void ldmatrix(uint32_t *r, int num, int trans, const void *row) {
    Fiber *f = need_fiber("ldmatrix");
    unsigned l = f->lin & 31;
    if (l < (unsigned)(8 * num) && ((uintptr_t)row & 15))
        fail_thread("%s: row address %p (lane %u) is not 16-byte aligned", op_name(OP_LDM, (uint8_t)(num | trans << 4)),
                    row, l);
    Lane &s = f->col;
    s.op = OP_LDM;
    s.sub = (uint8_t)(num | (trans << 4));
    s.size = 0;
    s.mask = 0xffffffffu;
    s.in[0] = (uint64_t)(uintptr_t)row;
    coll_sync(f);
    memcpy(r, s.out, 4 * (size_t)num);
}

void cp_async(void *smem, const void *gmem, int cp_bytes, int src_bytes) {
    Fiber *f = need_fiber("cp.async");
    if (!(cp_bytes == 4 || cp_bytes == 8 || cp_bytes == 16))
        fail_thread("cp.async: copy size %d is not 4, 8 or 16", cp_bytes);
    if (src_bytes < 0 || src_bytes > cp_bytes)
        fail_thread("cp.async: src-size %d outside [0,%d]", src_bytes, cp_bytes);
    if (((uintptr_t)smem | (uintptr_t)gmem) & (uintptr_t)(cp_bytes - 1))
        fail_thread("cp.async: shared %p or global %p is not %d-byte aligned", smem, gmem, cp_bytes);
    f->cp.push_back(CpOp{smem, gmem, cp_bytes, src_bytes, f->cp_committed});
}

void cp_async_commit() {
    Fiber *f = need_fiber("cp.async.commit_group");
    f->cp_committed++;
}

void cp_async_wait(int n) {
    Fiber *f = need_fiber("cp.async.wait_group");
    if (n < 0) n = 0;
    /* retire every committed group except the newest n, oldest first */
    if (f->cp_committed <= (unsigned)n) return;
    unsigned limit = f->cp_committed - (unsigned)n; /* groups with id < limit complete */
    size_t i = f->cp_head;
    for (; i < f->cp.size() && f->cp[i].group < limit; i++) {
        CpOp &o = f->cp[i];
        if (o.src_bytes) memcpy(o.dst, o.src, (size_t)o.src_bytes);
        if (o.src_bytes < o.bytes) memset((char *)o.dst + o.src_bytes, 0, (size_t)(o.bytes - o.src_bytes));
    }
    f->cp_head = i;
    if (f->cp_head == f->cp.size()) {
        f->cp.clear();
        f->cp_head = 0;
    }
}

void cp_async_wait_all() {
    cp_async_commit();
    cp_async_wait(0);
}

/* ======================================================================== */
/* Launch                                                                    */
/* ======================================================================== */

int launch_raw(const char *name, dim3 grid, dim3 block, size_t smem, void *frame, Invoke inv) {
    if (!name) name = "?";
    if (t_thr) {
        snprintf(g_last_error, sizeof g_last_error, "simt: launch of %s from inside a kernel is not supported", name);
        return 1;
    }
    pthread_once(&g_init_once, global_init);
    unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    const char *bad = nullptr;
    if (nt == 0 || nt > kMaxThreads) bad = "block threads must be in [1,1024]";
    else if (block.x > 1024 || block.y > 1024) bad = "block.x and block.y must be <= 1024";
    else if (block.z > 64) bad = "block.z must be <= 64";
    else if (grid.x == 0 || grid.y == 0 || grid.z == 0) bad = "grid dimensions must be >= 1";
    else if (grid.x > 2147483647u) bad = "grid.x must be <= 2^31-1";
    else if (grid.y > 65535 || grid.z > 65535) bad = "grid.y and grid.z must be <= 65535";
    else if (smem > kMaxSmem) bad = "dynamic shared memory must be <= 232448 bytes";
    else if (!inv) bad = "null kernel";
    if (bad) {
        pthread_mutex_lock(&g_launch_mu);
        snprintf(g_last_error, sizeof g_last_error,
                 "simt: kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) smem %zu: %s", name,
                 grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, bad);
        pthread_mutex_unlock(&g_launch_mu);
        return 1;
    }
    static __thread bool alt_done = false;
    if (!alt_done) {
        install_altstack();
        alt_done = true;
    }

    pthread_mutex_lock(&g_launch_mu);
    start_workers();
    Launch L;
    L.name = name;
    L.grid = grid;
    L.block = block;
    L.smem = smem;
    L.frame = frame;
    L.inv = inv;
    L.nthreads = (unsigned)nt;
    L.nblocks = (unsigned long long)grid.x * grid.y * grid.z;
    L.id = ++g_launch_seq;
    L.next.store(0);
    L.failed.store(0);
    L.err[0] = 0;
    g_cur_launch.store(&L);

    int needed = 0;
    if (g_pool.nexec > 1 && L.nblocks > 1)
        needed = (int)((unsigned long long)(g_pool.nexec - 1) < L.nblocks - 1 ? (unsigned long long)(g_pool.nexec - 1)
                                                                              : L.nblocks - 1);
    if (needed) {
        pthread_mutex_lock(&g_pool.mu);
        g_pool.L = &L;
        g_pool.needed = needed;
        g_pool.joined = 0;
        g_pool.closed = false;
        g_pool.epoch++;
        pthread_cond_broadcast(&g_pool.cv_work);
        pthread_mutex_unlock(&g_pool.mu);
    }
    run_blocks(g_pool.ex[0], &L);
    if (needed) {
        pthread_mutex_lock(&g_pool.mu);
        g_pool.closed = true;
        while (g_pool.joined) pthread_cond_wait(&g_pool.cv_done, &g_pool.mu);
        pthread_mutex_unlock(&g_pool.mu);
    }
    g_cur_launch.store(nullptr);
    int rc = 0;
    if (L.failed.load()) {
        memcpy(g_last_error, L.err, sizeof g_last_error);
        rc = 1;
    }
    pthread_mutex_unlock(&g_launch_mu);
    return rc;
}

/* ======================================================================== */
/* Device allocator and fault handler                                        */
/* ======================================================================== */

namespace {

struct Alloc {
    uintptr_t map_lo, map_hi; /* whole mapping incl. guards; 0 = free slot */
    uintptr_t start;
    size_t bytes, rounded;
    int freed;
    char name[64];
};

pthread_mutex_t g_alloc_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<Alloc *> g_allocs{nullptr};
std::atomic<size_t> g_nallocs{0}; /* slots in use (high-water) */
size_t g_alloc_cap = 0;
size_t g_bytes_in_use = 0;
std::vector<size_t> *g_free_slots;
std::unordered_map<uintptr_t, size_t> *g_by_ptr;
std::vector<size_t> *g_quarantine; /* FIFO of freed slots kept PROT_NONE */
size_t g_quarantine_bytes = 0;
constexpr size_t kQuarantineBytes = (size_t)1 << 30, kQuarantineMax = 4096;
struct sigaction g_old_segv, g_old_bus;

static size_t slot_alloc() {
    if (!g_free_slots->empty()) {
        size_t s = g_free_slots->back();
        g_free_slots->pop_back();
        return s;
    }
    size_t n = g_nallocs.load();
    if (n == g_alloc_cap) {
        size_t cap = g_alloc_cap ? g_alloc_cap * 2 : 1024;
        Alloc *na = (Alloc *)map_or_die(cap * sizeof(Alloc), PROT_READ | PROT_WRITE);
        Alloc *oa = g_allocs.load();
        if (oa) memcpy(na, oa, n * sizeof(Alloc));
        g_allocs.store(na); /* the old table is leaked: a handler may read it */
        g_alloc_cap = cap;
    }
    g_nallocs.store(n + 1);
    return n;
}

static void evict_quarantine() {
    while (!g_quarantine->empty() && (g_quarantine_bytes > kQuarantineBytes || g_quarantine->size() > kQuarantineMax)) {
        size_t s = g_quarantine->front();
        g_quarantine->erase(g_quarantine->begin());
        Alloc &a = g_allocs.load()[s];
        size_t len = a.map_hi - a.map_lo;
        void *lo = (void *)a.map_lo;
        a.map_lo = a.map_hi = 0;
        munmap(lo, len);
        g_quarantine_bytes -= len;
        g_free_slots->push_back(s);
    }
}

/* ---- async-signal-safe formatting ---- */
struct Buf {
    char b[700];
    size_t n = 0;
    void s(const char *p) {
        while (p && *p && n < sizeof b - 1) b[n++] = *p++;
    }
    void u(unsigned long long v) {
        char t[24];
        int k = 0;
        do t[k++] = (char)('0' + v % 10), v /= 10;
        while (v);
        while (k && n < sizeof b - 1) b[n++] = t[--k];
    }
    void x(unsigned long long v) {
        s("0x");
        char t[20];
        int k = 0;
        do t[k++] = "0123456789abcdef"[v & 15], v >>= 4;
        while (v);
        while (k && n < sizeof b - 1) b[n++] = t[--k];
    }
    void dim(unsigned a, unsigned b2, unsigned c) {
        s("(");
        u(a);
        s(",");
        u(b2);
        s(",");
        u(c);
        s(")");
    }
};

static void where(Buf &m) {
    Launch *L = g_cur_launch.load();
    Fiber *f = cur();
    Block *b = blk();
    if (f && b && L) {
        m.s(" in kernel ");
        m.s(L->name);
        m.s(" block ");
        m.dim(b->bid.x, b->bid.y, b->bid.z);
        m.s(" thread ");
        m.dim(f->tid.x, f->tid.y, f->tid.z);
    } else {
        m.s(" in host code");
    }
}

static bool describe_fault(uintptr_t a, Buf &m) {
    /* device buffers */
    Alloc *t = g_allocs.load();
    size_t n = g_nallocs.load();
    for (size_t i = 0; t && i < n; i++) {
        const Alloc &e = t[i];
        if (!e.map_lo || a < e.map_lo || a >= e.map_hi) continue;
        if (e.freed) {
            m.s("simt: use of freed device memory");
            where(m);
            m.s(": address ");
            m.x(a);
            m.s(" is inside freed buffer ");
        } else if (a >= e.start) {
            m.s("simt: out-of-bounds device access");
            where(m);
            m.s(": address ");
            m.x(a);
            m.s(" is ");
            m.u(a - (e.start + e.bytes));
            m.s(" bytes past the end of buffer ");
        } else {
            m.s("simt: out-of-bounds device access");
            where(m);
            m.s(": address ");
            m.x(a);
            m.s(" is ");
            m.u(e.start - a);
            m.s(" bytes before the start of buffer ");
        }
        m.s(e.name);
        m.s(" (");
        m.u(e.bytes);
        m.s(" bytes)\n");
        return true;
    }
    /* fiber stacks and dynamic shared memory */
    for (int i = 0; i < g_pool.nexec; i++) {
        Exec *ex = g_pool.ex[i];
        if (!ex) continue;
        uintptr_t lo = (uintptr_t)ex->stack_region;
        if (a >= lo && a < lo + ex->slot * kMaxThreads && (a - lo) % ex->slot < kStackGuard) {
            m.s("simt: fiber stack overflow");
            where(m);
            m.s(": address ");
            m.x(a);
            m.s(" is below the ");
            m.u(ex->stack_size / 1024);
            m.s(" KiB stack of a thread (raise NI_SIMT_STACK_KB)\n");
            return true;
        }
        uintptr_t g = (uintptr_t)ex->smem_region + ex->smem_map - kPage;
        if (a >= g && a < g + kPage) {
            Launch *L = g_cur_launch.load();
            m.s("simt: out-of-bounds shared memory access");
            where(m);
            m.s(": address ");
            m.x(a);
            m.s(" is past the end of the dynamic shared memory (");
            m.u(L ? L->smem : 0);
            m.s(" bytes)\n");
            return true;
        }
    }
    return false;
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    Buf m;
    if (describe_fault((uintptr_t)si->si_addr, m)) {
        ssize_t r = write(2, m.b, m.n);
        (void)r;
        _exit(3);
    }
    struct sigaction *old = sig == SIGBUS ? &g_old_bus : &g_old_segv;
    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
        /* restore the previous disposition; the faulting access repeats */
        sigaction(sig, old, nullptr);
        return;
    }
    old->sa_handler(sig);
}

} // namespace

void install_fault_handlers() {
    static bool done = false;
    if (done) return;
    done = true;
    g_free_slots = new std::vector<size_t>();
    g_by_ptr = new std::unordered_map<uintptr_t, size_t>();
    g_quarantine = new std::vector<size_t>();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
}

void after_fork_alloc() { pthread_mutex_init(&g_alloc_mu, nullptr); }

} // namespace detail

/* ======================================================================== */
/* Public API                                                                */
/* ======================================================================== */

using namespace detail;

const char *last_error() { return g_last_error; }

void *device_malloc(size_t bytes, const char *name) {
    pthread_once(&g_init_once, global_init);
    if (bytes > ((size_t)1 << 46)) return nullptr;
    size_t rounded = (bytes + 255) & ~(size_t)255;
    if (rounded == 0) rounded = 256;
    size_t body = (rounded + kPage - 1) & ~(kPage - 1);
    size_t total = body + 2 * kPage;
    void *m = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    char *base = (char *)m;
    if (mprotect(base + kPage, body, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, total);
        return nullptr;
    }
    char *start = base + kPage + (body - rounded); /* end flush with the trailing guard page */
    pthread_mutex_lock(&g_alloc_mu);
    size_t s = slot_alloc();
    Alloc &a = g_allocs.load()[s];
    a.start = (uintptr_t)start;
    a.bytes = bytes;
    a.rounded = rounded;
    a.freed = 0;
    snprintf(a.name, sizeof a.name, "%s", name ? name : "?");
    a.map_hi = (uintptr_t)base + total;
    __atomic_store_n(&a.map_lo, (uintptr_t)base, __ATOMIC_RELEASE);
    (*g_by_ptr)[(uintptr_t)start] = s;
    g_bytes_in_use += bytes;
    pthread_mutex_unlock(&g_alloc_mu);
    /* fill the rounding slack with a canary checked at free */
    memset(start + bytes, 0xa5, rounded - bytes);
    return start;
}

void device_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_alloc_mu);
    auto it = g_by_ptr->find((uintptr_t)p);
    if (it == g_by_ptr->end()) {
        pthread_mutex_unlock(&g_alloc_mu);
        fprintf(stderr, "simt: device_free(%p): not a live device_malloc pointer\n", p);
        abort();
    }
    size_t s = it->second;
    g_by_ptr->erase(it);
    Alloc &a = g_allocs.load()[s];
    const unsigned char *slack = (const unsigned char *)a.start + a.bytes;
    for (size_t i = 0; i < a.rounded - a.bytes; i++) {
        if (slack[a.rounded - a.bytes - 1 - i] != 0xa5) {
            fprintf(stderr,
                    "simt: out-of-bounds device write: buffer %s (%zu bytes) was written up to %zu bytes past its end "
                    "(found at device_free)\n",
                    a.name, a.bytes, a.rounded - a.bytes - i);
            _exit(3);
        }
    }
    g_bytes_in_use -= a.bytes;
    size_t len = a.map_hi - a.map_lo;
    /* replace by a fresh PROT_NONE mapping: drops the pages, keeps the range */
    mmap((void *)a.map_lo, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    a.freed = 1;
    g_quarantine->push_back(s);
    g_quarantine_bytes += len;
    evict_quarantine();
    pthread_mutex_unlock(&g_alloc_mu);
}

size_t device_bytes_in_use() {
    pthread_mutex_lock(&g_alloc_mu);
    size_t n = g_bytes_in_use;
    pthread_mutex_unlock(&g_alloc_mu);
    return n;
}

int workers() {
    pthread_once(&g_init_once, global_init);
    return g_pool.nexec;
}

const char *mma_model() { return tcmodel::mode_name(detail::mma_mode()); }

unsigned long long fiber_switches() {
    unsigned long long n = 0;
    for (int i = 0; i < g_pool.nexec; i++)
        if (g_pool.ex[i]) n += __atomic_load_n(&g_pool.ex[i]->switches, __ATOMIC_RELAXED);
    return n;
}

} // namespace simt
