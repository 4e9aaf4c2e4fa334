#!/bin/sh
# Builds and runs the host SIMT harness self-test with g++ (no GPU needed).
#   kernels/cuda/simt/build-test.sh [output-dir]     (default: build/simt)
# Environment: CXX (default g++), CXXFLAGS (extra flags), NI_SIMT_WORKERS ...
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$root/build/simt}
mkdir -p "$out"
CXX=${CXX:-g++}
flags="-std=c++17 -O2 -Wall -Wextra -DNI_SIMT -I $root/kernels/cuda -I $root/kernels -pthread ${CXXFLAGS:-}"
$CXX $flags -c "$here/simt.cpp" -o "$out/simt.o"
$CXX $flags -c "$here/simt_test.cpp" -o "$out/simt_test.o"
$CXX -pthread "$out/simt.o" "$out/simt_test.o" -o "$out/simt_test"
exec "$out/simt_test"
