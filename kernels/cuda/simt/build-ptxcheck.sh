#!/bin/sh
# Builds ptxcheck (README.md, "ptxcheck"): the harness's PTX emulations
# against the real instructions.
#   kernels/cuda/simt/build-ptxcheck.sh NVCC OUT     the full program (static cudart)
#   kernels/cuda/simt/build-ptxcheck.sh --sim-only OUT   no CUDA: only `OUT --sim-only` works
# The top Makefile's device-bundle target runs the first form with
# OUT=build/device/ptxcheck. Environment: CXX (default g++).
# GPU code: SASS for sm_89, sm_90a, sm_100a, sm_120a and compute_89 PTX.
set -eu
[ $# = 2 ] || { echo "usage: $0 NVCC|--sim-only OUT" >&2; exit 64; }
nvcc=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
CXX=${CXX:-g++}
mkdir -p "$(dirname "$out")"
obj=$(mktemp -d "${TMPDIR:-/tmp}/ptxcheck.XXXXXX")
trap 'rm -rf "$obj"' EXIT
inc="-I $root/kernels/cuda -I $root/kernels -I $here"
sim="-std=c++17 -O2 -Wall -Wextra -Wno-unknown-pragmas -DNI_SIMT -pthread $inc"
# -ffp-contract=off: the scalar reading's fp32 chain is exactly its fmaf calls.
main="-std=c++17 -O2 -Wall -Wextra -ffp-contract=off -I $here"

$CXX $sim -c "$here/simt.cpp" -o "$obj/simt.o"
$CXX $sim -c "$here/ptxcheck_sim.cpp" -o "$obj/ptxcheck_sim.o"

if [ "$nvcc" = --sim-only ]; then
  $CXX $main -DPTXC_SIM_ONLY -c "$here/ptxcheck_main.cpp" -o "$obj/ptxcheck_main.o"
  $CXX -pthread "$obj/ptxcheck_main.o" "$obj/ptxcheck_sim.o" "$obj/simt.o" -lm -o "$out"
  exit 0
fi

cuda=$(cd "$(dirname "$nvcc")/.." && pwd)
gencode=""
for a in 89 90a 100a 120a; do gencode="$gencode -gencode=arch=compute_$a,code=sm_$a"; done
gencode="$gencode -gencode=arch=compute_89,code=compute_89"
# shellcheck disable=SC2086
"$nvcc" -std=c++17 -O2 $gencode $inc -c "$here/ptxcheck_gpu.cu" -o "$obj/ptxcheck_gpu.o"
$CXX $main -c "$here/ptxcheck_main.cpp" -o "$obj/ptxcheck_main.o"
# Linked by g++ (not nvcc: nvcc 13.0 from PyPI also needs -L$CUDA_HOME/lib to
# link) against the static runtime, so the GPU machine needs only the driver.
$CXX -pthread "$obj/ptxcheck_main.o" "$obj/ptxcheck_sim.o" "$obj/simt.o" "$obj/ptxcheck_gpu.o" \
  -L"$cuda/lib" -L"$cuda/lib64" -lcudart_static -ldl -lpthread -lrt -lm -o "$out"
