#!/bin/bash
# Issue 31's CUDA halves (branch cuda31) on the GPU box in ONE warm window that the lead can launch blind: the four
# gates (CLAUSEQA_KV_BF16=1, CLAUSEQA_PREFIX_REUSE=1, CLAUSEQA_BATCH_LOGITS=rows, CLAUSEQA_BATCH_PLANES=3) tested and
# measured against the product as it is, with the real Gemma-3-270M and (when its pieces are stashed) the real
# Qwen2.5-Coder 1.5B.
#
#   tools/device_cuda31.sh bundle   HERE (a CUDA build in $BUILD, default build/, of a committed tree): writes
#                                   .device/cuda31/ (~48 MB, carried by the run call): bundle.tar.xz (clauseqa,
#                                   test_decoder_cuda, bench_decoder stripped, their non-system libraries, the source
#                                   tree of HEAD without its safetensors, bench_load's 200 policy-zh-dev documents and
#                                   83 validation questions), run.sh (this script: the lead's checkout need not hold
#                                   it), commit, models.tar.sha256, CALLS.txt (the exact calls); and the weights that
#                                   the Qwen pieces lack, one tar (Gemma GGUF, data/models/answer, ssm and the Qwen
#                                   adapter) in 55 MB pieces under .device/cuda31m/pN (one stash call each)
#   (calls)                         THERE, back to back (the machine goes back 30 s after a call): one stash call per
#                                   piece (inline commands in CALLS.txt: cuda31m pieces to /tmp/c31stash, the lead's
#                                   lora26 Qwen pieces to /tmp/gguf), then `bash .device/cuda31/run.sh run`
#   run.sh run                      THERE, one call, BUDGET_S (540) in all; every step under `timeout -k 5` cut to
#                                   its slot, so a hang still returns what came before it:
#                                   0. the bundle unpacked in /tmp/c31w; the weights joined (sha256 checked); no real
#                                      Qwen: the synthetic qwen2 (tests) and qwen2-1.5b (bench; random weights, the
#                                      real shapes and speed) made in the background; the load's KB ingested in the
#                                      background (data/demo + the 200 documents, as bench_load.py does)
#                                   1. test_decoder_cuda on Gemma, then on the Qwen file (real, else synthetic)
#                                   2. bench_decoder on each: batch 1 after a 512-token prompt (greedy and full logits),
#                                      KV float then bf16 (BATCH1=0 leaves it out); --concurrent 1,8,32,64 for each
#                                      CONC variant KV:LOGITS:PLANES (default "0:gemm:1 0:rows:1 1:rows:1 0:gemm:3
#                                      0:rows:3": the GEMM's logits, CLAUSEQA_BATCH_LOGITS=rows, rows + bf16 KV, and
#                                      both logits with CLAUSEQA_BATCH_PLANES=3)
#                                   3. tests/bench/bench_load.py, 1/16/64 clients, the product's GPU reader (the real
#                                      Qwen when stashed, else Gemma): default mode and router,bm25, gates off then all
#                                      three on; with time left, the default mode with each gate alone
#                                   4. the verdict (tools/device_cuda31_verdict.py): which gate may become a default
# Output ($OUT; 8 files come back at most): cuda31.log (all, as it ran), tests.txt, bench.txt, load.txt (the steps'
# whole outputs, appended as they run), verdict.txt.
# Knobs: BUDGET_S, LOAD_S (5 s a level), LEVELS (1,16,64), QWEN (a Qwen2 GGUF path there; the real 1.5B's, sha256
# checked, also reads in the load), GATES_ALONE=0, SKIP="tests bench load" (steps 1, 2 and/or 3 left out; without
# the load no KB is ingested: SKIP="bench load" is the tests alone, ~2-3 minutes), BATCH1=0, CONC (above).
# The planes call (issue 31's log-sum-exp, the tests and the planes' cost, ~7 minutes):
#   SKIP=load BATCH1=0 CONC="0:gemm:1 0:gemm:3 0:rows:1 0:rows:3" bash .device/cuda31/run.sh run
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -f "$HERE/bundle.tar.xz" ] && [ "$(basename "$HERE")" = cuda31 ]; then # run.sh in .device/cuda31 of a checkout
  cd "$HERE/../.."
else
  cd "$HERE/.."
