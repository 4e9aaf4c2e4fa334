package engine

import "fmt"

// NonFiniteHint is what to make of non-finite logits of the artifact
// weights, diagnosed as d (nil: the eager re-run found every output finite):
// with verified (the artifact passed --verify) the payload is intact, so
// the weights themselves are numerically broken; otherwise --verify tells
// the two causes apart, and the hint says what either outcome means, so
// that a passing --verify is not a dead end.
func NonFiniteHint(weights string, verified bool, d *NonFinite) string {
	where := "a layer"
	if d != nil {
		where = d.Where()
	}
	broken := fmt.Sprintf("the payload is intact, so the weights are numerically broken (e.g. values overflow fp32 in %s)", where)
	if verified {
		return "the artifact passed --verify: " + broken
	}
	return fmt.Sprintf("weights may be corrupt: run ninfer-inspect --verify %s; if it passes, %s", weights, broken)
}
