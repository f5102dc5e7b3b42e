#!/bin/bash
# Builds, here on the CPU, what issue 27's device calls carry (docs/SSM.md, "EmbeddingGemma teacher (issue 27)").
# A call carries at most 64 MiB with the lead's checkout (35 MiB of tracked files on 2026-12-06), so the sets are
# cut into parts of at most PART_MB (default 26 MB), one part folder a call:
#   d27.tar.xz.<i>-of-<n>  data/ (prepare.py: corpus.npz, queries.json, docs.json, meta.json), teacher/ (egemma_pack.py:
#                          tokens.npz, reference.npz, meta.json), gemma-trim.gguf (gemma_vocab.trim: the decoder's
#                          tokenizer and the table rows of every id the data and the suites' questions use; the box
#                          makes the students' ids from it, beside the teacher)
#   m27.tar.<i>-of-<n>     teacher/pack/ (egemma.json, ids.npy, egemma.safetensors: int8 rows + scales, which xz
#                          does not shrink, so the set is a plain tar)
#   tools.tar              this branch's tools/ (laid over the lead's checkout at each call), in the first part
#   tools/teacher/bundles27.sh        (DATA=.device/ssm27: data/ + teacher/ + data/tokens.gemma3.npz for the ids;
#                                      OUTD=.device/teacher27)
set -eu
cd "$(dirname "$0")/../.."
DATA=${DATA:-.device/ssm27}
OUTD=${OUTD:-.device/teacher27}
PART_MB=${PART_MB:-26}
PY=${PY:-python3}
for f in data/corpus.npz data/queries.json data/docs.json data/meta.json data/tokens.gemma3.npz teacher/tokens.npz \
         teacher/reference.npz teacher/meta.json teacher/pack/egemma.json teacher/pack/ids.npy \
         teacher/pack/egemma.safetensors; do
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
rm -rf $OUTD; mkdir -p $OUTD
split_parts() {  # file prefix(set name) -> $OUTD/p<k>/file.<i>-of-<n>, continuing the part numbering
  local f=$1 n i=1
  n=$(( ($(stat -c %s $f) + PART_MB * 1000000 - 1) / (PART_MB * 1000000) ))
  split -b ${PART_MB}000000 -d -a 2 $f $f.piece.
  for p in $f.piece.*; do
    K=$((K + 1)); mkdir -p $OUTD/p$K && mv $p $OUTD/p$K/$(basename $f).$i-of-$n
    i=$((i + 1))
  done
  rm -f $f
}
K=0
tar -C $DATA -cf - data/corpus.npz data/queries.json data/docs.json data/meta.json teacher/tokens.npz \
  teacher/reference.npz teacher/meta.json gemma-trim.gguf | xz -T2 -6 > $OUTD/d27.tar.xz
split_parts $OUTD/d27.tar.xz
tar -C $DATA -cf $OUTD/m27.tar teacher/pack/egemma.json teacher/pack/ids.npy teacher/pack/egemma.safetensors
split_parts $OUTD/m27.tar
tar -cf $OUTD/p1/tools.tar tools
ls -la $OUTD/*/
du -sh $OUTD/p* | awk '{print}'
echo "$K part folders; each call carries one (carry: $OUTD/p<k>)"
