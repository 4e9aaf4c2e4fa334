#!/usr/bin/env bash
# The MTP verify and draft cost at a real Qwen3.5 shape on the CPU backend
# (#23's table): a random model of the shape with one MTP layer and a
# proposal head, converted with --recipe q8 and --recipe groupwise-int; for
# each ISA level and recipe, ninfer-bench --spec mtp --draft-tokens K
# --lm-head-draft for K = 1..3 (acceptance is ~0 with random weights and does
# not matter: the costs do). Every rep's spec_timing gives the plain
# single-token step of the same run, the verify pass by width K+1 and the
# draft per token; the table shows the median over the reps of each cost in
# plain steps, with min–max. Not part of CI; record the output in
# docs/PERF.md.
#
# usage: scripts/bench-mtp-verify.sh
#   env: SHAPE (qwen3.5-0.8b), ISAS ("avx512 avx2": NINFER_CPU_ISA values; a
#        level this CPU lacks stops the run), THREADS (2), GEN (32), REPS (3),
#        KS ("1 2 3"), OUT (build/bench-mtp-verify/SHAPE),
#        CORPUS (models/tiny-shakespeare/bench_corpus.ids: ranks the
#        proposal head's rows), DRAFT_HEAD (4096 rows)
# The models are cached in OUT (delete it to rebuild them).
set -euo pipefail
cd "$(dirname "$0")/.."
shape=${SHAPE:-qwen3.5-0.8b} isas=${ISAS:-avx512 avx2} threads=${THREADS:-2} gen=${GEN:-32} reps=${REPS:-3}
ks=${KS:-1 2 3} out=${OUT:-build/bench-mtp-verify/$shape}
corpus=${CORPUS:-models/tiny-shakespeare/bench_corpus.ids} dh=${DRAFT_HEAD:-4096}
log() { printf '== %s\n' "$*" >&2; }
mkdir -p "$out/bin" "$out/runs"
go build -o "$out/bin/" ./cmd/ninfer-testmodel ./cmd/ninfer-convert ./cmd/ninfer-bench
if [ ! -f "$out/hf/config.json" ]; then
	log "random HF model, --shape $shape, 1 MTP layer"
	"$out/bin/ninfer-testmodel" --shape "$shape" --mtp-layers 1 --seed 1 --force "$out/hf"
fi
recipes=(q8 groupwise-int)
for r in "${recipes[@]}"; do
	[ -f "$out/$r.ninfer" ] && continue
	log "ninfer-convert --recipe $r --draft-head $dh"
	"$out/bin/ninfer-convert" -q --force --recipe "$r" --draft-head "$dh" --draft-corpus "$corpus" "$out/hf" "$out/$r.ninfer"
done
rm -f "$out"/runs/*.jsonl
for isa in $isas; do
	for r in "${recipes[@]}"; do
		for k in $ks; do
			log "$isa $r k=$k"
			NINFER_CPU_ISA=$isa "$out/bin/ninfer-bench" -q --weights "$out/$r.ninfer" --corpus "$corpus" --backend cpu \
				--threads "$threads" -n "$gen" -r "$reps" --spec mtp --draft-tokens "$k" --lm-head-draft \
				>"$out/runs/$isa-$r-k$k.jsonl"
		done
	done
done
python3 - "$out" "$shape" "$threads" "$gen" "$reps" "$isas" "$ks" <<'EOF'
import json, statistics, sys
out, shape, threads, gen, reps, isas, ks = sys.argv[1:8]
isas, ks = isas.split(), [int(k) for k in ks.split()]

def spread(xs, f="{:.2f}"):
    m = statistics.median(xs)
    return f.format(m) if max(xs) - min(xs) < 0.005 * abs(m) + 1e-12 else f"{f.format(m)} ({f.format(min(xs))}–{f.format(max(xs))})"

print(f"\nMTP verify and draft cost, SHAPE={shape} THREADS={threads} -n {gen} -r {reps}, --lm-head-draft;"
      " costs in plain single-token steps of the same rep (median over reps, min–max)\n")
print("| ISA | recipe | plain step ms | " + " | ".join(f"verify k={k} (width {k + 1})" for k in ks)
      + " | draft per token | environment.isa |")
print("|---|---|---|" + "---|" * len(ks) + "---|---|")
for isa in isas:
    for r in ("q8", "groupwise-int"):
        steps, ver, draft, seen = [], {}, [], set()
        for k in ks:
            for line in open(f"{out}/runs/{isa}-{r}-k{k}.jsonl"):
                d = json.loads(line)
                if d.get("type") == "run":
                    seen.add(str((d.get("environment") or {}).get("isa", "?")))
                if d.get("type") != "rep" or "spec_timing" not in d:
                    continue
                s = d["spec_timing"]
                step = s["plain_step_seconds"]
                steps.append(step * 1e3)
                n = s["verify_passes_by_width"][k]
                if n:
                    ver.setdefault(k, []).append(s["verify_seconds_by_width"][k] / n / step)
                if s.get("draft_seconds_per_token") is not None:
                    draft.append(s["draft_seconds_per_token"] / step)
        cells = [spread(ver[k]) if k in ver else "–" for k in ks]
        print(f"| {isa} | {r} | {spread(steps, '{:.1f}')} | " + " | ".join(cells)
              + f" | {spread(draft)} | {', '.join(sorted(seen))} |")
EOF
