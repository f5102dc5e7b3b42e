#!/bin/bash
# Issue 6, on the H200 (one `run` call): the whole laws-zh corpus ingested with the encoder on the GPU (timed), and
# `clauseqa eval` of the four dev suites' validation questions in five modes, for the shipped weights (old) and the
# new ones (NEW: one or more folders, each tagged by its name; default: the best of device_train.sh's
# .device/run1/d*/ by mean validation hit@5), CUDA backend. The timed ingest uses the first of NEW.
#   carry: .device/c2 (cq.tar.xz: bin/clauseqa built here with -DCLAUSEQA_CUDA=ON and stripped, lib/ its non-system
#          shared libraries, eval/<suite>-val/ = tools/ssm_train/val_suites.py's folders with the documents copied)
# Results: $OUT/ev/<suite>.<old|tag>.<mode>.json (eval_table.py reads them), $OUT/ingest.txt, $OUT/log.txt.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
DEADLINE=$(( T0 + ${LIMIT:-540} ))   # every eval is stopped by then, so that the results come back
TIMEFORMAT="%R s wall, %U s user, %S s sys"
W=/tmp/cq; rm -rf $W; mkdir -p $W && tar -C $W -xJf .device/c2/cq.tar.xz || exit 1
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export CLAUSEQA_DENSE=on
CQ=$W/bin/clauseqa
ldd $CQ | grep "not found" && exit 1
NEW=${NEW:-$(python3 - <<'PY'
import json, glob
best = None
for p in sorted(glob.glob(".device/run1/d*/ssm.json")):
    v = json.load(open(p))["manifest"].get("validation") or {}
    try:
        s = sum(v[k]["hit@5"] for k in ("laws-zh/semantic", "policy-zh-dev", "cuad-dev", "contracts-en-dev")) / 4
    except KeyError:
        continue
    print(p, round(s, 4), file=__import__("sys").stderr)
    if best is None or s > best[0]:
        best = (s, p[:-len("/ssm.json")])
print(best[1] if best else "")
PY
)}
echo "new weights: $NEW"
TAGS=old; FIRST=
rm -rf /tmp/d_*; mkdir -p $OUT/ev /tmp/d_old/models/ssm
cp data/models/ssm/ssm.json data/models/ssm/ssm.safetensors /tmp/d_old/models/ssm/
for n in $NEW; do
  [ -f "$n/ssm.safetensors" ] || { echo "no weights in $n"; exit 1; }
  t=$(basename $n); [ "$t" != old ] || t=new_old
  mkdir -p /tmp/d_$t/models/ssm && cp $n/ssm.json $n/ssm.safetensors /tmp/d_$t/models/ssm/
  cp $n/ssm.json $OUT/$t.ssm.json
  TAGS="$TAGS $t"; [ -n "$FIRST" ] || FIRST=$t
done
[ -n "$FIRST" ] || { echo "no new weights"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
# 1. the timed figure: whole laws-zh, new weights, nothing else running
echo "weights $FIRST: clauseqa ingest --kb laws-zh, 3,368 Markdown files, CLAUSEQA_DENSE=on, CUDA" > $OUT/ingest.txt
{ time timeout $(( DEADLINE - 60 - $(date +%s) )) $CQ ingest --data /tmp/d_$FIRST --kb laws-zh $W/eval/laws-zh-val/docs --json > /tmp/ingest_first.json ; } 2>> $OUT/ingest.txt
FIRST=$FIRST python3 - >> $OUT/ingest.txt 2>&1 <<'PY'
import json, sqlite3
import os
db = sqlite3.connect("/tmp/d_%s/clauseqa.db" % os.environ["FIRST"])
for q in ("select count(*) from documents", "select count(*) from clauses", "select count(*) from clause_vectors",
          "select count(*) from doc_states"):
    print(q, db.execute(q).fetchone()[0])
PY
ls -la /tmp/d_$FIRST /tmp/d_$FIRST/vectors >> $OUT/ingest.txt 2>&1
cat $OUT/ingest.txt
echo "ingest done at $(( $(date +%s) - T0 )) s"
# 2. the other weights' laws-zh stores, and every eval, in parallel over (weights, suite); one data folder per pair
evals() {  # weights suite datadir
  for mode in bm25 router,bm25 dense bm25,dense router,bm25,dense; do
    left=$(( DEADLINE - $(date +%s) )); [ $left -gt 5 ] || return
    timeout $left $CQ eval --data $3 --kb $2 --suite $W/eval/$2-val --mode $mode --answers extractive --json \
      > $OUT/ev/$2.$1.$(echo $mode | tr ',+' '__').json 2>> $OUT/ev/$2.$1.err
  done
}
for m in $TAGS; do
  if [ $m = $FIRST ]; then evals $m laws-zh /tmp/d_$m &
  else
    ( { time timeout $(( DEADLINE - $(date +%s) )) $CQ ingest --data /tmp/d_$m --kb laws-zh $W/eval/laws-zh-val/docs > /dev/null 2>&1 ; } 2> /tmp/${m}_ingest.txt
      echo "weights $m: laws-zh ingest (beside the evals): $(cat /tmp/${m}_ingest.txt)" >> $OUT/ingest.txt
      evals $m laws-zh /tmp/d_$m ) &
  fi
done
for m in $TAGS; do
  for s in policy-zh-dev cuad-dev contracts-en-dev; do
    mkdir -p /tmp/d_${m}_$s && cp -r /tmp/d_$m/models /tmp/d_${m}_$s/ 2>/dev/null
    evals $m $s /tmp/d_${m}_$s &
  done
done
wait
echo "evals done at $(( $(date +%s) - T0 )) s"
for m in $TAGS; do python3 tools/ssm_train/eval_table.py $OUT/ev $m | sed "s/^/$m /"; done
tar -C $OUT -czf $OUT/ev.tgz ev && rm -rf $OUT/ev
