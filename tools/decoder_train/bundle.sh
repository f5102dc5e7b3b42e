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
# PIECE_BYTES / TREE_BYTES: the piece size and the calling checkout's travelling tree, when not this one's.
#   MODEL=data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tools/decoder_train/bundle.sh [DATA [BUNDLE]]
set -euo pipefail
cd "$(dirname "$0")/../.."
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
cp tools/decoder_train/{base,cqprompt,lora,pack,refusal_threshold,train}.py tools/decoder_train/device_train.sh \
   "$BUNDLE/tools/decoder_train/"
cp tools/device_model.sh "$BUNDLE/tools/"
cp "data/models/$NAME.sha256" "$BUNDLE/data/models/"
cp .whl/gguf-*.whl "$BUNDLE/whl/"
T=$(mktemp -d)
mkdir -p "$T/dec_data"
cp "$DATA"/tokens.npz "$DATA"/val_answer.jsonl "$DATA"/val_rerank.jsonl "$DATA"/meta.json "$T/dec_data/"
[ -f "$DATA/cal_answer.jsonl" ] && cp "$DATA/cal_answer.jsonl" "$T/dec_data/"
tar -C "$T" -cf - dec_data | xz -T2 -${XZ_LEVEL:-6} > "$BUNDLE/dec/data.tar.xz"
rm -rf "$T"
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
