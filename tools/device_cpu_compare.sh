#!/bin/bash
# Issue 15's CPU comparison on the GPU box (its Xeon), where nothing can be built from the network: clauseqa's CPU
# decoder against llama.cpp on 2 pinned cores, same GGUF, through tests/bench/cpu_vs_llamacpp.py --llama-bench.
# The bundle .device/x15/x15.tar.xz is made here (not committed; llama.cpp's code never enters the repository):
#   llama.cpp (the llama-cpp-python sdist's vendor/llama.cpp, in /tmp): cmake -DBUILD_SHARED_LIBS=ON
#     -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF → dl/ (llama-bench, every
#     lib*.so*: it loads the CPU variant the running CPU reports); a static AVX2-only llama-bench → avx2/
#   clauseqa: -DCLAUSEQA_CUDA=OFF Release, target bench_decoder → bench_decoder; its non-system libraries → lib/
# There, with the model stashed by earlier calls (tools/device_model.sh stash):
#   tools/device_model.sh stash; bash tools/device_cpu_compare.sh      → $OUT/x15.txt, lscpu.txt, llama_variant.txt
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/x15out}; mkdir -p $OUT
X=/tmp/x15; rm -rf $X; mkdir -p $X && tar -C $X -xJf .device/x15/x15.tar.xz || { echo "x15: unpack failed"; exit 1; }
[ -f /tmp/model.gguf ] || tools/device_model.sh join /tmp/model.gguf > $OUT/join.txt 2>&1 || { cat $OUT/join.txt; exit 1; }
lscpu > $OUT/lscpu.txt 2>&1; nproc >> $OUT/lscpu.txt; uptime >> $OUT/lscpu.txt
export LD_LIBRARY_PATH=$X/lib:$X/dl
mkdir -p $X/build/tests && cp $X/bench_decoder $X/build/tests/
# which CPU variant llama.cpp loads here; a variant that dies on this (virtual) CPU (SIGILL: cpuid reports more
# than the guest runs) is removed and the next best one tried, and that is said in $OUT
for try in 1 2 3 4 5; do
  $X/dl/llama-bench -m /tmp/model.gguf -t 2 -r 1 -p 16 -n 0 > $OUT/llama_variant.$try.txt 2>&1; rc=$?
  v=$(grep -o "libggml-cpu-[a-z0-9_]*\.so" $OUT/llama_variant.$try.txt | head -1)
  echo "llama.cpp variant $v: rc $rc" | tee -a $OUT/llama_variant.txt
  [ $rc = 0 ] && break
  [ -n "$v" ] && rm -f $X/dl/$v || break
done
ROUNDS=${ROUNDS:-3}
for cores in "${CORES:-2,3}"; do
  python3 tests/bench/cpu_vs_llamacpp.py --rounds $ROUNDS --cores $cores --threads 2 --build $X/build \
    --model /tmp/model.gguf --llama-bench native=$X/dl/llama-bench --llama-bench avx2=$X/avx2/llama-bench \
    2>&1 | tee -a $OUT/x15.txt | tail -12
done
