#!/bin/bash
# Issue 31 on the GPU box in one warm window: reranks batched across asks (slices), measured against the binary of
# main before it, with the real Gemma-3-270M, its trained adapter and the SSM encoder.
#
#   tools/device_serve31.sh shrink     here, before the calls: takes the three committed safetensors (51 MB) out of the
#                                      index and lists them in .git/info/exclude, so that the travelling tree is ~9 MB
#                                      (a call carries 64 MiB with it); `unshrink` puts them back (run it before any
#                                      commit). The weights travel in the stash pieces instead.
#   tools/device_serve31.sh bundle     here (a CUDA build in $BUILD, default build/; BASE_BIN: main's clauseqa to compare
#                                      with, default /tmp/s31/basesrc/build/clauseqa): packs clauseqa, the base clauseqa,
#                                      test_decoder_cuda and bench_decoder (stripped) with their non-system libraries,
#                                      200 policy-zh-dev documents (the validation questions' gold documents first) and
#                                      its 83 validation questions into .device/serve31/bundle.tar.xz; and the model
#                                      (GGUF + data/models/answer + data/models/ssm, a tar) in pieces of PIECE_BYTES
#                                      (default 55000000) under .device/serve31m/pN
#   tools/device_serve31.sh stash      there, one call per piece but the last (carry .device/serve31m/pK): keeps the
#                                      carried piece in /tmp/s31stash
#   tools/device_serve31.sh run        there, ONE call (carry .device/serve31 and the last piece; ~8 minutes): joins the
#                                      model (sha256 checked), then
#                                      1. test_decoder_cuda on the real model (every kernel; batched decode vs batch 1 with
#                                         its log-sum-exp gap; concurrent scoring calls vs alone)
#                                      2. bench_decoder: batch-1 decode after 512 tokens (greedy on the GPU, and with the
#                                         top-64 candidates), prefill of 512
#                                      3. tests/bench/bench_load.py at 1 and 64 clients, default mode and router,bm25, the
#                                         new binary and main's, on data/demo + 200 policy-zh-dev documents
# Output: $OUT/serve31.log (all), $OUT/test_decoder_cuda.txt, $OUT/bench_decoder.txt, $OUT/load_*.txt.
set -u
cd "$(dirname "$0")/.."
GGUF=gemma-3-270m-q4_k_m.gguf
BIG="data/models/ssm/ssm.safetensors data/models/answer/adapter.safetensors data/models/answer-qwen2.5-coder-1.5b-instruct-q4_k_m/adapter.safetensors"
case "${1:-}" in
shrink)
  git rm -q --cached $BIG && for f in $BIG; do grep -qxF "$f" .git/info/exclude 2>/dev/null || echo "$f" >> .git/info/exclude; done
  bash tools/device_model.sh tree
  ;;
unshrink)
  git reset -q -- $BIG
  for f in $BIG; do grep -vxF "$f" .git/info/exclude > .git/info/exclude.tmp; mv .git/info/exclude.tmp .git/info/exclude; done
  git status --short | head
  ;;
bundle)
  set -e
  B=${BUILD:-build}
  BASE_BIN=${BASE_BIN:-/tmp/s31/basesrc/build/clauseqa}
  grep -q "CLAUSEQA_CUDA:BOOL=ON" "$B/CMakeCache.txt" || { echo "device_serve31: $B is not a CUDA build"; exit 1; }
  cmake --build "$B" -j "${JOBS:-2}" --target clauseqa test_decoder_cuda bench_decoder
  [ -x "$BASE_BIN" ] || { echo "device_serve31: no base binary $BASE_BIN (main's clauseqa, a CUDA build)"; exit 1; }
  T=$(mktemp -d)
  mkdir -p "$T/s/bin" "$T/s/lib" "$T/s/docs"
  cp "$B/clauseqa" "$B/tests/test_decoder_cuda" "$(find "$B" -name bench_decoder -type f | head -1)" "$T/s/bin/"
  cp "$BASE_BIN" "$T/s/bin/clauseqa_base"
  strip "$T"/s/bin/*
  for l in $(ldd "$T"/s/bin/* | awk '/=>/ {print $3}' | sort -u | grep -v -E \
      "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|cuda|libcublas|/libz\.so"); do
    cp -L "$l" "$T/s/lib/"
  done
  SUITE=${SUITE:-../shared/eval/policy-zh-dev}
  python3 tools/dev_split.py --out "$T/val" policy-zh-dev > /dev/null
  cp "$T/val/policy-zh-dev/questions.jsonl" "$T/s/questions.jsonl"
  python3 tools/load_kb_pick.py "$T/val/policy-zh-dev" "$SUITE/docs" "$T/s/docs"
  mkdir -p .device/serve31
  # the two clauseqa binaries side by side in one xz stream of a 64 MiB dictionary: their 40 MB of data (the PDF
  # export's embedded font) are the same bytes, stored once (~46 MB in all instead of 73)
  ( cd "$T" && tar -cf - s/bin/clauseqa s/bin/clauseqa_base s/bin/bench_decoder s/bin/test_decoder_cuda s/lib s/docs \
      s/questions.jsonl | xz -9 -T1 > "$OLDPWD/.device/serve31/bundle.tar.xz" )
  rm -rf "$T"
  ls -l .device/serve31
  # the weights: one tar (GGUF, adapter, SSM encoder) in pieces
  rm -rf .device/serve31m && mkdir -p .device/serve31m/tmp
  tar -C data/models -cf .device/serve31m/tmp/models.tar $GGUF answer ssm
  sha256sum .device/serve31m/tmp/models.tar | awk '{print $1}' > .device/serve31/models.tar.sha256
  split -b "${PIECE_BYTES:-55000000}" -d -a 2 --numeric-suffixes=1 .device/serve31m/tmp/models.tar .device/serve31m/tmp/models.tar.part
  n=$(ls .device/serve31m/tmp/models.tar.part* | wc -l)
  i=0
  for f in .device/serve31m/tmp/models.tar.part*; do
    i=$((i + 1)); mkdir -p .device/serve31m/p$i; mv "$f" .device/serve31m/p$i/models.tar.part$(printf %02d $i)of$(printf %02d $n)
  done
  rm -rf .device/serve31m/tmp
  du -sh .device/serve31m/p* .device/serve31
  echo "device_serve31: tree $(( $(bash tools/device_model.sh tree) / 1000 )) kB; $n pieces: stash p1..p$((n - 1)) one a call," \
       "then run with p$n and .device/serve31 carried"
  ;;
stash)
  mkdir -p /tmp/s31stash && cp .device/serve31m/p*/models.tar.part* /tmp/s31stash/ 2>/dev/null
  ls -l /tmp/s31stash
  ;;
