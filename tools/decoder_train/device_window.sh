#!/bin/bash
# One warm window for issue 26 on the GPU box (used 2026-12-06): the Qwen 1.5B GGUF stashed once in /tmp/gguf
# (21 pieces of 55 MB: `MODEL_NAME=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf PIECE_BYTES=55000000 OUTDIR=
# .device/lora26/gguf tools/device_model.sh split`, the bundle of tools/decoder_train/bundle.sh copied beside it as
# .device/lora26/{tools,data,dec,whl}), then the adapter training (device_train.sh, in the background) and the Qwen2
# CUDA checks (tools/device_qwen.sh steps 1-3, bundle in .device/qwen) at the same time; the bench after the training,
# on an idle GPU. 55 MB pieces fit a call only while the travelling tree is small: take the two committed
# safetensors out of the index for the calls (`git rm --cached data/models/ssm/ssm.safetensors
# data/models/answer/adapter.safetensors` and list them in .git/info/exclude; `git reset -- …` and the exclude lines
# removed afterwards, before any commit).
# Calls: 20 × (carry .device/lora26/gguf/pK; `bash tools/decoder_train/device_window.sh stash`), then one with carry
# p21, .device/lora26/{tools,data,dec,whl}, .device/qwen: `bash tools/decoder_train/device_window.sh start`, then
# `bash tools/decoder_train/device_window.sh finish`.
#   device_window.sh stash    copy the carried piece(s) to /tmp/gguf
#   device_window.sh start    join the model to /tmp/model (sha256 checked), start the training (setsid), run the checks
#   device_window.sh finish   wait for the training, bench the real model alone, bring back the adapter and logs
set -u
M=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
L=/tmp/lora_out
case "$1" in
stash)
  mkdir -p /tmp/gguf && cp .device/lora26/gguf/p*/* /tmp/gguf/ 2>/dev/null; ls /tmp/gguf | wc -l ;;
start)
  mkdir -p /tmp/gguf /tmp/model && cp .device/lora26/gguf/p*/* /tmp/gguf/ 2>/dev/null
  n=$(ls /tmp/gguf/$M.part*of21 | wc -l); echo "pieces: $n"; [ "$n" = 21 ] || exit 1
  cat $(for i in $(seq -w 1 21); do echo /tmp/gguf/$M.part${i}of21; done) > /tmp/model/$M
  got=$(sha256sum /tmp/model/$M | awk '{print $1}'); want=$(awk '{print $1}' data/models/$M.sha256)
  echo "joined sha256 $got"; [ "$got" = "$want" ] || { echo "sha256 mismatch (want $want)"; exit 1; }
  rm -rf /tmp/lora26 && cp -r .device/lora26 /tmp/lora26 && rm -rf /tmp/lora26/gguf
  ( cd /tmp/lora26 && DEV=. WHL=whl MODEL=$M COMMIT=${COMMIT:-365b159} LIMIT=${LIMIT:-585} VAL_RESERVE=130 OUT=$L \
      EXTRA="--base-dtype bf16 --micro-tokens 8192 --mix answer=0.52,abstain=0.08,abstain_syn=0.08,relevance=0.32 --warmup 30" \
      setsid nohup bash tools/decoder_train/device_train.sh > /tmp/lora_nohup.log 2>&1 < /dev/null & )
  echo "training started $(date +%T)"
  # qwen26's checks 1-3 (device_qwen.sh run without its bench: the GPU is shared with the training now)
  sed -e 's/^  log "4. bench_decoder/  exit 0; log "4. bench_decoder/' tools/device_qwen.sh > /tmp/dq_nobench.sh
  cp /tmp/dq_nobench.sh tools/device_qwen_nobench.sh
  OUT=$OUT timeout ${CHECK_S:-330} bash tools/device_qwen_nobench.sh run
  echo "== training so far"; tail -5 $L/train.log 2>/dev/null; tail -3 $L/device.log 2>/dev/null ;;
finish)
  T0=$(date +%s)
  while ! grep -q "\] end$" $L/device.log 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt ${WAIT:-480} ]; do sleep 5; done
  tail -40 $L/device.log
  cp $L/device.log $L/train.log $OUT/ 2>/dev/null; cp $L/adapter/* $OUT/ 2>/dev/null
  # the bench on an idle GPU: the real model, then the 1.5B-shaped synthetic file if time allows
  W=/tmp/qw; export LD_LIBRARY_PATH=$W/q/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  for f in /tmp/model/$M $W/syn15.gguf; do
    [ -f $f ] || continue
    echo "== $(basename $f)" | tee -a $OUT/bench.txt
    timeout 150 $W/q/bin/bench_decoder --model $f --device cuda --prompt 512 --decode 128 --runs 3 --perplexity 0 \
      2>&1 | tee -a $OUT/bench.txt | tail -25
  done
  ls -l $OUT ;;
esac
