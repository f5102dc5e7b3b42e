#!/bin/bash
# Issue 13 on the H200: the runs that choose the trained model's refusal threshold (--refusal-min-p) on the dev
# suites' TRAIN parts, and score it on the validation parts. Every run answers with the refusal masked
# (--refusal-min-p 2) and records, per question, the probability the model gave to refusing (refusal_p): refusing
# exactly when refusal_p >= t and answering otherwise is what the runtime does with --refusal-min-p t, so one run
# gives every threshold (tools/decoder_train/refusal_threshold.py picks t on the train runs).
#   tools/decoder_train/device_calibrate.sh unpack   unpack .device/evc (clauseqa + libs + train questions) and
#                                                    .device/evs (validation suites) when carried, and .device/adp
#                                                    (the adapter) into /tmp/adapter_keep
#   tools/decoder_train/device_calibrate.sh run      the runs, suites in parallel, under LIMIT seconds (default 480);
#                                                    results in $OUT/calib.tar.xz
# The refusal fit (refusal_report.sh) wants all of cjrc's calibration part, in the mode that ships: EVERY=1
# SUITES=cjrc-dev ORDER="train-rerank train-hybrid" LIMIT=540 (912 questions, 210 unanswerable; about 215 + 135 s on
# an H100 at the third sitting's rates), then ORDER=val-rerank for the whole cjrc validation part (~270 s).
# Expects the model joined at /tmp/model/gemma-3-270m-q4_k_m.gguf (tools/device_model.sh join).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
DEADLINE=$((T0 + ${LIMIT:-480}))
W=/tmp/ev
MODEL=${MODEL:-/tmp/model/gemma-3-270m-q4_k_m.gguf} # the Qwen reader: MODEL=/tmp/model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
ADAPTER=${ADAPTER:-/tmp/adapter_keep}
OUT=${OUT:-/tmp/calib_out}
# train parts: every EVERY-th question of the two large suites. tq/ must be written by refusal_split.py with the same
# EVERY (bundle_eval.sh suites): the suites' own order is grouped by document, and every 3rd question of it held 13
# unanswerable cjrc questions of 304 where the part has 23 % (issue 26)
EVERY=${EVERY:-3}
ORDER=${ORDER:-"train-rerank val-rerank val-hybrid train-hybrid"} # the runs of each suite, in turn
SUITES=${SUITES:-"cjrc-dev cmrc-dev policy-zh-dev cuad-dev contracts-en-dev"}
mkdir -p $W "$OUT"
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CLAUSEQA_DENSE=off
CQ=$W/bin/clauseqa

case ${1:-run} in
unpack)
  for b in .device/evc/bin2.tar.xz .device/evs/suites.tar.xz; do
    [ -f $b ] && tar -C $W -xJf $b && echo "unpacked $b"
  done
  if [ -f .device/adp/adapter.json ]; then mkdir -p $ADAPTER && cp .device/adp/adapter.* $ADAPTER/ && echo "adapter in $ADAPTER"; fi
  ls $W ;;
run)
  [ -x $CQ ] && [ -d $W/vs ] && [ -d $W/tq ] && [ -f $MODEL ] && [ -f $ADAPTER/adapter.json ] || { echo "missing: bin, suites, train questions, model or adapter"; ls $W /tmp/model $ADAPTER; exit 1; }
  ldd $CQ | grep "not found" && exit 1
  R=$W/calib; rm -rf $R; mkdir -p $R
  one() { # suite tag suite-dir args...
    local s=$1 tag=$2 dir=$3; shift 3
    local left=$((DEADLINE - $(date +%s)))
    [ $left -gt 15 ] || { echo "$s $tag: not started ($left s left)" >> $R/skipped.txt; return; }
    local t=$(date +%s)
    timeout $left $CQ eval --data $W/c_$s --kb $s --suite $dir --device cuda --answers generate --json --model $MODEL --adapter $ADAPTER \
      --refusal-min-p 2 --out $R/$s.$tag.jsonl "$@" > $R/$s.$tag.json 2> $R/$s.$tag.err
    echo "$s $tag: exit $? in $(( $(date +%s) - t )) s" >> $R/times.txt
  }
  suite() {
    local s=$1 every=1
    case $s in cjrc-dev|cmrc-dev) every=$EVERY ;; esac
    mkdir -p $W/c_$s/models $W/tq/$s && ln -sf $MODEL $W/c_$s/models/ && ln -sfn $ADAPTER $W/c_$s/models/answer
    ln -sfn $W/vs/$s/docs $W/tq/$s/docs
    for r in $ORDER; do
      case $r in
      train-rerank) one $s train-rerank $W/tq/$s --mode router,bm25,rerank --every $every ;;
      val-rerank) one $s val-rerank $W/vs/$s --mode router,bm25,rerank ;;
      val-hybrid) one $s val-hybrid $W/vs/$s --mode router,bm25 ;;
      train-hybrid) one $s train-hybrid $W/tq/$s --mode router,bm25 --every $every ;;
      esac
    done
  }
  for s in $SUITES; do suite $s & done
  wait
  cat $R/times.txt $R/skipped.txt 2>/dev/null
  tail -n 2 $R/*.err | grep -v -E "^$|adapter answer" | cut -c1-300 | tail -20
  tar -C $W -cJf "$OUT/calib.tar.xz" calib
  echo "run done at $(( $(date +%s) - T0 )) s" ;;
esac
