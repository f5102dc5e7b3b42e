#!/bin/bash
# The answer adapter's training on the GPU box, ONE `run` call (at most ~9.5 minutes): joins the base GGUF from the
# pieces stashed by earlier calls, trains, brings the adapter back under $OUT/adapter/ (adapter.safetensors +
# adapter.json, written by train.py as soon as training ends, the calibration and validation scores added to
# adapter.json after), with $OUT/train.log and $OUT/device.log. Files over 16 MiB are cut into 15 MB parts
# (adapter.safetensors.part0, .part1 ...: cat them together here).
#
# Runs from a repository root or from a bundle made by tools/decoder_train/bundle.sh (a folder holding tools/,
# data/models/*.sha256, dec/, whl/, gguf/pN/: `cd BUNDLE && DEV=. WHL=whl bash tools/decoder_train/device_train.sh`).
# Before it: the GGUF's pieces on the box (tools/device_model.sh split here; earlier calls each carry one piece
# gguf/pN and copy it to /tmp/gguf/ (STASH)); the data (tools/decoder_train/bundle.sh here).
#   env: MODEL (the base GGUF's file name; default gemma-3-270m-q4_k_m.gguf), COMMIT (recorded in the manifest),
#        LIMIT (seconds this script may take, default 560), VAL_RESERVE (seconds kept after training for export,
#        calibration and validation, default 110), BUDGET (training seconds at most, default 600: --train-until
#        usually decides), EXTRA (more train.py arguments, e.g. "--rank 16 --micro-tokens 16384"),
#        DEV (folder holding dec/ and gguf/, default .device), WHL (folder of the gguf wheel, default .whl)
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LIMIT=${LIMIT:-560}
VAL_RESERVE=${VAL_RESERVE:-110}
DEADLINE=$((T0 + LIMIT))
MODEL=${MODEL:-gemma-3-270m-q4_k_m.gguf}
DEV=${DEV:-.device}
WHL=${WHL:-.whl}
OUT=${OUT:-/tmp/dec_out}
STASH=${STASH:-/tmp/gguf}        # the pieces stashed by earlier calls
W=${WORK:-/tmp}                      # scratch: $W/site (gguf), $W/model (the joined GGUF), $W/dec (data)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1 TOKENIZERS_PARALLELISM=false
exec > >(tee "$OUT/device.log") 2>&1
log() { echo "[device $(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
python3 -c "import sys, torch, transformers, safetensors, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site "$WHL"/gguf-*.whl || { log "gguf wheel install failed"; exit 1; }
export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import gguf; print('gguf', gguf.__file__)" || exit 1
# the pieces: stashed by earlier calls in ${STASH}, plus any carried in this one
mkdir -p ${STASH}
for f in "$DEV"/gguf/p*/"$MODEL".part*of*; do [ -f "$f" ] && cp "$f" ${STASH}/; done
if [ ! -f "$W/model/$MODEL" ]; then
  any=$(ls ${STASH}/"$MODEL".part*of* 2>/dev/null | head -1)
  [ -n "$any" ] || { log "no pieces of $MODEL in ${STASH}: the machine went back, stash them again"; exit 1; }
  n=$((10#${any##*of}))
  missing=""
  for i in $(seq 1 "$n"); do
    p=$(printf "${STASH}/%s.part%02dof%02d" "$MODEL" "$i" "$n")
    [ -f "$p" ] || missing="$missing p$i"
  done
  [ -z "$missing" ] || { log "missing pieces:$missing (carry $DEV/gguf/pN again)"; exit 1; }
  mkdir -p "$W/model"
  for i in $(seq 1 "$n"); do cat "$(printf "${STASH}/%s.part%02dof%02d" "$MODEL" "$i" "$n")"; done > "$W/model/$MODEL.tmp"
  got=$(sha256sum "$W/model/$MODEL.tmp" | awk '{print $1}')
  want=$(awk '{print $1}' "data/models/$MODEL.sha256")
  [ "$got" = "$want" ] || { log "joined $MODEL: sha256 $got, want $want: carry the pieces again"; rm -f "$W/model/$MODEL.tmp"; exit 1; }
  mv "$W/model/$MODEL.tmp" "$W/model/$MODEL"
  rm -f ${STASH}/"$MODEL".part*           # the box's /tmp: keep one copy
  log "joined $MODEL from $n pieces, sha256 ok"
fi
rm -rf $W/dec && mkdir -p $W/dec && tar -C $W/dec -xJf "$DEV"/dec/data.tar.xz || { log "no data bundle"; exit 1; }
log "ready: model joined, data unpacked; training until $((DEADLINE - VAL_RESERVE - T0)) s, deadline $LIMIT s"
timeout $((DEADLINE - $(date +%s))) python3 tools/decoder_train/train.py --data $W/dec/dec_data \
  --base "$W/model/$MODEL" --out "$OUT/adapter" --budget "${BUDGET:-600}" \
  --train-until $((DEADLINE - VAL_RESERVE)) --deadline $((DEADLINE - 8)) --commit "${COMMIT:-}" ${EXTRA:-} \
  > "$OUT/train.log" 2>&1
rc=$?
log "train.py exit $rc"
grep -v -E "it/s\]|s/it\]|Warning|warn\(" "$OUT/train.log" | cut -c1-400 | tail -70
# files of more than 16 MiB do not come back from $OUT: cut them (join with cat)
for f in "$OUT"/adapter/*; do
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 16000000 ] || continue
  sha=$(sha256sum "$f" | awk '{print $1}')
  split -b 15000000 -d -a 1 "$f" "$f.part" && rm -f "$f" && log "$(basename "$f") (sha256 $sha) cut into $(ls "$f".part* | wc -l) parts: cat $(basename "$f").part* > $(basename "$f")"
done
ls -l "$OUT/adapter" 2>/dev/null
python3 - "$OUT/adapter/adapter.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
m = d["manifest"]
print("adapter: rank", d["rank"], "alpha", d["alpha"], "steps", m["steps"], "train s", m["train_seconds"],
      "last loss", (m["loss_history"] or [[0, None]])[-1])
print("refusal threshold:", (m.get("refusal_threshold") or {}).get("refusal_min_p"))
print("validation:", json.dumps({k: v for k, v in (m.get("validation") or {}).items()
                                 if k in ("refusal_min_p", "answers", "rerank")}))
PY
log "end"
