#!/bin/bash
# Issue 26 item 1 on the GPU box: the Qwen2 path of the CUDA decoder checked and timed.
#
#   tools/device_qwen.sh bundle   here (CUDA build in $BUILD, default build/): builds test_decoder_cuda,
#                                 test_decoder_qwen2 and bench_decoder, packs them with their non-system libraries
#                                 and the gguf wheel (transformers reads GGUF through it) into .device/qwen/qwen.tar.xz
#                                 (a few MB). With REAL=1 also cuts the real 1.5B GGUF into pieces under
#                                 .device/qgguf/pN (PIECE_BYTES, default 27000000: a call carries 64 MiB with the
#                                 working tree, ~38 MB of tracked files), one piece to carry per call.
#   tools/device_qwen.sh run      there, ONE call (~6-8 minutes), carry .device/qwen: makes two synthetic qwen2 GGUFs
#                                 (tools/decoder_ref/make_synthetic_gguf.py qwen2: 3 layers, GQA 4:2, head_dim 64,
#                                 F32/F16/BF16/Q8_0/Q5_0; qwen2-1.5b: the 1.5B's shapes in Q8_0, whose bf16 upload
#                                 makes the CUDA speeds the real model's), then
#                                 1. test_decoder_qwen2 (the CPU path, as here)
#                                 2. test_decoder_cuda with CLAUSEQA_SYNTH_GGUF = the small synthetic qwen2 (every
#                                    kernel test, SwiGLU's included; the whole forward, packed scoring, batched and
#                                    concurrent decode and adapters, CUDA against the CPU)
#                                 3. transformers (AutoModelForCausalLM, gguf_file, float32, on the GPU) on 4 prompts
#                                    of the small synthetic qwen2 (tools/decoder_ref/qwen2_hf_logits.py), and the C
#                                    decoder against it on CUDA (bf16 thresholds) and on the CPU (exact, 0.02)
#                                 4. bench_decoder on the 1.5B-shaped file: prefill of 512 tokens, decode after them
#                                 With the real model's pieces stashed by earlier calls (REAL=1 bundle; each earlier
#                                 call: `tools/device_qwen.sh stash` carrying .device/qgguf/pN), 2-4 run on the real
#                                 1.5B too: transformers on the fixed zh/en/ChatML prompts of
#                                 tests/data/decoder/qwen2_logits_ref.json, and the bench on the real file.
#   tools/device_qwen.sh stash    there: stashes the real model's pieces carried in this call (/tmp/gguf)
# Output: $OUT/qwen_device.log (everything, cmocka's test names and outcomes included), $OUT/test_decoder_*.txt
# (steps 1-2 whole), $OUT/bench.txt, $OUT/*_hf.json (the transformers logits).
set -u
cd "$(dirname "$0")/.."
REAL_NAME=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
case "${1:-}" in
bundle)
  set -e
  B=${BUILD:-build}
  cmake --build "$B" -j "${JOBS:-2}" --target test_decoder_cuda test_decoder_qwen2 bench_decoder
  grep -q "CLAUSEQA_CUDA:BOOL=ON" "$B/CMakeCache.txt" || { echo "device_qwen: $B is not a CUDA build (-DCLAUSEQA_CUDA=ON)"; exit 1; }
  T=$(mktemp -d)
  mkdir -p "$T/q/bin" "$T/q/lib" "$T/q/whl"
  cp "$B/tests/test_decoder_cuda" "$B/tests/test_decoder_qwen2" "$(find "$B" -name bench_decoder -type f | head -1)" "$T/q/bin/"
  strip "$T"/q/bin/*
  for l in $(ldd "$T"/q/bin/* | awk '/=>/ {print $3}' | sort -u | grep -v -E \
      "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|cuda|libcublas|/libz\.so"); do
    cp -L "$l" "$T/q/lib/"
  done
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$T/q/whl" gguf==0.19.0
  mkdir -p .device/qwen
  tar -C "$T" -cJf .device/qwen/qwen.tar.xz q
  rm -rf "$T"
  ls -l .device/qwen
  if [ "${REAL:-0}" = 1 ]; then
    MODEL_NAME=$REAL_NAME GGUF_DIR=.device/qgguf PIECE_BYTES=${PIECE_BYTES:-27000000} tools/device_model.sh split
  fi
  ;;
stash)
  MODEL_NAME=$REAL_NAME GGUF_DIR=.device/qgguf tools/device_model.sh stash
  ;;
run)
  T0=$(date +%s)
  OUT=${OUT:-/tmp/qwen_out}
  W=${WORK:-/tmp/qw}
  mkdir -p "$OUT" "$W"
  exec > >(tee "$OUT/qwen_device.log") 2>&1
  log() { echo "[device_qwen $(( $(date +%s) - T0 )) s] $*"; }
  export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1 TOKENIZERS_PARALLELISM=false
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  git log -1 --format="commit %h %s" 2>/dev/null || true
  rm -rf "$W/q" && tar -C "$W" -xJf .device/qwen/qwen.tar.xz || { log "no bundle: run tools/device_qwen.sh bundle here"; exit 1; }
  export LD_LIBRARY_PATH=$W/q/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
  for b in "$W"/q/bin/*; do ldd "$b" | grep "not found" | sed "s|^|$(basename "$b"): |"; done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$W/site" "$W"/q/whl/*.whl \
    && export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
  python3 -c "import torch, transformers, gguf; print('torch', torch.__version__, 'transformers', transformers.__version__, 'gguf ok')"
  export CLAUSEQA_SOURCE_DIR=$PWD
  python3 tools/decoder_ref/make_synthetic_gguf.py qwen2 "$W/synq.gguf" && log "synthetic qwen2 made"
  python3 tools/decoder_ref/make_synthetic_gguf.py qwen2-1.5b "$W/syn15.gguf" && log "1.5B-shaped qwen2 made ($(stat -c %s "$W/syn15.gguf") bytes)"
  REAL=""
  if compgen -G "/tmp/gguf/$REAL_NAME.part*" > /dev/null || compgen -G ".device/qgguf/p*/$REAL_NAME.part*" > /dev/null; then
    MODEL_NAME=$REAL_NAME GGUF_DIR=.device/qgguf tools/device_model.sh join "$W/$REAL_NAME" && REAL=$W/$REAL_NAME
  fi
  # a test's whole output goes to $OUT/NAME.txt; the log keeps cmocka's lines (test names, outcomes, the failing
  # assert's file:line) and every figure but the per-position decode lines ("decode at position N")
  run_test() {
    local name=$1; shift
    "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
    grep -v -E "^  decode at position [0-9]+:" "$OUT/$name.txt"; echo "rc $rc (whole output: $name.txt)"
  }
  log "1. test_decoder_qwen2 (CPU)"
  run_test test_decoder_qwen2 "$W/q/bin/test_decoder_qwen2"
  log "2. test_decoder_cuda on the synthetic qwen2${REAL:+ and the real 1.5B}"
  run_test test_decoder_cuda env CLAUSEQA_SYNTH_GGUF="$W/synq.gguf${REAL:+:$REAL}" timeout 300 "$W/q/bin/test_decoder_cuda"
  log "3. transformers on the GPU against the C decoder"
  for m in synq ${REAL:+real}; do
    if [ $m = synq ]; then f=$W/synq.gguf; ids=(--random 40); else f=$REAL; ids=(--ids-from tests/data/decoder/qwen2_logits_ref.json); fi
    timeout 240 python3 tools/decoder_ref/qwen2_hf_logits.py "$f" "$OUT/${m}_hf.json" "${ids[@]}" 2>&1 | grep -v -i warn | tail -8
    for dev in cuda cpu; do
      CLAUSEQA_QWEN2_MODEL=$f CLAUSEQA_QWEN2_REF=$OUT/${m}_hf.json CLAUSEQA_QWEN2_DEVICE=$dev \
        "$W/q/bin/test_decoder_qwen2" 2>&1 | grep -E "tokens:|NMSE|^\[|Failure|error" ; echo "$m $dev rc ${PIPESTATUS[0]}"
    done
  done
  log "4. bench_decoder (decode after 512 prompt tokens, prefill of 512)"
  for f in "$W/syn15.gguf" ${REAL:+"$REAL"}; do
    echo "== $(basename "$f")" | tee -a "$OUT/bench.txt"
    timeout 200 "$W/q/bin/bench_decoder" --model "$f" --device cuda --prompt 512 --decode 128 --runs 3 --perplexity 0 \
      2>&1 | tee -a "$OUT/bench.txt" | tail -30
  done
  log "end"
  ;;
*)
  sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
