package plan

import (
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// FromRecipe returns the objects a conversion of model c with recipe r
// would produce, for planning before converting: the text and MTP
// inventory, plus the optimized proposal head when withProposal. Sizes are
// format.EncodedSize of each tensor in its recipe format.
func FromRecipe(c qwen35.Config, r recipe.Recipe, withProposal bool) ([]Object, []recipe.Assignment, error) {
	tensors := c.Tensors()
	if withProposal {
		tensors = append(tensors, recipe.ProposalTensors(c)...)
	}
	as, err := r.Assign(tensors)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Object, len(as))
	for i, a := range as {
		out[i] = Object{ID: a.Tensor.Name, Component: a.Tensor.Component, Bytes: a.Bytes}
	}
	return out, as, nil
}
