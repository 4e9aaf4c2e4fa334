#!/usr/bin/env bash
# Seed sweep (not part of CI): the randomized op tests of every backend this
# machine has — the CPU ISA levels and the CUDA kernels under the host SIMT
# harness — under N fresh base seeds, with a summary of the failures by
# test / backend / format / shape. Run it (N >= 300) before landing any change
# to a kernel or a tolerance, and record the summary in docs/ACCURACY.md.
#
#   scripts/test-seeds.sh [-n N] [-j JOBS] [-run REGEX] [-no-sim] [-simt]
#   make test-seeds N=300 [RUN=REGEX] [SIM=0] [SIMT=1]
#
# -simt also runs the C++ op tests of the SIMT harness (test_weights,
# test_elementwise, test_delta, test_attention: the CUDA kernels against the
# CPU kernels and FP64 oracles) with each base as their seed.
#
# Each base is a fresh 64-bit value; every test derives its own seed from it
# and its name (internal/numtest), so a failing base replays exactly with
#   NINFER_TEST_SEED=<base> go test [-tags cudasim] -run '^Test…$' ./pkg/backend
# A failing base is a finding: fix the kernel or the tolerance derivation, and
# keep the base as a regression case.
set -euo pipefail
cd "$(dirname "$0")/.."

n=100
jobs=$(nproc)
run='^(TestMatMul|TestEmbed|TestAttention|TestDelta|TestRMSNorm|TestGatedRMSNorm|TestRoPE|TestArgmax|TestGDNGate|TestConv1D|TestKernelsDecode|TestSample)'
sim=1
simt=0
simrun=$run
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -run) run=$2; simrun=$2; shift 2 ;;
    -sim-run) simrun=$2; shift 2 ;;
    -no-sim) sim=0; shift ;;
    -simt) simt=1; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-seeds: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $n in ''|*[!0-9]*) echo "test-seeds: -n $n: want a positive count" >&2; exit 2 ;; esac
[ "$n" -gt 0 ] || { echo "test-seeds: -n must be positive" >&2; exit 2; }

out=${TEST_SEEDS_OUT:-build/test-seeds} # one directory per concurrent sweep
rm -rf "$out"
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
echo "test-seeds: building the test binary" >&2
# The cudasim binary's backends() are every CPU ISA level this machine runs
# plus the CUDA kernels under the SIMT harness; without it, the CPU levels.
if [ "$sim" = 1 ]; then
  simhash=$(cat kernels/cuda/*.cu kernels/cuda/*.cuh kernels/cuda/*.h kernels/ninfer_ops.h kernels/cuda/simt/*.h kernels/cuda/simt/*.cpp | sha256sum | cut -c1-16)
  CGO_CXXFLAGS="-DNI_SIM_SRC_HASH=$simhash" go test -tags cudasim -c -o "$out/sim.test" ./pkg/backend
  bins=(sim)
else
  go test -c -o "$out/cpu.test" ./pkg/backend
  bins=(cpu)
fi

if [ "$simt" = 1 ]; then
  echo "test-seeds: building the SIMT harness op tests" >&2
  kernels/cuda/simt/run-tests.sh 1 >/dev/null || { echo "test-seeds: the SIMT op tests fail with seed 1 (run kernels/cuda/simt/run-tests.sh)" >&2; exit 1; }
  for fam in weights elementwise delta attention; do
    cp "build/simt/test_$fam" "$out/simt_$fam.test"
    bins+=("simt_$fam")
  done
fi

# One line per (binary, base): the bases, fresh from the kernel's CSPRNG.
: > "$out/plan"
for i in $(seq 1 "$n"); do
  base=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  for b in "${bins[@]}"; do echo "$b $base" >> "$out/plan"; done
done

one() { # binary base
  local b=$1 base=$2 re=$run
  [ "$b" = sim ] && re=$simrun
  local log="$out/logs/$b-$base.log" cmd
  case $b in
    simt_*) cmd=("$out/$b.test" "$base") ;; # seed as argument; prints "N passed, M failed"
    *) cmd=(env NINFER_TEST_SEED="$base" "$out/$b.test" -test.count=1 -test.run "$re") ;;
  esac
  if (case $b in simt_*) "${cmd[@]}" ;; *) cd pkg/backend && "${cmd[@]}" ;; esac) > "$log" 2>&1; then
    rm -f "$log"
    echo "pass $b $base"
  else
    echo "FAIL $b $base"
  fi
}
export -f one
export out run simrun
start=$(date +%s)
echo "test-seeds: $n bases x ${#bins[@]} binaries (${bins[*]}), $jobs at a time" >&2
xargs -P "$jobs" -L 1 bash -c 'one "$0" "$1"' < "$out/plan" > "$out/results"
secs=$(( $(date +%s) - start ))

runs=$(wc -l < "$out/results")
fails=$(grep -c '^FAIL' "$out/results" || true)
echo "test-seeds: $runs runs in ${secs}s (tests: $run; sim: $simrun)"
for b in "${bins[@]}"; do
  echo "  $b: $(grep -c " $b " "$out/results" || true) runs, $(grep -c "^FAIL $b " "$out/results" || true) failed"
done
if [ "$fails" -gt 0 ]; then
  echo "failures by test and case (count, first line of the error):"
  # Error lines of the op tests start with the case name:
  # "backend/format/shape…: …"; group by what precedes the first colon.
  cat "$out"/logs/*.log | grep -E '^\s+\S+_test\.go:[0-9]+: ' | grep -v 'random inputs from base seed' |
    sed -E 's/^\s+\S+_test\.go:[0-9]+: //' | cut -c1-160 | awk -F': ' '{print $1}' | sort | uniq -c | sort -rn | head -40
  cat "$out"/logs/simt_*.log 2>/dev/null | grep -E 'FAIL' | cut -c1-160 | sort | uniq -c | sort -rn | head -20
  echo "failing bases (replay: NINFER_TEST_SEED=<base> go test [-tags cudasim] -run <test> ./pkg/backend; simt_<fam>: kernels/cuda/simt/run-tests.sh <base>):"
  grep '^FAIL' "$out/results" | head -20
  echo "logs: $out/logs"
fi
echo "$((runs - fails)) passed, $fails failed"
[ "$fails" = 0 ]
