package backend

import "fmt"

// ArenaAlign is the alignment of every arena allocation.
const ArenaAlign = 256

// Arena is a bump allocator over one backend buffer: the weights, the
// sequence state and the per-step workspace are each one Arena. Alloc does
// not allocate Go memory.
type Arena struct {
	buf        *Buffer
	used, peak int64
	limit      int64 // Alloc hands out [0, limit); the rest is reserved (ReserveTail)
}

// NewArena allocates a named buffer of the given size and returns an arena
// over it.
func NewArena(b Backend, name string, bytes int64) (*Arena, error) {
	if bytes <= 0 {
		bytes = ArenaAlign
	}
	buf, err := b.Alloc(name, bytes)
	if err != nil {
		return nil, err
	}
	return &Arena{buf: buf, limit: bytes}, nil
}

// ReserveTail takes the bytes from offset off (256-aligned) to the end of
// the buffer out of Alloc's reach and returns a view of them: the
// workspace's op-scratch term (pkg/layout WithOpScratch), which the backend
// owns for the arena's lifetime.
func (a *Arena) ReserveTail(off int64) (View, error) {
	if off < a.used || off > a.limit || off%ArenaAlign != 0 {
		return View{}, fmt.Errorf("arena %s: cannot reserve from offset %d (%d used, %d allocatable of %d)", a.buf.name, off, a.used, a.limit, a.buf.bytes)
	}
	a.limit = off
	return View{a.buf, off}, nil
}

// Buffer is the arena's backing buffer.
func (a *Arena) Buffer() *Buffer { return a.buf }

// Alloc returns a 256-byte-aligned view of n bytes.
func (a *Arena) Alloc(n int64) (View, error) {
	off := (a.used + ArenaAlign - 1) / ArenaAlign * ArenaAlign
	if n < 0 || off+n > a.limit {
		return View{}, fmt.Errorf("arena %s: out of memory: %d bytes requested, %d of %d used", a.buf.name, n, a.used, a.limit)
	}
	a.used = off + n
	if a.used > a.peak {
		a.peak = a.used
	}
	return View{a.buf, off}, nil
}

// Used is the current fill; Peak the high-water mark; Cap the size.
func (a *Arena) Used() int64 { return a.used }
func (a *Arena) Peak() int64 { return a.peak }
func (a *Arena) Cap() int64  { return a.buf.bytes }

// ResetPeak restarts the high-water mark from the current fill.
func (a *Arena) ResetPeak() { a.peak = a.used }

// Reset frees everything (workspace: once per step).
func (a *Arena) Reset() { a.used = 0 }

// Mark and Release free everything allocated after the mark.
func (a *Arena) Mark() int64        { return a.used }
func (a *Arena) Release(mark int64) { a.used = mark }

// Sizer computes the size of an arena from a sequence of allocations, with
// the same alignment rules (a dry run).
type Sizer struct{ n int64 }

// Add accounts for one allocation of n bytes.
func (s *Sizer) Add(n int64) { s.n = (s.n+ArenaAlign-1)/ArenaAlign*ArenaAlign + n }

// Bytes is the arena size needed.
func (s *Sizer) Bytes() int64 { return s.n }
