/*
 * graph.cuh — capture and replay of the ops queued on a context's stream
 * (ni_cuda.h, "graphs"). Not a header: ctx.cu includes it once, at its end,
 * so both builds (nvcc, and g++ -DNI_SIMT for the harness and its tests)
 * get it with the context without another translation unit.
 *
 * Real CUDA: stream capture in cudaStreamCaptureModeThreadLocal (the Go
 * binding pins the goroutine to its OS thread from begin to end) and one
 * instantiated cudaGraphExec per graph. Under the harness ni_launch, the
 * memsets and the device copies append closures to the graph being
 * recorded instead of running, and a launch runs them in order.
 *
 * Either way, every context call that cannot be part of a graph (a
 * synchronous copy, a stream sync, an allocation, op scratch growth, a
 * launch error) fails the capture with its reason instead of running, and
 * a free during the capture is deferred to its end.
 */
#include <new>
#if defined(NI_SIMT)
#include <vector>
#endif

struct ni_cuda_graph {
    ni_cuda_ctx *ctx; /* NULL once the context is gone */
    ni_cuda_graph *prev, *next;
    uint64_t gen; /* memory generation at capture */
    int nodes;
#if defined(NI_SIMT)
    struct op {
        const char *name;
        bool kernel;
        std::function<int()> fn;
    };
    std::vector<op> ops;
#else
    cudaGraphExec_t exec;
#endif
};

void ni_cuda_capture_fail(ni_cuda_ctx *c, const char *fmt, ...) {
    if (!c->capturing || c->capture_code) return;
    c->capture_code = NI_CUDA_CAPTURE_ERROR;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->capture_msg, sizeof c->capture_msg, fmt, ap);
    va_end(ap);
}

int ni_cuda_capture_reject(ni_cuda_ctx *c, const char *what, char *err, int errlen) {
    ni_cuda_capture_fail(c, "%s cannot be captured in a graph", what);
    char buf[256];
    snprintf(buf, sizeof buf, "%s during graph capture", what);
    copy_msg(err, errlen, buf);
    return NI_CUDA_CAPTURE_ERROR;
}

void ni_cuda_capture_defer_free(ni_cuda_ctx *c, void *p) {
    ni_cuda_capture_fail(c, "device memory was freed during graph capture");
    if (c->ndeferred == c->capdeferred) {
        int cap = c->capdeferred ? 2 * c->capdeferred : 16;
        void **q = (void **)realloc(c->deferred, (size_t)cap * sizeof *q);
        if (!q) return; /* leaks p rather than freeing memory queued work may use */
        c->deferred = q;
        c->capdeferred = cap;
    }
    c->deferred[c->ndeferred++] = p;
}

#if defined(NI_SIMT)
void ni_cuda_capture_op(ni_cuda_ctx *c, const char *name, bool kernel, std::function<int()> fn) {
    if (!c->cap) return;
    c->cap->ops.push_back(ni_cuda_graph::op{name, kernel, std::move(fn)});
    c->cap->nodes++;
}
#endif

static void graph_link(ni_cuda_ctx *c, ni_cuda_graph *g) {
    g->ctx = c;
    g->prev = NULL;
    g->next = c->graphs;
    if (c->graphs) c->graphs->prev = g;
    c->graphs = g;
}

static void graph_unlink(ni_cuda_graph *g) {
    ni_cuda_ctx *c = g->ctx;
    if (!c) return;
    if (g->prev) g->prev->next = g->next;
    else c->graphs = g->next;
    if (g->next) g->next->prev = g->prev;
    g->prev = g->next = NULL;
    g->ctx = NULL;
}

/* Releases the device side of a graph (the handle stays valid). */
static void graph_release(ni_cuda_graph *g) {
#if defined(NI_SIMT)
    g->ops.clear();
    g->ops.shrink_to_fit();
#else
    if (g->exec) cudaGraphExecDestroy(g->exec); /* an in-flight graph is freed when it completes */
    g->exec = NULL;
#endif
}

void ni_cuda_graphs_release(ni_cuda_ctx *c) {
    while (c->graphs) {
        ni_cuda_graph *g = c->graphs;
        graph_release(g);
        graph_unlink(g);
    }
    if (c->cap) {
#if !defined(NI_SIMT)
        cudaGraph_t tmp = NULL;
        if (cudaStreamEndCapture(c->stream, &tmp) == cudaSuccess && tmp) cudaGraphDestroy(tmp);
#endif
        delete c->cap;
        c->cap = NULL;
        c->capturing = 0;
    }
    for (int i = 0; i < c->ndeferred; i++) ni_cuda_free(c, c->deferred[i]);
    free(c->deferred);
    c->deferred = NULL;
    c->ndeferred = c->capdeferred = 0;
}

