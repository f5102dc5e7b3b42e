#!/usr/bin/env python3
"""Chooses the trained model's refusal threshold (clauseqa --refusal-min-p, CQ_ANSWER_REFUSAL_MIN_P) from eval runs
made with the refusal masked (device_calibrate.sh: --refusal-min-p 2), whose per-question lines carry the answer the
model gives when it may not refuse and `refusal_p`, the probability it gave to refusing. With threshold t the
runtime refuses exactly when refusal_p >= t and gives that answer otherwise, so every t is scored from one run.

Score of a question at t (SQuAD 2.0 style): an unanswerable question scores 1 when refused, else 0; an answerable
one scores its char-F1 (shared/eval/FORMAT.md; the eval's own f1 field), 0 when refused. A suite's score is the mean
over its questions with reference answers or unanswerable; the objective is the mean over suites (each suite counts
alike, whatever its size). Suites with no reference answers (contracts-en-dev) still report false abstention.

    python3 tools/decoder_train/refusal_threshold.py --runs DIR --tag train-rerank --questions ../shared/eval
    python3 tools/decoder_train/refusal_threshold.py --runs DIR --tag val-rerank --questions ../shared/eval --at 0.5

Without --at it prints the curve over a grid and the best t on these runs; with --at it scores the given t.
"""
import argparse
import glob
import json
import os


def load(runs, tag, questions_dir):
    suites = {}
    for path in sorted(glob.glob(os.path.join(runs, "*.%s.jsonl" % tag))):
        suite = os.path.basename(path)[: -len(".%s.jsonl" % tag)]
        meta = {}
        with open(os.path.join(questions_dir, suite, "questions.jsonl"), encoding="utf-8") as f:
            for line in f:
                q = json.loads(line)
                meta[q["id"]] = q
        rows = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                q = meta[r["id"]]
                rows.append({"answerable": q.get("answerable", True), "has_answers": bool(q.get("answers")),
                             "f1": r.get("f1", 0.0), "em": r.get("em", 0.0), "p": r.get("refusal_p", 0.0),
                             "other_abstention": r["prediction"]["abstained"]})
        suites[suite] = rows
    return suites


def score(rows, t):
    util, n_util, n_ans, false_abst, n_un, abst = 0.0, 0, 0, 0, 0, 0
    for r in rows:
        refuse = r["p"] >= t
        if r["answerable"]:
            n_ans += 1
            false_abst += refuse
            if r["has_answers"]:
                util += 0.0 if refuse else r["f1"]
                n_util += 1
        else:
            n_un += 1
            abst += refuse
            util += 1.0 if refuse else 0.0
            n_util += 1
    return {"score": util / n_util if n_util else None, "falseA": false_abst / n_ans if n_ans else None,
            "abst": abst / n_un if n_un else None}


def metrics(rows, t):
    """FORMAT.md's answer metrics at threshold t: EM and F1 over answerable questions with reference answers (a
    refusal scores 0), abstention accuracy on unanswerable ones, false abstention on answerable ones (refusals at t
    and the pipeline's own abstentions)."""
    em = f1 = n = n_ans = false_abst = n_un = abst = 0
    for r in rows:
        refuse = r["p"] >= t or r["other_abstention"]
        if r["answerable"]:
            n_ans += 1
            false_abst += refuse
            if r["has_answers"]:
                n += 1
                em += 0 if refuse else r["em"]
                f1 += 0 if refuse else r["f1"]
        else:
            n_un += 1
            abst += refuse
    return {"n": len(rows), "em": em / n if n else None, "f1": f1 / n if n else None,
            "abst": abst / n_un if n_un else None, "falseA": false_abst / n_ans if n_ans else None}


def fmt(v):
    return "   -  " if v is None else "%6.3f" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--questions", default="../shared/eval")
    ap.add_argument("--at", type=float, action="append")
    ap.add_argument("--metrics", action="store_true", help="with --at: EM, F1, abstention and false abstention")
    args = ap.parse_args()
    suites = load(args.runs, args.tag, args.questions)
    if args.metrics:
        for t in args.at or [1.01]:
            for n in sorted(suites):
                m = metrics(suites[n], t)
                print("t %.2f  %-17s n %5d  EM %s  F1 %s  abst %s  falseA %s"
                      % (t, n, m["n"], fmt(m["em"]), fmt(m["f1"]), fmt(m["abst"]), fmt(m["falseA"])))
        return
    grid = args.at or [0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 1.01]
    names = sorted(suites)
    print("t      objective  " + "  ".join("%-26s" % n for n in names))
    print("                  " + "  ".join("%-26s" % "score  falseA abst" for _ in names))
    best = None
    for t in grid:
        per = {n: score(suites[n], t) for n in names}
        vals = [per[n]["score"] for n in names if per[n]["score"] is not None]
        obj = sum(vals) / len(vals)
        print("%-6.2f %8.4f   " % (t, obj) + "  ".join(
            "%s %s %s     " % (fmt(per[n]["score"]), fmt(per[n]["falseA"]), fmt(per[n]["abst"])) for n in names))
        if best is None or obj > best[1]:
            best = (t, obj)
    if not args.at:
        print("best on these runs: t = %.2f (objective %.4f)" % best)


if __name__ == "__main__":
    main()
