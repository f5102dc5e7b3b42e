#!/bin/bash
# Packs everything the GPU box needs to train an answer adapter into ONE self-contained folder (here, on the CPU), so
# that the lead's checkout can carry it from its own ignored .device/ without merging this branch first:
#   BUNDLE/tools/decoder_train/   train.py and what it imports, device_train.sh
#   BUNDLE/data/models/NAME.sha256
#   BUNDLE/dec/data.tar.xz        prepare.py's validation + calibration files, pack.py's tokens.npz (the train text
#                                 stays here: the box reads token ids only), meta.json, from DATA
#   BUNDLE/whl/gguf-*.whl         the gguf package (the box has torch, transformers, safetensors, numpy, not gguf)
#   BUNDLE/gguf/pN/NAME.partNNofMM  the base GGUF in pieces, one per `run` call (tools/device_model.sh's piece size:
#                                 what fits beside the travelling tree, PIECE_BYTES to force one)
# and prints the `run` calls (command + carry) for a checkout that holds it at DEST (default .device/lora26), also
# into BUNDLE/CALLS.txt. EXTRA: train.py options for the training call; LIMIT / VAL_RESERVE: device_train.sh's;
# PIECE_BYTES / TREE_BYTES: the piece size and the calling checkout's travelling tree, when not this one's; SUMS: the
# folder of NAME.sha256 (default data/models).
#   MODEL=data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tools/decoder_train/bundle.sh [DATA [BUNDLE]]
# For a background run across calls (device_adapt.sh, issue 26's next run): PIECES=0 makes no gguf/ (the calling
# checkout already holds the pieces: GGUF_FROM, default .device/lora26/gguf, NPIECES of them, default 21) and
# INIT=DIR puts an adapter to start from in BUNDLE/init/ after checking it against MODEL (names, shapes, rank, base
# sha256, finite values; PY: a Python with torch, safetensors and gguf, default /opt/venv-train/bin/python); the
# whole folder must then fit one call beside the calling tree (TREE_BYTES, default 7.4 MB: a shrunk checkout).
set -euo pipefail
cd "$(dirname "$0")/../.."
# what the box runs, with everything it imports (refusal_threshold.py needs tools/dev_split.py since aa70b99: a bundle
# without it stops at train.py's first import); `bundle.sh --files` prints the list (test_decoder_heldout_train)
BOX_FILES="tools/decoder_train/base.py tools/decoder_train/cqprompt.py tools/decoder_train/lora.py
  tools/decoder_train/pack.py tools/decoder_train/refusal_threshold.py tools/decoder_train/train.py
  tools/decoder_train/device_train.sh tools/decoder_train/device_adapt.sh tools/device_model.sh tools/dev_split.py"
if [ "${1:-}" = --files ]; then echo $BOX_FILES | tr ' ' '\n'; exit 0; fi
DATA=${1:-.device/dec_data}
BUNDLE=${2:-.device/bundle}
MODEL=${MODEL:-data/models/gemma-3-270m-q4_k_m.gguf}
DEST=${DEST:-.device/lora26}
NAME=$(basename "$MODEL")
for f in tokens.npz val_answer.jsonl val_rerank.jsonl meta.json; do
  [ -f "$DATA/$f" ] || { echo "bundle: $DATA/$f missing (prepare.py, then pack.py)" >&2; exit 1; }
done
packed_for=$(python3 -c "import json, numpy as np; print(json.loads(str(np.load('$DATA/tokens.npz')['meta'])).get('gguf', ''))" 2>/dev/null || true)
if [ -n "$packed_for" ] && [ "$packed_for" != "$NAME" ]; then
  echo "bundle: $DATA/tokens.npz was packed for $packed_for, not $NAME (pack.py --base $MODEL)" >&2
  exit 1
fi
ls .whl/gguf-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl gguf
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/tools/decoder_train" "$BUNDLE/data/models" "$BUNDLE/dec" "$BUNDLE/whl"
for f in $BOX_FILES; do cp "$f" "$BUNDLE/$f"; done
cp "${SUMS:-data/models}/$NAME.sha256" "$BUNDLE/data/models/"
cp .whl/gguf-*.whl "$BUNDLE/whl/"
T=$(mktemp -d)
mkdir -p "$T/dec_data"
cp "$DATA"/tokens.npz "$DATA"/val_answer.jsonl "$DATA"/val_rerank.jsonl "$DATA"/meta.json "$T/dec_data/"
[ -f "$DATA/cal_answer.jsonl" ] && cp "$DATA/cal_answer.jsonl" "$T/dec_data/"
tar -C "$T" -cf - dec_data | xz -T2 -${XZ_LEVEL:-6} > "$BUNDLE/dec/data.tar.xz"
rm -rf "$T"
if [ -n "${INIT:-}" ]; then
  [ -f "$INIT/adapter.json" ] && [ -f "$INIT/adapter.safetensors" ] || { echo "bundle: no adapter in $INIT" >&2; exit 1; }
  "${PY:-/opt/venv-train/bin/python}" - "$INIT" "$MODEL" "${SUMS:-data/models}/$NAME.sha256" <<'PY' || { echo "bundle: $INIT does not fit $MODEL" >&2; exit 1; }
