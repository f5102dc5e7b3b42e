#!/bin/bash
# Issue 13 on the H200: the runs that choose the trained model's refusal threshold (--refusal-min-p) on the dev
# suites' TRAIN parts, and score it on the validation parts. Every run answers with the refusal masked
# (--refusal-min-p 2) and records, per question, the probability the model gave to refusing (refusal_p): refusing
# exactly when refusal_p >= t and answering otherwise is what the runtime does with --refusal-min-p t, so one run
# gives every threshold (tools/decoder_train/refusal_threshold.py picks t on the train runs).
#   tools/decoder_train/device_calibrate.sh unpack   unpack .device/evb or .device/evc (clauseqa + libs; bundle_eval.sh bin) and
#                                                    .device/evs (validation suites) or a part of .device/evh
#                                                    (bundle_eval.sh heldout: one pN a call) when carried, and .device/adp
#                                                    (the adapter) into /tmp/adapter_keep
#   tools/decoder_train/device_calibrate.sh launch   each ORDER tag a run of its own, in parallel, in the background
#                                                    (setsid, from a copy of tools/ in $LAUNCH_DIR, default /tmp/c26);
#                                                    touches $DONE (default /tmp/calib_done) when all are done
#   tools/decoder_train/device_calibrate.sh collect  (WAIT=N: first wait up to N s for $DONE) every launched run's
#                                                    results in $OUT/calib.tar.xz
#   tools/decoder_train/device_calibrate.sh run      the runs, suites in parallel, under LIMIT seconds (default 480);
#                                                    results in $OUT/calib.tar.xz
# The refusal fit (refusal_report.sh) wants all of cjrc's calibration part, in the mode that ships: EVERY=1
# SUITES=cjrc-dev ORDER="train-rerank train-hybrid" LIMIT=540 (912 questions, 210 unanswerable; about 215 + 135 s on
# an H100 at the third sitting's rates), then ORDER=val-rerank for the whole cjrc validation part (~270 s).
# ORDER tag val-rerankN (e.g. val-rerank10): the validation part reranked with N candidates (--rerank-top-n N; the GPU's
# default is 20) — what a cheaper relevance pass costs in quality (issue 31: the passes bound the default mode).
# Held-out-document unanswerables (heldout_unans.py; bundle_eval.sh suites writes tqh/ and vsh/): the ORDER tags
# train-rerank-heldout, val-rerank-heldout, train-hybrid-heldout and val-hybrid-heldout score the calibration (tqh/)
# and validation (vsh/) parts against a KB WITHOUT their held-out documents, each in its own data dir
# ($W/cth_<suite>, $W/cvh_<suite>: eval only adds documents, so the full KB of $W/c_<suite> must not be reused),
# ingested from a docs/ of links to vs/<suite>/docs less heldout.txt. refusal_report.sh scores them.
# Expects the model joined at /tmp/model/gemma-3-270m-q4_k_m.gguf (tools/device_model.sh join).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
DEADLINE=$((T0 + ${LIMIT:-480}))
W=${W:-/tmp/ev} # the unpacked bundles and the runs' KBs (W= elsewhere: a CPU dry run, docs/EVAL.md)
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
  for b in .device/evb/bin.tar.xz .device/evc/bin2.tar.xz .device/evs/suites.tar.xz .device/evh/p*/heldout.tar.xz; do
    [ -f $b ] && tar -C $W -xJf $b && echo "unpacked $b"
  done
  if [ -f .device/adp/adapter.json ]; then mkdir -p $ADAPTER && cp .device/adp/adapter.* $ADAPTER/ && echo "adapter in $ADAPTER"; fi
  ls $W ;;
launch)
  # each ORDER tag as its own background run (setsid: it outlives the call that starts it), in parallel, each in a
  # W of its own (links to $W's bundles; its own copies of tqh/ vsh/, whose docs/ the held-out runs rewrite) and
  # from a copy of tools/ (the call's checkout is gone by the next call); $DONE is touched when all have finished
  # (tools/teacher/device27.sh AFTER= waits on it); `collect` then packs every run's calib/ into $OUT/calib.tar.xz
  L=${LAUNCH_DIR:-/tmp/c26}; rm -rf $L; mkdir -p $L && cp -r tools $L/ || exit 1
  tags=""
  for r in $ORDER; do
    w=$L/w_$r; mkdir -p $w
    for x in bin lib vs tq; do [ -e $W/$x ] && ln -sfn $W/$x $w/$x; done
    for x in tqh vsh; do [ -d $W/$x ] && cp -r $W/$x $w/; done
    tags="$tags $r"
  done
  cat > $L/all.sh <<EOF2
#!/bin/bash
cd $L
for r in$tags; do
  ( W=$L/w_\$r ORDER=\$r OUT=$L/out_\$r MODEL=$MODEL ADAPTER=$ADAPTER EVERY=$EVERY LIMIT=${LIMIT:-480} SUITES="$SUITES" \\
      bash tools/decoder_train/device_calibrate.sh run > $L/\$r.log 2>&1; echo "\$r rc \$?" >> $L/done.txt ) &
done
wait
touch ${DONE:-/tmp/calib_done}
EOF2
  chmod +x $L/all.sh && setsid nohup $L/all.sh > $L/all.out 2>&1 < /dev/null &
  sleep 1; echo "launched:$tags (log $L/<tag>.log; ${DONE:-/tmp/calib_done} when done)" ;;
