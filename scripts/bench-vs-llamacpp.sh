#!/usr/bin/env bash
# ninfer vs llama.cpp on the CPU, same shape, same random weights (not CI).
#
#  1. llama.cpp: the source vendored by the PyPI sdist llama-cpp-python
#     (LLAMACPP_PY_VERSION, pip download --no-binary :all: --no-deps), only
#     llama-bench and llama-quantize, cmake -DGGML_NATIVE=ON without AMX, cached in
#     build/llamacpp/build-native; its convert_hf_to_gguf.py + gguf-py run in
#     build/llamacpp/venv (its requirements file's torch CPU wheel, or Debian's
#     python3-torch when download.pytorch.org is unreachable; transformers,
#     sentencepiece, gguf-py).
#  2. ninfer-testmodel --shape SHAPE --mtp-layers 0 writes one random HF
#     model (bf16); llama.cpp converts it to a bf16 GGUF and quantizes Q8_0
#     and Q4_0; ninfer-convert converts the same directory with --recipe q8
#     and --recipe groupwise-int. Pairs: Q8_0 vs q8, Q4_0 vs groupwise-int.
#  3. ROUNDS rounds, each running llama-bench then ninfer-bench for each pair
#     (A,B,A,B interleaved, so machine load spreads over both), same tests
#     (-p 512 -n 128 -pg 2048,128), THREADS threads, REPS reps per run.
#  4. A read-bandwidth probe (THREADS threads summing a 1 GiB buffer, best of
#     5), before the rounds and after each round, to state tg's streamed
#     bytes/s as % of it (per round, median over rounds).
#  5. A table: median tok/s over the rounds with min–max spread, and the
#     ratio ninfer / llama.cpp (median of per-round ratios).
#
# usage: scripts/bench-vs-llamacpp.sh
#   env: SHAPE (qwen3.5-0.8b), ROUNDS (3), THREADS (2), REPS (1),
#        ISA (native | avx2: llama.cpp built with -DGGML_NATIVE=OFF, i.e.
#        AVX2+FMA+F16C+BMI2 without AVX-512 or AVX-VNNI, in
#        build/llamacpp/build-avx2, against ninfer with NINFER_CPU_ISA=avx2
#        NINFER_CPU_AVXVNNI=0: the AVX2-only comparison on an AVX-512
#        machine; runs in OUT/avx2 | avxvnni: the same with AVX-VNNI on
#        both sides, -DGGML_AVX_VNNI=ON in build/llamacpp/build-avxvnni
#        against NINFER_CPU_ISA=avx2, as on an AVX2 CPU with AVX-VNNI
#        (Alder Lake and later client CPUs, Zen 5); runs in OUT/avxvnni),
#        TESTS (full: pp512 tg128 pp2048+tg128 | quick: pp512 tg128 |
#        tg: tg128 only),
#        OUT (build/bench-vs-llamacpp/SHAPE), LLAMACPP_PY_VERSION (0.3.36),
#        JOBS (build jobs, nproc),
#        BASELINE (a git revision: its ninfer-bench, built from `git archive`,
#        runs after ninfer-bench in every round, and the table adds its tok/s
#        and the ratio ninfer / baseline: before and after in one run)
# needs: go, gcc/g++, cmake (apt-get install cmake when missing and root),
#        python3 with venv, network access for pip on the first run.
# The tokenizer of the random model is ninfer-testmodel's small byte-level
# BPE: the converter does not know its pre-tokenizer hash, so the converter
# runs with get_vocab_base_pre pinned to "qwen35" (tokenization does not
# matter here: both benches feed random token ids).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
shape=${SHAPE:-qwen3.5-0.8b} rounds=${ROUNDS:-3} threads=${THREADS:-2} reps=${REPS:-1}
tests=${TESTS:-full} ver=${LLAMACPP_PY_VERSION:-0.3.36} jobs=${JOBS:-$(nproc)} isa=${ISA:-native}
baseline=${BASELINE:-}
case $isa in
native | avx2 | avxvnni) ;;
*) echo "bench-vs-llamacpp: ISA=$isa: want native, avx2 or avxvnni" >&2; exit 2 ;;
esac
if [ "$isa" = avxvnni ] && ! grep -qw avx_vnni /proc/cpuinfo; then
	echo "bench-vs-llamacpp: ISA=avxvnni: this CPU has no AVX-VNNI (no avx_vnni in /proc/cpuinfo)" >&2
	exit 2
