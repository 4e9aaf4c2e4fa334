#!/usr/bin/env bash
# Builds the CPU kernels (kernels/cpu/*.c, the reference backend) into
# build/simt/libcpuref.a for the C++ op tests of the SIMT harness.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=build/simt
mkdir -p "$out/cpuref"
for f in kernels/cpu/*.c; do
  o="$out/cpuref/$(basename "${f%.c}").o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ kernels/ninfer_ops.h -nt "$o" ] || [ kernels/cpu/ni_cpu.h -nt "$o" ]; then
    gcc -O2 -march=x86-64-v2 -std=gnu11 -Ikernels -c "$f" -o "$o"
  fi
done
rm -f "$out/libcpuref.a"
ar rcs "$out/libcpuref.a" "$out"/cpuref/*.o
echo "$out/libcpuref.a"
