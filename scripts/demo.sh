#!/usr/bin/env bash
# make demo: benchmark the tiny generated model on the CPU backend and print
# the llama-bench style table (ninfer-bench | ninfer-report --format md), then
# generate a little text with ninfer-run.
#
# usage: scripts/demo.sh BIN_DIR BUILD_DIR
#   BIN_DIR   holds ninfer-bench, ninfer-report, ninfer-inspect, ninfer-run (make build)
#   BUILD_DIR holds tiny.ninfer (make testmodel); the corpus and the JSON
#             lines of the run are written there too.
set -euo pipefail

bin=${1:-bin}
build=${2:-build}
model=$build/tiny.ninfer
corpus=$build/demo-corpus.ids
stream=$build/demo-bench.jsonl
trap 'rm -f "$corpus.tmp" "$stream.tmp"' EXIT # nothing partial is left on failure

if [ ! -f "$model" ]; then
	echo "demo: $model is missing (run: make testmodel)" >&2
	exit 1
fi

# The corpus: 4096 pseudo-random token ids below the model's vocabulary,
# from a fixed-seed LCG (exact in awk's doubles), so every run is the same.
vocab=$("$bin/ninfer-inspect" --summary "$model" | sed -n 's/.*vocab \([0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -z "$vocab" ]; then
	echo "demo: cannot read the vocabulary size of $model from ninfer-inspect" >&2
	exit 1
fi
awk -v vocab="$vocab" -v n=4096 'BEGIN {
	s = 20261201
	for (i = 0; i < n; i++) {
		s = (s * 69069 + 1) % 4294967296
		printf "%d%s", int(s / 65536) % vocab, (i % 16 == 15) ? "\n" : " "
	}
}' >"$corpus.tmp"
mv "$corpus.tmp" "$corpus"

echo "demo: ninfer-bench --backend cpu on $model (vocab $vocab, corpus $corpus)" >&2
"$bin/ninfer-bench" --backend cpu --weights "$model" --corpus "$corpus" \
	-p 64,256 -n 32 -pg 128,32 -r 3 --warmup 1 |
	tee "$stream.tmp" |
	"$bin/ninfer-report" --format md
mv "$stream.tmp" "$stream" # only a complete run replaces the previous lines
echo "demo: JSON lines in $stream (ninfer-report $stream > report.json for the schema-15 document)" >&2

# Text generation on the same model (random weights: the text is gibberish,
# but it is the real tokenizer → engine → streaming decoder path).
echo "demo: ninfer-run --backend cpu --chat --max-new 24 on $model" >&2
"$bin/ninfer-run" --backend cpu --weights "$model" --chat --no-think --max-new 24 --prompt "Hello, who are you?"
