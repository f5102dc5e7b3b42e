#!/usr/bin/env python3
"""Issue 26's refusal calibration tools (tools/decoder_train/refusal_split.py, refusal_threshold.py,
refusal_rule.py):
  - refusal_split.stratified_order: every Nth question of the written part keeps the answerable / unanswerable mix,
    where the suite's own grouped order (two answerable, then the unanswerable one) gave none;
  - refusal_threshold.class_weights / score: a sample short of unanswerable questions is weighted back to the
    prior, which moves the chosen threshold off "never refuse";
  - refusal_threshold.load skips a run's truncated last line;
  - refusal_rule.fit finds the direction that separates the classes and refuses only generated answers.
Standard library only.

usage: test_refusal_calib.py [path/to/clauseqa (unused)]"""
import json
import math
import os
import random
import sys
import tempfile

from checks import ROOT, check, finish  # noqa: E402 (tests/integration/checks.py)
sys.path.insert(0, os.path.join(ROOT, "tools", "decoder_train"))
import refusal_rule  # noqa: E402
import refusal_split  # noqa: E402
import refusal_threshold  # noqa: E402



def test_split():
    qs = []
    for g in range(300):  # the suite's pattern: A A U per document
        qs += [{"id": "q%d-a" % g}, {"id": "q%d-b" % g}, {"id": "q%d-u" % g, "answerable": False}]
    naive = qs[::3]
    check(sum(1 for q in naive if q.get("answerable") is False) == 0, "the grouped order's every 3rd: no unanswerable")
    for every in (2, 3, 5):
        order = refusal_split.stratified_order(qs, every)
        check(sorted(q["id"] for q in order) == sorted(q["id"] for q in qs),
              "every %d: the order keeps every question once" % every)
        s = order[::every]
        un = sum(1 for q in s if q.get("answerable") is False)
        check(abs(un - len(s) / 3) <= 1, "every %d: its sample holds %d of %d unanswerable (a third)"
              % (every, un, len(s)))
        check(refusal_split.stratified_order(list(reversed(qs)), every) == order,
              "every %d: the order does not depend on the input's" % every)
    order = refusal_split.stratified_order(qs, 3)
    for other in (2, 4, 7):  # other samples: hashed, so a third give or take chance
        s = order[::other]
        un = sum(1 for q in s if q.get("answerable") is False)
        check(abs(un - len(s) / 3) <= 4 * (len(s) * 2 / 9) ** 0.5, "every %d of the every-3 order: %d of %d"
              % (other, un, len(s)))
    check(refusal_split.stratified_order([], 3) == [], "empty part")


def rows_of(n_an, n_un, rng):
    rows = []
    for _ in range(n_an):  # answerable: refusal_p mostly low, a tail high
        rows.append({"answerable": True, "has_answers": True, "f1": 0.6, "em": 0.0, "other_abstention": False,
                     "p": rng.random() ** 3})
    for _ in range(n_un):  # unanswerable: refusal_p mostly high
        rows.append({"answerable": False, "has_answers": False, "f1": 0.0, "em": 0.0, "other_abstention": False,
                     "p": 1 - rng.random() ** 3})
    return rows


def test_weights():
    rng = random.Random(7)
    rows = rows_of(290, 6, rng)
    w = refusal_threshold.class_weights(rows, 0.25)
    check(abs(w[0] * 290 / 296 - 0.75) < 1e-9 and abs(w[1] * 6 / 296 - 0.25) < 1e-9,
          "class weights make the mix the prior's (%.3f, %.3f)" % w)
    check(refusal_threshold.class_weights(rows, None) == (1.0, 1.0), "no prior: unweighted")
    check(refusal_threshold.class_weights(rows[:290], 0.25) == (1.0, 1.0), "a class missing: unweighted")
    grid = [0.5, 0.6, 0.7, 0.8, 0.9, 1.01]
    plain = max(grid, key=lambda t: refusal_threshold.score(rows, t)["score"])
    weighted = max(grid, key=lambda t: refusal_threshold.score(rows, t, weights=w)["score"])
    check(plain == 1.01, "unweighted, 6 unanswerable of 296: never refuse (t %.2f)" % plain)
    check(weighted < 1.01, "weighted to a quarter unanswerable: a threshold that refuses (t %.2f)" % weighted)
    s = refusal_threshold.score(rows, 0.0, refuse_fn=lambda r: not r["answerable"], weights=w)
    check(abs(s["score"] - (0.25 + 0.75 * 0.6)) < 1e-9 and s["falseA"] == 0 and s["abst"] == 1,
          "score with a perfect refuse_fn: %.3f" % s["score"])


def write_suite(d, suite, qs, lines, tail=""):
    os.makedirs(os.path.join(d, "q", suite))
    with open(os.path.join(d, "q", suite, "questions.jsonl"), "w") as f:
        for q in qs:
            f.write(json.dumps(q) + "\n")
    with open(os.path.join(d, "%s.t.jsonl" % suite), "w") as f:
        for r in lines:
            f.write(json.dumps(r) + "\n")
        f.write(tail)


