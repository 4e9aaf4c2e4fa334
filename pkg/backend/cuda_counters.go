package backend

// OpCounts are the work counters of a backend that counts what it queues
// (the CUDA backend; OpCounter). They are cumulative since the backend was
// opened: take one reading before and one after a piece of work and
// subtract (Sub). Meaningful under the host SIMT harness as on a GPU: they
// count what was queued, not how long it took.
type OpCounts struct {
	// Launches is the ops queued on the device's stream: one per kernel op
	// (embed, matmul, norms, attention, sampling, …), device memset (Zero)
	// and device-to-device copy (Copy); host↔device transfers are not
	// counted. A graph launch adds the ops it was captured from (the ops
	// recorded during a capture are counted only when a launch runs them).
	Launches int64
	// WeightBytes is the sum, over the matmul ops, of the byte size of the
	// weight matrix each one reads (Weight.Bytes): the weight traffic of a
	// weight-streaming matmul, however many rows it multiplies.
	WeightBytes int64
}

// Add returns a + b.
func (a OpCounts) Add(b OpCounts) OpCounts {
	return OpCounts{Launches: a.Launches + b.Launches, WeightBytes: a.WeightBytes + b.WeightBytes}
}

// Sub returns a − b (the work between reading b and reading a).
func (a OpCounts) Sub(b OpCounts) OpCounts {
	return OpCounts{Launches: a.Launches - b.Launches, WeightBytes: a.WeightBytes - b.WeightBytes}
}

// OpCounter is implemented by backends that count their ops (CUDA). The
// counters live in the backend value; reading them neither syncs nor
// allocates.
type OpCounter interface {
	OpCounts() OpCounts
}

// OpCountsOf returns be's counters, ok false when be does not count.
func OpCountsOf(be Backend) (OpCounts, bool) {
	if c, ok := be.(OpCounter); ok {
		return c.OpCounts(), true
	}
	return OpCounts{}, false
}
