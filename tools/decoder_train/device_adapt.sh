#!/bin/bash
# The answer adapter's training as a BACKGROUND job on the GPU box, so that it can train longer than one `run` call
# (10 minutes): issue 26's next Qwen run (docs/EVAL.md, "Issue 26: the next adapter run (prepared)"). Runs from a
# bundle made by `INIT=... PIECES=0 tools/decoder_train/bundle.sh` (tools/, data/models/NAME.sha256, dec/, whl/,
# init/), carried as one folder; the base GGUF's pieces are stashed in /tmp/gguf by earlier calls
# (`GGUF_DIR=.device/lora26/gguf bash tools/device_model.sh stash`, one call a piece).
#
#   bash tools/decoder_train/device_adapt.sh start   (from the bundle folder) joins the GGUF into /tmp/model/NAME
#        (sha256 checked; skipped when it is there), copies the bundle to $BOX (/tmp/adapt26: the call's checkout is
#        gone by the next call), starts device_train.sh in the background (setsid), from scratch or (INIT=init) from
#        the bundle's init/ adapter, and watches it for up to WATCH s (default 150) until the step count is fixed by
#        the timing (or it died: its log tail);
#   bash /tmp/adapt26/tools/decoder_train/device_adapt.sh wait   waits up to WAIT s (default 560) for the end; when
#        ended, the adapter is joined at $ADAPTER (/tmp/adapter_new, for device_calibrate.sh) and brought back under
#        $OUT (adapter.safetensors in 15 MB parts: `cat adapter.safetensors.part* > adapter.safetensors`, adapter.json,
#        train.log, device.log); else the progress so far (call it again);
#   bash /tmp/adapt26/tools/decoder_train/device_adapt.sh status   the progress, nothing waited for.
#
# env (start): MODEL (GGUF file name, default qwen2.5-coder-1.5b-instruct-q4_k_m.gguf), BUDGET (training seconds,
#   default 720: train.py times steps 5-25 and fixes the step count to fit), MIX, INIT (none, the default: from
#   scratch, LR 2e-4; "init": the bundle's init/ folder, or a folder on the box: train.py --init, LR 1e-4 since the
#   factors start trained), LR, WARMUP (30), COMMIT, MORE (more train.py options; e.g. the CPU dry run's "--device
#   cpu --batch 4 ...").
#   LIMIT = BUDGET + 300 s for device_train.sh (join, load ~75 s, export, margin); VAL_RESERVE 60 (--no-val: the C
#   runtime's eval replaces train.py's validation).
set -u
M=${MODEL:-qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
BOX=${BOX:-/tmp/adapt26}
L=${RUN_OUT:-/tmp/adapt26_out}          # device_train.sh's OUT: adapter/, train.log, device.log
A=${ADAPTER:-/tmp/adapter_new}
MODEL_DIR=${MODEL_DIR:-/tmp/model}
OUT=${OUT:-/tmp/adapt26_back}
progress() {
  [ -f $L/device.log ] || { echo "no run in $L"; return; }
  grep -E "timing:|LoRA factors from|trained [0-9]+ steps|non-finite|skipped|out of GPU|Error|error|SystemExit|deadline" $L/train.log 2>/dev/null | cut -c1-300 | tail -8
  grep -E "^\[.*step [0-9]+/" $L/train.log 2>/dev/null | tail -2 | cut -c1-200
  tail -n 2 $L/device.log | cut -c1-300
  if grep -q "\] end$" $L/device.log && ! ls $L/adapter/adapter.json > /dev/null 2>&1; then
    echo "-- ended without an adapter; train.log's end:"; tail -n 15 $L/train.log | cut -c1-300
  fi
}
case "${1:-}" in
start)
  cd "$(dirname "$0")/../.." || exit 1
  [ -f dec/data.tar.xz ] && [ -f "data/models/$M.sha256" ] || { echo "start: run from the bundle folder (dec/data.tar.xz, data/models/$M.sha256)"; exit 1; }
  mkdir -p $MODEL_DIR
  if [ -f $MODEL_DIR/$M ] && [ "$(sha256sum $MODEL_DIR/$M | awk '{print $1}')" = "$(awk '{print $1}' data/models/$M.sha256)" ]; then
    echo "model: $MODEL_DIR/$M already there, sha256 ok"
  else
    GGUF_DIR=${GGUF_DIR:-gguf} bash tools/device_model.sh join $MODEL_DIR/$M || exit 1
    rm -f ${STASH:-/tmp/gguf}/$M.part*      # one copy of 1.1 GB is enough
  fi
  if [ -e "$L/device.log" ] && ! grep -q "\] end$" $L/device.log; then
    echo "start: a run is going on in $L (status / wait); not started again"; exit 1
  fi
  rm -rf $BOX $L && mkdir -p $BOX && cp -r tools data dec whl $BOX/ && { [ -d init ] && cp -r init $BOX/; true; } || exit 1
  init=${INIT:-none}
  [ "$init" = init ] && init=$BOX/init
  if [ "$init" = none ]; then init_opt=""; lr=${LR:-2e-4}; else
    [ -f $init/adapter.json ] && [ -f $init/adapter.safetensors ] || { echo "start: no adapter in $init (INIT=none: from scratch)"; exit 1; }
    init_opt="--init $init"; lr=${LR:-1e-4}
  fi
  budget=${BUDGET:-720}
  mix=${MIX:-answer=0.44,abstain=0.08,abstain_syn=0.14,abstain_heldout=0.10,relevance=0.24}
  ( cd $BOX && DEV=. WHL=whl MODEL=$M WORK=$(dirname $MODEL_DIR) COMMIT=${COMMIT:-unknown} BUDGET=$budget \
      LIMIT=$((budget + 300)) VAL_RESERVE=${VAL_RESERVE:-60} OUT=$L \
      EXTRA="$init_opt --base-dtype bf16 --micro-tokens 8192 --mix $mix --lr $lr --warmup ${WARMUP:-30} --no-val ${MORE:-}" \
      setsid nohup bash tools/decoder_train/device_train.sh > /tmp/adapt26_nohup.log 2>&1 < /dev/null & )
  echo "training started $(date +%T): budget $budget s, lr $lr, mix $mix, init ${init_opt:-none}"
  for i in $(seq 1 ${WATCH:-150}); do
    sleep 1
    grep -q -E "timing:|\] end$" $L/train.log $L/device.log 2>/dev/null && break
  done
  progress ;;
wait)
  T0=$(date +%s)
  while ! grep -q "\] end$" $L/device.log 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt ${WAIT:-560} ]; do sleep 3; done
  progress
  if grep -q "\] end$" $L/device.log 2>/dev/null; then
    grep -v -E "it/s\]|s/it\]" $L/device.log | tail -12
    rm -rf $A && mkdir -p $A && cp $L/adapter/adapter.json $A/ || { echo "no adapter came out"; cp $L/*.log $OUT/ 2>/dev/null; exit 1; }
    if ls $L/adapter/adapter.safetensors.part* > /dev/null 2>&1; then
      cat $L/adapter/adapter.safetensors.part* > $A/adapter.safetensors
    else
      cp $L/adapter/adapter.safetensors $A/
    fi
    sha256sum $A/*
    mkdir -p $OUT && cp $L/adapter/* $L/device.log $L/train.log $OUT/ && ls -l $OUT
    echo "adapter at $A (ADAPTER=$A for device_calibrate.sh)"
  else
    echo "still training after ${WAIT:-560} s: call wait again"
  fi ;;
status)
  progress ;;
*)
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
