package testmodel

import (
	"math"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Limits of the size options, what the model format allows: layers as
// qwen35.MaxLayers; token ids are int32, so the vocabulary has at most
// 2³¹−1 rows; no dimension may make a tensor of more than
// qwen35.MaxTensorElements elements (Options.Validate checks the products).
const (
	MaxLayers       = qwen35.MaxLayers
	MaxVocab        = math.MaxInt32
	MaxDim          = 1 << 24 // hidden and intermediate sizes
	MaxShards       = 99999   // the shard file names' five digits
	MinVocab        = 256     // plus len(SpecialTokens): see VocabMin
	bytesPerF32     = 4
	generationSlack = 64 << 20 // tokenizer training, JSON, buffers
)

// VocabMin is the smallest --vocab: 256 byte tokens plus the added tokens.
func VocabMin() int { return MinVocab + len(SpecialTokens) }

// MemoryEstimate is about the memory WriteDir needs for o (a valid
// Options): every tensor is held as float32 values and encoded at once.
func (o Options) MemoryEstimate() int64 {
	dt, _, err := o.dtype()
	if err != nil {
		return 0
	}
	per := int64(bytesPerF32 + dt.Bits()/8)
	var total int64 = generationSlack
	for _, t := range o.Config().Tensors() {
		n := int64(1)
		for _, d := range t.HFShape {
			if d > 0 && n > math.MaxInt64/d {
				return math.MaxInt64
			}
			n *= d
		}
		if n > (math.MaxInt64-total)/per {
			return math.MaxInt64
		}
		total += n * per
	}
	return total
}