fi
GGUF=gemma-3-270m-q4_k_m.gguf
QGGUF=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
QADAPTER=answer-qwen2.5-coder-1.5b-instruct-q4_k_m
SAFE="data/models/ssm/ssm.safetensors data/models/answer/adapter.safetensors data/models/$QADAPTER/adapter.safetensors"
write_calls() { # .device/cuda31/CALLS.txt: the exact calls, in order
n=$(ls -d .device/cuda31m/p* 2>/dev/null | wc -l)
{
  echo "# device_cuda31 calls (commit $(git rev-parse --short HEAD)). In the lead's checkout first:"
  echo "#   cp -r $PWD/.device/cuda31 .device/ && cp -al $PWD/.device/cuda31m .device/"
  echo "#   and the travelling tree under ~10 MB for the calls (a call carries 64 MiB in all): the committed safetensors"
  echo "#   out of the index meanwhile (the files stay on disk), and back after the window:"
  echo "#   F=\"$SAFE\""
  echo "#   shrink:   git rm -q --cached \$F && printf '%s\\n' \$F >> .git/info/exclude"
  echo "#   unshrink: git reset -q -- \$F && grep -vxF -f <(printf '%s\\n' \$F) .git/info/exclude > /tmp/ex && cp /tmp/ex .git/info/exclude"
  echo "# Then back to back (the machine goes back 30 s after a call; a gap loses the stash: start over)."
  for i in $(seq 1 "$n"); do
    echo "run carry=[\".device/cuda31m/p$i\"] command: mkdir -p /tmp/c31stash && cp .device/cuda31m/p$i/* /tmp/c31stash/ && ls /tmp/c31stash | wc -l"
  done
  echo "# the real Qwen 1.5B (optional; without it the Qwen numbers are the synthetic 1.5B's): the lead's 21 pieces"
  for i in $(seq 1 21); do
    echo "run carry=[\".device/lora26/gguf/p$i\"] command: mkdir -p /tmp/gguf && cp .device/lora26/gguf/p$i/* /tmp/gguf/ && ls /tmp/gguf | wc -l"
  done
  echo "# the run (~9.5 minutes; the bundle is ~48 MB, so no piece rides with it)"
  echo "run timeout_s=600 carry=[\".device/cuda31\"] command: bash .device/cuda31/run.sh run"
  echo "# or the tests alone (test_decoder_cuda on Gemma and the Qwen file, ~3 minutes; issue 31's lse diagnostics):"
  echo "run timeout_s=360 carry=[\".device/cuda31\"] command: SKIP=\"bench load\" bash .device/cuda31/run.sh run"
  echo "# or the planes call (issue 31's log-sum-exp with CLAUSEQA_BATCH_PLANES=3: the tests, then the batched step with"
  echo "# 1 and 3 planes, GEMM and rows logits, on both models; no load; ~7 minutes):"
  echo "run timeout_s=600 carry=[\".device/cuda31\"] command: SKIP=load BATCH1=0 CONC=\"0:gemm:1 0:gemm:3 0:rows:1 0:rows:3\" bash .device/cuda31/run.sh run"
} > .device/cuda31/CALLS.txt
}
case "${1:-}" in
calls)
  write_calls; cat .device/cuda31/CALLS.txt
  ;;