fi
B=$root/build/llamacpp
out=${OUT:-$root/build/bench-vs-llamacpp/$shape}
src=$B/llama_cpp_python-$ver/vendor/llama.cpp
mkdir -p "$B" "$out"
log() { printf '== %s\n' "$*" >&2; }

# --- tools -------------------------------------------------------------------
for t in go gcc g++ python3; do
	command -v "$t" >/dev/null || { echo "bench-vs-llamacpp: $t not found" >&2; exit 1; }
done
if ! command -v cmake >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		log "installing cmake"
		apt-get update -qq && apt-get install -y -qq cmake
	else
		echo "bench-vs-llamacpp: cmake not found (apt-get install cmake)" >&2
		exit 1
	fi
fi

# --- llama.cpp source and build ------------------------------------------------
if [ ! -f "$src/CMakeLists.txt" ]; then
	log "llama.cpp source: pip download llama-cpp-python==$ver (sdist)"
	python3 -m pip download --no-binary :all: --no-deps -d "$B" "llama-cpp-python==$ver"
	tar -xzf "$B/llama_cpp_python-$ver.tar.gz" -C "$B"
fi
# The native build leaves AMX out (-mno-amx-*): VMs list amx_tile/amx_int8 in
# /proc/cpuinfo that fault when used (llama-bench died with SIGILL at pp512 on
# such a Xeon), and ninfer does not use AMX either. Build dir build-native
# (build/ held the AMX-enabled binaries of earlier sessions).
noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
if [ ! -x "$B/build-native/bin/llama-bench" ] || [ ! -x "$B/build-native/bin/llama-quantize" ]; then
	log "building llama-bench, llama-quantize (GGML_NATIVE=ON without AMX, -j$jobs; log $B/cmake.log)"
	cmake -S "$src" -B "$B/build-native" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
		-DCMAKE_C_FLAGS="$noamx" -DCMAKE_CXX_FLAGS="$noamx" \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >"$B/cmake.log" 2>&1
	cmake --build "$B/build-native" --target llama-bench llama-quantize -j"$jobs" >>"$B/cmake.log" 2>&1
fi
lbench=$B/build-native/bin/llama-bench runs=$out ninfer_isa= avxvnni=1
if [ "$isa" != native ]; then
	lbench=$B/build-$isa/bin/llama-bench runs=$out/$isa ninfer_isa=avx2 vnniflag=OFF avxvnni=0
	[ "$isa" = avxvnni ] && vnniflag=ON avxvnni=1
	if [ ! -x "$lbench" ]; then
		log "building llama-bench for $isa (GGML_NATIVE=OFF GGML_AVX_VNNI=$vnniflag, -j$jobs; log $B/cmake-$isa.log)"
		cmake -S "$src" -B "$B/build-$isa" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX_VNNI=$vnniflag \
			-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
			>"$B/cmake-$isa.log" 2>&1
		cmake --build "$B/build-$isa" --target llama-bench -j"$jobs" >>"$B/cmake-$isa.log" 2>&1
	fi
	mkdir -p "$runs"
fi
if [ ! -f "$B/venv/.ok" ]; then
	# torch: the CPU wheel of the converter's requirements file when
	# download.pytorch.org answers; else Debian's python3-torch (1.13, CPU),
	# seen through --system-site-packages (the converter then needs the
	# float8 shim of convert.py below).
	log "converter venv (torch CPU, transformers, gguf-py from the source)"
	rm -rf "$B/venv"
	python3 -m venv "$B/venv"
	if ! timeout 600 "$B/venv/bin/pip" install --quiet --retries 1 --timeout 20 \
		--extra-index-url https://download.pytorch.org/whl/cpu "torch==2.11.0" "numpy~=2.2.6"; then
		[ "$(id -u)" = 0 ] || { echo "bench-vs-llamacpp: no torch (apt-get install python3-torch)" >&2; exit 1; }
		log "download.pytorch.org unreachable: Debian's python3-torch, venv on /usr/bin/python3"
		apt-get install -y -qq python3-torch python3-numpy python3-venv >/dev/null
		rm -rf "$B/venv"
		/usr/bin/python3 -m venv --system-site-packages "$B/venv"
	fi
	"$B/venv/bin/pip" install --quiet "sentencepiece>=0.1.98,<0.3.0" "transformers==4.57.6" \
		"protobuf>=4.21.0,<5.0.0" "$src/gguf-py"
	# Debian's torch 1.13 is built against numpy 1.x: keep the system numpy.
	if "$B/venv/bin/python" -c 'import torch, sys; sys.exit(not torch.__version__.startswith("1."))'; then
		"$B/venv/bin/pip" uninstall -y -q numpy || true
	fi
	touch "$B/venv/.ok"
