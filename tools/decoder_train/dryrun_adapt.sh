#!/bin/bash
# CPU rehearsal of issue 26's next adapter run (device_adapt.sh), call by call, on a tiny random Qwen2 that keeps the
# real Qwen2.5 GGUF's tokenizer (tiny_qwen.py), so a slice of the real packed data trains it:
#   1. the tiny GGUF, a random adapter of its shapes stored as int8 rows (adapter_int8.py, as the committed one);
#   2. a slice of DATA (every task, abstain_heldout included) packed for it (pack.py);
#   3. bundle.sh with PIECES=0 INIT=... (the init adapter checked against the model), the GGUF cut into pieces in a
#      stand-in of the calling checkout (.device/lora26/gguf/pN; no git repository: the scripts need none), each
#      stashed by its own "call" (a folder holding only
#      tools/device_model.sh and that piece, as a `run` call's tree: GGUF_DIR=.device/lora26/gguf ... stash);
#   4. `device_adapt.sh start` from the bundle's copy at <checkout>/.device/adapt26 (join, sha256, background run with
#      --init), then `wait` until the adapter is back, as the box would;
#   5. checks: the adapter fits the GGUF's shapes, the manifest names the init adapter's sha256 and steps, the factors
#      moved from the init's a little (a run from scratch would not be near them), train.log shows --init and steps.
#   DATA (default .device/dec_data26), D (scratch, default /tmp/adapt26dry), PY (default /opt/venv-train/bin/python),
#   BUDGET (training seconds, default 40), N (train examples a task, default 24), INIT (init, the default: --init
#   the bundle's int8 adapter; none: from scratch, the recommended run, checked to have no init)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=${DATA:-.device/dec_data26}
D=${D:-/tmp/adapt26dry}
PY=${PY:-/opt/venv-train/bin/python}
SRC=${SRC:-data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
M=tiny-qwen2-vocab.gguf
export PATH=$(dirname "$PY"):$PATH            # device_train.sh calls python3: the one with torch
step() { echo "== [$(date +%T)] $*"; }
rm -rf "$D" && mkdir -p "$D/sums"
step "1. tiny model + int8 init adapter"
nice "$PY" tools/decoder_train/tiny_qwen.py "$SRC" "$D/$M" --adapter "$D/init_f32"
"$PY" tools/decoder_train/adapter_int8.py "$D/init_f32" "$D/init"
sha256sum "$D/$M" | awk -v n=$M '{print $1 "  " n}' > "$D/sums/$M.sha256"
step "2. a slice of $DATA, packed for the tiny model"
python3 - "$DATA" "$D/slice" "${N:-24}" <<'PY'
import json, os, shutil, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst)
rows = lambda fn: [json.loads(l) for l in open(os.path.join(src, fn), encoding="utf-8")]
def write(fn, rs):
    with open(os.path.join(dst, fn), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rs)
by = {}
for r in rows("train.jsonl"):
    if len(by.setdefault(r["task"], [])) < n:
        by[r["task"]].append(r)
write("train.jsonl", [r for t in sorted(by) for r in by[t]])
write("val_answer.jsonl", rows("val_answer.jsonl")[:6])
write("cal_answer.jsonl", rows("cal_answer.jsonl")[:6])
write("val_rerank.jsonl", rows("val_rerank.jsonl")[:3])
shutil.copy(os.path.join(src, "meta.json"), dst)
print("slice:", {t: len(v) for t, v in sorted(by.items())})
PY
nice "$PY" tools/decoder_train/pack.py --data "$D/slice" --base "$D/$M"
step "3. the bundle (PIECES=0, INIT) and the pieces in a stand-in checkout"
mkdir -p "$D/checkout/tools" "$D/checkout/data/models"
cp tools/device_model.sh "$D/checkout/tools/" && cp "$D/sums/$M.sha256" "$D/checkout/data/models/"
(cd "$D/checkout" && OUTDIR=.device/lora26/gguf PIECE_BYTES=9000000 bash tools/device_model.sh split "$D/$M" > /dev/null)
n=$(ls -d "$D"/checkout/.device/lora26/gguf/p* | wc -l)
SUMS=$D/sums MODEL=$D/$M INIT=$D/init PIECES=0 NPIECES=$n DEST=.device/adapt26 PY=$PY XZ_LEVEL=1 \
  bash tools/decoder_train/bundle.sh "$D/slice" "$D/checkout/.device/adapt26"
for i in $(seq 1 $n); do      # one call a piece: a tree holding tools/ and that piece only
  c=$D/call$i && mkdir -p $c/tools $c/.device/lora26/gguf && cp tools/device_model.sh $c/tools/
  cp -r "$D/checkout/.device/lora26/gguf/p$i" $c/.device/lora26/gguf/
  (cd $c && GGUF_DIR=.device/lora26/gguf STASH=$D/stash bash tools/device_model.sh stash)
  rm -rf $c
done
step "4. start, then wait (the box's calls)"
export STASH=$D/stash MODEL=$M MODEL_DIR=$D/model BOX=$D/box RUN_OUT=$D/run ADAPTER=$D/adapter_new OUT=$D/back
(cd "$D/checkout/.device/adapt26" && INIT=${INIT:-init} COMMIT=dryrun BUDGET=${BUDGET:-40} WATCH=400 \
   MORE="--device cpu --batch 4 --micro-tokens 2048 --time-after 2 --time-steps 3 --warmup 3 --max-skipped 64" \
   bash tools/decoder_train/device_adapt.sh start)
for k in 1 2 3; do
  WAIT=400 bash $D/box/tools/decoder_train/device_adapt.sh wait | tee $D/wait.log
  grep -q "^adapter at" $D/wait.log && break
done
step "5. checks"
"$PY" - "$D" "$M" "${INIT:-init}" <<'PY'
import hashlib, json, os, sys
sys.path.insert(0, "tools/decoder_train")
import torch
import lora as L
from safetensors.torch import load_file
d, m, mode = sys.argv[1], sys.argv[2], sys.argv[3]
doc, t = L.read_adapter(os.path.join(d, "adapter_new"))
bad = L.check_adapter(doc, t, L.gguf_weight_shapes(os.path.join(d, m)))
assert not bad, bad
man = doc["manifest"]
init_sha = hashlib.sha256(open(os.path.join(d, "init", "adapter.safetensors"), "rb").read()).hexdigest()
if mode == "none":
    assert man["init"] is None and man["hyper_parameters"]["lr"] == 2e-4, (man["init"], man["hyper_parameters"])
else:
    assert man["init"] and man["init"]["sha256"] == init_sha and man["init"]["steps"] == 7, man["init"]
assert man["steps"] > 0 and man["loss_history"] and all(v == v for _, v in man["loss_history"]), man["loss_history"]
assert man["mixture_effective"].get("abstain_heldout"), man["mixture_effective"]
init = load_file(os.path.join(d, "init_f32", "adapter.safetensors"))
num = sum(float((t[k].float() - init[k]).norm() ** 2) for k in init) ** 0.5
den = sum(float(init[k].norm() ** 2) for k in init) ** 0.5
assert (0 < num / den < 0.2) == (mode != "none"), num / den   # from scratch: nowhere near the init
print("dry run ok: %d steps in %.1f s, last loss %s; factors moved %.4f of the init's norm (int8 init sha256 %s...); "
      "mixture %s" % (man["steps"], man["train_seconds"], man["loss_history"][-1], num / den, init_sha[:12],
                      {k: v["share"] for k, v in man["mixture_effective"].items()}))
PY
ls -l "$D/back"
