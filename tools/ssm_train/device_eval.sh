#!/bin/bash
# Issue 14, call C on the H200 (one `run` call; everything stops by LIMIT s, default 560): the C runtime, CUDA
# build, over the dev suites' validation parts (tools/dev_split.py, by document), for the shipped weights ("old") and
# each new weights folder:
#   1. GPU encode speed of candidate shapes (bench_ssm gpu shape=DxL ...: docs/SSM.md "Sizes");
#   2. per weights: every suite ingested with the encoder on the GPU (laws-zh timed), then `clauseqa eval` in the
#      modes dense and router,bm25,dense (bm25 and router,bm25 once, with the old weights' stores);
#   3. per new weights: fusion.py collect (BM25 and dense rankings of both parts' questions) for the calibrated fusion.
# Weights: NEW="name ..." from /tmp/stash14/runs/<name> (call B just before) or .device/new/<name>/ (carried);
# default: every run call B left. The Gemma vocabulary: the trimmed GGUF of the data parts (gemma_vocab.py trim;
# device_stash.sh) linked in as DATA/models/gemma-3-270m-q4_k_m.gguf.
#   carry: .device/s14/e1 (device_bundles.sh: CUDA clauseqa + libraries + bench_ssm, the suites' validation parts);
#          the trimmed GGUF comes from the parts stashed by calls A and B (or carry .device/s14/p1 again).
# Back: $OUT/ev.tgz (eval JSON per suite.tag.mode + per-question lines), $OUT/fusion.<tag>.json.gz, $OUT/speed.txt,
#       $OUT/ingest.txt, $OUT/log.txt
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
DEADLINE=$(( T0 + ${LIMIT:-560} ))
OUT=${OUT:-/tmp/out14}; mkdir -p $OUT
W=/tmp/ssm14
SUITES=${SUITES:-"laws-zh policy-zh-dev cjrc-dev cuad-dev contracts-en-dev"}
if [ "${TINY:-0}" = 1 ]; then  # a CPU test of this script: the CPU build, small suites, device_train.sh TINY=1's runs
  W=/tmp/ssm14tiny; mkdir -p $W/cq/bin; ln -sf $PWD/build/clauseqa $W/cq/bin/; ln -sf $PWD/build/tests/bench_ssm $W/cq/bin/
  ln -sf $(readlink -f data/models/gemma-3-270m-q4_k_m.gguf) $W/gemma-trim.gguf
  SUITES=${TINY_SUITES:-"policy-zh-dev contracts-en-dev"}
  for s in $SUITES; do
    mkdir -p $W/eval/$s && python3 tools/dev_split.py --out $W/v $s > /dev/null && python3 tools/dev_split.py --out $W/t --part train $s > /dev/null &&
      ln -sfn $(readlink -f ../shared/eval/$s/docs) $W/eval/$s/docs && cp $W/v/$s/questions.jsonl $W/eval/$s/ && cp $W/t/$s/questions.jsonl $W/eval/$s/train.jsonl
  done
else
  tools/ssm_train/device_stash.sh cq/bin/clauseqa gemma-trim.gguf 2>&1 | tee $OUT/log.txt || exit 1
fi
export LD_LIBRARY_PATH=$W/cq/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export CLAUSEQA_DENSE=on
CQ=$W/cq/bin/clauseqa
ldd $CQ | grep "not found" && exit 1
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/log.txt; }
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee -a $OUT/log.txt

# 0. the CUDA backend against the PyTorch fixtures, the external vocabulary's too (test_ssm_ref: a lent table;
#    test_ssm_train_parity: text through the Gemma vocabulary of the trimmed GGUF, which holds the fixture's rows)
if [ "${TINY:-0}" != 1 ]; then
  T=/tmp/cqsrc; rm -rf $T; mkdir -p $T/data/models && ln -s $PWD/tests $T/tests && ln -s $W/gemma-trim.gguf $T/data/models/gemma-3-270m-q4_k_m.gguf
  for t in test_ssm_ref test_ssm_train_parity test_ssm_cuda test_ssm_doc_head; do
    ldd $W/cq/bin/$t | grep "not found" | sed "s/^/$t: /" | tee -a $OUT/log.txt  # rc 127 otherwise says nothing
    CLAUSEQA_SOURCE_DIR=$T timeout 120 $W/cq/bin/$t > /tmp/$t.txt 2>&1; log "$t rc $? ($(grep -c OK /tmp/$t.txt) ok, $(grep -c SKIPPED /tmp/$t.txt) skipped lines)"
    grep -E "FAIL|Error|error" /tmp/$t.txt | head -5
  done
fi

