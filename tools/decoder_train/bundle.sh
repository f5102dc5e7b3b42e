#!/bin/bash
# Packs what device_train.sh needs on the GPU box into git-ignored folders (here, on the CPU):
#   .device/dec/data.tar.xz   prepare.py's validation files + pack.py's tokens.npz (the train text stays here: the
#                             box reads token ids only) + meta.json, from DATA (default .device/dec_data)
#   .whl/gguf-*.whl           the gguf package (the box has torch, transformers, safetensors, numpy, not gguf)
# With the working tree (~18 MB) a call carries at most 64 MiB: this prints the sizes and the carry list.
#   tools/decoder_train/bundle.sh [DATA]
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${1:-.device/dec_data}
for f in tokens.npz val_answer.jsonl val_rerank.jsonl meta.json; do
  [ -f "$DATA/$f" ] || { echo "bundle: $DATA/$f missing (prepare.py, then pack.py)" >&2; exit 1; }
done
ls .whl/gguf-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl gguf
mkdir -p .device/dec
T=$(mktemp -d)
mkdir -p "$T/dec_data"
cp "$DATA"/tokens.npz "$DATA"/val_answer.jsonl "$DATA"/val_rerank.jsonl "$DATA"/meta.json "$T/dec_data/"
tar -C "$T" -cf - dec_data | xz -T2 -9e > .device/dec/data.tar.xz.tmp
mv .device/dec/data.tar.xz.tmp .device/dec/data.tar.xz
rm -rf "$T"
ls -l .device/dec/data.tar.xz .whl/gguf-*.whl
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
dec=$(stat -c %s .device/dec/data.tar.xz)
whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
last=$(ls .device/gguf/p*/*.part* 2>/dev/null | tail -1 || true)
lastb=$([ -n "$last" ] && stat -c %s "$last" || echo 0)
echo "bundle: tree $((tree / 1000000)) MB + data $((dec / 1000000)) MB + wheel $((whl / 1000)) kB" \
     "+ last GGUF piece $((lastb / 1000000)) MB = $(((tree + dec + whl + lastb) / 1000000)) MB (limit 67 MB)"