bundle)
  set -e
  B=${BUILD:-build}
  grep -q "CLAUSEQA_CUDA:BOOL=ON" "$B/CMakeCache.txt" || { echo "device_cuda31: $B is not a CUDA build"; exit 1; }
  [ -z "$(git status --porcelain --untracked-files=no)" ] || echo "device_cuda31: warning: uncommitted changes (the bundle's source is HEAD)"
  cmake --build "$B" -j "${JOBS:-2}" --target clauseqa test_decoder_cuda bench_decoder
  T=$(mktemp -d)
  mkdir -p "$T/c/bin" "$T/c/lib" "$T/c/docs"
  cp "$B/clauseqa" "$B/tests/test_decoder_cuda" "$(find "$B" -name bench_decoder -type f | head -1)" "$T/c/bin/"
  strip "$T"/c/bin/*
  for l in $(ldd "$T"/c/bin/* | awk '/=>/ {print $3}' | sort -u | grep -v -E \
      "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|/libcuda|/libcudart|/libcublas|/libz\.so"); do
    cp -L "$l" "$T/c/lib/"
  done
  # the source tree of HEAD (bench_load.py, demo_kb.sh, data/demo, tests/data, the sha256 files; no weights, nor the
  # SSM's test weights, which nothing run there reads: 1 MB that keeps the bundle under 57 MB with libicudata)
  git archive --format=tar HEAD -- . ':(exclude)data/models/*.safetensors' ':(exclude)data/models/**/*.safetensors' \
    ':(exclude)tests/data/ssm/**/*.safetensors' > "$T/c/src.tar"
  # bench_load's KB and questions: 200 policy-zh-dev documents (the validation questions' gold documents first) and
  # the 83 validation questions, as tools/device_serve31.sh picks them (~1.3 MB)
  SUITE=${SUITE:-../shared/eval/policy-zh-dev}
  python3 tools/dev_split.py --out "$T/val" policy-zh-dev > /dev/null
  cp "$T/val/policy-zh-dev/questions.jsonl" "$T/c/questions.jsonl"
  python3 tools/load_kb_pick.py "$T/val/policy-zh-dev" "$SUITE/docs" "$T/c/docs"
  rm -rf "$T/val" .device/cuda31/bundle.tar.xz .device/cuda31/run.sh .device/cuda31/verdict.py
  mkdir -p .device/cuda31
  ( cd "$T" && tar -cf - c | xz -9 -T1 > "$OLDPWD/.device/cuda31/bundle.tar.xz" )
  rm -rf "$T"
  cp "$0" .device/cuda31/run.sh
  cp tools/device_cuda31_verdict.py .device/cuda31/verdict.py
  git rev-parse HEAD > .device/cuda31/commit
  # the weights the lead's Qwen pieces (.device/lora26/gguf) lack: one tar in pieces
  if [ "${MODELS:-1}" = 1 ]; then
    got=$(sha256sum data/models/$GGUF | awk '{print $1}')
    [ "$got" = "$(awk '{print $1}' data/models/$GGUF.sha256)" ] || { echo "device_cuda31: $GGUF sha256 differs"; exit 1; }
    rm -rf .device/cuda31m && mkdir -p .device/cuda31m/tmp
    tar -C data/models -cf .device/cuda31m/tmp/models.tar $GGUF answer ssm $QADAPTER
    sha256sum .device/cuda31m/tmp/models.tar | awk '{print $1}' > .device/cuda31/models.tar.sha256
    split -b "${PIECE_BYTES:-55000000}" -d -a 2 --numeric-suffixes=1 .device/cuda31m/tmp/models.tar .device/cuda31m/tmp/models.tar.part
    n=$(ls .device/cuda31m/tmp/models.tar.part* | wc -l)
    i=0
    for f in .device/cuda31m/tmp/models.tar.part*; do
      i=$((i + 1)); mkdir -p .device/cuda31m/p$i; mv "$f" .device/cuda31m/p$i/models.tar.part$(printf %02d $i)of$(printf %02d $n)
    done
    rm -rf .device/cuda31m/tmp
  fi
  write_calls
  ls -l .device/cuda31; du -sh .device/cuda31m/p* 2>/dev/null | tr '\n' ' '; echo
  echo "device_cuda31: bundle $(du -sb .device/cuda31 | cut -f1) bytes; the calls: .device/cuda31/CALLS.txt"
  ;;