run)
  T0=$(date +%s)
  OUT=${OUT:-/tmp/s31_out}
  W=${WORK:-/tmp/s31w}
  mkdir -p "$OUT" "$W" /tmp/s31stash
  exec > >(tee "$OUT/serve31.log") 2>&1
  log() { echo "[device_serve31 $(( $(date +%s) - T0 )) s] $*"; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc
  cp .device/serve31m/p*/models.tar.part* /tmp/s31stash/ 2>/dev/null
  parts=$(ls /tmp/s31stash/models.tar.part* 2>/dev/null | wc -l)
  want_n=$(ls /tmp/s31stash/models.tar.part* 2>/dev/null | head -1 | sed 's/.*of//')
  [ -n "$want_n" ] && [ "$parts" = "$((10#$want_n))" ] || { log "pieces: $parts of ${want_n:-?}: carry the missing ones"; ls /tmp/s31stash; exit 1; }
  cat $(ls /tmp/s31stash/models.tar.part* | sort) > "$W/models.tar"
  got=$(sha256sum "$W/models.tar" | awk '{print $1}')
  [ "$got" = "$(cat .device/serve31/models.tar.sha256)" ] || { log "models.tar sha256 $got differs"; exit 1; }
  tar -C data/models -xf "$W/models.tar" && rm -f "$W/models.tar"
  got=$(sha256sum data/models/$GGUF | awk '{print $1}')
  [ "$got" = "$(awk '{print $1}' data/models/$GGUF.sha256)" ] || { log "$GGUF sha256 differs"; exit 1; }
  ls -l data/models data/models/answer data/models/ssm
  rm -rf "$W/s" && tar -C "$W" -xJf .device/serve31/bundle.tar.xz || { log "no bundle"; exit 1; }
  export LD_LIBRARY_PATH=$W/s/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
  for b in "$W"/s/bin/*; do ldd "$b" | grep "not found" | sed "s|^|$(basename "$b"): |"; done
  export CLAUSEQA_SOURCE_DIR=$PWD CLAUSEQA_MODELS=$PWD/data/models
  log "1. test_decoder_cuda (real model)"
  timeout ${TEST_S:-150} "$W/s/bin/test_decoder_cuda" > "$OUT/test_decoder_cuda.txt" 2>&1; rc=$?
  grep -v -E "^  decode at position [0-9]+:" "$OUT/test_decoder_cuda.txt" | tail -60; echo "rc $rc"
  log "2. bench_decoder (batch 1)"
  timeout 60 "$W/s/bin/bench_decoder" --model data/models/$GGUF --device cuda --adapter data/models/answer --prompt 512 \
    --decode 128 --runs 3 --perplexity 0 > "$OUT/bench_decoder.txt" 2>&1
  tail -30 "$OUT/bench_decoder.txt"
  log "3. bench_load (1 and 64 clients; ${LOAD_S:-6} s a level)"
  D=$W/kb
  to=${FIRST_LOAD_S:-150} # the first run ingests the KB (data/demo + 200 documents); later ones reuse it
  for bin in clauseqa clauseqa_base; do
    for mode in default router,bm25; do
      m=(); [ $mode = default ] || m=(--mode $mode)
      log "   $bin, mode $mode"
      timeout $to python3 tests/bench/bench_load.py --binary "$W/s/bin/$bin" --levels 1,64 --seconds ${LOAD_S:-6} \
        --answers generate --docs-dir "$W/s/docs" --questions "$W/s/questions.jsonl" --data "$D" "${m[@]}" \
        -- --device cuda --max-asks 64 > "$OUT/load_${bin}_${mode/,/_}.txt" 2>&1
      cat "$OUT/load_${bin}_${mode/,/_}.txt"
      to=${LOAD_TIMEOUT_S:-60}
    done
  done
  log "end"
  ;;
*)
  sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
