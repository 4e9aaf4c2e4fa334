package backend

import (
	"fmt"
	"unsafe"

	"github.com/ninfer/ninfer/pkg/sample"
)

// SamplerState is the penalty state of one sequence for Sample, resident
// in backend memory: int32 counts[Vocab] of the tokens generated so far
// (presence/frequency/repetition penalties), then uint8 seen[Vocab],
// nonzero for the prompt's tokens (repetition penalty). Sample adds its
// token to the counts on the device. Build the initial bytes with
// EncodeSamplerState (or Zero the view for an empty prompt).
type SamplerState struct {
	View  View
	Vocab int
}

// SamplerStateBytes is the size of a SamplerState for vocab tokens.
func SamplerStateBytes(vocab int) int64 { return 4*int64(vocab) + (int64(vocab)+3)/4*4 }

// EncodeSamplerState returns the bytes of a SamplerState that has seen the
// prompt and generated the tokens gen (ids outside [0, vocab) are ignored,
// as pkg/sample ignores them).
func EncodeSamplerState(vocab int, prompt, gen []int32) []byte {
	b := make([]byte, SamplerStateBytes(vocab))
	counts := unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), vocab)
	seen := b[4*vocab:]
	for _, id := range gen {
		if id >= 0 && int(id) < vocab {
			counts[id]++
		}
	}
	for _, id := range prompt {
		if id >= 0 && int(id) < vocab {
			seen[id] = 1
		}
	}
	return b
}

// sampleCfg names sample.Config for the kernels' method sets.
type sampleCfg = sample.Config

// SamplerPosBytes is the size of the RNG position counter of Sample (int64).
const SamplerPosBytes = 8

// Sample draws the next token from one row of logits (a [1, vocab] one-head
// tensor) exactly as pkg/sample.Sampler.Sample does with the state st and
// the RNG position read from rngPos (int64), writes the id (int32; -1 when
// no logit is finite) to out, then adds it to st's counts and increments
// the position, all in backend memory: a decode step reads back only the
// id, and a captured step replays with new values.
func (o *ops) Sample(out View, logits Tensor, st SamplerState, cfg sample.Config, rngPos View) {
	const op = "sample"
	if err := cfg.Validate(); err != nil {
		o.fail(op, "%v", err)
		return
	}
	xr, ok := o.rows(op, "logits", logits)
	if !ok {
		return
	}
	if logits.T != 1 || logits.H != 1 || logits.D != st.Vocab || st.Vocab <= 0 {
		o.fail(op, "logits [%d,%d×%d] must be one row of the state's vocab %d", logits.T, logits.H, logits.D, st.Vocab)
		return
	}
	sp, ok1 := o.vec(op, "state", st.View, SamplerStateBytes(st.Vocab))
	op4, ok2 := o.vec(op, "out", out, 4)
	pp, ok3 := o.vec(op, "rng_pos", rngPos, SamplerPosBytes)
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if uintptr(sp)%4 != 0 || uintptr(op4)%4 != 0 || uintptr(pp)%8 != 0 {
		o.fail(op, "state, out and rng_pos must be 4-, 4- and 8-byte aligned")
		return
	}
	o.k.sample(xr, op4, sp, unsafe.Add(sp, 4*int64(st.Vocab)), cfg, pp)
}

// samplePos is the RNG position of a host-addressable counter.
func samplePos(p unsafe.Pointer) *int64 { return (*int64)(p) }

// hostSample is the CPU kernel of Sample: pkg/sample on host memory.
func hostSample(x rows, out, counts, seen unsafe.Pointer, cfg sample.Config, rngPos unsafe.Pointer) {
	s, err := sample.New(cfg)
	if err != nil {
		panic(fmt.Sprintf("backend sample: validated config rejected: %v", err)) // unreachable: ops.Sample validated it
	}
	n := x.d
	cnt := unsafe.Slice((*int32)(counts), n)
	sn := unsafe.Slice((*uint8)(seen), n)
	var prompt []int32
	for i, v := range sn {
		if v != 0 {
			prompt = append(prompt, int32(i))
		}
	}
	s.AddPrompt(prompt)
	for i, c := range cnt {
		for j := int32(0); j < c; j++ {
			s.Accept(int32(i))
		}
	}
	pos := samplePos(rngPos)
	id := s.Sample(unsafe.Slice((*float32)(x.p), n), *pos)
	*(*int32)(out) = id
	if id >= 0 {
		cnt[id]++
	}
	*pos++
}
