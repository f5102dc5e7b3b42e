#!/bin/bash
# Everything issue 26 item 5 asks of a calibration (docs/EVAL.md "Issue 26 item 5"), from one folder of
# device_calibrate.sh runs (<suite>.<tag>.jsonl, refusal masked), on the CPU:
#   tools/decoder_train/refusal_report.sh RUNS [RETRIEVAL]
# per retrieval mode (hybrid: router,bm25; rerank: router,bm25,rerank) whose train-MODE runs exist: the threshold
# refusal_threshold.py chooses there (each suite's classes weighted to its train part's mix), the validation
# metrics at it and at 1.01 (never), then refusal_rule.py's fitted rules against it (RETRIEVAL: a folder of runs
# with the same retrieval whose lines carry top scores and coverage, for runs made before eval wrote them).
# Then, per mode whose train-MODE-heldout runs exist (device_calibrate.sh; heldout_unans.py's held-out-document
# unanswerables, both languages): the questions rewritten here (the same HELDOUT_SHARE, 0.2, as bundle_eval.sh),
# the threshold per language on those runs (weighted as they come: refusal_threshold.py --prior auto), the
# held-out validation metrics at it and at 1.01, and the full KB's validation runs (val-MODE) at it.
set -eu
cd "$(dirname "$0")/../.."
RUNS=${1:?usage: refusal_report.sh RUNS [RETRIEVAL]}
RET=${2:-}
Q=${QUESTIONS:-../shared/eval}
for mode in hybrid rerank; do
  ls "$RUNS"/*.train-$mode.jsonl > /dev/null 2>&1 || { echo "== $mode: no train-$mode runs"; continue; }
  grep -q . "$RUNS"/cjrc-dev.train-$mode.jsonl 2> /dev/null || echo "== $mode: no cjrc-dev train-$mode run: the threshold is chosen without unanswerable questions"
  echo "== $mode: the threshold on the calibration runs"
  python3 tools/decoder_train/refusal_threshold.py --runs "$RUNS" --tag train-$mode --questions "$Q" | tail -n 16
  t=$(python3 tools/decoder_train/refusal_threshold.py --runs "$RUNS" --tag train-$mode --questions "$Q" |
      sed -n 's/^best on these runs: t = \([0-9.]*\).*/\1/p')
  if ls "$RUNS"/*.val-$mode.jsonl > /dev/null 2>&1; then
    echo "== $mode: validation at t $t and at 1.01"
    python3 tools/decoder_train/refusal_threshold.py --runs "$RUNS" --tag val-$mode --questions "$Q" --at "$t" \
      --at 1.01 --metrics
    for f in refusal_p,confidence refusal_p,confidence,key_terms refusal_p,confidence,key_terms,coverage; do
      echo "== $mode: fitted rule on $f"
      python3 tools/decoder_train/refusal_rule.py --runs "$RUNS" --fit-tag train-$mode --val-tag val-$mode \
        --questions "$Q" --features $f ${RET:+--retrieval "$RET"} 2> /dev/null | grep -v "^  refuse at" || true
    done
  fi
done
ZH=cjrc-dev,cmrc-dev,policy-zh-dev,laws-zh
EN=cuad-dev,contracts-en-dev
for mode in hybrid rerank; do
  ls "$RUNS"/*.train-$mode-heldout.jsonl > /dev/null 2>&1 || { echo "== $mode-heldout: no train-$mode-heldout runs"; continue; }
  HQ=$(mktemp -d)
  trap 'rm -rf "$HQ"' EXIT
  for part in calibration validation; do
    python3 tools/decoder_train/heldout_unans.py --eval "$Q" --out "$HQ/$part" --part $part \
      --share ${HELDOUT_SHARE:-0.2} $(ls "$RUNS" | sed -n 's/\.[a-z]*-'$mode'-heldout\.jsonl$//p' | sort -u) | sed 's/^/  /'
  done
  for d in "$HQ"/calibration/*/; do # one questions file per suite: both parts (ids are unique in a suite)
    s=$(basename "$d"); mkdir -p "$HQ/both/$s"
    cat "$d/questions.jsonl" "$HQ/validation/$s/questions.jsonl" > "$HQ/both/$s/questions.jsonl"
  done
  for lang in zh:$ZH en:$EN; do
    echo "== $mode-heldout, ${lang%%:*}: the threshold on the held-out calibration runs"
    out=$(python3 tools/decoder_train/refusal_threshold.py --runs "$RUNS" --tag train-$mode-heldout \
          --questions "$HQ/both" --suites ${lang#*:} 2>&1) || { echo "$out" | tail -n 3; continue; }
    echo "$out" | tail -n 16
    t=$(echo "$out" | sed -n 's/^best on these runs: t = \([0-9.]*\).*/\1/p')
    at="--at $t"; [ "$t" = 1.01 ] || at="$at --at 1.01"
    if python3 tools/decoder_train/refusal_threshold.py --runs "$RUNS" --tag val-$mode-heldout --questions "$HQ/both" \
        --suites ${lang#*:} $at --metrics > "$HQ/m" 2>&1; then
      echo "== $mode-heldout, ${lang%%:*}: held-out validation at t $t (and at 1.01, never)"; cat "$HQ/m"
    fi
    if python3 tools/decoder_train/refusal_threshold.py --runs "$RUNS" --tag val-$mode --questions "$Q" \
        --suites ${lang#*:} $at --metrics > "$HQ/m" 2>&1; then
      echo "== $mode-heldout, ${lang%%:*}: the full KB's validation (val-$mode) at t $t (and at 1.01)"; cat "$HQ/m"
    fi
  done
  rm -rf "$HQ"
done