fi

# --- ninfer tools ----------------------------------------------------------------
bin=$out/bin
log "building ninfer tools into $bin"
mkdir -p "$bin"
go build -o "$bin/" ./cmd/ninfer-testmodel ./cmd/ninfer-convert ./cmd/ninfer-bench
basebin=
if [ -n "$baseline" ]; then
	rev=$(git rev-parse --verify --quiet "$baseline^{commit}") || { echo "bench-vs-llamacpp: BASELINE=$baseline: not a git revision" >&2; exit 2; }
	basebin=$out/bin-baseline-${rev:0:12}
	if [ ! -x "$basebin/ninfer-bench" ]; then
		log "building the baseline ninfer-bench ($baseline = ${rev:0:12}) into $basebin"
		tmp=$(mktemp -d)
		git archive "$rev" | tar -x -C "$tmp"
		(cd "$tmp" && go build -o "$basebin/" ./cmd/ninfer-bench)
		rm -rf "$tmp"
	fi
fi

# --- models -----------------------------------------------------------------------
hf=$out/hf
if [ ! -f "$hf/config.json" ]; then
	log "random HF model, --shape $shape (bf16, no MTP layer)"
	"$bin/ninfer-testmodel" --shape "$shape" --mtp-layers 0 --seed 1 --force "$hf"
fi
if [ ! -f "$out/model-bf16.gguf" ]; then
	log "GGUF (bf16) with llama.cpp's convert_hf_to_gguf.py"
	cat >"$out/convert.py" <<'EOF'
# convert_hf_to_gguf.py with the BPE pre-tokenizer pinned (see the script).
import sys
import torch
# torch < 2.1 (Debian's python3-torch) has no float8 dtypes; the converter
# names them in class-level tables only (no such tensor here).
for n in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, n):
        setattr(torch, n, torch.uint8)
sys.path.insert(0, sys.argv.pop(1))
import convert_hf_to_gguf as c
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen35"
c.main()
EOF
	"$B/venv/bin/python" "$out/convert.py" "$src" "$hf" --no-mtp --outtype bf16 --outfile "$out/model-bf16.gguf.tmp" >"$out/convert.log" 2>&1 ||
		{ tail -20 "$out/convert.log" >&2; exit 1; }
	mv "$out/model-bf16.gguf.tmp" "$out/model-bf16.gguf"
fi
for q in Q8_0 Q4_0; do
	[ -f "$out/model-$q.gguf" ] && continue
	log "llama-quantize $q"
	"$B/build-native/bin/llama-quantize" "$out/model-bf16.gguf" "$out/model-$q.gguf" "$q" "$threads" >"$out/quantize-$q.log" 2>&1 ||
		{ tail -20 "$out/quantize-$q.log" >&2; exit 1; }
done
for r in q8 groupwise-int; do
	[ -f "$out/model-$r.ninfer" ] && continue
	log "ninfer-convert --recipe $r"
	"$bin/ninfer-convert" -q --force --recipe "$r" "$hf" "$out/model-$r.ninfer"
done

