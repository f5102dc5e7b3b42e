#!/bin/bash
# Issue 14, call A on the H200 (about 2-3 minutes): the fused selective scan (scan_triton.py) checked on the GPU
# against the plain loop, outputs and every gradient (float64 and float32; test_scan.py), then the training step timed
# at the same batch with today's prefix scan and with the fused kernel (bench_step.py; the issue asks >= 20x).
# It also stashes the data part it carries for call B (device_stash.sh).
#   carry: .device/s14/p1
# Back: $OUT/test_scan.txt, $OUT/bench_step.json (+ .txt), $OUT/log.txt
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out14}; mkdir -p $OUT
{ nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  tools/ssm_train/device_stash.sh; } 2>&1 | tee $OUT/log.txt
timeout 240 python3 tools/ssm_train/test_scan.py > $OUT/test_scan.txt 2>&1; echo "test_scan rc $?" | tee -a $OUT/log.txt
tail -4 $OUT/test_scan.txt
timeout 280 python3 tools/ssm_train/bench_step.py --out $OUT/bench_step.json > $OUT/bench_step.txt 2>&1
echo "bench_step rc $?" | tee -a $OUT/log.txt
tail -30 $OUT/bench_step.txt
