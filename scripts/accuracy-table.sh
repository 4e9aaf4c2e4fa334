#!/usr/bin/env bash
# The recipe × KV-format accuracy table of docs/ACCURACY.md ("Recipes × KV
# formats against fp32"): for the trained default model and each golden
# model, every recipe converted, evaluated with ninfer-eval under each KV
# cache format against the fp32 conversion run with an fp32 KV cache, whose
# logits are saved once (--save-logits) and used as --reference.
#
# Usage: scripts/accuracy-table.sh [WORKDIR]   (default /tmp/ninfer-accuracy)
# Env: THREADS (default 2), CTX (default 256), BACKEND (default cpu).
# Writes the markdown to stdout (and WORKDIR/table.md); the raw ninfer-eval
# JSON lines to WORKDIR/results.jsonl. Needs go and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/ninfer-accuracy}
threads=${THREADS:-2}
ctx=${CTX:-256}
backend=${BACKEND:-cpu}
recipes="fp32 bf16 q8 groupwise-int fp8 nvfp4-mlp"
kvs="bf16 int8 fp8"
mkdir -p "$work/bin"
go build -o "$work/bin/" ./cmd/ninfer-convert ./cmd/ninfer-eval
: >"$work/results.jsonl"

# name | Hugging Face directory | corpus (random: pseudo-random ids, see below)
models=(
  "tiny-shakespeare (the default model; golden case d_trained_shakespeare)|models/tiny-shakespeare|models/tiny-shakespeare/bench_corpus.ids"
  "golden a_untied_6l|testdata/golden/a_untied_6l|random"
  "golden b_tied_4l|testdata/golden/b_tied_4l|random"
  "golden c_untied_fullfirst|testdata/golden/c_untied_fullfirst|random"
)

for m in "${models[@]}"; do
  IFS='|' read -r name hf corpus <<<"$m"
  tag=$(basename "$hf")
  dir=$work/$tag
  mkdir -p "$dir"
  label="\`$corpus\`"
  if [ "$corpus" = random ]; then
    # The golden models have random weights and no tokenizer: no text has a
    # meaning to them, so they are scored on 8192 pseudo-random ids of their
    # vocabulary (Python's random.Random(0), 16 ids a line).
    corpus=$dir/random.ids
    python3 - "$hf/config.json" "$corpus" <<'EOF'
import json, random, sys
v = json.load(open(sys.argv[1]))["vocab_size"]
r = random.Random(0)
ids = [r.randrange(v) for _ in range(8192)]
with open(sys.argv[2], "w") as f:
    for i in range(0, len(ids), 16):
        f.write(" ".join(map(str, ids[i:i + 16])) + "\n")
EOF
    label="8192 pseudo-random ids of its vocabulary (vocab $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$hf/config.json"), Python random.Random(0))"
  fi
  ws=()
  for r in $recipes; do
    out=$dir/$r.ninfer
    log=$("$work/bin/ninfer-convert" --force --recipe "$r" "$hf" "$out" 2>&1)
    fb=$(grep -o '[0-9]* fallbacks' <<<"$log" | cut -d' ' -f1)
    printf '{"model":"%s","hf":"%s","corpus":"%s","recipe":"%s","size":%d,"fallbacks":%d}\n' \
      "$name" "$hf" "$label" "$r" "$(stat -c %s "$out")" "${fb:-0}" >>"$work/results.jsonl"
    # nvfp4-mlp where the MLP dims allow nvfp4 (N%128, K%64): with
    # fallbacks it is groupwise-int plus some nvfp4 at best; it is left out.
    if [ "$r" = nvfp4-mlp ] && [ "${fb:-0}" != 0 ]; then continue; fi
    ws+=(--weights "$out")
  done
  ev=("$work/bin/ninfer-eval" --corpus "$corpus" --ctx "$ctx" --backend "$backend" --threads "$threads" -q --format json)
  # The reference: fp32 weights, fp32 KV cache, run once.
  "${ev[@]}" --weights "$dir/fp32.ninfer" --kv-dtype fp32 --save-logits "$dir/fp32-kvfp32.logits" |
    sed "s|^{|{\"model\":\"$name\",\"kind\":\"reference\",|" >>"$work/results.jsonl"
  for kv in $kvs; do
    "${ev[@]}" "${ws[@]}" --reference "$dir/fp32-kvfp32.logits" --kv-dtype "$kv" |
      sed "s|^{|{\"model\":\"$name\",\"kind\":\"eval\",|" >>"$work/results.jsonl"
  done
  # The error the saved reference's rounding adds to the KL: the same runs
  # (fp32 KV) against the live fp32 model and against the file.
  for ref in "$dir/fp32.ninfer" "$dir/fp32-kvfp32.logits"; do
    "${ev[@]}" "${ws[@]}" --reference "$ref" --kv-dtype fp32 |
      sed "s|^{|{\"model\":\"$name\",\"kind\":\"check\",|" >>"$work/results.jsonl"
  done