run)
  T0=$(date +%s)
  BUDGET=${BUDGET_S:-540}
  OUT=${OUT:-/tmp/c31_out}
  W=${WORK:-/tmp/c31w}
  D=$PWD/.device/cuda31
  mkdir -p "$OUT" "$W"
  exec > >(tee -a "$OUT/cuda31.log") 2>&1
  export PYTHONUNBUFFERED=1
  log() { echo "[device_cuda31 $(( $(date +%s) - T0 )) s] $*"; }
  left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
  # slot WANT UNTIL: seconds a step may take: WANT, cut so that it ends by UNTIL seconds into the call (the later
  # steps' share) and by the budget; 0 when less than 10 s would be left (the step is skipped, and says so)
  slot() {
    local now=$(( $(date +%s) - T0 )) s=$1
    [ $(( $2 - now )) -lt "$s" ] && s=$(( $2 - now ))
    [ $(( BUDGET - now )) -lt "$s" ] && s=$(( BUDGET - now ))
    [ "$s" -ge 10 ] && echo "$s" || echo 0
  }
  # step FILE WANT UNTIL TITLE -- CMD...: runs CMD under its slot, its whole output appended to $OUT/FILE under a
  # "=== TITLE" header (the verdict reads those), the header and rc in the log
  step() {
    local file=$1 want=$2 until=$3 title=$4; shift 5
    local s; s=$(slot "$want" "$until")
    if [ "$s" = 0 ]; then
      log "skipped (no time left): $title"; printf '=== %s\n(skipped: no time left)\n' "$title" >> "$OUT/$file"; return 0
    fi
    log "$title (at most $s s)"
    printf '=== %s\n' "$title" >> "$OUT/$file"
    timeout -k 5 "$s" "$@" >> "$OUT/$file" 2>&1
    local rc=$?
    [ $rc = 124 ] || [ $rc = 137 ] && echo "(timed out after $s s)" >> "$OUT/$file"
    echo "=== rc $rc" >> "$OUT/$file"
    log "  rc $rc"
    return 0
  }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit $(cat "$D/commit" 2>/dev/null); $(nproc) CPUs; budget $BUDGET s"
  rm -rf "$W/c" "$W/src" && tar -C "$W" -xJf "$D/bundle.tar.xz" || { log "no bundle in $D"; exit 1; }
  mkdir -p "$W/src" && tar -C "$W/src" -xf "$W/c/src.tar" && rm -f "$W/c/src.tar"
  S=$W/src M=$W/src/data/models BIN=$W/c/bin
  export LD_LIBRARY_PATH=$W/c/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
  for b in "$BIN"/*; do ldd "$b" | grep "not found" | sed "s|^|$(basename "$b"): |"; done
  # 0. the weights: the cuda31m tar (Gemma, the adapters, the SSM encoder) and the Qwen GGUF, pieces stashed or carried
  mkdir -p /tmp/c31stash /tmp/gguf
  cp .device/cuda31m/p*/models.tar.part* /tmp/c31stash/ 2>/dev/null
  cp .device/lora26/gguf/p*/$QGGUF.part* /tmp/gguf/ 2>/dev/null
  have=$(ls /tmp/c31stash/models.tar.part* 2>/dev/null | wc -l)
  want=$(ls /tmp/c31stash/models.tar.part* 2>/dev/null | head -1 | sed 's/.*of//')
  if [ -z "$want" ] || [ "$have" != "$((10#$want))" ]; then
    log "the cuda31m pieces: $have of ${want:-?} in /tmp/c31stash ($(ls /tmp/c31stash | tr '\n' ' ')): stash the missing ones"
    exit 1
  fi
  cat $(ls /tmp/c31stash/models.tar.part* | sort) > "$W/models.tar"
  got=$(sha256sum "$W/models.tar" | awk '{print $1}')
  [ "$got" = "$(cat "$D/models.tar.sha256")" ] || { log "models.tar sha256 $got differs: stash the pieces again"; exit 1; }
  tar -C "$M" -xf "$W/models.tar" && rm -f "$W/models.tar"
  [ "$(sha256sum "$M/$GGUF" | awk '{print $1}')" = "$(awk '{print $1}' "$M/$GGUF.sha256")" ] || { log "$GGUF sha256 differs"; exit 1; }
  QWEN=${QWEN:-} QREAL=0 SYN=0
  if [ -n "$QWEN" ] && [ -f "$QWEN" ] && [ "$(sha256sum "$QWEN" | awk '{print $1}')" = "$(awk '{print $1}' "$M/$QGGUF.sha256")" ]; then
    ln -sf "$QWEN" "$M/$QGGUF" && QREAL=1 # a real model joined before (tools/device_model.sh join): the reader too
  fi
  qhave=$(ls /tmp/gguf/$QGGUF.part* 2>/dev/null | wc -l)
  qwant=$(ls /tmp/gguf/$QGGUF.part* 2>/dev/null | head -1 | sed 's/.*of//')
  if [ -z "$QWEN" ] && [ -n "$qwant" ] && [ "$qhave" = "$((10#$qwant))" ]; then
    cat $(ls /tmp/gguf/$QGGUF.part* | sort) > "$M/$QGGUF"
    if [ "$(sha256sum "$M/$QGGUF" | awk '{print $1}')" = "$(awk '{print $1}' "$M/$QGGUF.sha256")" ]; then
      QWEN=$M/$QGGUF QREAL=1
    else
      log "the joined Qwen's sha256 differs: not used"; rm -f "$M/$QGGUF"
    fi
  elif [ "$qhave" != 0 ]; then
    log "Qwen pieces: $qhave of $qwant in /tmp/gguf: not used (stash the missing ones for the real model)"
  fi
  if [ -n "$QWEN" ] && [ -f "$QWEN" ]; then
    QTEST=$QWEN QBENCH=$QWEN
  else # the synthetic files: the small qwen2 for the tests (every Qwen2 kernel shape), the 1.5B's shapes for speed
    QTEST=$W/synq.gguf QBENCH=$W/synq15.gguf
    ( python3 "$S/tools/decoder_ref/make_synthetic_gguf.py" qwen2 "$QTEST.tmp" > "$W/synq.log" 2>&1 &&
        mv "$QTEST.tmp" "$QTEST"
      python3 "$S/tools/decoder_ref/make_synthetic_gguf.py" qwen2-1.5b "$QBENCH.tmp" >> "$W/synq.log" 2>&1 &&
        mv "$QBENCH.tmp" "$QBENCH" ) &
    SYN=$!
  fi
  log "models: $(cd "$M" && ls -d *.gguf */ | tr '\n' ' '); Qwen for the tests: $QTEST, the bench: $QBENCH ($([ $QREAL = 1 ] && echo real || echo synthetic))"
  export CLAUSEQA_SOURCE_DIR=$S CLAUSEQA_MODELS=$M
  # the load's KB, ingested now in the background (bench_load.py --data reuses a folder holding .bench_load_ready)
  KB=$W/kb DOCS=$W/c/docs QS=$W/c/questions.jsonl
  rm -rf "$KB"
  ING=
  case " ${SKIP:-} " in *" load "*) ;; *)
  ( bash "$S/tools/demo_kb.sh" "$BIN/clauseqa" "$KB" && "$BIN/clauseqa" ingest --data "$KB" --kb demo --ocr off "$DOCS"/* \
      > "$W/ingest.log" 2>&1 && touch "$KB/.bench_load_ready" && echo "[device_cuda31] KB ready at $(( $(date +%s) - T0 )) s" ) &
  ING=$! ;; esac
  # 1. the tests (test_decoder_cuda sets CLAUSEQA_BATCH_LOGITS=rows itself; the bf16 and prefix halves are its own)
  mkdir -p "$W/srcq/data/models" && ln -sfn "$S/tests" "$W/srcq/tests" # a source dir without Gemma: the Qwen alone
  case " ${SKIP:-} " in *" tests "*) log "1. tests skipped (SKIP)" ;; *)
  TG=120 TQ=140 TQU=260 # the tests' slots; without the load the benches have room for longer ones
  case " ${SKIP:-} " in *" load "*) TG=170 TQ=170 TQU=340 ;; esac
  step tests.txt $TG $TG "tests gemma: test_decoder_cuda, $GGUF" -- "$BIN/test_decoder_cuda"
  for i in $(seq 90); do [ -f "$QTEST" ] && break; { [ $SYN != 0 ] && kill -0 $SYN 2>/dev/null; } || break; sleep 1; done
  if [ -f "$QTEST" ]; then
    CLAUSEQA_SOURCE_DIR=$W/srcq CLAUSEQA_SYNTH_GGUF=$QTEST \
      step tests.txt $TQ $TQU "tests qwen: test_decoder_cuda, $(basename "$QTEST") ($([ $QREAL = 1 ] && echo real || echo synthetic))" \
      -- "$BIN/test_decoder_cuda"
  else
    log "no Qwen file for the tests ($(tail -2 "$W/synq.log" 2>/dev/null))"
  fi
  grep -h -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|^=== tests|timed out" "$OUT/tests.txt"
  grep -h -E "log-sum-exp|bf16 KV vs float|prefix reuse," "$OUT/tests.txt" | head -80 ;; esac
  # 2. decode speed (on a quiet GPU: the KB's ingest waited for, up to 60 s; a bench beside it is marked so)
  for i in $(seq 60); do [ -n "$ING" ] && kill -0 $ING 2>/dev/null || break; sleep 1; done
  [ -n "$ING" ] && kill -0 $ING 2>/dev/null && log "warning: the KB's ingest still runs beside the benches (their numbers may be low)"
  case " ${SKIP:-} " in *" bench "*) log "2. benches skipped (SKIP)"; set -- ;; *) set -- "$M/$GGUF" "$QBENCH" ;; esac
  for model in "$@"; do
    if [ "$model" = "$QBENCH" ]; then
      for i in $(seq 90); do [ -f "$QBENCH" ] && break; { [ $SYN != 0 ] && kill -0 $SYN 2>/dev/null; } || break; sleep 1; done
      until_b=400 name=$(basename "$model" .gguf)$([ $QREAL = 0 ] && echo "-synthetic-qwen2-1.5b")
    else
      until_b=320 name=$(basename "$model" .gguf)
    fi
    case " ${SKIP:-} " in *" load "*) # no load after the benches: they share its time (Gemma's by 440 s)
      [ "$model" = "$QBENCH" ] && until_b=$BUDGET || until_b=440 ;; esac
    [ -f "$model" ] || { log "no $model to bench ($(tail -2 "$W/synq.log" 2>/dev/null))"; continue; }
    for kv in $([ "${BATCH1:-1}" = 0 ] || echo 0 1); do
      CLAUSEQA_KV_BF16=$kv step bench.txt 40 $until_b "bench batch1 model=$name kv=$kv" -- "$BIN/bench_decoder" --model "$model" \
        --device cuda --prompt 512 --decode 128 --runs 3 --perplexity 0
      grep -E "decode \(|prefill \(last" "$OUT/bench.txt" | tail -3
    done
    for v in ${CONC:-0:gemm:1 0:rows:1 1:rows:1 0:gemm:3 0:rows:3}; do
      IFS=: read -r kv lg pl <<< "$v"
      pl=${pl:-1}
      CLAUSEQA_KV_BF16=$kv CLAUSEQA_BATCH_LOGITS=$([ $lg = rows ] && echo rows) CLAUSEQA_BATCH_PLANES=$pl \
        step bench.txt 45 $until_b "bench concurrent model=$name kv=$kv logits=$lg planes=$pl" -- "$BIN/bench_decoder" --model "$model" \
        --device cuda --prompt 512 --decode 128 --runs 2 --perplexity 0 --concurrent 1,8,32,64
      sed -n '/^concurrent decode/,$p' "$OUT/bench.txt" | tail -5
    done
  done
  # 3. the server under load: the product's GPU reader (the real Qwen when its file is in $M, else Gemma)
  for i in $(seq 120); do [ -n "$ING" ] && kill -0 $ING 2>/dev/null || break; sleep 1; done
  if [ -z "$ING" ]; then
    log "3. bench_load skipped (SKIP)"
  elif [ -f "$KB/.bench_load_ready" ]; then
    reader=$([ $QREAL = 1 ] && echo "$QGGUF" || echo "$GGUF")
    runs="default:off router,bm25:off default:on router,bm25:on"
    [ "${GATES_ALONE:-1}" = 1 ] && runs="$runs default:share default:kv16 default:rows"
    for r in $runs; do
      IFS=: read -r mode gate <<< "$r"
      kv=0 pr=0 lg=
      case $gate in on) kv=1 pr=1 lg=rows ;; share) pr=1 ;; kv16) kv=1 ;; rows) lg=rows ;; esac
      m=(); [ "$mode" = default ] || m=(--mode "$mode")
      want=$([ "$gate" = off ] || [ "$gate" = on ] && echo 75 || echo 60)
      [ "$(left)" -lt 45 ] && [ "$gate" != off ] && [ "$gate" != on ] && { log "no time for the load with $gate alone"; continue; }
      CLAUSEQA_KV_BF16=$kv CLAUSEQA_PREFIX_REUSE=$pr CLAUSEQA_BATCH_LOGITS=$lg \
        step load.txt $want $BUDGET "load mode=$mode gates=$gate reader=$reader (CLAUSEQA_KV_BF16=$kv CLAUSEQA_PREFIX_REUSE=$pr CLAUSEQA_BATCH_LOGITS=${lg:-})" \
        -- python3 "$S/tests/bench/bench_load.py" --binary "$BIN/clauseqa" --levels "${LEVELS:-1,16,64}" --seconds "${LOAD_S:-5}" \
        --answers generate --docs-dir "$DOCS" --questions "$QS" --data "$KB" ${m[@]+"${m[@]}"} -- --device cuda --max-asks 64
      grep -E "^# answers|^\| [0-9]" "$OUT/load.txt" | tail -4
    done
  else
    log "3. bench_load skipped: the KB was not ready ($(tail -3 "$W/ingest.log" 2>/dev/null))"
  fi
  # 4. the verdict
  python3 "$D/verdict.py" "$OUT" | tee "$OUT/verdict.txt"
  log "end"
  ;;
verdict)
  python3 tools/device_cuda31_verdict.py "${2:?the folder holding tests.txt, bench.txt, load.txt}"
  ;;
*)
  sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
