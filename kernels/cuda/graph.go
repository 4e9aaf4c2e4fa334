//go:build cuda || cudasim

package cuda

/*
#include <stdlib.h>
#include "ni_cuda.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"
)

// ErrGraphStale is returned by Graph.Launch when device memory the graph may
// use was freed or the op scratch was reallocated after the capture: the
// graph ran nothing and must be captured again.
var ErrGraphStale = errors.New("graph is stale: device memory was freed or reallocated after its capture")

// CaptureError is the code of a capture that met something that cannot be
// part of a graph (a synchronous copy, a sync, an allocation, op scratch
// growth).
const CaptureError = C.NI_CUDA_CAPTURE_ERROR

// Graph is a captured sequence of ops of one context.
type Graph struct {
	g *C.ni_cuda_graph
	x *Ctx
}

// CaptureBegin starts recording the ops queued on the stream instead of
// running them. The calling goroutine stays on its OS thread until
// CaptureEnd (real CUDA captures in thread-local mode).
func (x *Ctx) CaptureBegin() error {
	if x.c == nil {
		return &Error{Code: 400, Msg: "graph capture: the context is closed"}
	}
	runtime.LockOSThread()
	buf := make([]byte, 512)
	if code := C.ni_cuda_capture_begin(x.c, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf))); code != 0 {
		runtime.UnlockOSThread()
		return errFrom(code, buf)
	}
	return nil
}

// CaptureEnd ends the capture started by CaptureBegin and returns the
// graph, or the first reason the capture failed.
func (x *Ctx) CaptureEnd() (*Graph, error) {
	if x.c == nil {
		return nil, &Error{Code: 400, Msg: "graph capture: the context is closed"}
	}
	var g *C.ni_cuda_graph
	buf := make([]byte, 768)
	code := C.ni_cuda_capture_end(x.c, &g, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	runtime.UnlockOSThread()
	if code != 0 {
		return nil, errFrom(code, buf)
	}
	return &Graph{g: g, x: x}, nil
}

// MemGeneration counts op scratch reallocations and frees of the context
// (a graph captured under an older generation is stale).
func (x *Ctx) MemGeneration() uint64 { return uint64(C.ni_cuda_mem_generation(x.c)) }

// Launch queues the graph on its context's stream (ErrGraphStale: nothing
// was queued). Errors of its kernels surface at Sync.
func (g *Graph) Launch() error {
	if g.g == nil || g.x.c == nil {
		return &Error{Code: 400, Msg: "graph launch: the graph or its context was released"}
	}
	buf := g.x.msg[:]
	code := C.ni_cuda_graph_launch(g.x.c, g.g, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)))
	if code == C.NI_CUDA_GRAPH_STALE {
		return ErrGraphStale
	}
	return errFrom(code, buf)
}

// Nodes is the number of ops (kernel launches, memsets, copies) in the graph.
func (g *Graph) Nodes() int {
	if g.g == nil {
		return 0
	}
	return int(C.ni_cuda_graph_nodes(g.g))
}

// Free releases the graph (also after its context was closed).
func (g *Graph) Free() {
	if g.g != nil {
		C.ni_cuda_graph_free(g.g)
		g.g = nil
	}
}