def test_choose():
    """The threshold: the best objective among the thresholds that keep every suite's false refusals within the
    limit, a tie to the higher (refusing more bought nothing)."""
    def pt(t, obj, *false):
        return (t, obj, {"s%d" % i: {"falseA": f} for i, f in enumerate(false)})
    curve = [pt(0.5, 0.80, 0.20, 0.01), pt(0.9, 0.75, 0.07, None), pt(0.95, 0.74, 0.02, 0.0), pt(1.01, 0.74, 0.0, 0.0)]
    check(refusal_threshold.choose(curve, 1.0) == (0.5, 0.80), "no limit: the best objective")
    check(refusal_threshold.choose(curve, 0.08) == (0.9, 0.75), "0.5 refuses 20 % of one suite's answerable ones")
    check(refusal_threshold.choose(curve, 0.05) == (1.01, 0.74), "a tie goes to the higher threshold")
    check(refusal_threshold.choose(curve[:1], 0.05) is None, "none eligible")


def test_rule():
    rng = random.Random(11)
    qs, lines = [], []
    for i in range(400):
        un = i % 4 == 0
        qs.append({"id": "q%d" % i, "question": "?", "answerable": not un, "answers": [] if un else ["x"]})
        line = {"id": "q%d" % i, "f1": 0.0 if un else 0.8, "em": 0.0, "prediction": {"abstained": False},
                "refusal_p": min(1, max(0, rng.gauss(0.7 if un else 0.3, 0.2))),
                "confidence": min(1, max(0, rng.gauss(0.4 if un else 0.6, 0.2))),
                "key_terms": 1 if un else 3, "key_terms_sentence": 1, "n_key_terms": 4}
        if i == 5:  # an extractive answer: no generated features, never refused by the rule
            line = {"id": "q5", "f1": 0.8, "em": 0.0, "prediction": {"abstained": False}}
        lines.append(line)
    with tempfile.TemporaryDirectory() as d:
        write_suite(d, "s", qs, lines, tail='{"id": "q40')
        suites = refusal_rule.load(d, "t", os.path.join(d, "q"))
        check(len(suites["s"]) == 400, "load: the truncated last line skipped (%d rows)" % len(suites["s"]))
        rule, _ = refusal_rule.fit(suites, ["s"], ["refusal_p", "confidence", "key_terms"], lambda n: None, 1.0)
        check(rule.weights["refusal_p"] > 0 and rule.weights["confidence"] < 0 and rule.weights["key_terms"] < 0,
              "fit: refusal up, confidence and key terms down (%s)" % json.dumps(rule.json()))
        a = refusal_rule.auc(suites["s"], lambda r: rule.z(r["x"]))
        check(a > 0.9, "fitted rule separates the classes (AUC %.3f)" % a)
        q5 = [r for r in suites["s"] if r["id"] == "q5"][0]
        check(not refusal_rule.Rule(100.0, {}).refuses(q5), "the rule never refuses an answer it has no features of")
        x = refusal_rule.features({"refusal_p": 0.5, "confidence": 0.9, "key_terms": 2, "n_key_terms": 4})
        check(x["verdict"] == 1 and x["key_terms_sentence"] == 0.5, "a verdict: the clause's share for the sentence")
        x = refusal_rule.features({"refusal_p": 0.5, "confidence": 0.9, "key_terms": 0, "key_terms_sentence": -1,
                                   "n_key_terms": 0})
        check(x["key_terms"] == 1 and x["key_terms_sentence"] == 1 and x["verdict"] == 0,
              "no key terms: both shares 1")
        # retrieval features: the line's own, else the retrieval run's, each on its own (a line with top scores
        # but no coverage takes the coverage from the retrieval run)
        line = {"refusal_p": 0.5, "confidence": 0.9, "top": [{"score": 9.0}, {"score": 3.0}]}
        ret = {"top": [{"score": 1.0}], "coverage": 0.25, "cited": 1}
        x = refusal_rule.features(line, ret)
        check(abs(x["top_score"] - math.log1p(9.0)) < 1e-12 and abs(x["margin"] - 2 / 3) < 1e-12
              and x["coverage"] == 0.25 and x["cited_top"] == 0,
              "features: the line's top scores, the retrieval run's coverage, never its cited clause")
        x = refusal_rule.features({"refusal_p": 0.5, "top": [{"doc": "a"}], "coverage": 0.5, "cited": 1}, ret)
        check(abs(x["top_score"] - math.log1p(1.0)) < 1e-12 and x["margin"] == 1 and x["coverage"] == 0.5
              and x["cited_top"] == 1, "features: the retrieval run's top scores when the line has none")


def main():
    test_split()
    test_weights()
    test_choose()
    test_rule()
    finish()


if __name__ == "__main__":
    main()