import json, os, sys
sys.path.insert(0, "tools/decoder_train")
import torch
import lora as L
from safetensors.torch import load_file
init, model, sha = sys.argv[1:4]
doc = json.load(open(os.path.join(init, "adapter.json"), encoding="utf-8"))
t = load_file(os.path.join(init, "adapter.safetensors"))
want = open(sha).read().split()[0]
bad = []
if (doc.get("base") or {}).get("sha256") != want:
    bad.append("base sha256 %s, the model's %s" % ((doc.get("base") or {}).get("sha256"), want))
fac = {n: L.factor(t, n) for n in t if not n.endswith(".scale")}
bad += L.check_adapter(doc, fac, L.gguf_weight_shapes(model))
bad += ["%s: not finite" % n for n, x in fac.items() if not torch.isfinite(x).all()]
if bad:
    sys.exit("; ".join(bad[:6]))
m = doc.get("manifest") or {}
print("bundle: init adapter %s: rank %s alpha %s, %d factors (%s), %s steps of commit %s: fits %s"
      % (init, doc["rank"], doc["alpha"], len(fac), (m.get("storage") or {}).get("dtype") or m.get("export_dtype"),
         m.get("steps"), m.get("commit"), os.path.basename(model)))
PY
  mkdir -p "$BUNDLE/init" && cp "$INIT/adapter.json" "$INIT/adapter.safetensors" "$BUNDLE/init/"
fi
if [ "${PIECES:-1}" = 0 ]; then
  tree=${TREE_BYTES:-7400000}
  all=$(du -cb "$BUNDLE" | tail -1 | cut -f1)
  echo "bundle: $BUNDLE $((all / 1000)) kB (no GGUF pieces); tree $((tree / 1000)) kB"
  [ $((tree + all + 1500000)) -le 67108864 ] || { echo "bundle: $BUNDLE does not fit one call beside the tree" >&2; exit 1; }
  G=${GGUF_FROM:-.device/lora26/gguf}
  {
    echo "# $NAME: the pieces $G/p1..p${NPIECES:-21} are on the calling checkout; copy $BUNDLE to <checkout>/$DEST."
    echo "# Fire back to back (the machine goes back when idle: a gap loses the stash and the background run)."
    for i in $(seq 1 ${NPIECES:-21}); do
      echo "run carry=[\"$G/p$i\"] command: GGUF_DIR=$G bash tools/device_model.sh stash"
    done
    echo "# start: from scratch (INIT=none) or INIT=init (the bundle's init/ adapter$([ -d "$BUNDLE/init" ] || echo ': none in this bundle')); BUDGET: training seconds"
    echo "run carry=[\"$DEST\"] command: cd $DEST && INIT=${CALL_INIT:-none} COMMIT=<sha> BUDGET=${BUDGET:-720} bash tools/decoder_train/device_adapt.sh start"
    echo "run command: OUT=\$OUT bash /tmp/adapt26/tools/decoder_train/device_adapt.sh wait     # again until 'adapter at'"
  } | tee "$BUNDLE/CALLS.txt"
  exit 0
fi
OUTDIR="$BUNDLE/gguf" tools/device_model.sh split "$MODEL" >/dev/null
n=$(ls -d "$BUNDLE"/gguf/p* | wc -l)
small=$(du -cb "$BUNDLE/tools" "$BUNDLE/data" "$BUNDLE/dec" "$BUNDLE/whl" | tail -1 | cut -f1)
last=$(stat -c %s "$BUNDLE"/gguf/p$n/*)
tree=${TREE_BYTES:-$(tools/device_model.sh tree)}   # TREE_BYTES: the calling checkout's, when it differs
echo "bundle: $BUNDLE: $n pieces of $NAME; tools + data + wheel $((small / 1000)) kB; last piece $((last / 1000)) kB;" \
     "tree $((tree / 1000)) kB"
# the calls: stash calls for the pieces that do not ride with the training call
ride=0
[ $((tree + small + last + 1500000)) -le 67108864 ] && ride=1
{
  echo "# $NAME: $n pieces; copy $BUNDLE to <checkout>/$DEST, then fire these back to back (the machine goes back"
  echo "# 30 s after a call: a gap loses the stashed pieces)."
  for i in $(seq 1 $((n - ride))); do
    echo "run carry=[\"$DEST/gguf/p$i\"] command: mkdir -p /tmp/gguf && cp $DEST/gguf/p$i/* /tmp/gguf/ && ls /tmp/gguf | wc -l"
  done
  carry="\"$DEST/tools\", \"$DEST/data\", \"$DEST/dec\", \"$DEST/whl\""
  [ $ride = 1 ] && carry="$carry, \"$DEST/gguf/p$n\""
  echo "run timeout_s=600 carry=[$carry] command: cd $DEST && DEV=. WHL=whl MODEL=$NAME COMMIT=<sha> LIMIT=${LIMIT:-585} VAL_RESERVE=${VAL_RESERVE:-130} EXTRA=\"${EXTRA:-}\" OUT=\$OUT bash tools/decoder_train/device_train.sh"
} | tee "$BUNDLE/CALLS.txt"
