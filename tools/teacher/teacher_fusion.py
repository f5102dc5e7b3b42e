"""Teacher + BM25 hybrid on the dev suites' validation parts, here on the CPU, with the product's fusion (issue 27's
baseline: the target is >= 70 % of what the teacher adds to BM25).

    python3 tools/teacher/teacher_fusion.py --data DATA --vectors DIR [--eval ../shared/eval] [--out F.json.gz]
        [--tag egemma] [--dim 0] [--bm25-scores F.json.gz]

DIR: egemma_vectors.py's files (dev_rank.npz: the teacher's 50 nearest store clauses of each dev question's suite,
computed on the GPU at full dimension). --dim N instead ranks here from the cache's Matryoshka vectors
(cache.c.*, cache.q.*; N <= the cache's dimension), which needs no dev_rank.npz.

Each question becomes one record of tools/ssm_train/fusion.py's collect format (keys = global clause ids, hit = the
clause is one of the question's gold clauses by FORMAT.md's rule, prepare.py's `pos`): "bm25" = prepare.py's BM25
top 50 (`clauseqa retrieve --mode bm25` on the same store; no scores, so fusion.py's `gate` is not meaningful here),
"dense" = the teacher's top 50. Answerable questions with gold that prepare.py dropped (no clause of the store meets
their gold) are kept as records that no method can hit, as `fusion.py collect` counts them. Parts: validation, and of
the train part the calibration questions (tools/dev_split.py), on which fusion.py fits w and m; then fusion.py's
own table (`fit --merge`): BM25, teacher dense, fixed RRF, rrf-w / gate / keep fitted by type, language, all.
The `keep` column "language" is what the runtime ships (search/fusion.c).

--bm25-scores (tools/teacher/bm25_scores.py's file: BM25's top 50 WITH scores, the same ranking as prepare.py's)
puts BM25's scores into the records, and the score fusions are measured too (fusion.py `score_report`: per-question
min-max or z-score normalization, a dense weight w, BM25's top m kept when it is confident by margin c; fitted by
language on the calibration questions; search/fusion_score.c ships it).
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ssm_train"))
sys.path.insert(0, os.path.join(HERE, ".."))
import dev_split  # noqa: E402
import fusion  # noqa: E402
import egemma_vectors  # noqa: E402


def dense_lists(a, data_q, meta, corpus):
    """{question row: (gids, cos)} of the dev questions."""
    if not a.dim:
        z = np.load(os.path.join(a.vectors, "dev_rank.npz"))
        return {int(j): (r, c) for j, r, c in zip(z["qi"], z["rank"], z["cos"])}
    C = egemma_vectors.load_cache(a.vectors, "c")[:, :a.dim]
    Q = egemma_vectors.load_cache(a.vectors, "q")[:, :a.dim]
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    doc_off, doc_suite = corpus["doc_off"], corpus["doc_suite"]
    clause_suite = np.repeat(doc_suite, np.diff(doc_off))
    out = {}
    for si, suite in enumerate(meta["suites"]):
        qi = [j for j, x in enumerate(data_q) if x["src"] == "dev" and x["suite"] == suite]
        gids = np.flatnonzero((clause_suite == si) & (np.arange(len(clause_suite)) < meta["n_store_clauses"]))
        if not qi or not len(gids):
            continue
        s = Q[qi] @ C[gids].T
        top = np.argsort(-s, axis=1, kind="stable")[:, :50]
        for r, j in enumerate(qi):
            out[j] = (gids[top[r]], s[r, top[r]])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--out", default="")
    ap.add_argument("--tag", default="egemma")
    ap.add_argument("--dim", type=int, default=0)
    ap.add_argument("--bm25-scores", default="", help="bm25_scores.py's file: BM25 with scores, score fusion too")
    a = ap.parse_args()
    scores = json.load(gzip.open(a.bm25_scores, "rt"))["questions"] if a.bm25_scores else {}
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    corpus = np.load(os.path.join(a.data, "corpus.npz"))
    data_q = json.load(open(os.path.join(a.data, "queries.json"), encoding="utf-8"))["questions"]
    dense = dense_lists(a, data_q, meta, corpus)
    by_id = {(x["suite"], x["id"]): j for j, x in enumerate(data_q) if x["src"] == "dev"}
    recs, missing_rank = {}, 0
    for suite in meta["suites"]:
        if suite not in fusion.LANG:
            continue
        for q in dev_split.read_questions(a.eval, suite):
            if not q.get("answerable", True) or not q.get("gold"):
                continue
            val = dev_split.question_is_validation(suite, q)
            calib = not val and dev_split.question_is_calibration(suite, q)
            if not val and not calib:
                continue
            rec = {"suite": suite, "type": q["type"], "part": "val" if val else "train", "calib": calib,
                   "bm25": [], "dense": []}
            j = by_id.get((suite, q["id"]))
            if j is not None:
                pos = set(data_q[j]["pos"])
                key = "%s/%s" % (suite, q["id"])
                if scores and key not in scores:
                    raise SystemExit("teacher_fusion: %s has no BM25 scores in %s" % (key, a.bm25_scores))
                rec["bm25"] = ([[int(g), float(x), int(g in pos)] for g, x in scores[key]] if scores else
                               [[int(g), 0.0, int(g in pos)] for g in data_q[j].get("bm25", [])])
                if j in dense:
                    g, c = dense[j]
                    rec["dense"] = [[int(x), round(float(s), 5), int(x in pos)] for x, s in zip(g, c) if x >= 0]
                else:
                    missing_rank += 1
            recs["%s/%s" % (suite, q["id"])] = rec
    if missing_rank:
        print("warning: %d questions without the teacher's ranking" % missing_rank, file=sys.stderr)
    out = a.out or os.path.join(a.vectors, "fusion.%s.json.gz" % a.tag)
    with gzip.open(out, "wt") as f:
        json.dump({"tag": a.tag + ("" if not a.dim else " (cache, %d-d)" % a.dim), "questions": recs}, f)
    n = {p: sum(r["part"] == p for r in recs.values()) for p in ("val", "train")}
    print("%d validation and %d calibration questions -> %s" % (n["val"], n["train"], out))
    fusion.fit_report(argparse.Namespace(files=[out], merge=True, write="", note=""))
    if scores:
        for depth in (fusion.SCORE_DEPTH, fusion.DEPTH_BM25):
            fusion.score_report(list(recs.values()), a.tag, depth)


if __name__ == "__main__":
    main()
