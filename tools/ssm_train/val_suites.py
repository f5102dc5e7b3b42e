"""Writes the validation half of each dev suite as a suite folder that `clauseqa eval` reads: OUT/<suite>-val/ with
docs -> the suite's docs (a symbolic link) and questions.jsonl holding only the validation questions (the split rule
of prepare.py: int(sha256(id), 16) % 5 == 0). These are the questions the encoder never trained on.

    python3 tools/ssm_train/val_suites.py --eval ../shared/eval --out build/val-suites [--laws-sample 300]

--laws-sample N also writes laws-zh-sub-val/: the same laws-zh validation questions over a smaller corpus, the
documents their gold clauses are in plus N other laws-zh documents drawn with a fixed seed (docs/ holds links to
those files only). Ingesting the whole of laws-zh with the encoder on 2 shared cores takes most of an hour; this
subset is what docs/EVAL.md scores BM25, dense and hybrid on, all three over the same documents.
"""
import argparse
import json
import os
import random

from prepare import SUITES, is_validation


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--out", default="build/val-suites")
    ap.add_argument("--laws-sample", type=int, default=0)
    args = ap.parse_args()
    for suite in SUITES:
        d = os.path.join(args.out, suite + "-val")
        os.makedirs(d, exist_ok=True)
        link = os.path.join(d, "docs")
        if not os.path.islink(link):
            os.symlink(os.path.abspath(os.path.join(args.eval, suite, "docs")), link)
        n = 0
        with open(os.path.join(args.eval, suite, "questions.jsonl"), encoding="utf-8") as f, \
                open(os.path.join(d, "questions.jsonl"), "w", encoding="utf-8") as out:
            for line in f:
                if line.strip() and is_validation(json.loads(line)["id"]):
                    out.write(line)
                    n += 1
        print("%s: %d validation questions" % (d, n))
    if args.laws_sample:
        src = os.path.join(args.eval, "laws-zh")
        d = os.path.join(args.out, "laws-zh-sub-val")
        os.makedirs(os.path.join(d, "docs"), exist_ok=True)
        files = {os.path.splitext(f)[0]: f for f in sorted(os.listdir(os.path.join(src, "docs")))}
        gold, lines = set(), []
        with open(os.path.join(src, "questions.jsonl"), encoding="utf-8") as f:
            for line in f:
                q = json.loads(line)
                if is_validation(q["id"]):
                    lines.append(line)
                    gold.update(g["doc"] for g in q["gold"] if g["doc"] in files)
        others = sorted(set(files) - gold)
        pick = sorted(gold) + sorted(random.Random(6).sample(others, min(args.laws_sample, len(others))))
        for name in pick:
            link = os.path.join(d, "docs", files[name])
            if not os.path.islink(link):
                os.symlink(os.path.abspath(os.path.join(src, "docs", files[name])), link)
        with open(os.path.join(d, "questions.jsonl"), "w", encoding="utf-8") as out:
            out.writelines(lines)
        print("%s: %d validation questions over %d documents (%d gold, %d sampled)"
              % (d, len(lines), len(pick), len(gold), len(pick) - len(gold)))


if __name__ == "__main__":
    main()
