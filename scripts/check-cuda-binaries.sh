#!/usr/bin/env bash
# Checks the CUDA-built tools on a machine without a usable GPU: they link
# cudart statically (no libcudart.so needed), --backend auto falls back to
# the CPU with one note saying why, and --backend cuda fails with one line
# naming the reason and the CUDA error code (exit 1).
#   scripts/check-cuda-binaries.sh BIN_DIR
set -euo pipefail
bin=${1:-bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check-cuda-binaries: $*" >&2; exit 1; }

if ldd "$bin/ninfer-run" | grep -q 'libcudart'; then fail "ninfer-run links libcudart dynamically"; fi
"$bin/ninfer-testmodel" --force "$tmp/hf" >/dev/null 2>&1
"$bin/ninfer-convert" --force --recipe q8 "$tmp/hf" "$tmp/m.ninfer" >/dev/null 2>&1
if nvidia-smi >/dev/null 2>&1; then
  echo "check-cuda-binaries: a GPU is present; skipping the no-GPU checks"
  exit 0
fi
echo "1 2 3" | "$bin/ninfer-run" --weights "$tmp/m.ninfer" --ids --max-new 4 --backend auto >"$tmp/out" 2>"$tmp/err.auto" ||
  fail "--backend auto did not run on the CPU: $(cat "$tmp/err.auto")"
grep -q 'using the CPU backend' "$tmp/err.auto" || fail "--backend auto gave no fallback note: $(cat "$tmp/err.auto")"
grep -q 'CUDA error' "$tmp/err.auto" || fail "the fallback note names no CUDA error: $(cat "$tmp/err.auto")"
[ -s "$tmp/out" ] || fail "--backend auto produced no ids"
rc=0
echo "1 2 3" | "$bin/ninfer-run" --weights "$tmp/m.ninfer" --ids --max-new 4 --backend cuda >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "--backend cuda without a GPU exited $rc, want 1"
# The error is one line (after ninfer-run's "loading" log line).
errline=$(grep -- '--backend cuda:' "$tmp/err" || true)
[ "$(printf '%s\n' "$errline" | grep -c .)" = 1 ] || fail "--backend cuda error is not one line: $(cat "$tmp/err")"
printf '%s' "$errline" | grep -q 'CUDA error 35' || fail "--backend cuda error names no CUDA error code: $(cat "$tmp/err")"
echo "check-cuda-binaries: ok"
echo "  auto: $(grep 'using the CPU backend' "$tmp/err.auto" | head -n 1)"
echo "  cuda: $errline"
