package tokenizer

import (
	"encoding/json"
	"fmt"
)

// ParseGenerationEOS reads eos_token_id from a generation_config.json; it may
// be an integer or an array of integers. A missing or null field gives nil.
func ParseGenerationEOS(generationConfigJSON []byte) ([]int32, error) {
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(generationConfigJSON, &g); err != nil {
		return nil, fmt.Errorf("generation_config.json: %w", err)
	}
	if len(g.EOS) == 0 || string(g.EOS) == "null" {
		return nil, nil
	}
	var one int64
	if err := json.Unmarshal(g.EOS, &one); err == nil {
		if one < 0 || one > maxID {
			return nil, fmt.Errorf("generation_config.json: eos_token_id %d out of range", one)
		}
		return []int32{int32(one)}, nil
	}
	var many []int64
	if err := json.Unmarshal(g.EOS, &many); err != nil {
		return nil, fmt.Errorf("generation_config.json: eos_token_id must be an integer or an array of integers, got %s", oneLineJSON(g.EOS))
	}
	out := make([]int32, len(many))
	for i, v := range many {
		if v < 0 || v > maxID {
			return nil, fmt.Errorf("generation_config.json: eos_token_id[%d] = %d out of range", i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// SetGenerationConfig makes EOSIDs return generation_config.json's
// eos_token_id when it has one (it takes precedence over tokenizer_config's
// eos_token, as in transformers' generate). Each id must be a known token.
// Call it before sharing the Tokenizer between goroutines.
func (t *Tokenizer) SetGenerationConfig(generationConfigJSON []byte) error {
	ids, err := ParseGenerationEOS(generationConfigJSON)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, ok := t.Token(id); !ok {
			return fmt.Errorf("generation_config.json: eos_token_id %d is not a token of this tokenizer", id)
		}
	}
	if len(ids) > 0 {
		t.eos = ids
	}
	return nil
}