collect)
  # WAIT=N: wait up to N s for $DONE first; then the runs' calib/ folders merged into $OUT/calib.tar.xz
  L=${LAUNCH_DIR:-/tmp/c26}
  for i in $(seq 1 ${WAIT:-0}); do [ -e ${DONE:-/tmp/calib_done} ] && break; sleep 1; done
  cat $L/done.txt 2>/dev/null; tail -n 4 $L/*.log 2>/dev/null | cut -c1-300
  rm -rf $L/merged && mkdir -p $L/merged/calib
  for w in $L/w_*; do [ -d $w/calib ] && cp -r $w/calib/. $L/merged/calib/ && for t in times skipped; do
    [ -f $w/calib/$t.txt ] && cat $w/calib/$t.txt >> $L/merged/calib/$t.all; done; done
  tar -C $L/merged -cJf "$OUT/calib.tar.xz" calib && ls -la "$OUT" ;;
run)
  [ -x $CQ ] && [ -d $W/vs ] && [ -d $W/tq ] && [ -f $MODEL ] && [ -f $ADAPTER/adapter.json ] || { echo "missing: bin, suites, train questions, model or adapter"; ls $W /tmp/model $ADAPTER; exit 1; }
  ldd $CQ | grep "not found" && exit 1
  R=$W/calib; rm -rf $R; mkdir -p $R
  one() { # suite tag suite-dir args...
    local s=$1 tag=$2 dir=$3; shift 3
    local left=$((DEADLINE - $(date +%s)))
    [ $left -gt 15 ] || { echo "$s $tag: not started ($left s left)" >> $R/skipped.txt; return; }
    [ -f $dir/questions.jsonl ] && [ -d $dir/docs ] || { echo "$s $tag: no suite in $dir" >> $R/skipped.txt; return; }
    local t=$(date +%s)
    timeout $left $CQ eval --data ${DATA:-$W/c_$s} --kb $s --suite $dir --device cuda --answers generate --json --model $MODEL --adapter $ADAPTER \
      --refusal-min-p 2 --out $R/$s.$tag.jsonl "$@" > $R/$s.$tag.json 2> $R/$s.$tag.err
    echo "$s $tag: exit $? in $(( $(date +%s) - t )) s" >> $R/times.txt
  }
  heldout() { # suite part-dir data-dir: links part-dir/docs to the suite's documents less part-dir/heldout.txt
    local s=$1 dir=$2 data=$3 f n
    [ -f $dir/heldout.txt ] || { echo "$s: no $dir/heldout.txt (bundle_eval.sh suites)" >> $R/skipped.txt; return 1; }
    mkdir -p $data/models && ln -sf $MODEL $data/models/ && ln -sfn $ADAPTER $data/models/answer
    rm -rf $dir/docs && mkdir -p $dir/docs
    declare -A out=()
    while IFS= read -r n; do [ -n "$n" ] && out[$n]=1; done < $dir/heldout.txt
    for f in $W/vs/$s/docs/*; do
      n=$(basename "$f"); n=${n%.*}
      [ -n "${out[$n]:-}" ] || ln -s "$f" $dir/docs/
    done
    echo "$s: $(ls $dir/docs | wc -l) documents in $data, ${#out[@]} held out" >> $R/times.txt
  }
  suite() {
    local s=$1 every=1
    case $s in cjrc-dev|cmrc-dev) every=$EVERY ;; esac
    mkdir -p $W/c_$s/models $W/tq/$s && ln -sf $MODEL $W/c_$s/models/ && ln -sfn $ADAPTER $W/c_$s/models/answer
    ln -sfn $W/vs/$s/docs $W/tq/$s/docs
    case " $ORDER " in *-heldout\ *)
      heldout $s $W/tqh/$s $W/cth_$s; heldout $s $W/vsh/$s $W/cvh_$s ;;
    esac
    for r in $ORDER; do
      case $r in
      train-rerank) one $s train-rerank $W/tq/$s --mode router,bm25,rerank --every $every ;;
      val-rerank) one $s val-rerank $W/vs/$s --mode router,bm25,rerank ;;
      val-hybrid) one $s val-hybrid $W/vs/$s --mode router,bm25 ;;
      val-rerank[0-9]*) one $s $r $W/vs/$s --mode router,bm25,rerank --rerank-top-n ${r#val-rerank} ;; # e.g. val-rerank10: 10 candidates
      train-hybrid) one $s train-hybrid $W/tq/$s --mode router,bm25 --every $every ;;
      train-rerank-heldout) DATA=$W/cth_$s one $s $r $W/tqh/$s --mode router,bm25,rerank --every $every ;;
      val-rerank-heldout) DATA=$W/cvh_$s one $s $r $W/vsh/$s --mode router,bm25,rerank ;;
      train-hybrid-heldout) DATA=$W/cth_$s one $s $r $W/tqh/$s --mode router,bm25 --every $every ;;
      val-hybrid-heldout) DATA=$W/cvh_$s one $s $r $W/vsh/$s --mode router,bm25 ;;
      *) echo "$s $r: no such run" >> $R/skipped.txt ;;
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
