package eval

import (
	"fmt"
	"io"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/tokenizer"
)

// ModelOptions configure Open.
type ModelOptions struct {
	Weights      string // .ninfer artifact
	Backend      string // auto, cpu or cuda
	Threads      int    // CPU threads; 0 = all cores
	Ctx          int    // window length: the engine's max context
	PrefillChunk int    // a multiple of 128; 0 = 1024
	KVDtype      string // bf16 (default), int8, fp8 or fp32
	Activations  string // CPU matmul activations (backend.ParseActivations; "" = fp32)
	// Log receives the backend note and the upload progress; nil = silent.
	Log io.Writer
}

// LogitsRows is the logits workspace of a Model: the scored half of a
// window runs through the output head this many rows at a time.
const LogitsRows = 128

// Model is an artifact loaded on a backend with one sequence; it is a
// Scorer. Not safe for concurrent use.
type Model struct {
	w       *loader.Weights
	be      backend.Backend
	eng     *engine.Engine
	seq     *engine.Sequence
	backend string
	note    string
	vocab   int
}

// Open loads the artifact o.Weights for windows of o.Ctx tokens.
func Open(o ModelOptions) (m *Model, err error) {
	m = &Model{}
	defer func() {
		if err != nil {
			m.Close()
			m = nil
		}
	}()
	if m.w, err = loader.OpenWeights(o.Weights); err != nil {
		return m, err
	}
	cfg := m.w.Config()
	m.vocab = cfg.VocabSize
	if mp := cfg.MaxPositionEmbeddings; mp > 0 && o.Ctx > mp {
		return m, fmt.Errorf("%s: --ctx %d exceeds the model's max_position_embeddings %d", o.Weights, o.Ctx, mp)
	}
	if m.be, m.backend, m.note, err = loader.NewBackend(o.Backend, o.Threads); err != nil {
		return m, err
	}
	if err = backend.SetActivations(m.be, o.Activations); err != nil {
		return m, err
	}
	eo := engine.Options{MaxContext: o.Ctx, PrefillChunk: o.PrefillChunk, KVDtype: o.KVDtype, Threads: o.Threads,
		LogitsRows: LogitsRows, Progress: o.Log}
	if m.eng, err = engine.New(m.w, m.be, eo); err != nil {
		return m, fmt.Errorf("%s: %w", o.Weights, err)
	}
	if m.seq, err = m.eng.NewSequence(); err != nil {
		return m, fmt.Errorf("%s: %w", o.Weights, err)
	}
	return m, nil
}

// VocabSize is the number of logits per row (the embedding rows).
func (m *Model) VocabSize() int { return m.vocab }

// Backend is the backend in use (cpu or cuda); Note says why auto chose
// the CPU ("" when there is nothing to say).
func (m *Model) Backend() string { return m.backend }

// Note is the backend choice's note for stderr ("" for none).
func (m *Model) Note() string { return m.note }

// Resource returns an embedded file of the artifact (tokenizer.json, ...).
func (m *Model) Resource(name string) ([]byte, bool) { return m.w.Resource(name) }

// Logits implements Scorer: the sequence is reset, window[:first] is
// prefilled without logits, then window[first:len-1] with the logits of
// every position (the last token of the window is only a target).
func (m *Model) Logits(window []int32, first int) ([]float32, error) {
	if first < 0 || first >= len(window)-1 {
		return nil, fmt.Errorf("eval: scoring from %d in a window of %d", first, len(window))
	}
	if err := m.seq.Reset(); err != nil {
		return nil, err
	}
	if first > 0 {
		if _, err := m.seq.Prefill(window[:first], false); err != nil {
			return nil, err
		}
	}
	return m.seq.Prefill(window[first:len(window)-1], true)
}

// Close frees the sequence, the engine, the backend and the mapping.
func (m *Model) Close() error {
	if m.seq != nil {
		m.seq.Close()
		m.seq = nil
	}
	if m.eng != nil {
		m.eng.Close()
		m.eng = nil
	}
	var err error
	if m.be != nil {
		err = m.be.Close()
		m.be = nil
	}
	if m.w != nil {
		if e := m.w.Close(); err == nil {
			err = e
		}
		m.w = nil
	}
	return err
}

// Tokenizer loads the tokenizer embedded in an artifact (its
// tokenizer.json and tokenizer_config.json); it also returns the
// tokenizer.json bytes, to compare artifacts.
func Tokenizer(res func(string) ([]byte, bool), what string) (*tokenizer.Tokenizer, []byte, error) {
	tj, ok := res("tokenizer.json")
	if !ok {
		return nil, nil, fmt.Errorf("%s: the artifact has no tokenizer.json", what)
	}
	tc, _ := res("tokenizer_config.json")
	tok, err := tokenizer.Load(tj, tc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return tok, tj, nil
}

// DirectorySHA256 is the artifact's checked metadata.directory_sha256 (""
// for an artifact written before the digest existed).
func (m *Model) DirectorySHA256() string { return m.w.File().DirectorySHA256 }
