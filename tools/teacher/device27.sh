#!/bin/bash
# Issue 27: EmbeddingGemma teacher vectors and distilled SSM students in one warm window on one H100 (docs/SSM.md,
# "EmbeddingGemma teacher (issue 27)"). Every call sends the lead's checkout; this branch's tools travel as
# tools.tar in the first carried part and are laid over the checkout at each call (the checkout is fresh each call).
#   tools/teacher/device27.sh stash   copy the carried parts ($SRC/*/*, default .device/teacher27) to $S, unpack
#                                     every complete set (*.tar.xz.<i>-of-<n>) into $W; once the data, the teacher
#                                     pack and the trimmed GGUF are all there, start the job (setsid) unless started
#   tools/teacher/device27.sh poll    (WAIT=N UNTIL=REGEX: first wait up to N s for REGEX in the job's log, default
#                                     "all done") the job's log; then bring back (into $OUT) the next files in line that fit one
#                                     call (8 files, MAX_MB together): the teacher's log and fusion numbers, its
#                                     rankings and vectors (egemma_vectors.py), then the packed runs as they finish
# The job: ids of the training data (tokenize_data.py gemma3, beside the teacher); the teacher (train.py
# --teacher-only: the pack checked against the full model's reference vectors, every text embedded, its own dense
# and fused validation); egemma_vectors.py export; then the students of RUNS at once for BUDGET s each, packed into
# $W/<name>.tgz (ssm.json with the manifest, ssm.safetensors BF16, train.log).
# Mending the tools within a window: rebuild d1 here (bundles27.sh SETS=d, or tar tools into .device/teacher27/d1/
# tools.tar) and carry d1 itself again. The box keeps the ignored folders earlier calls carried, and every stash copies
# $SRC/*/* again: a tools.tar carried under another name is overwritten by the old d1's (2026-12-06, fifth sitting).
# AFTER=FILE (given to the call whose stash starts the job): the teacher pass and ids run at once, the students only
# once FILE exists (another GPU job touches it when done), at most AFTER_MAX s (900) later.
# A job started again in the same window (rm $W/.started) redoes the teacher pass (~2 min).
# Continuing students across sittings: a plain tar init27.tar.1-of-1 in a carried part (.device/teacher27/d3 holds
# the sixth sitting's e192x4 and e384x6 as init/<name>/) unpacks to $W/init/<name>; a run's options then name it
# (--init /tmp/w27/init/e192x4: the encoder and its doc_head.safetensors). Train them with the GPU to themselves: the
# sixth sitting's two students beside the calibration runs stepped at 1.5 and 2.5 s (198 and 118 steps in 300 s).
set -u
cd "$(dirname "$0")/../.."
if [ "${1:-}" = dry ]; then  # a temp dir of its own; never lays tools.tar over this checkout
  D=${DRY_DIR:-$(mktemp -d /tmp/dry27.XXXXXX)}; S=$D/stash; W=$D/work; O=$D/out; PLAN_LAID=dry
else
  S=${STASH:-/tmp/st27}; W=${WORK:-/tmp/w27}; O=${OUT:-/tmp/out27}
fi
SRC=${SRC:-.device/teacher27}
BUDGET=${BUDGET:-180}
MAX_MB=${MAX_MB:-60}
# name:train.py options; the two run at once (the GPU is shared); d_embed 256 as the runtime ships
RUNS=${RUNS:-"e192x4:--d-model 192 --n-layer 4 --teacher-dim 768 --distill-tau 0.05;e384x6:--d-model 384 --n-layer 6 --teacher-dim 768 --distill-tau 0.05"}
COMMON=${COMMON:-"--long-frac 0.4 --long-window 4096 --calib 1 --distill 1 --distill-emb 1 --validate full"}
mkdir -p $S $W $O
overlay() { [ -f $S/tools.tar ] && tar -xf $S/tools.tar; }
if [ -z "${PLAN_LAID:-}" ] && [ -f $S/tools.tar ]; then
  overlay && PLAN_LAID=1 exec bash tools/teacher/device27.sh "$@"
