#!/bin/bash
# Builds, here on the CPU, what issue 27's device calls carry (docs/SSM.md, "EmbeddingGemma teacher (issue 27)").
# A call carries at most 64 MiB with the lead's checkout (35 MiB of tracked files on 2026-12-06), so the sets are
# cut into parts of at most PART_MB (default 26 MB), one part folder a call (SETS="d m", either alone):
#   d<k>/data27.tar.xz.<k>-of-<n>  data/ (prepare.py: corpus.npz, queries.json, docs.json, meta.json), teacher/tokens.npz
#                          (egemma_pack.py), gemma-trim.gguf (gemma_vocab.trim: the decoder's
#                          tokenizer and the table rows of every id the data and the suites' questions use; the box
#                          makes the students' ids from it, beside the teacher)
#   m<k>/pack27.tar.<k>-of-<n> teacher/reference.npz, meta.json, pack/ (egemma.json, ids.npy, egemma.safetensors: int8 rows + scales, which xz
#                          does not shrink, so the set is a plain tar)
#   d1/tools.tar           this branch's tools/ (laid over the lead's checkout at each call)
#   d<last>/init27.tar.1-of-1  with INIT="name=DIR ...": weights to continue from (--init /tmp/w27/init/<name>)
#   tools/teacher/bundles27.sh        (DATA=.device/ssm27: data/ + teacher/ + data/tokens.gemma3.npz for the ids;
#                                      OUTD=.device/teacher27)
set -eu
cd "$(dirname "$0")/../.."
DATA=${DATA:-.device/ssm27}
OUTD=${OUTD:-.device/teacher27}
PART_MB=${PART_MB:-26}
PY=${PY:-python3}
NEED="data/corpus.npz data/queries.json data/docs.json data/meta.json data/tokens.gemma3.npz teacher/tokens.npz"
case " ${SETS:-d m} " in *" m "*) NEED="$NEED teacher/reference.npz teacher/meta.json teacher/pack/egemma.json teacher/pack/ids.npy teacher/pack/egemma.safetensors" ;; esac
for f in $NEED; do
  [ -f $DATA/$f ] || { echo "missing $DATA/$f (prepare.py, tokenize_data.py --tokenizer gemma3, tools/teacher/egemma_pack.py)"; exit 1; }
done
if [ ! -f $DATA/gemma-trim.gguf ] || [ $DATA/data/tokens.gemma3.npz -nt $DATA/gemma-trim.gguf ]; then
  $PY - $DATA <<'PY'
import json, os, sys
import numpy as np
sys.path.insert(0, "tools/ssm_train"); sys.path.insert(0, "tools")
import dev_split, gemma_vocab
d = sys.argv[1]
ids = set(np.load(os.path.join(d, "data", "tokens.gemma3.npz"))["ids"].tolist())
fx = json.load(open("tests/data/ssm/train_gemma/cases.json", encoding="utf-8"))["token_ids"]  # the parity test's
ids.update(i for doc in fx["documents"] for c in doc for i in c)
ids.update(i for q in fx["queries"] for i in q)
v = gemma_vocab.Vocab()
for s in ["laws-zh", "policy-zh-dev", "cjrc-dev", "cuad-dev", "contracts-en-dev"]:
    for q in dev_split.read_questions("../shared/eval", s):
        ids.update(v.encode(q["question"]).tolist())
n = gemma_vocab.trim(sorted(ids), os.path.join(d, "gemma-trim.gguf"))
print("gemma-trim.gguf: %d rows kept" % n)
PY
fi
mkdir -p $OUTD
split_parts() {  # file set-letter -> $OUTD/<letter><k>/file.<k>-of-<n>
  local f=$1 L=$2 n i=1
  rm -rf $OUTD/$L[0-9]*
  n=$(( ($(stat -c %s $f) + PART_MB * 1000000 - 1) / (PART_MB * 1000000) ))
  split -b ${PART_MB}000000 -d -a 2 $f $f.piece.
  for p in $f.piece.*; do
    mkdir -p $OUTD/$L$i && mv $p $OUTD/$L$i/$(basename $f).$i-of-$n
    i=$((i + 1))
  done
  rm -f $f
}
for what in ${SETS:-d m}; do
  case $what in
  d) tar -C $DATA -cf - data/corpus.npz data/queries.json data/docs.json data/meta.json teacher/tokens.npz \
       gemma-trim.gguf | xz -T2 -${XZ:-4} > $OUTD/data27.tar.xz
     split_parts $OUTD/data27.tar.xz d
     tar --exclude=__pycache__ -cf $OUTD/d1/tools.tar tools ;;
  m) tar -C $DATA -cf $OUTD/pack27.tar teacher/reference.npz teacher/meta.json teacher/pack/egemma.json \
       teacher/pack/ids.npy teacher/pack/egemma.safetensors
     split_parts $OUTD/pack27.tar m ;;
  esac
done
# INIT="name=DIR ...": weights to continue from (train.py --init /tmp/w27/init/<name>), e.g. the committed
# checkpoint INIT="e192x4=data/models/ssm-e192x4g"; one plain tar in the smallest data part (d3), unpacked by stash
if [ -n "${INIT:-}" ]; then
  T=$(mktemp -d)
  for spec in $INIT; do
    name=${spec%%=*}; dir=${spec#*=}
    [ -f $dir/ssm.json ] && [ -f $dir/ssm.safetensors ] || { echo "INIT $name: $dir lacks ssm.json or ssm.safetensors"; exit 1; }
    mkdir -p $T/init/$name && cp $dir/ssm.json $dir/ssm.safetensors $T/init/$name/
    [ -f $dir/doc_head.safetensors ] && cp $dir/doc_head.safetensors $T/init/$name/
  done
  last=$(ls -d $OUTD/d[0-9]* | sort -V | tail -1)
  rm -f $OUTD/d*/init27.tar.*; tar -C $T -cf $last/init27.tar.1-of-1 init && rm -rf $T
  echo "init: $(tar -tf $last/init27.tar.1-of-1 | grep -c safetensors) weight files in $last/init27.tar.1-of-1"
fi
ls -la $OUTD/*/
echo "$(ls -d $OUTD/*/ | wc -l) part folders; each call carries one (carry: $OUTD/<d1..., m1...>)"
