#!/usr/bin/env python3
"""Writes the dev suites' calibration parts (tools/dev_split.py: train documents held out of the reader's training)
for device_calibrate.sh's train-* runs (its tq/ folder), in an order whose every Nth question keeps the part's
answerable / unanswerable mix.

Why: the suites list their questions grouped by document in a fixed pattern (cjrc-dev: the unanswerable question is
mostly the third of its group), and `clauseqa eval --every 3` over the part in that order took 13 unanswerable of 304
questions (4 %) where the part holds 210 of 912 (23 %): the refusal threshold chosen on it was "never refuse"
(issue 26). Here the part is put in a hashed order (sha256 of the question id) with every Nth question of each
class at the positions `--every N` takes, so that sample holds each class's share within one question.

    python3 tools/decoder_train/refusal_split.py --eval ../shared/eval --out /tmp/tq [--every 3] [SUITE ...]

writes OUT/<suite>/questions.jsonl (no docs: device_calibrate.sh links the suite's documents) and prints, per suite,
the part's counts and those of the every-Nth sample.
"""
import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dev_split  # noqa: E402

SUITES = ["cjrc-dev", "cmrc-dev", "policy-zh-dev", "cuad-dev", "contracts-en-dev"]


def _key(q):
    return hashlib.sha256(("order/" + q["id"]).encode("utf-8")).hexdigest()


def stratified_order(questions, every=3):
    """The questions in hashed order (no pattern of the suite's own order left), arranged so that `clauseqa eval
    --every EVERY` (questions 0, EVERY, 2 EVERY, ...) takes every EVERY-th question of each class (answerable or
    not) in that order: its class mix is the part's within one question. Other sample sizes get a hashed sample."""
    every = max(1, every)
    un = sorted((q for q in questions if q.get("answerable", True) is False), key=_key)
    an = sorted((q for q in questions if q.get("answerable", True) is not False), key=_key)
    sample = sorted(un[::every] + an[::every], key=_key)
    picked = set(id(q) for q in sample)
    rest = sorted((q for q in un + an if id(q) not in picked), key=_key)
    out = []
    for i, q in enumerate(sample):
        out.append(q)
        out += rest[i * (every - 1):(i + 1) * (every - 1)]
    out += rest[len(sample) * (every - 1):]
    return out


def calibration_part(eval_dir, suite):
    qs = dev_split.read_questions(eval_dir, suite)
    return [q for q in qs if dev_split.question_is_calibration(suite, q)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--out", required=True)
    ap.add_argument("--every", type=int, default=3, help="the sample device_calibrate.sh takes (its EVERY)")
    ap.add_argument("suites", nargs="*")
    args = ap.parse_args()
    for suite in args.suites or SUITES:
        if not os.path.isfile(os.path.join(args.eval, suite, "questions.jsonl")):
            sys.exit("refusal_split: no suite %s under %s" % (suite, args.eval))
        qs = stratified_order(calibration_part(args.eval, suite), args.every)
        d = os.path.join(args.out, suite)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "questions.jsonl"), "w", encoding="utf-8") as f:
            for q in qs:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
        sample = qs[::max(1, args.every)]
        un = lambda L: sum(1 for q in L if q.get("answerable", True) is False)  # noqa: E731
        print("%s: calibration part %d questions (%d unanswerable); every %d: %d (%d unanswerable)"
              % (suite, len(qs), un(qs), args.every, len(sample), un(sample)))


if __name__ == "__main__":
    main()
