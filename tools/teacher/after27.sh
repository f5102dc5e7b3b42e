#!/bin/bash
# After issue 27's window, here on the CPU: the files each `poll` brought back (FOLDER ... : the calls' files_at)
# go into the teacher cache outside the repository, are checked against the data, and the teacher + BM25 baseline is
# measured with the product's fusion (tools/teacher/teacher_fusion.py); the students' tgz are unpacked beside.
#   tools/teacher/after27.sh FOLDER [FOLDER ...]     (DATA=.device/ssm27/data, CACHE=/var/cache/clauseqa/teacher,
#                                                     RUNS_DIR=.device/teacher27_runs, PY=python3 with numpy)
set -eu
cd "$(dirname "$0")/../.."
DATA=${DATA:-.device/ssm27/data}
PY=${PY:-python3}
SHA=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['store_sha256'][:12])" $DATA/meta.json)
C=${CACHE:-/var/cache/clauseqa/teacher}/$SHA
R=${RUNS_DIR:-.device/teacher27_runs}
mkdir -p $C $R
for d in "$@"; do
  for f in $d/*; do
    case $f in
      *.tgz) tar -C $R -xzf $f && echo "run $(basename ${f%.tgz}) -> $R" ;;
      *.npz|*.json|*.txt|*.gz) cp $f $C/ ;;
    esac
  done
done
echo "cache: $C"
$PY tools/teacher/egemma_vectors.py check $C --data $DATA || echo "(incomplete: poll again for the files named)"
[ -f $C/dev_rank.npz ] && $PY tools/teacher/teacher_fusion.py --data $DATA --vectors $C --out $C/fusion.egemma.json.gz \
  | tee $C/teacher_fusion.txt
for r in $R/*/ssm.json; do
  [ -f $r ] && $PY -c "import json,sys; m=json.load(open(sys.argv[1]))['manifest']; v=m.get('validation') or {}; print(sys.argv[1], m.get('steps_done'), 'steps;', {k: v[k]['hit@5'] for k in v if isinstance(v[k], dict) and 'hit@5' in v[k] and '/' not in k})" $r
done
