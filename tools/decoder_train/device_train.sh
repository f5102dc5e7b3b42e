#!/bin/bash
# Issue 13 on the H200, ONE `run` call (at most ~9.5 minutes): trains the answer model's LoRA adapter and brings it
# back under $OUT/adapter/ (adapter.safetensors + adapter.json, written by train.py as soon as training ends, the
# validation scores added to adapter.json after), with $OUT/train.log and $OUT/device.log.
#
# Before it: the GGUF's pieces on the box (tools/device_model.sh split here; earlier calls each carry one piece
# .device/gguf/pN and run `tools/device_model.sh stash`); the data (tools/decoder_train/bundle.sh here).
#   carry: .device/dec .whl [.device/gguf/pN: the last piece, when it fits with the rest]
#   env:   COMMIT (recorded in the manifest), LIMIT (seconds this script may take, default 560), VAL_RESERVE
#          (seconds kept after training for validation and export, default 110), BUDGET (training seconds at most,
#          default 600: --train-until usually decides), EXTRA (more train.py arguments, e.g. "--rank 64")
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LIMIT=${LIMIT:-560}
VAL_RESERVE=${VAL_RESERVE:-110}
DEADLINE=$((T0 + LIMIT))
OUT=${OUT:-/tmp/dec_out}
W=${WORK:-/tmp}                      # scratch: $W/site (gguf), $W/model (the joined GGUF), $W/dec (data)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1 TOKENIZERS_PARALLELISM=false
exec > >(tee "$OUT/device.log") 2>&1
log() { echo "[device $(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
python3 -c "import sys, torch, transformers, safetensors, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site .whl/gguf-*.whl || { log "gguf wheel install failed"; exit 1; }
export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import gguf; print('gguf', gguf.__file__)" || exit 1
tools/device_model.sh join $W/model/gemma-3-270m-q4_k_m.gguf || { log "model pieces missing: see above"; exit 1; }
rm -rf $W/dec && mkdir -p $W/dec && tar -C $W/dec -xJf .device/dec/data.tar.xz || { log "no data bundle"; exit 1; }
log "ready: model joined, data unpacked; training until $((DEADLINE - VAL_RESERVE - T0)) s, deadline $LIMIT s"
timeout $((DEADLINE - $(date +%s))) python3 tools/decoder_train/train.py --data $W/dec/dec_data \
  --gguf $W/model/gemma-3-270m-q4_k_m.gguf --out "$OUT/adapter" --budget "${BUDGET:-600}" \
  --train-until $((DEADLINE - VAL_RESERVE)) --deadline $((DEADLINE - 8)) --commit "${COMMIT:-}" ${EXTRA:-} \
  > "$OUT/train.log" 2>&1
rc=$?
log "train.py exit $rc"
grep -v -E "it/s\]|s/it\]|Warning|warn\(" "$OUT/train.log" | cut -c1-400 | tail -60
# files of more than 16 MiB do not come back from $OUT: cut them (rank 64 at F16 is 30 MB); join with cat
for f in "$OUT"/adapter/*; do
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 16000000 ] || continue
  split -b 15000000 -d -a 1 "$f" "$f.part" && rm -f "$f" && log "$(basename "$f") cut into $(ls "$f".part* | wc -l) parts: cat $(basename "$f").part* > $(basename "$f")"
done
ls -l "$OUT/adapter" 2>/dev/null
python3 - "$OUT/adapter/adapter.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
m = d["manifest"]
print("adapter: rank", d["rank"], "alpha", d["alpha"], "steps", m["steps"], "train s", m["train_seconds"],
      "last loss", (m["loss_history"] or [[0, None]])[-1])
print("validation:", json.dumps({k: v for k, v in (m.get("validation") or {}).items() if k in ("answers", "rerank")}))
PY
log "end"
