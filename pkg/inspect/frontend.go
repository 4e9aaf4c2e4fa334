package inspect

import (
	"encoding/binary"
	"fmt"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/tokenizer"
)

// Frontend resource ids that ninfer-run parses when it loads an artifact.
const (
	resTokenizer       = "frontend/tokenizer.json"
	resTokenizerConfig = "frontend/tokenizer_config.json"
	resGeneration      = "frontend/generation_config.json"
)

// verifyFrontend parses the frontend resources as ninfer-run does
// (tokenizer.CheckFrontend), so that --verify does not pass an artifact
// whose tokenizer run refuses (one written before ninfer-convert checked
// it, or by another writer).
func verifyFrontend(f *artifact.File) error {
	read := func(id string) ([]byte, error) {
		if o, ok := f.Object(id); !ok || o.Kind != artifact.KindResource {
			return nil, nil
		}
		return f.Resource(id)
	}
	var files [3][]byte
	for i, id := range []string{resTokenizer, resTokenizerConfig, resGeneration} {
		b, err := read(id)
		if err != nil {
			return err
		}
		files[i] = b
	}
	if err := tokenizer.CheckFrontend(files[0], files[1], files[2]); err != nil {
		return fmt.Errorf("%s: resource %w (ninfer-run refuses it)", f.Path, err)
	}
	return nil
}

// verifyDraftIDs checks the values of the proposal head's row ids
// (text/draft_head_token_ids, int32): each must be a row of the vocabulary,
// as the engine requires when it loads the head for --lm-head-draft.
// Before, --verify passed ids out of range that run and bench then refused.
func verifyDraftIDs(f *artifact.File) error {
	o, ok := f.Object(qwen35.NameDraftIDs)
	if !ok || !o.IsTensor() {
		return nil
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	data, err := f.ReadObject(o)
	if err != nil {
		return err
	}
	for i := 0; i+4 <= len(data); i += 4 {
		if id := int32(binary.LittleEndian.Uint32(data[i:])); id < 0 || int(id) >= cfg.VocabSize {
			return fmt.Errorf("%s: object %q: id %d at row %d is outside the vocabulary [0,%d) (ninfer-run --lm-head-draft refuses it)", f.Path, o.ID, id, i/4, cfg.VocabSize)
		}
	}
	return nil
}
