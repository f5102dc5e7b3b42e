#!/usr/bin/env python3
"""Chooses the trained model's refusal threshold (clauseqa --refusal-min-p, CQ_ANSWER_REFUSAL_MIN_P) from eval runs
made with the refusal masked (device_calibrate.sh: --refusal-min-p 2), whose per-question lines carry the answer the
model gives when it may not refuse and `refusal_p`, the probability it gave to refusing. With threshold t the
runtime refuses exactly when refusal_p >= t and gives that answer otherwise, so every t is scored from one run.

Score of a question at t (SQuAD 2.0 style): an unanswerable question scores 1 when refused, else 0; an answerable
one scores its char-F1 (shared/eval/FORMAT.md; the eval's own f1 field), 0 when refused. A suite's score is the mean
over its questions with reference answers or unanswerable, each class weighted to the share it has in the suite's
whole TRAIN part (tools/dev_split.py; --prior run: as the runs have them); the objective is the mean over suites
(each suite counts alike, whatever its size). A suite with no reference answers (contracts-en-dev) is left out of
the objective, whose trade of F1 for abstention it cannot weigh (scored on abstention alone it would ask to refuse
everything), and still reports false abstention (bounded by --max-false) and abstention.

Held-out-document runs (tags ending in -heldout: heldout_unans.py, device_calibrate.sh's *-heldout runs) are
weighted as they come (--prior auto, the default, is run for them and train for the others): their unanswerable
questions are made by holding a share of the part's documents (0.2) out of the KB, so their share is by
construction and the train part's (none in English) says nothing of it. Their questions are not the suites' own:
pass --questions a folder heldout_unans.py wrote (refusal_report.sh writes both parts into one).

Why the prior: the calibration runs score a sample of the calibration part, and a sample can miss the class mix by
far. The first Qwen calibration (issue 26) ran `clauseqa eval --every 3` over the cjrc calibration part, whose
questions come grouped by document in a fixed order (the unanswerable one mostly third of each group): every 3rd
question held 13 unanswerable of 304 (4 %) where the part holds 210 of 912 (23 %) and the train part 1163 of 4866
(24 %), and the threshold chosen on it was "never refuse". refusal_split.py now writes calibration parts whose every
Nth question keeps the class mix; the reweighting makes the objective the suite's whatever the sample.

    python3 tools/decoder_train/refusal_threshold.py --runs DIR --tag train-rerank --questions ../shared/eval
    python3 tools/decoder_train/refusal_threshold.py --runs DIR --tag val-rerank --questions ../shared/eval --at 0.5
    python3 tools/decoder_train/refusal_threshold.py --runs DIR --tag train-rerank-heldout --questions HELDOUT_Q \
        --suites cuad-dev,contracts-en-dev

Without --at it prints the curve over a grid and the best t on these runs among those keeping every suite's false
refusals within --max-false (ties to the higher t); with --at it scores the given t. --suites picks one language's
suites for a threshold per language (adapter.json "refusal_min_p": {"zh": t, "en": t}).
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dev_split  # noqa: E402


GRID = [0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 1.01]  # the thresholds tried (1.01: never)


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
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:  # a run cut by its time limit ends in half a line
                    print("%s: skipping a truncated line" % path, file=sys.stderr)
                    continue
                q = meta[r["id"]]
                rows.append({"id": r["id"], "answerable": q.get("answerable", True), "has_answers": bool(q.get("answers")),
                             "f1": r.get("f1", 0.0), "em": r.get("em", 0.0), "p": r.get("refusal_p", 0.0),
                             "other_abstention": r["prediction"]["abstained"]})
        suites[suite] = rows
    return suites


def train_prior(eval_dir, suite):
    """Share of unanswerable questions in the suite's whole train part (tools/dev_split.py), None when the suite is
    not under eval_dir."""
    if not os.path.isfile(os.path.join(eval_dir, suite, "questions.jsonl")):
        return None
    qs = dev_split.part_questions(eval_dir, suite, "train")
    return sum(1 for q in qs if q.get("answerable", True) is False) / len(qs) if qs else None


def prior_for(tag, prior="auto"):
    """The class weighting of a tag's runs: "run" (as they come) for held-out-document runs, whose unanswerable
    share is by construction, "train" for the others; an explicit choice stands."""
    if prior != "auto":
        return prior
    return "run" if tag.endswith("-heldout") else "train"


def class_weights(rows, prior):
    """(weight of an answerable row, weight of an unanswerable row) that make the rows' class mix the prior's
    (share of unanswerable); (1, 1) when prior is None or the rows lack a class the prior has."""
    n_un = sum(1 for r in rows if not r["answerable"])
    n_an = len(rows) - n_un
    if prior is None or not n_un or not n_an:
        return 1.0, 1.0
    return (1.0 - prior) * len(rows) / n_an, prior * len(rows) / n_un


def score(rows, t, refuse_fn=None, weights=(1.0, 1.0)):
    """The SQuAD 2.0-style utility at threshold t (or with refuse_fn(row) -> bool deciding the refusal), each row
    weighted by its class (weights: answerable, unanswerable)."""
    util, n_util, n_ans, false_abst, n_un, abst = 0.0, 0.0, 0, 0, 0, 0
    w_an, w_un = weights
    for r in rows:
        refuse = refuse_fn(r) if refuse_fn else r["p"] >= t
        if r["answerable"]:
            n_ans += 1
            false_abst += refuse
            if r["has_answers"]:
                util += 0.0 if refuse else w_an * r["f1"]
                n_util += w_an
        else:
            n_un += 1
            abst += refuse
            util += w_un if refuse else 0.0
            n_util += w_un
    if not any(r["answerable"] and r["has_answers"] for r in rows):
        n_util = 0  # no answer to lose: the suite cannot weigh refusing (module docstring)
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


def choose(curve, max_false):
    """(t, objective) of the best point of curve [(t, objective, {suite: score()})] in ascending t among those where
    no suite's false refusals exceed max_false; a tie goes to the higher t (refusing more bought nothing); None when
    none is eligible."""
    best = None
    for t, obj, per in curve:
        if all(p["falseA"] is None or p["falseA"] <= max_false for p in per.values()) and (best is None or obj >= best[1]):
            best = (t, obj)
    return best


def fmt(v):
    return "   -  " if v is None else "%6.3f" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--questions", default="../shared/eval")
    ap.add_argument("--at", type=float, action="append")
    ap.add_argument("--metrics", action="store_true", help="with --at: EM, F1, abstention and false abstention")
    ap.add_argument("--eval", default="../shared/eval", help="the whole suites, for the train part's class mix")
    ap.add_argument("--prior", choices=["auto", "train", "run"], default="auto",
                    help="weight each class to its share in the suite's whole train part (train) or not (run); "
                         "auto: run for held-out-document tags (*-heldout), else train")
    ap.add_argument("--suites", help="only these suites (comma-separated), e.g. one language's")
    ap.add_argument("--max-false", type=float, default=0.08,
                    help="a threshold is eligible only where no suite refuses more than this share of its answerable "
                         "questions (issue 26: abstention at <= 8 %% false refusals); 1: no limit")
    args = ap.parse_args()
    suites = load(args.runs, args.tag, args.questions)
    if args.suites:
        suites = {n: v for n, v in suites.items() if n in args.suites.split(",")}
    if not suites:
        sys.exit("refusal_threshold: no %s/*.%s.jsonl" % (args.runs, args.tag))
    if args.metrics:
        for t in args.at or [1.01]:
            for n in sorted(suites):
                m = metrics(suites[n], t)
                print("t %.2f  %-17s n %5d  EM %s  F1 %s  abst %s  falseA %s"
                      % (t, n, m["n"], fmt(m["em"]), fmt(m["f1"]), fmt(m["abst"]), fmt(m["falseA"])))
        return
    grid = args.at or GRID
    names = sorted(suites)
    prior = prior_for(args.tag, args.prior)
    weights = {n: class_weights(suites[n], train_prior(args.eval, n) if prior == "train" else None)
               for n in names}
    for n in names:
        if weights[n] != (1.0, 1.0):
            print("%s: unanswerable %.1f %% of these runs, weighted to the train part's %.1f %%"
                  % (n, 100.0 * sum(1 for r in suites[n] if not r["answerable"]) / len(suites[n]),
                     100.0 * train_prior(args.eval, n)))
    print("t      objective  " + "  ".join("%-26s" % n for n in names))
    print("                  " + "  ".join("%-26s" % "score  falseA abst" for _ in names))
    curve = []
    for t in grid:
        per = {n: score(suites[n], t, weights=weights[n]) for n in names}
        vals = [per[n]["score"] for n in names if per[n]["score"] is not None]
        obj = sum(vals) / len(vals)
        print("%-6.2f %8.4f   " % (t, obj) + "  ".join(
            "%s %s %s     " % (fmt(per[n]["score"]), fmt(per[n]["falseA"]), fmt(per[n]["abst"])) for n in names))
        curve.append((t, obj, per))
    best = choose(curve, args.max_false)
    if not args.at:
        if best is None:
            sys.exit("refusal_threshold: no threshold keeps every suite's false refusals within %.3f" % args.max_false)
        print("best on these runs: t = %.2f (objective %.4f; false refusals <= %.3f in every suite)"
              % (best[0], best[1], args.max_false))


if __name__ == "__main__":
    main()