fi
write_job() {
  R=$W/repo; rm -rf $R; mkdir -p $R && cp -r tools app decoder core ssm $R/
  cat > $W/job.sh <<EOF
#!/bin/bash
cd $R
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
T0=\$(date +%s)
log() { echo "[\$(( \$(date +%s) - T0 )) s] \$*" >> $W/job.log; }
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $W/job.log 2>&1
${PY:-python3} -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> $W/job.log 2>&1
${PY:-python3} tools/ssm_train/tokenize_data.py --data $W/data --tokenizer gemma3 --gguf $W/gemma-trim.gguf --jobs ${TOK_JOBS:-12} > $W/tok.log 2>&1 &
TOK=\$!
${PY:-python3} tools/ssm_train/train.py --data $W/data --teacher $W/teacher --teacher-save $W/teacher.pt --teacher-only \
  --threads 4 > $W/teacher.log 2>&1
log "teacher rc \$?"
${PY:-python3} tools/teacher/egemma_vectors.py export --teacher $W/teacher.pt --data $W/data --out $W/vec > $W/vec.log 2>&1
log "vectors rc \$? (\$(du -sm $W/vec | cut -f1) MB)"
grep -E "teacher validation" $W/teacher.log | cut -c1-100000 > $W/vec/teacher_validation.txt
wait \$TOK
log "ids rc \$?: \$(tail -1 $W/tok.log)"
if [ -n "${AFTER:-}" ]; then  # AFTER=FILE: the students wait (up to AFTER_MAX s) until FILE exists: the GPU to themselves
  for i in \$(seq 1 ${AFTER_MAX:-900}); do [ -e ${AFTER:-} ] && break; sleep 1; done
  log "students start (${AFTER:-}: \$([ -e ${AFTER:-} ] && echo there || echo still absent))"
fi
IFS=';' read -ra RUNS_A <<< "$RUNS"
n=\${#RUNS_A[@]}
for spec in "\${RUNS_A[@]}"; do
  name=\${spec%%:*}; opts=\${spec#*:}
  mkdir -p $W/runs/\$name
  ( ${PY:-python3} tools/ssm_train/train.py --data $W/data --out $W/runs/\$name --teacher $W/teacher.pt --budget $BUDGET \
      --commit ${COMMIT:-unknown} --workers \$(( ${WORKERS:-14} / n )) --threads 2 $COMMON \$opts > $W/runs/\$name/train.log 2>&1
    log "\$name rc \$?"
    tar -C $W/runs -czf $W/\$name.tgz \$name && log "\$name packed (\$(du -h $W/\$name.tgz | cut -f1))" ) &
done
wait
log "all done"
EOF
  chmod +x $W/job.sh
}
start_job() {
  write_job
  touch $W/.started
  setsid nohup $W/job.sh > $W/job.out 2>&1 < /dev/null &
  sleep 2; echo "job started"
}
unpack() {  # every complete set of pieces in $S into $W (once), the pieces then removed
  for first in $S/*.tar.xz.1-of-*; do
    [ -f "$first" ] || continue
    base=${first%.1-of-*}; n=${first##*-of-}; name=$(basename $base)
    [ -f $W/.unpacked.$name ] && continue
    pieces=""; ok=1
    for i in $(seq 1 $n); do [ -f $base.$i-of-$n ] && pieces="$pieces $base.$i-of-$n" || ok=0; done
    [ $ok = 1 ] || { echo "$name: $(ls $base.* | wc -l) of $n pieces"; continue; }
    cat $pieces | xz -T0 -dc | tar -C $W -xf - && touch $W/.unpacked.$name && echo "unpacked $name" && rm -f $pieces
  done
  for first in $S/*.tar.1-of-*; do  # plain tars (the teacher pack: int8, xz would not shrink it)
    [ -f "$first" ] || continue
    base=${first%.1-of-*}; n=${first##*-of-}; name=$(basename $base)
    [ -f $W/.unpacked.$name ] && continue
    pieces=""; ok=1
    for i in $(seq 1 $n); do [ -f $base.$i-of-$n ] && pieces="$pieces $base.$i-of-$n" || ok=0; done
    [ $ok = 1 ] || { echo "$name: $(ls $base.* | wc -l) of $n pieces"; continue; }
    cat $pieces | tar -C $W -xf - && touch $W/.unpacked.$name && echo "unpacked $name" && rm -f $pieces
  done
}
case ${1:-} in
stash)
  for f in $SRC/*/*; do
    [ -f "$f" ] || continue
    cp "$f" $S/ && echo "stashed $(basename $f) ($(du -h $f | cut -f1))"
  done
  unpack
  overlay
  if [ -f $W/data/corpus.npz ] && [ -f $W/teacher/pack/egemma.safetensors ] && [ -f $W/teacher/tokens.npz ] && [ -f $W/teacher/reference.npz ] && \
     [ -f $W/gemma-trim.gguf ]; then
    [ -f $W/.started ] && echo "job already started" || start_job
  else
    echo "not complete yet: $(ls $W)"
  fi ;;
poll)
  # WAIT=N: first wait up to N s for a line matching UNTIL in the job's log (the machine stays warm meanwhile)
  for i in $(seq 1 ${WAIT:-0}); do grep -qE "${UNTIL:-all done}" $W/job.log 2>/dev/null && break; sleep 1; done
  cat $W/job.log 2>/dev/null; tail -2 $W/tok.log 2>/dev/null
  grep -E "teacher[: ]|validation|rror" $W/teacher.log 2>/dev/null | cut -c1-600
  for r in $W/runs/*/train.log; do
    [ -f $r ] || continue
    echo "== $r"; grep -E "model:|step|trained|validation|rror" $r | tail -3 | cut -c1-400
  done
  # the next files in line, at most 8 and MAX_MB together; each file once
  touch $W/.fetched; n=0; mb=0
  for f in $W/vec/fingerprint.json $W/vec/teacher_validation.txt $W/vec/dev_rank.npz $W/vec/dev_q.*.npz \
           $W/*.tgz $W/vec/val_c.*.npz $W/vec/cache.c.*.npz $W/vec/cache.q.*.npz $W/vec/cache.h.*.npz \
           $W/vec/cache.i.*.npz; do
    [ -f "$f" ] || continue
    grep -qxF "$f" $W/.fetched && continue
    case $f in *.tgz) grep -q "$(basename ${f%.tgz}) packed" $W/job.log || continue ;; esac
    s=$(( ($(stat -c %s "$f") + 1048575) / 1048576 ))
    [ $n -lt 7 ] && [ $(( mb + s )) -le $MAX_MB ] || continue
    cp "$f" $O/ && echo "$f" >> $W/.fetched && n=$((n + 1)) && mb=$((mb + s))
  done
  cp $W/teacher.log $O/teacher.log 2>/dev/null && gzip -f $O/teacher.log
  echo "brought back $n files, $mb MiB (+ teacher.log.gz); left: $(for f in $W/vec/* $W/*.tgz; do [ -f $f ] && ! grep -qxF $f $W/.fetched && echo -n "$(basename $f) "; done)" ;;
dry)
  # CPU dry run of exactly the job stash starts (write_job's text), here before a window: the carried parts unpacked
  # into a temp dir, data and teacher tokens cut to a tiny slice (tiny_data.py --teacher), the tokenizer library
  # built the GPU box's way (CQ_TOK_SHIM=1: stand-in utf8proc.h, no -lutf8proc), RUNS/COMMON as given but BUDGET
  # 20 s on the CPU; fails (exit 1, the step named) where the job would. DRY_TOOLS=tar: the tools of d1/tools.tar
  # laid over the job's copy as the box does (default: this checkout's tools; a stale tools.tar is reported).
  # DRY_KEEP=1 keeps $D. Here (shared 2 cores, 24 GB): unpack + slice 0.5 min, teacher + vectors + ids 2-2.7 min;
  # the lead's --doc-head 0.5 --doc-batch 16 --doc-window 2048 students are OOM-killed (rc 137) on the CPU scan
  # even at --batch 8 (docs/SSM.md): that step fails here, not necessarily on the box.
  T0=$(date +%s)
  fail() { echo "DRY RUN FAILED at step: $1 ($(( $(date +%s) - T0 )) s; $D)"; [ -n "${2:-}" ] && [ -f "$2" ] && tail -25 "$2"; exit 1; }
  echo "dry run in $D"; mkdir -p $S $W $O
  for f in $SRC/*/*; do [ -f "$f" ] && { cp "$f" $S/ || fail "stash $f"; }; done
  unpack || fail unpack
  [ -f $W/data/corpus.npz ] && [ -f $W/teacher/pack/egemma.safetensors ] && [ -f $W/teacher/tokens.npz ] && \
    [ -f $W/teacher/reference.npz ] && [ -f $W/gemma-trim.gguf ] || fail "parts incomplete: $(ls $W)"
  if [ -f $S/tools.tar ]; then
    mkdir -p $D/tt && tar -C $D/tt -xf $S/tools.tar && diff -rq -x __pycache__ $D/tt/tools tools > $D/tools.diff 2>&1 \
      || echo "NOTE: $SRC/d1/tools.tar differs from this checkout's tools/ (rebuild d1 before the window): $(wc -l < $D/tools.diff) files, $D/tools.diff"
  fi
  PY=${PY:-/opt/venv-train/bin/python}; BUDGET=${DRY_BUDGET:-20}; WORKERS=${WORKERS:-2}; TOK_JOBS=${TOK_JOBS:-2}
  # the one change to the students' options: a CPU-sized --batch (default 128 questions, with 40 % of positives read
  # in 4096-token windows, took 24 GB and the OOM killer here); RUNS' own options stay as given (they come last)
  COMMON="$COMMON ${DRY_COMMON:---batch 8}"
  mv $W/data $W/data.full && mv $W/teacher $W/teacher.full || fail "move the full data aside"
  $PY tools/ssm_train/tiny_data.py --data $W/data.full --out $W/data --teacher $W/teacher.full --teacher-out $W/teacher \
    ${DRY_TINY:---val 1 --train 1 --others 0 --max-doc-clauses 8 --max-ict 10} > $D/tiny.log 2>&1 \
    || fail "tiny_data.py (slice of the data and the teacher tokens)" $D/tiny.log
  tail -2 $D/tiny.log
  write_job || fail "write the job"
  if [ "${DRY_TOOLS:-tree}" = tar ]; then tar -C $W/repo -xf $S/tools.tar || fail "lay tools.tar over the job's copy"; fi
  echo "job: $W/job.sh (PY=$PY BUDGET=$BUDGET, CQ_TOK_SHIM=1)"
  CQ_TOK_SHIM=1 timeout ${DRY_LIMIT:-900} bash $W/job.sh > $W/job.out 2>&1; rc=$?
  cat $W/job.log
  [ $rc = 0 ] || fail "the job itself (rc $rc; 124: over DRY_LIMIT ${DRY_LIMIT:-900} s)" $W/job.out
  grep -q "teacher rc 0" $W/job.log || fail "teacher pass (train.py --teacher-only)" $W/teacher.log
  grep -q "vectors rc 0" $W/job.log || fail "egemma_vectors.py export" $W/vec.log
  grep -q "ids rc 0" $W/job.log || fail "tokenize_data.py (gemma3 ids)" $W/tok.log
  [ -s $W/vec/teacher_validation.txt ] || fail "teacher validation line missing from teacher.log" $W/teacher.log
  IFS=';' read -ra RUNS_A <<< "$RUNS"
  for spec in "${RUNS_A[@]}"; do
    name=${spec%%:*}
    grep -q "$name rc 0" $W/job.log || fail "student $name (train.py)" $W/runs/$name/train.log
    grep -q "$name packed" $W/job.log || fail "pack $name.tgz" $W/job.out
    want="ssm.json ssm.safetensors train.log"
    case " $COMMON ${spec#*:} " in *" --doc-head 0 "*) ;; *" --doc-head "*) want="$want doc_head.safetensors" ;; esac
    for f in $want; do
      tar -tzf $W/$name.tgz | grep -qx "$name/$f" || fail "$name.tgz lacks $f" $W/runs/$name/train.log
    done
  done
  echo "DRY RUN OK in $(( $(date +%s) - T0 )) s: $(ls $W/*.tgz | xargs -n1 basename | tr '\n' ' ')"
  [ -n "${DRY_KEEP:-}" ] || rm -rf $D ;;
*) echo "usage: $0 stash|poll|dry"; exit 2 ;;
esac
