#!/usr/bin/env bash
# Plain vs MTP speculative decoding on the default model, CPU backend,
# interleaved: ROUNDS rounds, each running every configuration once
# (ninfer-bench -pg P,G -r REPS), so machine load spreads over all of them.
# Prints one line per configuration: decode tok/s (median over all reps,
# min–max), acceptance rate and length, and the ratio to plain decoding.
#
# usage: scripts/bench-mtp.sh [BIN_DIR] [BUILD_DIR]
#   env: ROUNDS (5), REPS (2), PG ("64,128"), THREADS (1), CPU ("" = any;
#        e.g. CPU=1 pins the runs with taskset), MODEL_DIR
#        (models/tiny-shakespeare)
# needs: make demo (the q8 artifact) and, for the proposal-head rows,
#        BUILD_DIR/shakespeare-q8-draft1024.ninfer (see docs/PERF.md).
set -euo pipefail
bin=${1:-bin}
build=${2:-build}
model=${MODEL_DIR:-models/tiny-shakespeare}
rounds=${ROUNDS:-5} reps=${REPS:-2} pg=${PG:-64,128} threads=${THREADS:-1}
pin=()
if [ -n "${CPU:-}" ]; then pin=(taskset -c "$CPU"); fi
out=$(mktemp -d "$build/bench-mtp.XXXXXX")
trap 'rm -rf "$out"' EXIT
configs=("plain|shakespeare-q8|" "mtp1|shakespeare-q8|--spec mtp --draft-tokens 1"
	"mtp2|shakespeare-q8|--spec mtp --draft-tokens 2" "mtp3|shakespeare-q8|--spec mtp --draft-tokens 3")
if [ -f "$build/shakespeare-q8-draft1024.ninfer" ]; then
	configs+=("mtp1-proposal|shakespeare-q8-draft1024|--spec mtp --draft-tokens 1 --lm-head-draft"
		"mtp2-proposal|shakespeare-q8-draft1024|--spec mtp --draft-tokens 2 --lm-head-draft")
fi
for ((r = 0; r < rounds; r++)); do
	for c in "${configs[@]}"; do
		IFS='|' read -r name art args <<<"$c"
		# shellcheck disable=SC2086
		"${pin[@]}" "$bin/ninfer-bench" --backend cpu --threads "$threads" --quiet --weights "$build/$art.ninfer" \
			--corpus "$model/bench_corpus.ids" -pg "$pg" -r "$reps" --warmup 1 $args >>"$out/$name.jsonl"
	done
done
python3 - "$out" "${configs[@]}" <<'PY'
import json, statistics, sys
out, names = sys.argv[1], [c.split("|")[0] for c in sys.argv[2:]]
base = None
print(f"{'config':<15} {'decode tok/s median (min-max)':<32} {'accept rate':>11} {'accept len':>10} {'vs plain':>8}")
for n in names:
    tps, drafted, accepted, rounds = [], 0, 0, 0
    for line in open(f"{out}/{n}.jsonl"):
        d = json.loads(line)
        if d.get("type") != "rep":
            continue
        t = d["timings"]
        tps.append(d["decode_output_tokens"] / t["decode_seconds"])
        s = d.get("speculative") or {}
        if s.get("enabled"):
            drafted += s["drafted_tokens"]; accepted += s["accepted_tokens"]; rounds += s["rounds"]
    med = statistics.median(tps)
    base = base or med
    rate = f"{accepted / drafted:.3f}" if drafted else "-"
    length = f"{(rounds + accepted) / rounds:.2f}" if rounds else "-"
    print(f"{n:<15} {med:8.1f} ({min(tps):.1f}-{max(tps):.1f}, n={len(tps)}){'':<4} {rate:>11} {length:>10} {med / base:8.2f}")
PY
