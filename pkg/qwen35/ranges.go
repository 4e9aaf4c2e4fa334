package qwen35

import "fmt"

// MaxPositionEmbeddingsLimit bounds max_position_embeddings: far above any
// real model (Qwen3.5 has 262,144) and low enough that every context the
// planner derives from it fits its arithmetic.
const MaxPositionEmbeddingsLimit = 1 << 26

// checkRanges checks the fields that size nothing in the tensor inventory
// but that every tool reads later: max_position_embeddings (the context
// limit: 0 or less used to be read as "no limit", so a broken config.json
// planned the planner's default instead of failing) and the token ids
// (eos_token_ids, bos_token_id), which must name rows of the vocabulary.
func (c Config) checkRanges() error {
	if c.MaxPositionEmbeddings <= 0 || c.MaxPositionEmbeddings > MaxPositionEmbeddingsLimit {
		return fmt.Errorf("config: max_position_embeddings must be in [1, %d], got %d", MaxPositionEmbeddingsLimit, c.MaxPositionEmbeddings)
	}
	for i, id := range c.EOSTokenIDs {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("config: eos_token_ids[%d] is %d, outside the vocabulary [0, %d)", i, id, c.VocabSize)
		}
	}
	if c.BOSTokenID != nil && (*c.BOSTokenID < 0 || *c.BOSTokenID >= c.VocabSize) {
		return fmt.Errorf("config: bos_token_id is %d, outside the vocabulary [0, %d)", *c.BOSTokenID, c.VocabSize)
	}
	return nil
}