done

python3 - "$work/results.jsonl" "$ctx" <<'EOF' | tee "$work/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ctx = int(sys.argv[2])
names = list(dict.fromkeys(r["model"] for r in rows))
def size(b):
    return f"{b/2**20:.2f} MiB" if b >= 2**20 else f"{b/2**10:.0f} KiB"
def recipe(w):
    return w.rsplit("/", 1)[-1].removesuffix(".ninfer")
for n in names:
    conv = {r["recipe"]: r for r in rows if r["model"] == n and "recipe" in r}
    ref = next(r for r in rows if r["model"] == n and r.get("kind") == "reference")
    ev = [r for r in rows if r["model"] == n and r.get("kind") == "eval"]
    first = next(iter(conv.values()))
    print(f"#### {n}\n")
    print(f"`{first['hf']}`, corpus {first['corpus']}: {ref['windows']} windows of {ctx}, "
          f"{ref['tokens']} tokens scored; reference fp32 weights with an fp32 KV cache: "
          f"PPL {ref['ppl']:.4f} ± {ref['ppl_stderr']:.4f}.\n")
    print("| recipe | size | KV | PPL | Δ PPL | KL mean | KL p99 | top-1 |")
    print("|:--|--:|:--|:--|--:|:--|--:|:--|")
    order = {k: i for i, k in enumerate(["bf16", "int8", "fp8"])}
    ev.sort(key=lambda r: (list(conv).index(recipe(r["weights"])), order[r["kv_dtype"]]))
    for r in ev:
        rc = recipe(r["weights"])
        kl = r["kl"]
        print(f"| {rc} | {size(conv[rc]['size'])} | {r['kv_dtype']} | {r['ppl']:.4f} ± {r['ppl_stderr']:.4f} | "
              f"{r['delta_ppl']:+.4f} | {kl['mean']:.6f} ± {kl['stderr']:.6f} | {kl['p99']:.6f} | "
              f"{100*r['top1_agreement']:.2f} ± {100*r['top1_stderr']:.2f} % |")
    skipped = [f"{k} ({v['fallbacks']} fallbacks)" for k, v in conv.items() if k == "nvfp4-mlp" and v["fallbacks"]]
    if skipped:
        print(f"\nLeft out: {', '.join(skipped)}: the MLP dims do not allow nvfp4.")
    chk = [r for r in rows if r["model"] == n and r.get("kind") == "check"]
    live = {r["weights"]: r for r in chk if not r["reference"].endswith(".logits")}
    saved = {r["weights"]: r for r in chk if r["reference"].endswith(".logits")}
    err = max(abs(live[w]["kl"]["mean"] - saved[w]["kl"]["mean"]) for w in live)
    rel = max(abs(live[w]["kl"]["mean"] - saved[w]["kl"]["mean"]) / live[w]["kl"]["mean"] for w in live if live[w]["kl"]["mean"] >= 1e-5)
    same = all(live[w]["top1_agreement"] == saved[w]["top1_agreement"] and live[w]["ref_ppl"] == saved[w]["ref_ppl"] for w in live)
    print(f"\nSaved-reference check (fp32 KV, against the live fp32 model and against the logits file): "
          f"largest KL-mean difference {err:.1e} nat, at most {rel:.1e} of the KL; reference PPL and top-1 {'identical' if same else 'DIFFER'}.\n")
EOF
