#!/bin/bash
# Issue 13 on the H200: `clauseqa eval` (C engine, CUDA) over the validation parts of the dev suites, with the base
# model (--adapter none, its few-shot prompt), the trained adapter, and the adapter with mode rerank; then the CUDA
# tests and the decoder bench with the adapter.
#   tools/decoder_train/device_eval.sh unpack   unpack whatever of .device/evb, .device/evs this call carried into
#                                               /tmp/ev (the two bundles may travel in separate calls)
#   tools/decoder_train/device_eval.sh run      the evals (all suites in parallel, each suite's runs in turn), under
#                                               LIMIT seconds (default 540); results in $OUT/eval.tar.xz + a table
#   tools/decoder_train/device_eval.sh cuda     test_decoder_cuda (real model + synthetic ones) and bench_decoder
#                                               with and without the adapter
# Expects the model joined at /tmp/model/gemma-3-270m-q4_k_m.gguf (device_train.sh) and the adapter in ADAPTER
# (default /tmp/adapter_keep). RUNS (default "adapter rerank base") picks the runs; SUITES the suites.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
DEADLINE=$((T0 + ${LIMIT:-540}))
W=/tmp/ev
MODEL=${MODEL:-/tmp/model/gemma-3-270m-q4_k_m.gguf} # the Qwen reader: MODEL=/tmp/model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
ADAPTER=${ADAPTER:-/tmp/adapter_keep}
RUNS=${RUNS:-"adapter rerank base"}
SUITES=${SUITES:-"cjrc-dev cmrc-dev policy-zh-dev cuad-dev contracts-en-dev laws-zh"}
OUT=${OUT:-/tmp/ev_out}
mkdir -p $W "$OUT"
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CLAUSEQA_DENSE=off
CQ=$W/bin/clauseqa

case ${1:-run} in
unpack)
  for b in .device/evb/bin.tar.xz .device/evs/suites.tar.xz; do
    [ -f $b ] && tar -C $W -xJf $b && echo "unpacked $b"
  done
  ls $W ;;
run)
  [ -x $CQ ] && [ -d $W/vs ] && [ -f $MODEL ] && [ -f $ADAPTER/adapter.json ] || { echo "missing: bin, suites, model or adapter"; ls $W /tmp/model $ADAPTER; exit 1; }
  ldd $CQ | grep "not found" && exit 1
  nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
  R=$W/results; rm -rf $R; mkdir -p $R
  one() { # suite tag args...: one eval, bounded by the deadline
    local s=$1 tag=$2; shift 2
    local left=$((DEADLINE - $(date +%s)))
    [ $left -gt 15 ] || { echo "$s $tag: not started ($left s left)" >> $R/skipped.txt; return; }
    local t=$(date +%s)
    timeout $left $CQ eval --data $W/d_$s --kb $s --suite $W/vs/$s --device cuda --answers generate --json \
      --out $R/$s.$tag.jsonl "$@" > $R/$s.$tag.json 2> $R/$s.$tag.err
    echo "$s $tag: exit $? in $(( $(date +%s) - t )) s" >> $R/times.txt
  }
  suite() {
    local s=$1
    mkdir -p $W/d_$s/models && ln -sf $MODEL $W/d_$s/models/ && ln -sfn $ADAPTER $W/d_$s/models/answer
    for r in $RUNS; do
      case $r in
      adapter) one $s adapter --mode router,bm25 ;;
      rerank) one $s rerank --mode router,bm25,rerank ;;
      base) [ $s = laws-zh ] || one $s base --mode router,bm25 --adapter none ;;
      esac
    done
  }
  for s in $SUITES; do suite $s & done
  wait
  cat $R/times.txt $R/skipped.txt 2>/dev/null
  tail -n 3 $R/*.err | grep -v "^$" | cut -c1-300 | tail -40
  python3 - $R <<'PY'
import glob, json, os, sys
rows = []
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        d = json.load(open(p))
    except Exception:
        continue
    s, tag = os.path.basename(p)[:-5].rsplit(".", 1)
    for t, v in list(d["types"].items()) + [("all", d["all"])]:
        rows.append("%-17s %-8s %-18s %5d  h1 %.3f h5 %.3f mrr %.3f  EM %.3f F1 %.3f  abst %.3f (%d)  falseA %.3f  p50 %.0f ms"
                    % (s, tag, t, v["questions"], v["hit@1"], v["hit@5"], v["mrr"], v["em"], v["f1"],
                       v["abstention_accuracy"], v["unanswerable"], v["false_abstention_rate"], d.get("retrieve_ms_p50", 0)))
print("\n".join(rows))
PY
  tar -C $W -cJf "$OUT/eval.tar.xz" results
  echo "run done at $(( $(date +%s) - T0 )) s" ;;
cuda)
  SYN=""
  if python3 tools/decoder_ref/make_synthetic_gguf.py small /tmp/small.gguf > /dev/null &&
     python3 tools/decoder_ref/make_synthetic_gguf.py 270m /tmp/s270m.gguf > /dev/null; then SYN=/tmp/small.gguf:/tmp/s270m.gguf; fi
  ln -sf $MODEL data/models/   # the tests read the real model under $CLAUSEQA_SOURCE_DIR/data/models
  CLAUSEQA_SOURCE_DIR=$PWD CLAUSEQA_SYNTH_GGUF=$SYN timeout 240 $W/bin/test_decoder_cuda 2>&1 | tail -40
  echo "test_decoder_cuda exit ${PIPESTATUS[0]}"
  for a in none $ADAPTER; do
    echo "== bench_decoder, adapter $a"
    if [ $a = none ]; then A=""; else A="--adapter $a"; fi
    timeout 90 $W/bin/bench_decoder --model $MODEL --device cuda --prompt 512 --decode 256 $A 2>&1 | tail -25
  done
  echo "== packed relevance scoring, 20 candidates of 280 / 120 tokens"
  timeout 60 $W/bin/bench_decoder --model $MODEL --device cuda --prompt 280 --score 20 --runs 20 --adapter $ADAPTER 2>&1 | tail -8
  timeout 60 $W/bin/bench_decoder --model $MODEL --device cuda --prompt 120 --score 20 --runs 20 --adapter $ADAPTER 2>&1 | tail -8
  echo "cuda done at $(( $(date +%s) - T0 )) s" ;;
esac