# 1. GPU encode speed by shape (random weights, the built-in vocabulary: the input layer is a table row either way)
timeout 120 $W/cq/bin/bench_ssm gpu ${SHAPES:-shape=192x4 shape=256x4 shape=384x4 shape=192x6} > $OUT/speed.txt 2>&1
log "bench_ssm rc $?"; grep -E "^#|tokens/s" $OUT/speed.txt

# 2. weights
NEW=${NEW:-$(ls /tmp/stash14/runs 2>/dev/null | tr '\n' ' ')}
TAGS=""
# only this call's own data folders (old and NEW's tags): a KB another run keeps under /tmp/d_<other> stays (a blanket
# /tmp/d_* removed a laws-zh ingest running beside a TINY call on the dev box, 2026-12-07)
for t in old $NEW; do rm -rf /tmp/d_$t /tmp/d_${t}_*; done
mkdir -p $OUT/ev
setup() {  # tag source
  mkdir -p /tmp/d_$1/models/ssm && cp $2/ssm.json $2/ssm.safetensors /tmp/d_$1/models/ssm/ &&
  ln -sf $W/gemma-trim.gguf /tmp/d_$1/models/gemma-3-270m-q4_k_m.gguf
}
# SKIP_OLD=1: only the new weights (the shipped ones' figures are known; their safetensors need not travel)
[ "${SKIP_OLD:-0}" = 1 ] || { setup old data/models/ssm && TAGS=old; }
for n in $NEW; do
  src=/tmp/stash14/runs/$n; [ -f $src/ssm.safetensors ] || src=.device/new/$n
  [ -f $src/ssm.safetensors ] || { log "no weights for $n"; continue; }
  setup $n $src && TAGS="$TAGS $n"
done
log "weights: $TAGS"
evals() {  # tag suite datadir modes...
  local t=$1 s=$2 d=$3; shift 3
  for mode in "$@"; do
    left=$(( DEADLINE - $(date +%s) )); [ $left -gt 5 ] || return
    timeout $left $CQ eval --data $d --kb $s --suite $W/eval/$s --mode $mode --answers extractive --json \
      > $OUT/ev/$s.$t.$(echo $mode | tr ',' '_').json 2>> $OUT/ev/$s.$t.err
  done
}
for s in $SUITES; do mkdir -p $W/eval/only_$s && ln -sfn $W/eval/$s $W/eval/only_$s/$s; done
for t in $TAGS; do
  for s in $SUITES; do
    d=/tmp/d_${t}_$s; mkdir -p $d && cp -r /tmp/d_$t/models $d/
    modes="dense router,bm25,dense"; [ $t = old ] && modes="bm25 router,bm25 $modes"
    ( if [ $s = laws-zh ]; then
        { time timeout $(( DEADLINE - $(date +%s) )) $CQ ingest --data $d --kb $s $W/eval/$s/docs > /dev/null 2>&1 ; } 2> /tmp/ingest_$t.txt
        echo "weights $t: laws-zh ingest ($(ls $W/eval/$s/docs | wc -l) files, encoder on the GPU, beside the other ingests): $(tr '\n' ' ' < /tmp/ingest_$t.txt)" >> $OUT/ingest.txt
      fi
      evals $t $s $d $modes
      if [ $t != old ]; then
        left=$(( DEADLINE - $(date +%s) ))
        [ $left -gt 20 ] && timeout $left python3 tools/ssm_train/fusion.py collect --clauseqa $CQ --data $d \
          --suites $W/eval/only_$s --tag $t --out $OUT/ev/fusion.$t.$s.json.gz > /dev/null 2>> $OUT/ev/fusion.err
      fi ) &
  done
done
wait
log "evals done"
cat $OUT/ingest.txt 2>/dev/null
for t in $TAGS; do python3 tools/ssm_train/eval_table.py $OUT/ev $t | sed "s/^/$t /"; done | tee $OUT/table.txt
# the fusion files of a tag in one, scored, then everything in ev.tgz (at most 8 files come back)
for t in $TAGS; do
  [ $t = old ] && continue
  python3 - $OUT/ev $t <<'PY'
import glob, gzip, json, os, sys
ev, tag = sys.argv[1], sys.argv[2]
qs = {}
for p in sorted(glob.glob(os.path.join(ev, "fusion.%s.*.json.gz" % tag))):
    qs.update(json.load(gzip.open(p, "rt"))["questions"])
    os.remove(p)
with gzip.open(os.path.join(ev, "fusion.%s.json.gz" % tag), "wt") as f:
    json.dump({"tag": tag, "questions": qs}, f)
PY
done
ls $OUT/ev/fusion.*.json.gz > /dev/null 2>&1 && python3 tools/ssm_train/fusion.py fit $OUT/ev/fusion.*.json.gz 2>&1 | tee $OUT/fusion.txt
tar -C $OUT -czf $OUT/ev.tgz ev && rm -rf $OUT/ev
log "done"
