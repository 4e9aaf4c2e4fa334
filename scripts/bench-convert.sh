#!/usr/bin/env bash
# Measures ninfer-convert throughput (MB/s of bf16 checkpoint input) and
# ninfer-inspect time on the resulting multi-GB artifact.
# Usage: scripts/bench-convert.sh [WORKDIR]   (needs ~8 GB free disk)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/ninfer-bench-convert}
mkdir -p "$work" bin
go build -o bin/ ./cmd/ninfer-testmodel ./cmd/ninfer-convert ./cmd/ninfer-inspect
src=$work/hf
if [ ! -f "$src/config.json" ]; then
  ./bin/ninfer-testmodel --force --hidden 2048 --intermediate 8192 --layers 16 --vocab 65536 --shards 4 "$src" >&2
fi
in_bytes=$(du -cb "$src"/*.safetensors | tail -n1 | cut -f1)
echo "checkpoint: $src, $in_bytes bytes of bf16 safetensors, $(nproc) cores"
for r in groupwise-int q8 nvfp4-mlp bf16; do
  out=$work/m-$r.ninfer
  s=$(date +%s.%N)
  ./bin/ninfer-convert --quiet --force --recipe "$r" "$src" "$out"
  e=$(date +%s.%N)
  python3 -c "import sys; s,e,b,o=map(float,sys.argv[1:5]); print(f'convert {sys.argv[5]:14s} {e-s:6.2f} s  {b/(e-s)/1e6:7.1f} MB/s of bf16 input  -> {o/1e9:.2f} GB')" "$s" "$e" "$in_bytes" "$(stat -c %s "$out")" "$r"
done
big=$work/m-bf16.ninfer
for i in 1 2 3; do ./bin/ninfer-inspect --summary "$big" >/dev/null; done  # warm the page cache for the header
s=$(date +%s.%N)
for i in $(seq 20); do ./bin/ninfer-inspect "$big" >/dev/null; done
e=$(date +%s.%N)
python3 -c "import sys; s,e=map(float,sys.argv[1:3]); print(f'ninfer-inspect {sys.argv[3]} ({int(sys.argv[4])/1e9:.2f} GB): {(e-s)/20*1000:.1f} ms per run (mean of 20, full object table)')" "$s" "$e" "$big" "$(stat -c %s "$big")"
