#!/usr/bin/env bash
# Builds and runs every C++ test of the host SIMT harness (no GPU needed):
# the harness self-test with its planted bugs (simt_test), then one op test
# per kernel family (test_<family>.cpp: the CUDA kernels under the harness
# against the CPU backend's C kernels and FP64 oracles on fresh random data).
# Prints each program's closing line and a total "N passed, M failed".
#   kernels/cuda/simt/run-tests.sh [seed]        (default seed: 1)
# NINFER_SIMT_MMA=ieee|a100|h100|b200 picks the mma accumulation model
# (tcmodel.h; the first line names the model in effect).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$root/build/simt
mkdir -p "$out"
cd "$root"
CXX=${CXX:-g++}
flags="-std=c++17 -O2 -Wall -Wno-unknown-pragmas -DNI_SIMT -I kernels/cuda -I kernels -pthread"
seed=${1:-1}
# The accumulation model's own unit tests (pure C++, no harness); built
# first, as it also names the model in effect.
$CXX -std=c++17 -O2 -Wall -Wextra -ffp-contract=off kernels/cuda/simt/tcmodel_test.cpp -o "$out/tcmodel_test" || exit 1
mma=$("$out/tcmodel_test" --print-mode) || exit 1
echo "simt tests: seed $seed, mma model $mma (replay: NINFER_SIMT_MMA=$mma kernels/cuda/simt/run-tests.sh $seed)"
kernels/cuda/simt/cpuref.sh >/dev/null || exit 1
$CXX $flags -c kernels/cuda/simt/simt.cpp -o "$out/simt.o" || exit 1
$CXX $flags -x c++ -c kernels/cuda/ctx.cu -o "$out/ctx.o" || exit 1
pass=0 fail=0 bad=0
run() { # name binary args...
  local name=$1
  shift
  local log="$out/$name.log"
  "$@" >"$log" 2>&1
  local rc=$?
  local last
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [ -z "$last" ]; then
    echo "$name: no result line (exit $rc); log $log:"
    tail -n 20 "$log"
    bad=$((bad + 1))
    return
  fi
  echo "$name: $last (exit $rc)"
  [ $rc = 0 ] || grep -E 'FAIL' "$log" | head -n 20
  pass=$((pass + $(echo "$last" | cut -d' ' -f1)))
  fail=$((fail + $(echo "$last" | cut -d' ' -f3)))
  [ $rc = 0 ] || [ "$(echo "$last" | cut -d' ' -f3)" != 0 ] || bad=$((bad + 1))
}
run tcmodel_test "$out/tcmodel_test" "$seed"
$CXX $flags kernels/cuda/simt/simt_test.cpp "$out/simt.o" -o "$out/simt_test" || exit 1
run simt_test "$out/simt_test"
# The PTX emulations against an independent scalar reading of the ISA's
# fragment layouts (on a GPU the device check also compares the hardware).
if kernels/cuda/simt/build-ptxcheck.sh --sim-only "$out/ptxcheck-sim"; then
  run ptxcheck "$out/ptxcheck-sim" --sim-only --seed "$seed"
else
  echo "ptxcheck: build failed"
  bad=$((bad + 1))
fi
for fam in weights elementwise delta attention; do
  t=kernels/cuda/simt/test_$fam.cpp
  [ -f "$t" ] || continue
  $CXX $flags -x c++ kernels/cuda/$fam.cu -x c++ "$t" -x none "$out/ctx.o" "$out/simt.o" build/simt/libcpuref.a -lm \
    -o "$out/test_$fam" || { echo "test_$fam: build failed"; bad=$((bad + 1)); continue; }
  run "test_$fam" "$out/test_$fam" "$seed"
done
# A program that did not build or print its result counts as one failure.
echo "simt: $pass passed, $((fail + bad)) failed"
[ $fail = 0 ] && [ $bad = 0 ]
