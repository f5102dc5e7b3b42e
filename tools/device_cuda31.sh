#!/bin/bash
# Issue 31's CUDA halves (branch cuda31) on the GPU box in ONE warm call: the bf16 KV cache, the batched decode's
# log-sum-exp against batch 1's, measured with the real Gemma-3-270M and (when stashed) the real Qwen2.5 1.5B.
#
#   tools/device_cuda31.sh bundle   here (a CUDA build in $BUILD, default build/): packs test_decoder_cuda,
#                                   bench_decoder and clauseqa (stripped) with their non-system libraries, and the
#                                   200 policy-zh-dev documents and the 83 validation questions (bench_load's KB), into
#                                   .device/cuda31/bundle.tar.xz (~22 MB); the models are not in it (stashed by the lead,
#                                   e.g. as tools/device_serve31.sh bundle/stash do: pieces in /tmp/s31stash there, the
#                                   last one may be carried as .device/serve31m/pK). Run `tools/device_serve31.sh shrink`
#                                   first so that the travelling tree stays small (unshrink before committing).
#   tools/device_cuda31.sh run      there, ONE call (carry .device/cuda31; ~6-9 minutes; 600 s cap a call):
#                                   0. the models: GEMMA (default data/models/gemma-3-270m-q4_k_m.gguf; else joined
#                                      from the serve31 pieces in /tmp/s31stash as tools/device_serve31.sh stashes
#                                      them, sha256 checked against the models.tar.sha256 the bundle copied) and
#                                      QWEN (a Qwen2 GGUF path on the box; unset or missing: the synthetic qwen2-1.5b
#                                      of tools/decoder_ref/make_synthetic_gguf.py, same shapes and speed, random
#                                      weights, when numpy is there)
#                                   1. test_decoder_cuda on Gemma and the Qwen file (CLAUSEQA_SYNTH_GGUF): every kernel
#                                      with a float and a bf16 cache against its C twin (shared-prefix packed attention
#                                      too), the rows-logits kernel, batched vs batch-1 steps with the per-row
#                                      log-sum-exp check (float and bf16 KV), bf16 vs float KV logits on fixed prompts
#                                      (test_kv_bf16_logits), packed scoring with prefix reuse vs whole prompts
#                                      (test_prefix_share)
#                                   2. bench_decoder, each model, CLAUSEQA_KV_BF16 unset then 1: batch-1 decode after
#                                      512 tokens and --concurrent 1,8,32,64 (the batched step, its rows-logits kernel)
#                                   3. (unless LOAD=0; needs data/models/answer and ssm, which the serve31 pieces hold)
#                                      tests/bench/bench_load.py, default mode, 1, 16 and 64 clients: as merged (float
#                                      KV, CUDA prefix reuse off), bf16 KV, prefix reuse on; the bundle's 200 documents
# Knobs: GEMMA, QWEN (paths), TEST_QWEN= (empty: the tests on Gemma only), TEST_S, BENCH_S, LOAD=0, LOAD_S,
# BUDGET_S (570: every step's timeout is cut to what is left of it).
# Output: $OUT/cuda31.log (all), $OUT/test_decoder_cuda.txt, $OUT/bench_*.txt, $OUT/load_*.txt.
set -u
cd "$(dirname "$0")/.."
GGUF=gemma-3-270m-q4_k_m.gguf
case "${1:-}" in
bundle)
  set -e
  B=${BUILD:-build}
  grep -q "CLAUSEQA_CUDA:BOOL=ON" "$B/CMakeCache.txt" || { echo "device_cuda31: $B is not a CUDA build"; exit 1; }
  cmake --build "$B" -j "${JOBS:-2}" --target clauseqa test_decoder_cuda bench_decoder
  T=$(mktemp -d)
  mkdir -p "$T/c/bin" "$T/c/lib"
  cp "$B/clauseqa" "$B/tests/test_decoder_cuda" "$(find "$B" -name bench_decoder -type f | head -1)" "$T/c/bin/"
  strip "$T"/c/bin/*
  for l in $(ldd "$T"/c/bin/* | awk '/=>/ {print $3}' | sort -u | grep -v -E \
      "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|cuda|libcublas|/libz\.so"); do
    cp -L "$l" "$T/c/lib/"
  done
  # bench_load's KB and questions: 200 policy-zh-dev documents (the validation questions' gold documents first) and
  # the 83 validation questions, as tools/device_serve31.sh picks them (~1.3 MB)
  SUITE=${SUITE:-../shared/eval/policy-zh-dev}
  if [ -d "$SUITE/docs" ]; then
    mkdir -p "$T/c/docs"
    python3 tools/dev_split.py --out "$T/val" policy-zh-dev > /dev/null
    cp "$T/val/policy-zh-dev/questions.jsonl" "$T/c/questions.jsonl"
    python3 - "$T/val/policy-zh-dev" "$SUITE/docs" "$T/c/docs" <<'EOF2'
import json, os, shutil, sys
val, docs, out = sys.argv[1:]
names = sorted(os.listdir(docs))
by_stem = {os.path.splitext(n)[0]: n for n in names}
pick = []
for line in open(os.path.join(val, 'questions.jsonl'), encoding='utf-8'):
    for g in json.loads(line).get('gold') or []:
        n = by_stem.get(g.get('doc'))
        if n and n not in pick:
            pick.append(n)
for n in names:
    if len(pick) >= 200:
        break
    if n not in pick:
        pick.append(n)
for n in pick[:200]:
    shutil.copy(os.path.join(docs, n), out)
print(f'{len(pick[:200])} documents')
EOF2
    rm -rf "$T/val"
  fi
  mkdir -p .device/cuda31
  [ -f .device/serve31/models.tar.sha256 ] && cp .device/serve31/models.tar.sha256 .device/cuda31/
  ( cd "$T" && tar -cf - c | xz -9 -T1 > "$OLDPWD/.device/cuda31/bundle.tar.xz" )
  rm -rf "$T"
  git rev-parse HEAD > .device/cuda31/commit
  ls -l .device/cuda31
  echo "device_cuda31: tree $(( $(bash tools/device_model.sh tree) / 1000 )) kB + bundle; run with .device/cuda31 carried"
  ;;
run)
  T0=$(date +%s)
  OUT=${OUT:-/tmp/c31_out}
  W=${WORK:-/tmp/c31w}
  mkdir -p "$OUT" "$W"
  exec > >(tee "$OUT/cuda31.log") 2>&1
  log() { echo "[device_cuda31 $(( $(date +%s) - T0 )) s] $*"; }
  # the call's 600 s: each step's timeout is its own (TEST_S, BENCH_S, LOAD_S...) or what is left of BUDGET_S
  cap() { local left=$(( ${BUDGET_S:-570} - ($(date +%s) - T0) )); [ "$left" -lt "$1" ] && echo $(( left > 5 ? left : 5 )) || echo "$1"; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat .device/cuda31/commit 2>/dev/null)"
  rm -rf "$W/c" && tar -C "$W" -xJf .device/cuda31/bundle.tar.xz || { log "no bundle"; exit 1; }
  export LD_LIBRARY_PATH=$W/c/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
  for b in "$W"/c/bin/*; do ldd "$b" | grep "not found" | sed "s|^|$(basename "$b"): |"; done
  # 0. the models
  GEMMA=${GEMMA:-data/models/$GGUF}
  mkdir -p /tmp/s31stash && cp .device/serve31m/p*/models.tar.part* /tmp/s31stash/ 2>/dev/null # a carried last piece
  if [ ! -f "$GEMMA" ] && ls /tmp/s31stash/models.tar.part* > /dev/null 2>&1; then
    log "joining the serve31 pieces in /tmp/s31stash"
    cat $(ls /tmp/s31stash/models.tar.part* | sort) > "$W/models.tar"
    sum=$(cat .device/cuda31/models.tar.sha256 .device/serve31/models.tar.sha256 2>/dev/null | head -1)
    if [ -n "$sum" ]; then
      got=$(sha256sum "$W/models.tar" | awk '{print $1}')
      [ "$got" = "$sum" ] || { log "models.tar sha256 $got differs"; exit 1; }
    fi
    tar -C data/models -xf "$W/models.tar" && rm -f "$W/models.tar"
  fi
  [ -f "$GEMMA" ] || { log "no Gemma model at $GEMMA (stash it, or set GEMMA)"; exit 1; }
  got=$(sha256sum "$GEMMA" | awk '{print $1}')
  [ "$got" = "$(awk '{print $1}' data/models/$GGUF.sha256)" ] || log "warning: $GEMMA sha256 $got is not the pinned one"
  QWEN=${QWEN:-}
  if [ -z "$QWEN" ] || [ ! -f "$QWEN" ]; then
    QWEN=$W/synq15.gguf
    [ -f "$QWEN" ] || python3 tools/decoder_ref/make_synthetic_gguf.py qwen2-1.5b "$QWEN" > /dev/null 2>&1 || QWEN=
    log "Qwen: ${QWEN:-none} (synthetic qwen2-1.5b: random weights, the real shapes)"
  fi
  export CLAUSEQA_SOURCE_DIR=$PWD CLAUSEQA_MODELS=$PWD/data/models
  [ "$GEMMA" = "data/models/$GGUF" ] || ln -sf "$(readlink -f "$GEMMA")" "data/models/$GGUF"
  # 1. the tests
  log "1. test_decoder_cuda (Gemma${QWEN:+ and $QWEN})"
  CLAUSEQA_SYNTH_GGUF=${TEST_QWEN-$QWEN} timeout $(cap ${TEST_S:-240}) "$W/c/bin/test_decoder_cuda" > "$OUT/test_decoder_cuda.txt" 2>&1
  rc=$?
  grep -v -E "^  decode at position [0-9]+:" "$OUT/test_decoder_cuda.txt" | grep -E \
    "OK|FAIL|PASS|SKIP|ERROR|bf16|log-sum-exp|rows|batched|nmse|NMSE" | tail -120
  echo "test_decoder_cuda rc $rc"
  # 2. decode speed, float then bf16 KV
  for model in "$GEMMA" $QWEN; do
    name=$(basename "$model" .gguf)
    for kv in 0 1; do # the batched steps' logits as batch 1's (CLAUSEQA_BATCH_LOGITS=rows) in both runs; the GEMM's
      log "2. bench_decoder $name, CLAUSEQA_KV_BF16=$kv, CLAUSEQA_BATCH_LOGITS=rows" # speed: the float run of step 3
      CLAUSEQA_BATCH_LOGITS=rows CLAUSEQA_KV_BF16=$kv timeout $(cap ${BENCH_S:-45}) "$W/c/bin/bench_decoder" --model "$model" --device cuda --prompt 512 \
        --decode 128 --runs 3 --perplexity 0 --concurrent 1,8,32,64 > "$OUT/bench_${name}_kv$kv.txt" 2>&1
      tail -25 "$OUT/bench_${name}_kv$kv.txt"
    done
  done
  # 3. the server under load (default mode), float then bf16 KV
  DOCS=${DOCS:-$W/c/docs} QS=${QS:-$W/c/questions.jsonl}
  if [ "${LOAD:-auto}" != 0 ] && [ -d "$DOCS" ] && [ -f "$QS" ] && [ -d data/models/answer ] && [ -d data/models/ssm ]; then
    to=${FIRST_LOAD_S:-150}
    for v in base:0:0 kv16:1:0 share:0:1; do # name : CLAUSEQA_KV_BF16 : CLAUSEQA_PREFIX_REUSE
      IFS=: read -r name kv share <<< "$v"
      log "3. bench_load default mode, 1/16/64 clients, $name (CLAUSEQA_KV_BF16=$kv CLAUSEQA_PREFIX_REUSE=$share)"
      CLAUSEQA_KV_BF16=$kv CLAUSEQA_PREFIX_REUSE=$share timeout $(cap $to) python3 tests/bench/bench_load.py \
        --binary "$W/c/bin/clauseqa" --levels 1,16,64 --seconds ${LOAD_S:-6} --answers generate --docs-dir "$DOCS" \
        --questions "$QS" --data "$W/kb" -- --device cuda --max-asks 64 > "$OUT/load_$name.txt" 2>&1
      cat "$OUT/load_$name.txt"
      to=${LOAD_TIMEOUT_S:-80}
    done
  else
    log "3. bench_load skipped (needs the bundle's documents in $DOCS and questions $QS, data/models/answer and ssm)"
  fi
  log "end"
  ;;
*)
  sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
