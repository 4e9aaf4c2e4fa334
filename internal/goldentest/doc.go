// Package goldentest holds the model-level golden tests of the engine: every
// case under testdata/golden (tiny Qwen3.5 models exported by Hugging Face
// transformers, see scripts/golden/README.md), plus the cases of the
// directories named by NINFER_GOLDEN_EXTRA (ExtraEnv), is converted with each
// recipe preset, run on the CPU backend with each KV cache dtype, and
// compared with the transformers float32 logits, greedy continuation and MTP
// draft-head logits. Except the fixed fp32 bar (fp32Tol), every tolerance is
// derived from the case's own numbers (derived_test.go), so new cases need no
// calibrated constants. The package has no non-test code; the measured
// accuracy table is in docs/ACCURACY.md (go test ./internal/goldentest -run
// TestAccuracyTable -v prints it; -run TestDerivedBoundsReport -v prints the
// derived bounds).
package goldentest
