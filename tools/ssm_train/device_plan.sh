#!/bin/bash
# Issue 14, second device plan: one warm H200 window, calls back to back (docs/SSM.md, "Device plan, second round").
# Every call sends the lead's checkout, not this branch: this branch's tools/ travel as tools.tar in a carried part
# and are laid over the checkout at each call (the copy on the machine is fresh each call).
#   tools/ssm_train/device_plan.sh stash            copy the carried parts of $SRC (folders, default .device/ssm14b;
#                                                   their subfolders' files) to /tmp/stash14b, unpack every bundle that
#                                                   is complete, plain tars (earlier runs' weights) into /tmp/ssm14,
#                                                   lay tools.tar over the checkout
#   tools/ssm_train/device_plan.sh train            (after stash) in the background (setsid): gemma3 ids, the teacher
#                                                   (its validation, alone and fused, calibrated), one training of
#                                                   BUDGET s with RUN_OPTS, validation, export to /tmp/ssm14/runs/NAME
#                                                   (RUN_OPTS may hold --init /tmp/ssm14/<earlier run>: a continuation)
#   tools/ssm_train/device_plan.sh poll             the training's log so far; $OUT/NAME.tgz once it is done
#   tools/ssm_train/device_plan.sh tests            the three SSM CUDA unit tests (eval bundle)
#   tools/ssm_train/device_plan.sh eval             the C runtime (eval bundle) on the trained weights: laws-zh
#                                                   ingest alone and timed, the other suites, eval bm25 / dense /
#                                                   router,bm25 / router,bm25,dense, fusion.py collect; WAIT=N first
#                                                   waits up to N s for the training to be packed (the call that
#                                                   follows the last poll); brings back the run and its diagnosis
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out14b}; mkdir -p $OUT
# STASH, WORK: other folders for a CPU test of this script (a tiny slice, docs/SSM.md "Third round")
S=${STASH:-/tmp/stash14b}; W=${WORK:-/tmp/ssm14}
NAME=${NAME:-g192c}
mkdir -p $S $W
overlay() { [ -f $S/tools.tar ] && tar -xf $S/tools.tar; }
# each call's checkout is fresh (the lead's): lay the stashed tools over it and run the laid copy of this script, or
# the verb runs the checkout's own version, which bash has already read (third round: one eval ran main's script)
if [ -z "${PLAN_LAID:-}" ] && [ -f $S/tools.tar ]; then
  overlay && PLAN_LAID=1 exec bash tools/ssm_train/device_plan.sh "$@"
