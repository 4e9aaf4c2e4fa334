package backend

import "errors"

// Graph is a captured sequence of ops: Launch replays exactly the ops that
// were queued during the capture, with the same arguments (views, shapes,
// output slots), so every value that changes between replays (token ids,
// positions, state input slots) must live in device memory and be uploaded
// before the launch. Launch is asynchronous like the ops; Sync reports the
// errors of the replayed kernels.
type Graph interface {
	// Launch queues the graph. It returns ErrGraphStale (having queued
	// nothing) when memory the graph may use was freed or reallocated since
	// the capture: close it and capture again.
	Launch() error
	// Nodes is the number of ops (kernel launches, memsets, copies) it holds.
	Nodes() int
	// Close releases the graph.
	Close()
}

// GraphCapturer is implemented by backends that capture graphs (CUDA).
// Between BeginCapture and EndCapture ops are recorded, not run; anything
// that cannot be part of a graph (Upload*, Download*, Sync, Alloc, a kernel
// growing its scratch) fails the capture, and EndCapture returns the first
// reason. Run a step of the same shapes eagerly once before capturing it:
// kernels may grow their scratch on first use.
type GraphCapturer interface {
	BeginCapture() error
	EndCapture() (Graph, error)
}

// ErrGraphStale is returned by Graph.Launch for a graph that must be
// captured again.
var ErrGraphStale = errors.New("backend: graph is stale (device memory it may use was freed or reallocated); capture it again")

// CapturesGraphs reports whether be captures graphs.
func CapturesGraphs(be Backend) bool {
	_, ok := be.(GraphCapturer)
	return ok
}