# --- read bandwidth probe -------------------------------------------------------
cat >"$out/readbw.c" <<'EOF'
/* THREADS threads each sum their slice of a 1 GiB buffer; best of 5 passes. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static uint64_t *buf; static size_t n; static int nt; static volatile uint64_t sink;
static void *work(void *arg) {
	size_t id = (size_t)arg, lo = n * id / nt, hi = n * (id + 1) / nt;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	for (size_t i = lo; i + 4 <= hi; i += 4) { s0 += buf[i]; s1 += buf[i+1]; s2 += buf[i+2]; s3 += buf[i+3]; }
	sink += s0 + s1 + s2 + s3;
	return 0;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
	nt = argc > 1 ? atoi(argv[1]) : 1; size_t bytes = (size_t)1 << 30; n = bytes / 8;
	buf = aligned_alloc(64, bytes); memset(buf, 1, bytes);
	double best = 0;
	for (int r = 0; r < 5; r++) {
		pthread_t th[256]; double t0 = now();
		for (int i = 0; i < nt; i++) pthread_create(&th[i], 0, work, (void *)(size_t)i);
		for (int i = 0; i < nt; i++) pthread_join(th[i], 0);
		double gbs = bytes / (now() - t0) / 1e9; if (gbs > best) best = gbs;
	}
	printf("%.2f\n", best);
	return 0;
}
EOF
gcc -O3 -march=native -pthread -o "$out/readbw" "$out/readbw.c"
bw=$("$out/readbw" "$threads")
log "read bandwidth ($threads threads): $bw GB/s"

# --- interleaved runs ---------------------------------------------------------------
case $tests in
quick) targs=(-p 512 -n 128) ;;
tg) targs=(-n 128) ;; # llama-bench also gets -p 0 (its default is -p 512)
*) targs=(-p 512 -n 128 -pg 2048,128) ;;
esac
ltargs=("${targs[@]}")
[ "$tests" = tg ] && ltargs=(-p 0 -n 128)
pairs=("Q8_0|q8" "Q4_0|groupwise-int")
rm -f "$runs"/r*-*.json "$runs"/base-r*-*.json "$runs"/r*-probe.txt
for ((r = 1; r <= rounds; r++)); do
	for p in "${pairs[@]}"; do
		lq=${p%%|*} nr=${p##*|}
		log "round $r/$rounds: llama-bench $lq"
		"$lbench" -m "$out/model-$lq.gguf" "${ltargs[@]}" -t "$threads" -r "$reps" -o json \
			>"$runs/r$r-llama-$lq.json" 2>"$runs/r$r-llama-$lq.log" || { tail -5 "$runs/r$r-llama-$lq.log" >&2; exit 1; }
		log "round $r/$rounds: ninfer-bench $nr${ninfer_isa:+ (NINFER_CPU_ISA=$ninfer_isa NINFER_CPU_AVXVNNI=$avxvnni)}"
		NINFER_CPU_ISA=${ninfer_isa:-auto} NINFER_CPU_AVXVNNI=$avxvnni "$bin/ninfer-bench" -q --weights "$out/model-$nr.ninfer" --backend cpu \
			--threads "$threads" "${targs[@]}" -r "$reps" -o json --output-file "$runs/r$r-ninfer-$nr.json"
		if [ -n "$basebin" ]; then
			log "round $r/$rounds: baseline ninfer-bench $nr"
			NINFER_CPU_ISA=${ninfer_isa:-auto} NINFER_CPU_AVXVNNI=$avxvnni "$basebin/ninfer-bench" -q --weights "$out/model-$nr.ninfer" --backend cpu \
				--threads "$threads" "${targs[@]}" -r "$reps" -o json --output-file "$runs/base-r$r-ninfer-$nr.json"
		fi
	done
	# the probe again in every round: this machine's bandwidth moves between runs
	"$out/readbw" "$threads" >"$runs/r$r-probe.txt"
	log "round $r/$rounds: read bandwidth $(cat "$runs/r$r-probe.txt") GB/s"
done

# --- table ------------------------------------------------------------------------------
python3 - "$out" "$rounds" "$bw" "$shape" "$threads" "$runs" "$isa" "$baseline" <<'EOF'
import json, os, statistics, sys
out, rounds, bw0, shape, threads, runs, isa = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
baseline = sys.argv[8]
# the probe of every round (r{r}-probe.txt), and the one before the rounds
bws = [float(open(f"{runs}/r{r}-probe.txt").read()) for r in range(1, rounds + 1)]
pairs = [("Q8_0", "q8"), ("Q4_0", "groupwise-int")]

def label(p, g):
    return f"pp{p}" if g == 0 else (f"tg{g}" if p == 0 else f"pp{p}+tg{g}")

def llama(path):  # llama-bench t/s: pp P/t, tg G/t, pg (P+G)/t
    return {label(t["n_prompt"], t["n_gen"]): t["avg_ts"] for t in json.load(open(path))}

def ninfer(path):  # the same definitions from the schema-15 document
    res = {}
    for t in json.load(open(path))["tests"]:
        p, g = t["n_prompt"], t["n_gen"]
        if g == 0:
            v = t["prefill_tok_s_mean"]
        elif p == 0:
            v = t["decode_output_tok_s_mean"]
        else:
            v = (p + g) / t["total_seconds_mean"]
        res[label(p, g)] = v
    return res

def fmt(xs):
    m = statistics.median(xs)
    sp = (max(xs) - min(xs)) / m * 100 if m else 0
    return f"{m:8.2f} ±{sp:4.1f}%"

print(f"\nninfer vs llama.cpp: SHAPE={shape} ISA={isa} THREADS={threads} ROUNDS={rounds}; tok/s median over rounds, ±(max−min)/median;"
      f" ratio = median of per-round ninfer/llama.cpp; read bandwidth probe per round {statistics.median(bws):.2f} GB/s"
      f" ({min(bws):.2f}–{max(bws):.2f}; {bw0:.2f} before the rounds)\n")
bhead, bsep = (f" baseline {baseline} tok/s | ninfer / baseline |", "---|---|") if baseline else ("", "")
print("| pair (llama.cpp / ninfer) | test | llama.cpp tok/s | ninfer tok/s | ninfer / llama.cpp | tg streamed GB/s (% of probe) llama.cpp / ninfer |" + bhead)
print("|---|---|---|---|---|---|" + bsep)
for lq, nr in pairs:
    L = [llama(f"{runs}/r{r}-llama-{lq}.json") for r in range(1, rounds + 1)]
    N = [ninfer(f"{runs}/r{r}-ninfer-{nr}.json") for r in range(1, rounds + 1)]
    NB = [ninfer(f"{runs}/base-r{r}-ninfer-{nr}.json") for r in range(1, rounds + 1)] if baseline else None
    lsz, nsz = os.path.getsize(f"{out}/model-{lq}.gguf"), os.path.getsize(f"{out}/model-{nr}.ninfer")
    for t in L[0]:
        ls, ns = [x[t] for x in L], [x[t] for x in N]
        ratio = statistics.median([n / l for n, l in zip(ns, ls)])
        rs = [n / l for n, l in zip(ns, ls)]
        bwcol = ""
        if t.startswith("tg"):  # % of the probe: median over rounds of the round's stream / the round's probe
            lg, ng = lsz * statistics.median(ls) / 1e9, nsz * statistics.median(ns) / 1e9
            lp = statistics.median([lsz * x / 1e9 / b * 100 for x, b in zip(ls, bws)])
            npc = statistics.median([nsz * x / 1e9 / b * 100 for x, b in zip(ns, bws)])
            bwcol = f"{lg:.1f} ({lp:.0f}%) / {ng:.1f} ({npc:.0f}%)"
        bcol = ""
        if NB:
            bs = [x[t] for x in NB]
            brs = [n / b for n, b in zip(ns, bs)]
            bcol = f" {fmt(bs)} | {statistics.median(brs):.2f} ({min(brs):.2f}–{max(brs):.2f}) |"
        print(f"| {lq} ({lsz / 2**20:.0f} MiB) / {nr} ({nsz / 2**20:.0f} MiB) | {t} | {fmt(ls)} | {fmt(ns)} | "
              f"{ratio:.2f} ({min(rs):.2f}–{max(rs):.2f}) | {bwcol} |" + bcol)
print("\ntg streamed bytes/s = model file size × tg tok/s (every weight read once per token; "
      "overcounts by the embedding table when the head is untied); % of probe = median over rounds of each "
      "round's streamed bytes/s over that round's probe.")
EOF
