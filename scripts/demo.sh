#!/usr/bin/env bash
# make demo: the default model (models/tiny-shakespeare, a small Qwen3.5 with
# an MTP head trained on Shakespeare's plays) on the CPU backend:
#   1. ninfer-bench | ninfer-report on the q8 artifact, plain decoding;
#   2. the same with MTP speculative decoding (--spec mtp --draft-tokens 2):
#      the table shows the real acceptance and the speed-up;
#   3. the groupwise-int (q4/q5/q6) artifact, plain: the cost of a smaller recipe;
#   4. a short continuation with ninfer-run, printed as text.
# The prompts come from the held-out plays (models/tiny-shakespeare/bench_corpus.ids).
#
# usage: scripts/demo.sh BIN_DIR BUILD_DIR [MODEL_DIR]
#   BIN_DIR   holds ninfer-bench, ninfer-report, ninfer-run (make build)
#   BUILD_DIR holds shakespeare-q8.ninfer and shakespeare-groupwise-int.ninfer
#             (make demo converts them); the JSON lines are written there too.
set -euo pipefail

bin=${1:-bin}
build=${2:-build}
model=${3:-models/tiny-shakespeare}
corpus=$model/bench_corpus.ids
q8=$build/shakespeare-q8.ninfer
gi=$build/shakespeare-groupwise-int.ninfer
for f in "$q8" "$gi" "$corpus"; do
	if [ ! -f "$f" ]; then
		echo "demo: $f is missing (run: make demo)" >&2
		exit 1
	fi
done
tmp=$(mktemp "$build/demo.XXXXXX")
trap 'rm -f "$tmp"' EXIT # nothing partial is left on failure

bench() { # bench NAME ARGS...: one run into BUILD/demo-NAME.jsonl, its table on stdout
	local name=$1
	shift
	echo "demo: ninfer-bench --backend cpu $*" >&2
	"$bin/ninfer-bench" --backend cpu --corpus "$corpus" -r 3 --warmup 1 "$@" >"$tmp"
	mv "$tmp" "$build/demo-$name.jsonl" # only a complete run replaces the previous lines
	"$bin/ninfer-report" --format md "$build/demo-$name.jsonl"
	echo
}

bench plain --weights "$q8" -p 64,256 -n 64
bench mtp --weights "$q8" -n 64 --spec mtp --draft-tokens 2
bench groupwise-int --weights "$gi" -p 256 -n 64
echo "demo: JSON lines in $build/demo-{plain,mtp,groupwise-int}.jsonl (ninfer-report FILE > report.json for the schema-15 document)" >&2

prompt="KING. My lords, "
echo "demo: ninfer-run --backend cpu --weights $q8 --temperature 0.8 --top-k 40 --seed 1 --max-new 60 --prompt \"$prompt\"" >&2
printf '%s' "$prompt"
"$bin/ninfer-run" --backend cpu --weights "$q8" --temperature 0.8 --top-k 40 --seed 1 --max-new 60 --quiet --prompt "$prompt"
