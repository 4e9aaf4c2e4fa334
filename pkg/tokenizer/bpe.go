package tokenizer

import (
	"container/heap"
	"sync"
)

const (
	wordCacheEntries = 1 << 16
	maxCachedWord    = 256 // bytes
	linearMergeMax   = 48  // symbols; longer words use the heap
)

// wordCache maps a pre-tokenized word (raw bytes) to its BPE ids. It is
// cleared when full, which keeps memory bounded without LRU bookkeeping.
type wordCache struct {
	mu  sync.RWMutex
	m   map[string][]int32
	max int
}

func newWordCache(max int) *wordCache {
	return &wordCache{m: make(map[string][]int32), max: max}
}

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		c.m = make(map[string][]int32)
	}
	c.m[w] = ids
	c.mu.Unlock()
}

// bpeWord appends the BPE ids of one pre-tokenized word (raw bytes; the
// byte-level mapping is applied here through byteID).
func (t *Tokenizer) bpeWord(dst []int32, w string) []int32 {
	if w == "" {
		return dst
	}
	cacheable := len(w) <= maxCachedWord
	if cacheable {
		if ids, ok := t.cache.get(w); ok {
			return append(dst, ids...)
		}
	}
	var ids []int32
	if t.ignoreMerges {
		if id, ok := t.vocab[byteLevelEncode(w)]; ok {
			ids = []int32{id}
		}
	}
	if ids == nil {
		syms := make([]int32, 0, len(w))
		for i := 0; i < len(w); i++ {
			if id := t.byteID[w[i]]; id >= 0 {
				syms = append(syms, id)
			}
		}
		if len(syms) <= linearMergeMax {
			ids = t.mergeLinear(syms)
		} else {
			ids = t.mergeHeap(syms)
		}
	}
	if cacheable {
		t.cache.put(w, ids)
	}
	return append(dst, ids...)
}

// mergeLinear repeatedly merges the adjacent pair with the lowest rank
// (leftmost on ties). O(n²) but fastest for ordinary words.
func (t *Tokenizer) mergeLinear(syms []int32) []int32 {
	for len(syms) > 1 {
		best := int32(-1)
		bestAt := -1
		var bestID int32
		for i := 0; i+1 < len(syms); i++ {
			if m, ok := t.merges[pairKey(syms[i], syms[i+1])]; ok && (best < 0 || m.rank < best) {
				best, bestAt, bestID = m.rank, i, m.id
			}
		}
		if bestAt < 0 {
			break
		}
		syms[bestAt] = bestID
		syms = append(syms[:bestAt+1], syms[bestAt+2:]...)
	}
	return syms
}

// mergeHeap is the same algorithm with a priority queue of candidate pairs
// ordered by (rank, position) over a linked list of symbols.
func (t *Tokenizer) mergeHeap(syms []int32) []int32 {
	n := len(syms)
	prev := make([]int, n)
	next := make([]int, n)
	alive := make([]bool, n)
	for i := range syms {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	h := &pairHeap{}
	push := func(i int) {
		if i < 0 || next[i] < 0 {
			return
		}
		j := next[i]
		if m, ok := t.merges[pairKey(syms[i], syms[j])]; ok {
			heap.Push(h, pairCand{rank: m.rank, pos: i, left: syms[i], right: syms[j], id: m.id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(pairCand)
		i := c.pos
		j := next[i]
		if !alive[i] || j < 0 || syms[i] != c.left || syms[j] != c.right {
			continue // stale
		}
		syms[i] = c.id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if prev[i] >= 0 {
			push(prev[i])
		}
		push(i)
	}
	out := make([]int32, 0, n)
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

type pairCand struct {
	rank        int32
	pos         int
	left, right int32
	id          int32
}

type pairHeap []pairCand

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].pos < h[b].pos
}
func (h pairHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCand)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
