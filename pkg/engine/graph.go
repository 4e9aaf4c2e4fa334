package engine

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer/pkg/backend"
)

// Decode-step graphs (Options.CUDAGraph). After its control uploads, a
// decode step's work (embed … final norm and head) depends only on device
// buffers — the token ids, positions and state input slot it reads, the
// weights, the sequence arena, the workspace — and on host values fixed by
// its shape: the token count, the GDN output slot, the logits rows. So each
// shape is captured once as a backend graph and replayed with the new
// control values uploaded before every launch: the same kernels with the
// same arguments as the eager step, hence identical results.
//
// A shape runs eagerly the first time it is met (the prime: kernels may grow
// their op scratch on first use, which a capture cannot do), is captured on
// its second use (and launched at once: capturing runs nothing), and is
// replayed from then on. A graph the backend reports stale (device memory
// was freed or reallocated since its capture) is captured again; a new
// workspace arena (LoadMTP grows it) drops every graph.

// graphKind tells the target step from the MTP head's step.
type graphKind uint8

const (
	graphTarget graphKind = iota
	graphMTP
)

// graphKey is everything host-side a step's ops depend on besides the
// buffers the graph's owner fixes.
type graphKey struct {
	kind graphKind
	// target: tokens, GDN output slot, first logits row and logits rows.
	T, outSlot, from, rows int
	// mtp: the target residual rows below the step's workspace, the hidden
	// input view and whether it drafts.
	resT  int
	h     backend.View
	draft bool
}

// graphEntry is one shape: primed once it ran eagerly, then its graph, the
// workspace bytes its step allocates (so the arena's peak still counts
// replayed steps) and the step's result view.
type graphEntry struct {
	primed bool
	g      backend.Graph
	peak   int64
	out    backend.Tensor
}

// graphCache holds one sequence's graphs.
type graphCache struct {
	gc      backend.GraphCapturer
	ws      *backend.Buffer // the workspace the graphs write
	entries map[graphKey]*graphEntry
	// Captures and Launches count what the cache did (tests, reports).
	captures, launches int
}

// newGraphCache returns the graph cache of a sequence of e, or nil when the
// engine runs eagerly (Options.CUDAGraph off, or a backend without graphs).
func newGraphCache(e *Engine) *graphCache {
	if !e.opts.CUDAGraph {
		return nil
	}
	gc, ok := e.be.(backend.GraphCapturer)
	if !ok {
		return nil
	}
	return &graphCache{gc: gc, entries: map[graphKey]*graphEntry{}}
}

// close releases every graph.
func (c *graphCache) close() {
	if c == nil {
		return
	}
	for k, en := range c.entries {
		if en.g != nil {
			en.g.Close()
		}
		delete(c.entries, k)
	}
}

// run queues the step issue describes (its ops only: no uploads, syncs or
// downloads) for key: eagerly, as a new capture, or as a replay. issue
// resets the workspace and allocates from it; it returns the step's result
// view. The ops are queued, not finished, when run returns.
func (c *graphCache) run(key graphKey, ws *backend.Arena, issue func() (backend.Tensor, error)) (backend.Tensor, error) {
	if ws.Buffer() != c.ws {
		c.close() // a new workspace: every graph wrote the old one
		c.ws = ws.Buffer()
	}
	en := c.entries[key]
	if en == nil {
		en = &graphEntry{}
		c.entries[key] = en
	}
	if en.g != nil {
		err := en.g.Launch()
		if err == nil {
			c.launches++
			touchPeak(ws, en.peak)
			return en.out, nil
		}
		en.g.Close()
		en.g = nil
		if !errors.Is(err, backend.ErrGraphStale) {
			return backend.Tensor{}, fmt.Errorf("engine: graph: %w", err)
		}
	}
	if !en.primed {
		en.primed = true
		return issue()
	}
	// Capture: measure the step's own workspace peak, then restore the
	// arena's high-water mark to include it.
	peak := ws.Peak()
	ws.Reset()
	ws.ResetPeak()
	if err := c.gc.BeginCapture(); err != nil {
		return backend.Tensor{}, fmt.Errorf("engine: graph: %w", err)
	}
	out, ierr := issue()
	g, err := c.gc.EndCapture()
	en.peak = ws.Peak()
	touchPeak(ws, peak)
	if ierr != nil {
		if g != nil {
			g.Close()
		}
		return backend.Tensor{}, ierr
	}
	if err != nil {
		return backend.Tensor{}, fmt.Errorf("engine: graph capture: %w", err)
	}
	c.captures++
	en.g, en.out = g, out
	if err := g.Launch(); err != nil {
		return backend.Tensor{}, fmt.Errorf("engine: graph: %w", err)
	}
	c.launches++
	return out, nil
}

// touchPeak raises the arena's high-water mark to n bytes as if a step had
// allocated them (a replayed step allocates nothing on the host), leaving
// it empty.
func touchPeak(ws *backend.Arena, n int64) {
	ws.Reset()
	if n > 0 {
		_, _ = ws.Alloc(n) // n ≤ capacity: it was allocated before
	}
	ws.Reset()
}
