#!/bin/bash
# Issue 26 item 3 on the GPU box: rerank with and without keep-doc (clauseqa eval --rerank-keep-doc K) on the
# validation parts, retrieval only (--answers extractive), beside router,bm25 — the runs that decide
# CLAUSEQA_RERANK_KEEP_DOC's default. Runs in the background while a training job shares the GPU:
#   MODEL=/tmp/model/X.gguf ADAPTER=/tmp/adapter_old tools/decoder_train/device_keepdoc.sh start   (returns at once)
#   tools/decoder_train/device_keepdoc.sh collect        (waits up to WAIT s, then $OUT/keepdoc.tar.xz)
# Expects the CUDA build and the validation suites unpacked in /tmp/ev (bundle_eval.sh / device_window2.sh unpack).
set -u
W=/tmp/ev
R=$W/keepdoc
MODEL=${MODEL:-/tmp/model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
ADAPTER=${ADAPTER:-/tmp/adapter_old}
SUITES=${SUITES:-"contracts-en-dev cuad-dev policy-zh-dev cmrc-dev cjrc-dev"}
PART=${PART:-vs} # vs: the validation parts; tq: the calibration parts (train side), to confirm a setting there
# KS: the runs of each suite (default "base 0 1 2 3": router,bm25, then rerank with keep-doc 0..3)
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CLAUSEQA_DENSE=off
case ${1:-start} in
start)
  [ -x $W/bin/clauseqa ] && [ -d $W/vs ] && [ -f $MODEL ] && [ -f $ADAPTER/adapter.json ] || { echo "missing bin, suites, model or adapter"; exit 1; }
  rm -rf $R; mkdir -p $R
  cat > $R/run.sh <<RUN
#!/bin/bash
for s in $SUITES; do
  mkdir -p $W/k_\$s/models && ln -sf $MODEL $W/k_\$s/models/ && ln -sfn $ADAPTER $W/k_\$s/models/answer
  [ -e $W/$PART/\$s/docs ] || ln -sfn $W/vs/\$s/docs $W/$PART/\$s/docs
  for k in ${KS:-base 0 1 2 3}; do
    if [ \$k = base ]; then a="--mode router,bm25"; else a="--mode router,bm25,rerank --rerank-keep-doc \$k"; fi
    t=\$(date +%s)
    $W/bin/clauseqa eval --data $W/k_\$s --kb \$s --suite $W/$PART/\$s --device cuda --answers extractive --json \
      --model $MODEL --adapter $ADAPTER --out $R/\$s.\$k.jsonl \$a > $R/\$s.\$k.json 2> $R/\$s.\$k.err
    echo "\$s \$k: exit \$? in \$(( \$(date +%s) - t )) s" >> $R/times.txt
  done
done
echo end >> $R/times.txt
RUN
  ( setsid nohup bash $R/run.sh > $R/nohup.log 2>&1 < /dev/null & )
  echo "keep-doc runs started $(date +%T)" ;;
collect)
  T0=$(date +%s)
  while ! grep -q "^end" $R/times.txt 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt ${WAIT:-0} ]; do sleep 3; done
  cat $R/times.txt 2>/dev/null
  for f in $R/*.json; do [ -s $f ] && echo "$(basename $f) $(python3 -c "import json,sys; d=json.load(open('$f')); a=d['all']; print(' '.join('%s %.3f' % (k, a.get(k, 0)) for k in ('hit@1','hit@5','mrr')))" 2>/dev/null)"; done
  tar -C $W -cJf ${OUT:-/tmp}/keepdoc.tar.xz keepdoc && echo "keepdoc.tar.xz $(du -h ${OUT:-/tmp}/keepdoc.tar.xz | cut -f1)" ;;
esac
