package layout

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Align is the alignment of every arena term (backend.ArenaAlign).
const Align = 256

// KVPage is the number of tokens per KV page (backend.KVPage).
const KVPage = 64

// ConvStateElemBytes is the element size of the GDN conv window state
// (fp32; see docs/PLAN.md for the deviation from the reference bf16 state).
const ConvStateElemBytes = 4

// AlignUp rounds n up to a multiple of Align.
func AlignUp(n int64) int64 { return (n + Align - 1) / Align * Align }

// Term is one named buffer of an arena.
type Term struct {
	Name   string
	Offset int64 // Align-aligned offset in its arena
	Bytes  int64 // exact size; the next term starts at AlignUp(Offset+Bytes)
}

// Arena is a list of terms laid out back to back at Align.
type Arena struct {
	Name     string
	Capacity int64 // Σ AlignUp(bytes)
	Terms    []Term
}

// Lay lays out terms in order (their Offset fields are ignored); terms of
// zero bytes are dropped.
func Lay(name string, terms []Term) Arena {
	a := Arena{Name: name}
	for _, t := range terms {
		if t.Bytes <= 0 {
			continue
		}
		t.Offset = a.Capacity
		a.Terms = append(a.Terms, t)
		a.Capacity += AlignUp(t.Bytes)
	}
	return a
}

// Term returns the named term, or ok=false.
func (a Arena) Term(name string) (Term, bool) {
	for _, t := range a.Terms {
		if t.Name == name {
			return t, true
		}
	}
	return Term{}, false
}

// Bytes is the exact size of the named term (0 when absent).
func (a Arena) Bytes(name string) int64 {
	t, _ := a.Term(name)
	return t.Bytes
}

// IsVector reports the tensor classes the engine binds as fp32 vectors
// (norm weights, the conv kernel, GDN control parameters).
func IsVector(c qwen35.Class) bool {
	return c == qwen35.ClassNorm || c == qwen35.ClassConv || c == qwen35.ClassControl
}

// BoundBytes is a tensor's size in the weights arena: 4·elements for a
// vector class (widened to fp32), else its encoded payload.
func BoundBytes(c qwen35.Class, elements, encoded int64) int64 {
	if IsVector(c) {
		return 4 * elements
	}
	return encoded
}

// Weights lays out the weights arena from (object id, bound bytes) terms
// in binding order.
func Weights(terms []Term) Arena { return Lay("weights", terms) }

// KVPlaneBytes is the bytes per (token, kv head) vector of a KV code plane
// and of a scale plane: bf16 2d; int8 (int8-group64) d + 2·ceil(d/64);
// fp8 (e4m3, one fp16 scale per head vector) d + 2; fp32 4d.
func KVPlaneBytes(dtype string, hd int) (code, scale int64, err error) {
	d := int64(hd)
	switch dtype {
	case "", "bf16":
		return 2 * d, 0, nil
	case "int8":
		return d, 2 * ((d + 63) / 64), nil
	case "fp8":
		return d, 2, nil
	case "fp32":
		return 4 * d, 0, nil
	}
	return 0, 0, fmt.Errorf("layout: unknown KV dtype %q (want bf16, int8, fp8 or fp32)", dtype)
}

// Pages is the number of KV pages for maxCtx tokens.
func Pages(maxCtx int) int { return (maxCtx + KVPage - 1) / KVPage }

// StepTokens is the most tokens one engine step processes.
func StepTokens(maxCtx, prefillChunk int) int { return min(prefillChunk, maxCtx) }
