#!/usr/bin/env bash
# One prepared run of the CUDA backend on a machine with an NVIDIA GPU and
# its driver, but no network and no Go or CUDA toolchain: it uses only what
# `make device-bundle` built into build/device/ (binaries and `go test -c`
# executables, static cudart). Budget: ≤ 8 minutes.
#
#   scripts/device-check.sh OUTDIR
#
# Writes into OUTDIR (flat, ≤ 8 files): summary.txt (one PASS/FAIL/SKIP line
# per check, the device, the versions), ops.log (every op, CUDA vs the CPU
# backend and the FP64 oracles), golden.log (golden models on CUDA: fp32
# path vs transformers, greedy vs CPU, MTP lossless; graph vs eager), ptxcheck.log (the
# harness's PTX emulations vs the real instructions), sanitizer.log
# (compute-sanitizer memcheck and racecheck on a short decode, when the
# bundle has it), bench.jsonl and report.md (a small bench | report).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/device-check.sh OUTDIR}
mkdir -p "$out"
bundle=build/device
sum="$out/summary.txt"
: >"$sum"
start=$(date +%s)
note() { echo "$*" | tee -a "$sum"; }
result() { # name rc
  if [ "$2" = 0 ]; then note "PASS $1"; else note "FAIL $1 (exit $2)"; fi
}
gotest() { # name rc log: a go test run whose CUDA tests must have run, not skipped
  if [ "$2" != 0 ]; then
    note "FAIL $1 (exit $2)"
  elif grep -q -- '--- SKIP: TestCUDA' "$3" || ! grep -q -- '--- PASS: TestCUDA' "$3"; then
    note "FAIL $1: the CUDA tests were skipped ($(grep -m1 -A1 -- '--- SKIP: TestCUDA' "$3" | tail -n 1 | sed 's/^ *//'))"
  else
    note "PASS $1 ($(grep -c -- '--- PASS: TestCUDA' "$3") CUDA tests)"
  fi
}
[ -f "$bundle/ninfer-bench.gz" ] || { note "FAIL bundle: $bundle/ninfer-bench.gz missing (run make device-bundle first)"; exit 1; }
# The bundle's executables are gzipped (they travel within 64 MiB).
b=$(mktemp -d)
tmp=$(mktemp -d)
trap 'rm -rf "$b" "$tmp"' EXIT
for f in "$bundle"/*.gz; do
  gunzip -c "$f" >"$b/$(basename "$f" .gz)" && chmod +x "$b/$(basename "$f" .gz)"
done

note "device-check $(date -u +%FT%TZ)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /' | tee -a "$sum"
else
  note "FAIL no nvidia-smi: this machine has no NVIDIA driver"
  exit 1
fi
note "bundle: $(cat $bundle/BUILD_INFO 2>/dev/null)"

# 1. Every op on CUDA against the CPU backend and the FP64 oracles.
(cd pkg/backend && timeout 150 "$b/backend.test" -test.v -test.count=1) >"$out/ops.log" 2>&1
result "ops: pkg/backend tests on cpu + cuda ($(grep -c '^=== RUN' "$out/ops.log") runs)" $?
grep -q 'skipping the CUDA backend' "$out/ops.log" && note "FAIL ops: the CUDA backend was skipped: $(grep -m1 'skipping the CUDA backend' "$out/ops.log")"

# 2. The PTX emulations of the harness against the real instructions.
if [ -x "$b/ptxcheck" ]; then
  # The harness's tensor-core model for this GPU generation (H100/H200: h100;
  # NINFER_SIMT_MMA overrides): the bit-for-bit count then tests the model.
  mma_model=${NINFER_SIMT_MMA:-h100}
  NINFER_SIMT_MMA=$mma_model timeout 60 "$b/ptxcheck" >"$out/ptxcheck.log" 2>&1
  result "ptxcheck: harness emulations (mma.sync under model $mma_model, ldmatrix, cp.async) == hardware" $?
else
  note "SKIP ptxcheck: not in the bundle"
fi

# 3. Golden models on CUDA.
(cd internal/goldentest && timeout 150 "$b/goldentest.test" -test.v -test.count=1 -test.run 'CUDA') >"$out/golden.log" 2>&1
gotest "golden: fp32 path vs transformers, greedy vs CPU, MTP k=1..3 lossless on CUDA" $? "$out/golden.log"

# 3b. CUDA graphs: greedy and MTP speculative generation replayed as graphs
# equal eager runs token for token.
(cd pkg/engine && timeout 90 "$b/engine.test" -test.v -test.count=1 -test.run 'CUDAGraph') >"$tmp/graphs.log" 2>&1
rc=$?
cat "$tmp/graphs.log" >>"$out/golden.log"
gotest "graphs: decode and MTP rounds as CUDA graphs == eager" $rc "$tmp/graphs.log"

# 4. compute-sanitizer on a short decode.
"$b/ninfer-testmodel" --force "$tmp/hf" >/dev/null 2>&1 && "$b/ninfer-convert" --force --recipe q8 "$tmp/hf" "$tmp/m.ninfer" >/dev/null 2>&1
awk 'BEGIN { s = 7; for (i = 0; i < 2048; i++) { s = (s * 69069 + 1) % 4294967296; printf "%d%s", int(s / 65536) % 256, (i % 16 == 15) ? "\n" : " " } }' >"$tmp/corpus.ids"
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$san" ]; then
  : >"$out/sanitizer.log"
  for tool in memcheck racecheck; do
    timeout 90 "$san" --tool $tool --error-exitcode 3 "$b/ninfer-bench" --backend cuda --weights "$tmp/m.ninfer" \
      --corpus "$tmp/corpus.ids" -p 16 -n 8 -r 1 --spec mtp --draft-tokens 2 >>"$out/sanitizer.log" 2>&1
    result "compute-sanitizer $tool: short prefill + decode + MTP rounds" $?
  done
else
  note "SKIP compute-sanitizer: not in the bundle and not installed"
fi

# 5. A small bench | report on CUDA.
if [ -f "$tmp/m.ninfer" ]; then
  timeout 120 "$b/ninfer-bench" --backend cuda --weights "$tmp/m.ninfer" --corpus "$tmp/corpus.ids" -p 64 -n 32 -r 3 --output-file "$out/bench.jsonl" >/dev/null 2>"$out/bench.err"
  rc=$?
  result "bench: tiny model pp64/tg32 on cuda" $rc
  [ $rc = 0 ] && "$b/ninfer-report" --format md "$out/bench.jsonl" >"$out/report.md" 2>>"$out/bench.err"
  tail -n 5 "$out/bench.err" >>"$sum"
  rm -f "$out/bench.err"
fi
note "elapsed $(( $(date +%s) - start )) s"
grep -q '^FAIL' "$sum" && exit 1
exit 0
