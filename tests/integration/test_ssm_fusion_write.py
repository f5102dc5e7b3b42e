#!/usr/bin/env python3
"""tools/ssm_train/fusion.py fit --write (issue 14): the language-level `keep` fusion fitted on the calibration
questions and written into an encoder's ssm.json as the runtime reads it.
  - synthetic rankings where dense must lift the gold for Chinese (BM25 has it at rank 6, dense at rank 1: the
    smallest dense weight that puts it first, w 0.1, BM25's top 0 kept) and must stay out for English (BM25 first,
    dense never right: w 0, m 0);
  - the other keys of ssm.json are kept; the object has method, fitted_on (with --note), zh/en {w, m};
  - validation questions never enter the fit; rankings without calibration questions are refused, the file unchanged;
  - --method score (issue 27): the score fusion written the same way, {"method": "score", "norm", "zh"/"en": {w, m, c}}.

usage: test_ssm_fusion_write.py [path/to/clauseqa (unused)]"""
import argparse
import gzip
import json
import os
import sys
import tempfile

from checks import ROOT, check, failed  # noqa: E402 (tests/integration/checks.py)
sys.path.insert(0, os.path.join(ROOT, "tools", "ssm_train"))
import fusion  # noqa: E402



def record(suite, part, calib, gold_bm25, gold_dense, base, adverse=False):
    """BM25's top 10 and dense's top 50 over clause keys from base; the gold key is base, at the given ranks
    (1-based; 0 = not in that list). adverse: dense ranks BM25's 2nd..10th first, so that fusing without keeping
    BM25's top pushes a BM25-first gold below rank 5."""
    others = iter(range(base + 1, base + 200))
    bm = [[next(others), 10.0 - r, 0] for r in range(10)]
    dn = [[next(others), 1.0 - r / 100, 0] for r in range(50)]
    if adverse:
        for r in range(9):
            dn[r][0] = bm[r + 1][0]
    if gold_bm25:
        bm[gold_bm25 - 1] = [base, bm[gold_bm25 - 1][1], 1]
    if gold_dense:
        dn[gold_dense - 1] = [base, dn[gold_dense - 1][1], 1]
    return {"suite": suite, "type": "span_qa" if suite.endswith("zh-dev") else "clause_extraction", "part": part,
            "calib": calib, "bm25": bm, "dense": dn}


def rankings(path, calib=True, adverse=False):
    qs, n = {}, 0
    for i in range(12):  # calibration (train part) questions
        qs["zc%d" % i] = record("policy-zh-dev", "train", calib, 6, 1, 1000 * (n := n + 1))
        qs["ec%d" % i] = record("cuad-dev", "train", calib, 1, 0, 1000 * (n := n + 1))
    for i in range(40 if adverse else 4):  # trained-on train questions and validation questions: never in the fit
        qs["zt%d" % i] = record("policy-zh-dev", "train", False, 1, 0, 1000 * (n := n + 1), adverse)
        qs["zv%d" % i] = record("policy-zh-dev", "val", False, 1, 0, 1000 * (n := n + 1), adverse)
        qs["ev%d" % i] = record("cuad-dev", "val", False, 0, 1, 1000 * (n := n + 1))
    with gzip.open(path, "wt") as f:
        json.dump({"tag": "synthetic", "questions": qs}, f)