fi
case ${1:-} in
stash)
  for src in ${SRC:-.device/ssm14b}; do
    for f in $src/*/*; do
      [ -f "$f" ] || continue
      cp "$f" $S/ && echo "stashed $(basename $f) ($(du -h $f | cut -f1))"
    done
  done
  for first in $S/*.tar.xz.1-of-*; do
    [ -f "$first" ] || continue
    base=${first%.1-of-*}; n=${first##*-of-}; name=$(basename $base)
    [ -f $W/.unpacked.$name ] && continue
    pieces=""; ok=1
    for i in $(seq 1 $n); do [ -f $base.$i-of-$n ] && pieces="$pieces $base.$i-of-$n" || ok=0; done
    [ $ok = 1 ] || { echo "$name: $(ls $base.* | wc -l) of $n pieces"; continue; }
    cat $pieces | xz -T0 -dc | tar -C $W -xf - && touch $W/.unpacked.$name && echo "unpacked $name"
  done
  for x in $S/*.so*.xz; do  # a library carried apart from the eval bundle (libicudata: l1)
    [ -f "$x" ] || continue
    lib=$(basename ${x%.xz}); mkdir -p $W/cq/lib
    [ -f $W/cq/lib/$lib ] || { xz -dc $x > $W/cq/lib/$lib && echo "unpacked $lib"; }
  done
  for t in $S/*.tar; do  # plain tars other than tools.tar (e.g. the old run's weights) into $W
    [ -f "$t" ] && [ "$(basename $t)" != tools.tar ] && tar -C $W -xf $t
  done
  overlay ;;
train)
  overlay
  [ -f $W/data/corpus.npz ] && [ -f $W/teacher/e5pack.npz ] || { echo "data not unpacked"; exit 1; }
  # the job runs from a copy of its own: each call re-copies the checkout over this one (the overlay goes)
  R=$W/repo; rm -rf $R; mkdir -p $R && cp -r tools app decoder core ssm $R/
  cat > $W/train_job.sh <<EOF
#!/bin/bash
cd $R
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
T0=\$(date +%s)
log() { echo "[\$(( \$(date +%s) - T0 )) s] \$*" >> $W/job.log; }
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $W/job.log
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $W/job.log 2>&1
python3 tools/ssm_train/tokenize_data.py --data $W/data --tokenizer gemma3 --gguf $W/gemma-trim.gguf --jobs 12 > $W/tok.log 2>&1 &
python3 tools/ssm_train/train.py --data $W/data --teacher $W/teacher --teacher-save $W/teacher.pt --teacher-only > $W/teacher.log 2>&1
log "teacher rc \$?"
wait
log "ids: \$(tail -1 $W/tok.log)"
mkdir -p $W/runs/$NAME
python3 tools/ssm_train/train.py --data $W/data --out $W/runs/$NAME --teacher $W/teacher.pt --budget ${BUDGET:-240} \
  --commit ${COMMIT:-unknown} --workers 14 --threads 2 ${RUN_OPTS:-} > $W/runs/$NAME/train.log 2>&1
log "train rc \$?"
cp $W/teacher.log $W/runs/$NAME/
tar -C $W/runs -czf $W/$NAME.tgz $NAME && log "packed"
# the laws-zh collapse: whole documents against training-sized windows (DIAG: other weights folders to compare),
# after packing so that the evaluation need not wait for it
python3 tools/ssm_train/diag_context.py --data $W/data --weights ${DIAG:-} $W/runs/$NAME \
  --questions 200 --others 150 > $W/diag.$NAME.txt 2>&1
log "diag rc \$?"
EOF
  chmod +x $W/train_job.sh
  setsid nohup $W/train_job.sh > /dev/null 2>&1 < /dev/null &
  sleep 2; echo "started"; cat $W/job.log 2>/dev/null ;;
poll)
  overlay
  cat $W/job.log 2>/dev/null; tail -3 $W/tok.log 2>/dev/null
  grep -E "teacher|validation" $W/teacher.log 2>/dev/null | cut -c1-400
  cat $W/diag.$NAME.txt 2>/dev/null | cut -c1-1500
  grep -E "step|trained|batch mix|fused scan:" $W/runs/$NAME/train.log 2>/dev/null | tail -4 | cut -c1-400
  tail -2 $W/runs/$NAME/train.log 2>/dev/null | cut -c1-300
  [ -f $W/$NAME.tgz ] && cp $W/$NAME.tgz $W/teacher.log $OUT/ && echo "packed: $OUT/$NAME.tgz" ;;
tests)
  overlay
  export LD_LIBRARY_PATH=$W/cq/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  T=/tmp/cqsrc; rm -rf $T; mkdir -p $T/data/models && ln -s $PWD/tests $T/tests &&
    ln -s $W/gemma-trim.gguf $T/data/models/gemma-3-270m-q4_k_m.gguf
  for t in test_ssm_ref test_ssm_train_parity test_ssm_cuda test_ssm_doc_head; do
    ldd $W/cq/bin/$t | grep "not found" | sed "s/^/$t: /"
    CLAUSEQA_SOURCE_DIR=$T timeout 120 $W/cq/bin/$t > $OUT/$t.txt 2>&1
    echo "$t rc $? ($(grep -c OK $OUT/$t.txt) ok lines, $(grep -c SKIP $OUT/$t.txt) skipped)"
    grep -E "FAIL|rror" $OUT/$t.txt | head -5
  done ;;
eval)
  overlay
  export LD_LIBRARY_PATH=$W/cq/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export CLAUSEQA_DENSE=on
  CQ=$W/cq/bin/clauseqa
  for i in $(seq 1 ${WAIT:-0}); do [ -f $W/$NAME.tgz ] && break; sleep 1; done
  cat $W/job.log 2>/dev/null
  [ -f $W/$NAME.tgz ] && cp $W/$NAME.tgz $W/teacher.log $OUT/
  T0=$(date +%s); DEADLINE=$(( T0 + ${LIMIT:-500} ))
  SUITES=${SUITES:-"laws-zh policy-zh-dev cjrc-dev cuad-dev contracts-en-dev"}; FIRST=${SUITES%% *}
  src=$W/runs/$NAME; [ -f $src/ssm.safetensors ] || { echo "no weights in $src"; exit 1; }
  # while the job runs, runs/NAME holds its last checkpoint, not the trained weights
  [ -f $W/$NAME.tgz ] || [ "${FORCE:-0}" = 1 ] || { echo "$NAME is not packed yet (training running?): FORCE=1 evaluates its checkpoint"; exit 1; }
  mkdir -p $OUT/ev
  for s in $SUITES; do
    d=$W/e_$s; rm -rf $d; mkdir -p $d/models/ssm $W/eval/only_$s
    cp $src/ssm.json $src/ssm.safetensors $d/models/ssm/; ln -sf $W/gemma-trim.gguf $d/models/gemma-3-270m-q4_k_m.gguf
    ln -sfn $W/eval/$s $W/eval/only_$s/$s
  done
  # the first suite (laws-zh) alone first: the ingest target (3,368 laws, the encoder on the GPU), nothing else running
  { time $CQ ingest --data $W/e_$FIRST --kb $FIRST $W/eval/$FIRST/docs > $OUT/ev/ingest_first.log 2>&1 ; } 2> $OUT/ev/ingest_time.txt
  echo "$FIRST ingest alone, encoder on the GPU ($(ls $W/eval/$FIRST/docs | wc -l) files): $(tr '\n' ' ' < $OUT/ev/ingest_time.txt)" | tee $OUT/ingest.txt
  for s in $SUITES; do
    ( d=$W/e_$s
      [ $s = $FIRST ] || $CQ ingest --data $d --kb $s $W/eval/$s/docs > /dev/null 2>&1
      for mode in bm25 dense router,bm25 router,bm25,dense; do
        left=$(( DEADLINE - $(date +%s) )); [ $left -gt 5 ] || break
        timeout $left $CQ eval --data $d --kb $s --suite $W/eval/$s --mode $mode --answers extractive --json \
          > $OUT/ev/$s.$NAME.$(echo $mode | tr ',' '_').json 2>> $OUT/ev/$s.err
      done
      left=$(( DEADLINE - $(date +%s) ))
      [ $left -gt 20 ] && timeout $left python3 tools/ssm_train/fusion.py collect --clauseqa $CQ --data $d \
        --suites $W/eval/only_$s --calib-only --tag $NAME --out $OUT/ev/fusion.$NAME.$s.json.gz > /dev/null 2>> $OUT/ev/fusion.err
    ) &
  done
  wait
  echo "evals done in $(( $(date +%s) - T0 )) s"
  python3 tools/ssm_train/eval_table.py $OUT/ev $NAME | tee $OUT/table.txt
  python3 tools/ssm_train/fusion.py fit --merge $OUT/ev/fusion.$NAME.*.json.gz 2>&1 | tee $OUT/fusion.txt
  tar -C $OUT -czf $OUT/ev.tgz ev && rm -rf $OUT/ev
  # the run itself (if the wait above missed it) and its diagnosis, which ran beside this evaluation
  [ -f $OUT/$NAME.tgz ] || { [ -f $W/$NAME.tgz ] && cp $W/$NAME.tgz $W/teacher.log $OUT/; }
  for i in $(seq 1 ${DIAG_WAIT:-60}); do grep -q "diag rc" $W/job.log 2>/dev/null && break; sleep 1; done
  cp $W/diag.$NAME.txt $OUT/diag.txt 2>/dev/null; cat $W/job.log ;;
*) echo "usage: $0 stash|train|poll|tests|eval"; exit 2 ;;
esac
