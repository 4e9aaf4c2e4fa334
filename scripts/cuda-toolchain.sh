#!/usr/bin/env bash
# Installs the pinned PyPI CUDA 13.0 toolchain into build/cuda/ (inside the
# repository; nothing outside it is changed) and prints its CUDA_HOME.
#
# Every part is pinned through the cuda-toolkit 13.0.2 metapackage: nvcc's own
# wheel leaves its dependencies unpinned, and a newer crt/nvvm/runtime than
# nvcc breaks CCCL. 13.0 writes PTX ISA 9.0, which the r580 drivers JIT.
#
#   scripts/cuda-toolchain.sh            install if missing, print CUDA_HOME
#   scripts/cuda-toolchain.sh --check    exit 1 unless installed
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/cuda
home=$root/nvidia/cu13
stamp=$root/.installed-13.0.2
pkgs=("cuda-toolkit[nvcc,cudart,cccl,crt,nvvm]==13.0.2")

if [ "${1:-}" = "--check" ]; then
  [ -f "$stamp" ] && [ -x "$home/bin/nvcc" ] && exit 0
  exit 1
fi
if [ ! -f "$stamp" ] || [ ! -x "$home/bin/nvcc" ]; then
  py=$(command -v python3 || command -v python || true)
  if [ -z "$py" ]; then
    echo "cuda-toolchain: python3 with pip is needed to install the PyPI CUDA toolchain (or set CUDA_HOME)" >&2
    exit 1
  fi
  echo "cuda-toolchain: installing ${pkgs[*]} into $root (≈100 MB download)" >&2
  tmp=$root.tmp.$$
  rm -rf "$tmp"
  mkdir -p "$(dirname "$root")"
  if ! "$py" -m pip install --quiet --disable-pip-version-check --no-cache-dir --target "$tmp" "${pkgs[@]}" >&2; then
    rm -rf "$tmp"
    echo "cuda-toolchain: pip install failed (see above)" >&2
    exit 1
  fi
  rm -rf "$root"
  mv "$tmp" "$root"
  touch "$stamp"
fi
cd "$home" && pwd
