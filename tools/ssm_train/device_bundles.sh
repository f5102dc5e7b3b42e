#!/bin/bash
# Builds, here on the CPU, what issue 14's device calls carry (each call carries at most 64 MiB with the working
# tree, about 18 MB of it tracked files, so a bundle is cut into parts of at most PART_MB, default 42):
#   train  .device/s14/p1, p2 ...: s14.tar.xz.<i>-of-<n>, the tar of /tmp/ssm14's layout:
#            data/     prepare.py's corpus.npz, queries.json, docs.json, meta.json (texts: both input layers'
#                      ids are made on the GPU box by tokenize_data.py, which is cheaper to carry than two id sets)
#            teacher/  tools/teacher/export.py's tokens.npz, e5pack.npz, reference.npz, meta.json
#            gemma-trim.gguf   gemma_vocab.py trim: the decoder's tokenizer and the token-table rows of every id
#                      the data and the suites' questions use (and every 64th row, so the table's fingerprint holds);
#                      the rest zero, which xz removes: the 241 MB model does not travel
#   eval   .device/s14/e1 ...: s14eval.tar.xz.<i>-of-<n>: cq/bin/clauseqa (CUDA build, stripped), cq/bin/bench_ssm,
#            cq/bin/test_ssm_{ref,train_parity,cuda} (the CUDA backend against the fixtures, external vocabulary too),
#            cq/lib/ (the non-system shared libraries of all of them: libcmocka for the tests), eval/<suite>/
#            (docs, questions.jsonl = the validation part, train.jsonl = the train part's questions,
#            tools/dev_split.py)
#   tools/ssm_train/device_bundles.sh [train] [eval]      (DATA=.device/ssm14, CQ=build-gpu/clauseqa)
# The device scripts stash every part they carry (device_stash.sh) and unpack a set once all its parts are there.
set -eu
cd "$(dirname "$0")/../.."
DATA=${DATA:-.device/ssm14}
CQ=${CQ:-build-gpu/clauseqa}
PART_MB=${PART_MB:-42}
SUITES="laws-zh policy-zh-dev cjrc-dev cuad-dev contracts-en-dev"
[ $# -gt 0 ] || set -- train eval
split_parts() {  # file.tar.xz prefix(dir stem, e.g. .device/s14/p)
  local f=$1 stem=$2 n i=1
  rm -rf ${stem}[0-9]*
  n=$(( ($(stat -c %s $f) + PART_MB * 1000000 - 1) / (PART_MB * 1000000) ))
  split -b ${PART_MB}000000 -d -a 1 $f $f.piece.
  for p in $f.piece.*; do
    mkdir -p $stem$i && mv $p $stem$i/$(basename $f).$i-of-$n
    i=$((i + 1))
  done
  rm -f $f
  ls -la $stem*/
}
for what in "$@"; do
  case $what in
  train)
    for f in data/corpus.npz data/queries.json data/docs.json data/meta.json data/tokens.gemma3.npz \
             teacher/tokens.npz teacher/e5pack.npz teacher/reference.npz; do
      [ -f $DATA/$f ] || { echo "missing $DATA/$f (prepare.py, tokenize_data.py --tokenizer gemma3, tools/teacher/export.py)"; exit 1; }
    done
    # the table rows to keep: every id of the data (tokens.gemma3.npz) and of every question of the suites
    python3 - $DATA <<'PY'
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
    mkdir -p .device/s14
    tar -C $DATA -cf - data/corpus.npz data/queries.json data/docs.json data/meta.json teacher/tokens.npz \
      teacher/e5pack.npz teacher/reference.npz teacher/meta.json gemma-trim.gguf | xz -T2 -6 > .device/s14/s14.tar.xz
    split_parts .device/s14/s14.tar.xz .device/s14/p ;;
  eval)
    T=$(mktemp -d); mkdir -p $T/cq/bin $T/cq/lib $T/eval
    strip -o $T/cq/bin/clauseqa "$CQ"
    strip -o $T/cq/bin/bench_ssm "$(dirname $CQ)/tests/bench_ssm"
    for t in test_ssm_ref test_ssm_train_parity test_ssm_cuda test_ssm_doc_head; do strip -o $T/cq/bin/$t "$(dirname $CQ)/tests/$t"; done
    # the non-system libraries of every binary carried, not only clauseqa's: the unit tests link libcmocka, which
    # clauseqa does not (without it they stopped at the loader, rc 127, on the H200 box); CUDA's own libraries are
    # named exactly: a bare "cuda" also matched libicudata (ICU), which then went missing on the box
    for l in $(for b in $T/cq/bin/*; do ldd "$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u | grep -v -E \
        "/libc\.so|/libm\.so|ld-linux|/libdl\.|/libpthread\.|/librt\.|libgcc_s|libstdc|/libcuda|/libcudart|/libcublas|/libz\.so|/libblas\.|/liblapack\."); do
      cp -L "$l" $T/cq/lib/
    done
    ln -s libopenblas.so.0 $T/cq/lib/libblas.so.3
    ln -s libopenblas.so.0 $T/cq/lib/liblapack.so.3
    python3 tools/dev_split.py --eval ../shared/eval --out $T/v $SUITES > /dev/null
    python3 tools/dev_split.py --eval ../shared/eval --out $T/t --part train $SUITES > /dev/null
    for s in $SUITES; do
      mkdir -p $T/eval/$s && cp -rL $T/v/$s/docs $T/eval/$s/ && cp $T/v/$s/questions.jsonl $T/eval/$s/ &&
        cp $T/t/$s/questions.jsonl $T/eval/$s/train.jsonl
    done
    mkdir -p .device/s14
    tar -C $T -cf - cq eval | xz -T2 -9 > .device/s14/s14eval.tar.xz
    rm -rf $T
    split_parts .device/s14/s14eval.tar.xz .device/s14/e ;;
  esac
done
