//go:build cuda || cudasim

package backend

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer/kernels/cuda"
)

var _ GraphCapturer = (*CUDA)(nil)

// BeginCapture starts recording the ops queued on the device's stream
// (CUDA stream capture; the harness records them). The calling goroutine
// stays on its OS thread until EndCapture.
func (c *CUDA) BeginCapture() error {
	if err := c.ctx.CaptureBegin(); err != nil {
		return fmt.Errorf("backend cuda: begin capture: %w", err)
	}
	c.capBase = c.counts
	return nil
}

// EndCapture ends the capture and returns the graph, or the first reason the
// capture failed (a synchronous copy, a sync, an allocation or scratch
// growth inside it, or a launch error).
func (c *CUDA) EndCapture() (Graph, error) {
	// The ops queued since BeginCapture were recorded, not run: they count
	// when a launch runs them.
	recorded := c.counts.Sub(c.capBase)
	c.counts = c.capBase
	g, err := c.ctx.CaptureEnd()
	if err != nil {
		return nil, fmt.Errorf("backend cuda: %w", err)
	}
	return &cudaGraph{g: g, ops: recorded, counts: &c.counts}, nil
}

// cudaGraph is a graph of the CUDA backend (an instantiated cudaGraphExec,
// or the harness's recorded closures). ops are the op counts of the ops it
// was captured from, added to the backend's counters at each launch.
type cudaGraph struct {
	g      *cuda.Graph
	ops    OpCounts
	counts *OpCounts
}

func (g *cudaGraph) Launch() error {
	if err := g.g.Launch(); err != nil {
		if errors.Is(err, cuda.ErrGraphStale) {
			return ErrGraphStale
		}
		return fmt.Errorf("backend cuda: graph launch: %w", err)
	}
	*g.counts = g.counts.Add(g.ops)
	return nil
}

func (g *cudaGraph) Nodes() int { return g.g.Nodes() }

func (g *cudaGraph) Close() { g.g.Free() }
