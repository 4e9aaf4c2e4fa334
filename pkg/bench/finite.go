package bench

import (
	"fmt"
	"math"

	"github.com/ninfer/ninfer/pkg/engine"
)

// A benchmark of a model whose logits are not finite measures nothing: the
// first measured rep of every test checks the last logits row it produced
// (on the host already; scanned after the rep's timing ends), and a
// non-finite row fails the run with a NonFiniteError naming the test and,
// through engine.Sequence.DiagnoseNonFinite, the first op whose output is
// not finite. Speculative reps check the plain probe's last row, and a
// decoder that found no finite logit is diagnosed the same way.

// NonFiniteError is Run's error for a test whose logits are not finite.
type NonFiniteError struct {
	Test      string            // the test's display label
	Msg       string            // what was found: "logit 0 of the last row is NaN"
	Weights   string            // the artifact
	Tokens    int               // tokens re-run for the diagnosis
	Verified  bool              // the artifact passed --verify
	Diagnosis *engine.NonFinite // nil: every output was finite in the re-run
	DiagErr   error             // the re-run itself failed
}

func (e *NonFiniteError) Error() string {
	hint := engine.NonFiniteHint(e.Weights, e.Verified, e.Diagnosis)
	head := fmt.Sprintf("%s: the logits are not finite (%s), so the timings measure nothing", e.Test, e.Msg)
	switch {
	case e.DiagErr != nil:
		return fmt.Sprintf("%s (re-running the %d prompt tokens op by op to find the cause failed: %v; %s)", head, e.Tokens, e.DiagErr, hint)
	case e.Diagnosis == nil:
		return fmt.Sprintf("%s (an eager op-by-op re-run of the %d prompt tokens found every output finite, so the cause is on a path it does not take: a decode step, CUDA graphs (try --no-cuda-graph) or the MTP verify step; %s)", head, e.Tokens, hint)
	}
	return fmt.Sprintf("%s: %s (%s)", head, e.Diagnosis, hint)
}

// firstNonFinite returns the index of the first NaN or infinity in x, or -1.
func firstNonFinite(x []float32) int {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return i
		}
	}
	return -1
}

// checkFinite checks the last logits row of the rep just run (r.last) and,
// when it is not finite, diagnoses the test's depth and prompt tokens op
// by op. It resets the sequence; call it between reps only.
func (r *repRunner) checkFinite(t Test, weights string, verified bool) error {
	i := firstNonFinite(r.last)
	if i < 0 {
		return nil
	}
	return r.diagnose(t, weights, verified, fmt.Sprintf("logit %d of the last row is %v", i, r.last[i]))
}

// diagnose re-runs the test's depth and prompt tokens op by op.
func (r *repRunner) diagnose(t Test, weights string, verified bool, msg string) error {
	seq := r.seq
	if r.mseq != nil {
		seq = r.mseq.Sequence()
	}
	ids := r.corpus[:t.NDepth+t.PromptTokens()]
	e := &NonFiniteError{Test: t.DisplayLabel(), Msg: msg, Weights: weights, Tokens: len(ids), Verified: verified}
	e.Diagnosis, e.DiagErr = seq.DiagnoseNonFinite(ids)
	return e
}

// specNoFinite is how pkg/spec says that a target step left no token to
// pick (every logit NaN or -Inf).
const specNoFinite = "all logits NaN or -Inf"