int ni_cuda_capture_begin(ni_cuda_ctx *c, char *err, int errlen) {
    if (c->capturing) {
        copy_msg(err, errlen, "graph capture: a capture is already in progress");
        return NI_CUDA_CAPTURE_ERROR;
    }
    ni_cuda_graph *g = new (std::nothrow) ni_cuda_graph();
    if (!g) {
        copy_msg(err, errlen, "graph capture: out of host memory");
        return 2;
    }
    g->gen = c->mem_gen;
#if !defined(NI_SIMT)
    cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        delete g;
        return rt_fail(e, "cudaStreamBeginCapture", err, errlen);
    }
#endif
    c->cap = g;
    c->capturing = 1;
    c->capture_code = 0;
    c->capture_msg[0] = 0;
    return 0;
}

int ni_cuda_capture_end(ni_cuda_ctx *c, ni_cuda_graph **out, char *err, int errlen) {
    *out = NULL;
    if (!c->capturing || !c->cap) {
        copy_msg(err, errlen, "graph capture: no capture in progress");
        return NI_CUDA_CAPTURE_ERROR;
    }
    ni_cuda_graph *g = c->cap;
    int code = 0;
    char buf[640];
    buf[0] = 0;
#if !defined(NI_SIMT)
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
#endif
    c->cap = NULL;
    c->capturing = 0;
    /* Frees asked for during the capture happen now (and bump the
     * generation, so a graph that might use the memory is stale). */
    for (int i = 0; i < c->ndeferred; i++) ni_cuda_free(c, c->deferred[i]);
    c->ndeferred = 0;
    if (c->capture_code) {
        code = c->capture_code;
        snprintf(buf, sizeof buf, "graph capture failed: %s", c->capture_msg);
    }
#if !defined(NI_SIMT)
    else if (e != cudaSuccess) {
        code = (int)e;
        snprintf(buf, sizeof buf, "cudaStreamEndCapture: %s (CUDA error %d %s)", cudaGetErrorString(e), (int)e,
                 cudaGetErrorName(e));
    } else {
        size_t n = 0;
        if ((e = cudaGraphGetNodes(graph, NULL, &n)) == cudaSuccess) g->nodes = (int)n;
        if (e == cudaSuccess) e = cudaGraphInstantiate(&g->exec, graph, 0);
        if (e != cudaSuccess) {
            code = (int)e;
            snprintf(buf, sizeof buf, "cudaGraphInstantiate: %s (CUDA error %d %s)", cudaGetErrorString(e), (int)e,
                     cudaGetErrorName(e));
        }
    }
    if (graph) cudaGraphDestroy(graph);
#endif
    if (!code && g->gen != c->mem_gen) {
        code = NI_CUDA_CAPTURE_ERROR;
        snprintf(buf, sizeof buf, "graph capture failed: device memory was reallocated during the capture");
    }
    c->capture_code = 0;
    c->capture_msg[0] = 0;
    if (code) {
        graph_release(g);
        delete g;
        copy_msg(err, errlen, buf);
        return code;
    }
    graph_link(c, g);
    *out = g;
    return 0;
}

int ni_cuda_graph_launch(ni_cuda_ctx *c, ni_cuda_graph *g, char *err, int errlen) {
    if (!g || g->ctx != c) {
        copy_msg(err, errlen, "graph launch: the graph does not belong to this context (or it was released)");
        return 400; /* cudaErrorInvalidResourceHandle */
    }
    if (c->capturing) return ni_cuda_capture_reject(c, "a graph launch", err, errlen);
    if (g->gen != c->mem_gen) return NI_CUDA_GRAPH_STALE;
#if defined(NI_SIMT)
    for (const ni_cuda_graph::op &o : g->ops)
        if (o.fn() != 0) ni_cuda_record(c, 1, "kernel %s: %s", o.name, o.kernel ? simt::last_error() : "failed");
    return 0;
#else
    cudaError_t e = cudaGraphLaunch(g->exec, c->stream);
    if (e != cudaSuccess) return rt_fail(e, "cudaGraphLaunch", err, errlen);
    return 0;
#endif
}

int ni_cuda_graph_nodes(const ni_cuda_graph *g) { return g ? g->nodes : 0; }

void ni_cuda_graph_free(ni_cuda_graph *g) {
    if (!g) return;
    if (g->ctx) graph_release(g);
    graph_unlink(g);
    delete g;
}

uint64_t ni_cuda_mem_generation(const ni_cuda_ctx *c) { return c->mem_gen; }
