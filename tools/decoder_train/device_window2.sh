#!/bin/bash
# Issue 26's third warm window (2026-12-06, third sitting), one H100, with issue 27's student after it:
#   1. the Qwen 1.5B GGUF stashed in /tmp/gguf (20 calls carrying .device/lora26/gguf/pK: `stash`);
#   2. `start` (carrying p21 and .device/lora26/{tools,data,dec,whl}): the model joined and checked, the adapter's
#      training started in the background (device_train.sh, --no-val: the C runtime's eval replaces train.py's);
#   3. `unpack` (carrying .device/ev26/bin.tar.xz, then .device/ev26/suites.tar.xz): the CUDA build of clauseqa
#      and the dev suites' validation (vs/) and calibration (tq/) parts into /tmp/ev;
#   4. `wait` (carrying issue 27's last teacher part): waits for the training, joins the adapter at /tmp/adapter_new
#      and brings it back (15 MB parts), then stashes issue 27's parts (tools/teacher/device27.sh stash), which
#      starts the teacher + student job on the GPU the training has left;
#   5. `calib`: device_calibrate.sh with the new adapter (refusal masked, every threshold from one run);
#   6. `demo`: the issue's three demo questions and ask latency on the GPU, bench_decoder with the adapter.
# Every call sends the checkout: take the committed safetensors out of the index first (see device_window.sh).
set -u
M=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
L=/tmp/lora_out
A=/tmp/adapter_new
W=/tmp/ev
export LD_LIBRARY_PATH=$W/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
case "$1" in
stash)
  mkdir -p /tmp/gguf && cp .device/lora26/gguf/p*/* /tmp/gguf/ 2>/dev/null; ls /tmp/gguf | wc -l ;;
start)
  mkdir -p /tmp/gguf /tmp/model && cp .device/lora26/gguf/p*/* /tmp/gguf/ 2>/dev/null
  n=$(ls /tmp/gguf/$M.part*of21 | wc -l); echo "pieces: $n"; [ "$n" = 21 ] || exit 1
  cat $(for i in $(seq -w 1 21); do echo /tmp/gguf/$M.part${i}of21; done) > /tmp/model/$M
  got=$(sha256sum /tmp/model/$M | awk '{print $1}'); want=$(awk '{print $1}' data/models/$M.sha256)
  echo "joined sha256 $got"; [ "$got" = "$want" ] || { echo "sha256 mismatch (want $want)"; exit 1; }
  rm -f /tmp/gguf/*
  rm -rf /tmp/lora26 && cp -r .device/lora26 /tmp/lora26 && rm -rf /tmp/lora26/gguf
  ( cd /tmp/lora26 && DEV=. WHL=whl MODEL=$M COMMIT=${COMMIT:-unknown} LIMIT=${LIMIT:-600} VAL_RESERVE=${VAL_RESERVE:-45} \
      OUT=$L EXTRA="--base-dtype bf16 --micro-tokens 8192 --mix ${MIX:-answer=0.50,abstain=0.08,abstain_syn=0.12,relevance=0.30} --warmup 30 --no-val" \
      setsid nohup bash tools/decoder_train/device_train.sh > /tmp/lora_nohup.log 2>&1 < /dev/null & )
  echo "training started $(date +%T)"; sleep 25; tail -5 $L/device.log 2>/dev/null ;;
unpack)
  mkdir -p $W
  for b in .device/ev26/bin.tar.xz .device/ev26/suites.tar.xz; do [ -f $b ] && tar -C $W -xJf $b && echo "unpacked $b"; done
  ls $W; tail -3 $L/train.log 2>/dev/null ;;
wait)
  T0=$(date +%s)
  while ! grep -q "\] end$" $L/device.log 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt ${WAIT:-500} ]; do sleep 3; done
  grep -v -E "it/s\]|s/it\]" $L/device.log | tail -30
  grep -E "step .*(00|50)/|trained|skipped|non-finite" $L/train.log | tail -12
  mkdir -p $A && cp $L/adapter/adapter.json $A/ && cat $L/adapter/adapter.safetensors.part* > $A/adapter.safetensors 2>/dev/null \
    || cp $L/adapter/adapter.safetensors $A/
  sha256sum $A/*; cp $L/adapter/* $L/device.log $L/train.log $OUT/ 2>/dev/null
  [ -d .device/teacher27 ] && bash tools/teacher/device27.sh stash ;;
old)   # no training this window: the committed adapter (carry its adapter.safetensors, which the index leaves out)
  mkdir -p $A && cp data/models/answer-${M%.gguf}/adapter.json data/models/answer-${M%.gguf}/adapter.safetensors $A/ && sha256sum $A/* ;;
calib)
  OUT=$OUT MODEL=/tmp/model/$M ADAPTER=$A bash tools/decoder_train/device_calibrate.sh run
  # the threshold chosen on the calibration part (held out of training) goes into adapter.json for the demo
  python3 tools/decoder_train/refusal_threshold.py --runs $W/calib --tag train-hybrid --questions $W/tq | tail -4
  t=$(python3 tools/decoder_train/refusal_threshold.py --runs $W/calib --tag train-hybrid --questions $W/tq | sed -n 's/^best on these runs: t = \([0-9.]*\).*/\1/p')
  [ -n "$t" ] && python3 -c "import json,sys; p='$A/adapter.json'; d=json.load(open(p)); d['refusal_min_p']=float(sys.argv[1]); json.dump(d,open(p,'w'),indent=1)" $t && echo "refusal_min_p $t written"
  python3 tools/decoder_train/refusal_threshold.py --runs $W/calib --tag val-hybrid --questions $W/vs --at ${t:-0.9} --metrics 2>&1 | tail -8 ;;
demo)
  D=/tmp/demo; rm -rf $D; mkdir -p $D && ln -sfn $A /tmp/model/answer-${M%.gguf}   # the adapter found beside the model
  CQ=$W/bin/clauseqa
  $CQ ingest --data $D --kb demo data/demo/*.pdf data/demo/*.md 2>&1 | tail -1
  for q in "员工加班费怎么算？" "休息日安排劳动者工作又不能安排补休的，用人单位应当支付多少工资报酬？" "公司的注册资本最低限额是多少？" \
           "How many days of notice are needed to terminate the services agreement?"; do
    echo "== $q"
    s=$(date +%s%N); $CQ ask --data $D --kb demo --model /tmp/model/$M --device cuda --json "$q" > $D/a.json 2> $D/a.err
    echo "$(( ($(date +%s%N) - s) / 1000000 )) ms (one process, model load included)"
    python3 -c "import json; d=json.load(open('$D/a.json')); print(json.dumps(d, ensure_ascii=False)[:1500])" || tail -3 $D/a.err
  done
  echo "== bench_load (server on the GPU, demo KB)"
  for mode in default router,bm25; do
    m=""; [ $mode = default ] || m="--mode $mode"
    timeout 150 python3 tests/bench/bench_load.py --binary $CQ --levels 1,16 --seconds 8 --answers generate --docs 0 $m \
      -- --device cuda --model /tmp/model/$M 2>&1 | tail -16
  done
  timeout 100 $W/bin/bench_decoder --model /tmp/model/$M --device cuda --prompt 512 --decode 256 --runs 3 --adapter $A 2>&1 | tail -14 ;;
esac
