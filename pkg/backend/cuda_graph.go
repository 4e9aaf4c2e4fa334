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
	return nil
}

// EndCapture ends the capture and returns the graph, or the first reason the
// capture failed (a synchronous copy, a sync, an allocation or scratch
// growth inside it, or a launch error).
func (c *CUDA) EndCapture() (Graph, error) {
	g, err := c.ctx.CaptureEnd()
	if err != nil {
		return nil, fmt.Errorf("backend cuda: %w", err)
	}
	return &cudaGraph{g: g}, nil
}

// cudaGraph is a graph of the CUDA backend (an instantiated cudaGraphExec,
// or the harness's recorded closures).
type cudaGraph struct{ g *cuda.Graph }

func (g *cudaGraph) Launch() error {
	if err := g.g.Launch(); err != nil {
		if errors.Is(err, cuda.ErrGraphStale) {
			return ErrGraphStale
		}
		return fmt.Errorf("backend cuda: graph launch: %w", err)
	}
	return nil
}

func (g *cudaGraph) Nodes() int { return g.g.Nodes() }

func (g *cudaGraph) Close() { g.g.Free() }