def main():
    tmp = tempfile.mkdtemp(prefix="cq_fusion_")
    cfg_path = os.path.join(tmp, "ssm.json")
    cfg = {"format": "clauseqa-ssm", "version": 1, "d_model": 8, "manifest": {"steps_done": 3}}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    good = os.path.join(tmp, "good.json.gz")
    rankings(good)
    fusion.fit_report(argparse.Namespace(files=[good], merge=True, write=cfg_path, note="a note"))
    out = json.load(open(cfg_path))
    fu = out.get("fusion", {})
    check({k: v for k, v in out.items() if k != "fusion"} == cfg, "the other keys of ssm.json are kept as they were")
    check(fu.get("method") == "keep", "method keep")
    check(fu.get("zh") == {"w": 0.1, "m": 0}, "zh: the smallest dense weight that lifts the gold first, w 0.1, m 0 "
          "(got %s)" % fu.get("zh"))
    check(fu.get("en") == {"w": 0.0, "m": 0}, "en: dense never right, BM25 alone (got %s)" % fu.get("en"))
    check("calibration" in fu.get("fitted_on", "") and "synthetic" in fu["fitted_on"] and
          fu["fitted_on"].endswith("; a note"), "fitted_on names the calibration questions, the tag and the note")
    check("zh 12, en 12 questions" in fu.get("fitted_on", ""), "fitted_on counts the calibration questions alone")

    # validation and trained-on questions that want BM25's top kept (m >= 1) outnumber the calibration ones: no move
    other = os.path.join(tmp, "other.json.gz")
    rankings(other, adverse=True)
    recs = [r for r in json.load(gzip.open(other, "rt"))["questions"].values() if r["part"] == "val"]
    check(fusion.metrics(recs, "keep", w=0.1, c=0)["hit@5"] < fusion.metrics(recs, "keep", w=0.1, c=1)["hit@5"],
          "(the adverse validation questions do want BM25's top kept)")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    fusion.fit_report(argparse.Namespace(files=[other], merge=True, write=cfg_path, note=""))
    check(json.load(open(cfg_path)).get("fusion", {}).get("zh") == {"w": 0.1, "m": 0},
          "the validation questions take no part in the fit")

    # no calibration questions: refused, the file unchanged
    bad = os.path.join(tmp, "bad.json.gz")
    rankings(bad, calib=False)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    before = open(cfg_path).read()
    try:
        fusion.fit_report(argparse.Namespace(files=[bad], merge=True, write=cfg_path, note=""))
        refused = False
    except SystemExit as e:
        refused = "calibration" in str(e)
    check(refused, "rankings without calibration questions are refused")
    check(open(cfg_path).read() == before, "and the ssm.json is left unchanged")
    # --method score (issue 27): the lists' scores; the same synthetic rankings (BM25 10 - r, dense 1 - r / 100)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    fusion.fit_report(argparse.Namespace(files=[good], merge=True, write=cfg_path, note="", method="score"))
    fu = json.load(open(cfg_path)).get("fusion", {})
    check(fu.get("method") == "score" and fu.get("norm") in ("minmax", "z"), "method score with a norm (got %s)" % fu)
    zh, en = fu.get("zh", {}), fu.get("en", {})
    check(set(zh) == {"w", "m", "c"} and set(en) == {"w", "m", "c"}, "zh and en hold w, m, c")
    zc = [r for r in json.load(gzip.open(good, "rt"))["questions"].values() if r["suite"] == "policy-zh-dev"
          and r.get("calib")]
    check(zh.get("w", 0) > 0 and all(fusion.ranked_score(r, zh["w"], zh["m"], zh["c"], fu["norm"])[0][1] for r in zc),
          "zh: a dense weight that puts the gold (BM25 6th, dense 1st) first (got %s)" % zh)
    check(en == {"w": 0.0, "m": 0, "c": 0.0}, "en: dense never right, BM25 alone (got %s)" % en)
    check("BM25 50 deep" in fu.get("fitted_on", ""), "fitted_on says how deep BM25 was read")
    before = open(cfg_path).read()
    try:
        fusion.fit_report(argparse.Namespace(files=[bad], merge=True, write=cfg_path, note="", method="score"))
        refused = False
    except SystemExit as e:
        refused = "calibration" in str(e)
    check(refused and open(cfg_path).read() == before, "score: no calibration questions, refused, the file unchanged")
    print("%d failed" % failed())
    return 1 if failed() else 0


if __name__ == "__main__":
    sys.exit(main())
