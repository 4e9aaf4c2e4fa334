package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/sample"
)

// DeviceSampler is pkg/sample's Sampler kept in backend memory for
// Backend.Sample: the penalty state (int32 counts and the prompt's seen
// mask, backend.SamplerState), the int64 RNG position and the drawn id. With
// it a step's logits stay on the device and only the token id comes back
// (Sequence.PrefillSample, Sequence.DecodeSample); the draws are those of
// sample.Sampler.Sample(logits, pos) with pos the sequence position at the
// draw, as the host loop calls it.
type DeviceSampler struct {
	be  backend.Backend
	cfg sample.Config
	// The state lives in the sequence arena's ctl.sampler term
	// (layout.SamplerBytes), planned like every other term.
	st    backend.SamplerState
	pos   backend.View // int64 RNG position of the next draw
	out   backend.View // int32 id of the last draw
	next  int64        // the position the device counter holds; −1 = unknown
	tok   []int32
	vocab int
}

// NewDeviceSampler makes the sequence's device sampler for cfg, empty
// (Reset it with the prompt before the first draw). Its state is the
// sequence's ctl.sampler term, so there is one sampler per sequence (a new
// one replaces the old) and it lives as long as the sequence. Backends
// without device memory (the CPU) have no such term: they sample on the
// host (pkg/sample).
func (s *Sequence) NewDeviceSampler(cfg sample.Config) (*DeviceSampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine: device sampler: %w", err)
	}
	if s.sampler.Buf == nil {
		return nil, fmt.Errorf("engine: device sampler: the %s backend samples on the host (its sequences have no ctl.sampler term)", s.e.be.Name())
	}
	V := s.e.cfg.VocabSize
	stBytes := backend.SamplerStateBytes(V) // a multiple of 4
	posOff := (stBytes + 7) / 8 * 8
	outOff := posOff + backend.SamplerPosBytes
	if outOff+8 != layout.SamplerBytes(V) {
		return nil, fmt.Errorf("engine: device sampler: internal: state needs %d bytes, ctl.sampler has %d", outOff+8, layout.SamplerBytes(V))
	}
	v := s.sampler
	d := &DeviceSampler{be: s.e.be, cfg: cfg, st: backend.SamplerState{View: v, Vocab: V},
		pos: v.At(posOff), out: v.At(outOff), next: -1, tok: make([]int32, 1), vocab: V}
	if err := d.Reset(nil); err != nil {
		return nil, err
	}
	return d, nil
}

// Config is the sampling configuration.
func (d *DeviceSampler) Config() sample.Config { return d.cfg }

// Reset empties the generated-token counts and marks prompt as seen, as
// sample.Sampler's Reset then AddPrompt(prompt).
func (d *DeviceSampler) Reset(prompt []int32) error {
	if err := d.be.Upload(d.st.View, backend.EncodeSamplerState(d.vocab, prompt, nil)); err != nil {
		return fmt.Errorf("engine: device sampler state: %w", err)
	}
	return nil
}

// setPos makes the device RNG position pos (uploaded only when the counter,
// which every draw increments, does not already hold it).
func (d *DeviceSampler) setPos(pos int64) error {
	if d.next == pos {
		return nil
	}
	var b [backend.SamplerPosBytes]byte
	binary.LittleEndian.PutUint64(b[:], uint64(pos)) // a native int64 on every supported host and device
	if err := d.be.Upload(d.pos, b[:]); err != nil {
		d.next = -1
		return fmt.Errorf("engine: device sampler position: %w", err)
	}
	d.next = pos
	return nil
}

// PrefillSample appends ids, as Prefill, and draws the next token from the
// last position's logits on the device: sampler position Pos() after the
// prefill, the id added to sm's counts. Only the id is downloaded; it is −1
// when no logit is finite.
func (s *Sequence) PrefillSample(ids []int32, sm *DeviceSampler) (int32, error) {
	if err := s.fits(len(ids)); err != nil {
		return -1, err
	}
	chunk := s.e.opts.PrefillChunk
	for done := 0; done < len(ids); {
		T := min(chunk, len(ids)-done)
		copy(s.hostIDs, ids[done:done+T])
		n, from := 0, 0
		if done+T == len(ids) {
			n, from = 1, T-1
		}
		at := s.n
		if err := s.stepRows(T, from, n, nil, int(s.slot), false); err != nil {
			return -1, err
		}
		done += T
		if n > 0 {
			s.verifyAt = -1
			return s.drawLast(sm, at)
		}
	}
	return -1, fmt.Errorf("engine: prefill: unreachable") // fits rejected an empty ids
}

// DecodeSample appends id, as Decode, and draws the next token from its
// logits on the device (sampler position Pos() after the step, the id added
// to sm's counts). Only the int32 id is downloaded; it is −1 when no logit
// is finite. With Options.CUDAGraph the step replays Decode's graph.
func (s *Sequence) DecodeSample(id int32, sm *DeviceSampler) (int32, error) {
	if err := s.fits(1); err != nil {
		return -1, err
	}
	s.hostIDs[0] = id
	at := s.n
	if err := s.stepRows(1, 0, 1, nil, int(s.slot), true); err != nil {
		return -1, err
	}
	s.verifyAt = -1
	return s.drawLast(sm, at)
}

// drawLast queues Sample on the step's last logits row at sampler position
// s.n, syncs (the step left that to it) and downloads the id. On an error
// the sequence goes back to position at, the position before the step.
func (s *Sequence) drawLast(sm *DeviceSampler, at int) (int32, error) {
	be := s.e.be
	fail := func(what string, err error) (int32, error) {
		s.n = at
		sm.next = -1
		return -1, fmt.Errorf("engine: %s at position %d: %w", what, at, err)
	}
	if sm.vocab != s.e.cfg.VocabSize {
		return fail("sample", fmt.Errorf("sampler of vocab %d, model vocab %d", sm.vocab, s.e.cfg.VocabSize))
	}
	if err := sm.setPos(int64(s.n)); err != nil {
		return fail("sample", err)
	}
	be.Sample(sm.out, s.lastRow, sm.st, sm.cfg, sm.pos)
	if err := be.Sync(); err != nil {
		return fail("step", err)
	}
	if err := be.DownloadI32(sm.tok, sm.out); err != nil {
		return fail("sample", err)
	}
	sm.next++
	return sm.tok[0], nil
}
