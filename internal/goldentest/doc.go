// Package goldentest holds the model-level golden tests of the engine: every
// case under testdata/golden (tiny random Qwen3.5 models exported by Hugging
// Face transformers, see scripts/golden/README.md) is converted with each
// recipe preset, run on the CPU backend with each KV cache dtype, and
// compared with the transformers float32 logits, greedy continuation and MTP
// draft-head logits. The package has no non-test code;
// the measured accuracy table is in docs/ACCURACY.md
// (go test ./internal/goldentest -run TestAccuracyTable -v prints it).
package goldentest
