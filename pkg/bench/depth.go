package bench

import (
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// ParseDepthList parses one -d/--n-depth value: a comma list of context
// depths ≥ 0 (llama-bench's -d).
func ParseDepthList(value string) ([]int, error) {
	if value == "" {
		return nil, fmt.Errorf("n-depth is empty")
	}
	var out []int
	for _, piece := range strings.Split(value, ",") {
		v, ok := parseInt(piece)
		if !ok || v > 1<<31-1 || v < -(1<<31) {
			return nil, fmt.Errorf("invalid n-depth: %s", piece)
		}
		if v < 0 {
			return nil, fmt.Errorf("n-depth must not be negative")
		}
		out = append(out, int(v))
	}
	return out, nil
}

// WithDepths runs every test of the matrix at each depth, depths innermost
// (llama-bench's order: pp512 @ d0, pp512 @ d4096, tg128 @ d0, ...). No
// depths (or just 0) leaves the matrix as it is.
func WithDepths(tests []Test, depths []int) []Test {
	if len(depths) == 0 || (len(depths) == 1 && depths[0] == 0) {
		return tests
	}
	out := make([]Test, 0, len(tests)*len(depths))
	for _, t := range tests {
		for _, d := range depths {
			t.NDepth = d
			out = append(out, t)
		}
	}
	return out
}

// DisplayLabel is the test's label in tables, progress and messages:
// "tg128 @ d4096" at a depth, the plain label without.
func (t Test) DisplayLabel() string { return benchfmt.DisplayLabel(t.Label, int64(t.NDepth)) }

// CheckDepthContext checks, before anything is loaded, that the tests fit
// an explicit --max-ctx (maxCtx > 0) with their depth; the message names
// the test, its depth and what it needs. Tests without depth are left to
// ResolveMaxContext, whose message is the reference's.
func CheckDepthContext(tests []Test, spec string, k, maxCtx int) error {
	if maxCtx <= 0 {
		return nil
	}
	for _, t := range tests {
		if t.NDepth == 0 {
			continue
		}
		need := RequiredContext([]Test{t}, spec, k, false)
		if need.Tokens > maxCtx {
			return fmt.Errorf("--n-depth %d: %s needs %d tokens of context (depth %d + the test's %d), above --max-ctx %d",
				t.NDepth, need.Who, need.Tokens, t.NDepth, need.Tokens-t.NDepth, maxCtx)
		}
	}
	return nil
}

// fillDepth prefills the test's depth (corpus[:NDepth]) into the freshly
// reset sequence, untimed: the context the timed test then runs in
// (llama-bench -d). Nothing happens without a depth.
func (r *repRunner) fillDepth(t Test, prefill func([]int32) error) error {
	if t.NDepth == 0 {
		return nil
	}
	if err := prefill(r.corpus[:t.NDepth]); err != nil {
		return fmt.Errorf("prefill to depth %d: %w", t.NDepth, err)
	}
	return nil
}

// DepthContextError is a context limit that a -d depth exceeds: a usage
// error of the command line (ninfer-bench exits 2), found as soon as the
// model's max_position_embeddings is known, before anything is allocated.
type DepthContextError struct{ Err error }

func (e DepthContextError) Error() string { return e.Err.Error() }
func (e DepthContextError) Unwrap() error { return e.Err }

// CheckDepthModelContext checks the depth tests against the model's
// max_position_embeddings (0: no limit) as soon as the header is read,
// before the corpus and the engine: a DepthContextError naming the test.
// An explicit --max-ctx was checked by CheckDepthContext already, and
// CheckModelContext checks that one against the model.
func CheckDepthModelContext(tests []Test, spec string, k, maxCtx, maxPositions int) error {
	if maxCtx > 0 || maxPositions <= 0 {
		return nil
	}
	for _, t := range tests {
		if t.NDepth == 0 {
			continue
		}
		if need := RequiredContext([]Test{t}, spec, k, false); need.Tokens > maxPositions {
			return DepthContextError{Err: fmt.Errorf("--n-depth %d: %s needs %d tokens of context, above the model's max_position_embeddings %d (lower --n-depth)",
				t.NDepth, need.Who, need.Tokens, maxPositions)}
		}
	}
	return nil
}
