#!/usr/bin/env python3
"""The train / validation split of the development suites BY DOCUMENT, shared by every training tool (decoder
adapter, SSM encoder) and by the evaluations that report on validation parts.

A document is validation when int(sha256("<suite>/<doc name>"), 16) % 5 == 0 (about a fifth of every suite). A
question is validation when ANY of its gold documents is; it is train only when all its gold documents are train
documents, so nothing trained on has seen a validation document's gold. A question without gold documents falls
back to its id (int(sha256(id), 16) % 5 == 0). Suites whose documents live in other suites (corpus.txt, e.g.
laws-zh-pdf) split by the same doc names.

    python3 tools/dev_split.py --eval ../shared/eval --out build/val [--part validation|train] [SUITE ...]

writes OUT/<suite>/ with docs -> the suite's docs (all of them: retrieval runs over the whole corpus, as a user's
KB would) and questions.jsonl holding only the questions of the part, and prints the counts. `clauseqa eval
--suite OUT/<suite>` then scores exactly that part.
"""
import argparse
import hashlib
import json
import os
import sys

SUITES = ["cjrc-dev", "cmrc-dev", "policy-zh-dev", "cuad-dev", "contracts-en-dev", "laws-zh", "laws-zh-pdf",
          "mmlongbench-dev"]


def _bucket(key):
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % 5


def doc_is_validation(suite, doc):
    # laws-zh-pdf holds PDF renderings of laws-zh documents under the same names: split them as laws-zh does.
    base = "laws-zh" if suite == "laws-zh-pdf" else suite
    return _bucket("%s/%s" % (base, doc)) == 0


def question_is_validation(suite, q):
    docs = [g["doc"] for g in q.get("gold") or [] if g.get("doc")]
    if not docs:
        return _bucket(q["id"]) == 0
    return any(doc_is_validation(suite, d) for d in docs)


def doc_is_calibration(suite, doc):
    """Issue 14's calibration part: about a fifth of the TRAIN documents (an independent hash), held out of the
    encoder's training so that a fusion can be fitted on questions the encoder never saw."""
    base = "laws-zh" if suite == "laws-zh-pdf" else suite
    return not doc_is_validation(suite, doc) and _bucket("calib/%s/%s" % (base, doc)) == 0


def question_is_calibration(suite, q):
    docs = [g["doc"] for g in q.get("gold") or [] if g.get("doc")]
    return bool(docs) and not question_is_validation(suite, q) and any(doc_is_calibration(suite, d) for d in docs)


def read_questions(eval_dir, suite):
    with open(os.path.join(eval_dir, suite, "questions.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def part_questions(eval_dir, suite, part):
    want = part == "validation"
    return [q for q in read_questions(eval_dir, suite) if question_is_validation(suite, q) == want]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--out", default="build/val")
    ap.add_argument("--part", choices=["validation", "train"], default="validation")
    ap.add_argument("suites", nargs="*")
    args = ap.parse_args()
    suites = args.suites or [s for s in SUITES if os.path.isdir(os.path.join(args.eval, s))]
    for suite in suites:
        src = os.path.join(args.eval, suite)
        if not os.path.isdir(src):
            sys.exit("dev_split: no suite %s under %s" % (suite, args.eval))
        d = os.path.join(args.out, suite)
        os.makedirs(d, exist_ok=True)
        for name in ("docs", "corpus.txt"):
            target = os.path.abspath(os.path.join(src, name))
            link = os.path.join(d, name)
            if os.path.exists(target) and not os.path.lexists(link):
                os.symlink(target, link)
        qs = part_questions(args.eval, suite, args.part)
        with open(os.path.join(d, "questions.jsonl"), "w", encoding="utf-8") as out:
            for q in qs:
                out.write(json.dumps(q, ensure_ascii=False) + "\n")
        print("%s: %d %s questions" % (d, len(qs), args.part))


if __name__ == "__main__":
    main()
