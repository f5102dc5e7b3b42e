#!/usr/bin/env python3
"""index/fusion_score.c's score fusion against its reference, `ranked_score()` of tools/ssm_train/fusion.py.

    fusion_score_vs_py.py TEST_INDEX_FUSION_SCORE    fresh cases (a new seed each run, printed) ranked by fusion.py;
                                                     the C program ranks them (CLAUSEQA_FUSION_SCORE_CASES) and must
                                                     agree on every one; 77 (skipped) when fusion.py cannot be loaded
    fusion_score_vs_py.py --write FILE               the cases the C unit test checks without Python
                                                     (tests/data/fusion/score_rankings.jsonl)
    fusion_score_vs_py.py TEST_INDEX_FUSION_SCORE --records F.json.gz ...
                                                     the questions of fusion.py records with scores (teacher_fusion.py
                                                     --bm25-scores' file: BM25 50 deep with scores, cosines) instead,
                                                     under a few (norm, w, m, c), the teacher's fits among them

A case is {"norm", "w", "m", "c", "bm25": [[id, score]], "dense": [[id, score]], "ranked": [ids]}: BM25 at most 50
deep (its scores not always falling: the documents a question names come first), dense at most 50. Scores are drawn
from small sets as well as at random, so that equal scores, equal lists and constant lists occur.
"""
import random
import sys

import fusion_cases


def case(rs, b, d, norm, w, m, c):
    rec = {"bm25": [[k, s, 0] for k, s in b], "dense": [[k, s, 0] for k, s in d]}
    return {"norm": norm, "w": w, "m": m, "c": c, "bm25": [[k, s] for k, s in b], "dense": [[k, s] for k, s in d],
            "ranked": [k for k, _ in rs(rec, w, m, c, norm)]}


def edge_cases(rs):
    b = [(1, 9.0), (2, 7.5), (3, 7.5), (4, 3.0), (5, 1.0)]
    d = [(6, 0.8), (3, 0.7), (1, 0.6), (7, 0.6), (8, 0.2)]
    out = []
    for norm in ("minmax", "z"):
        for w, m, c in ((0.0, 0, 0.0), (1.0, 0, 0.0), (0.5, 0, 0.0), (0.5, 2, 0.0), (0.5, 2, 0.5), (0.3, 9, 0.0),
                        (0.7, 1, 0.1)):
            out.append(case(rs, b, d, norm, w, m, c))
            out.append(case(rs, b, [], norm, w, m, c))                 # no dense list
            out.append(case(rs, [], d, norm, w, m, c))                 # no BM25 list
            out.append(case(rs, b[:1], d[:1], norm, w, m, c))          # lists of one
            out.append(case(rs, [(1, 2.0), (2, 2.0)], [(2, 0.5), (1, 0.5)], norm, w, m, c))  # constant lists
            out.append(case(rs, [(1, 3.0), (2, 5.0), (3, 4.0)], d, norm, w, m, c))  # named documents first
            out.append(case(rs, [(1, 2.0), (2, 1.0), (1, 0.5)], [(3, 0.9), (3, 0.8), (2, 0.1)], norm, w, m, c))
        out.append(case(rs, [], [], norm, 0.5, 2, 0.0))
    return out


def random_cases(rs, n, seed):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        pool = rnd.randint(2, 120)
        nb, nd = rnd.randint(0, 50), rnd.randint(0, 50)
        ids_b = rnd.sample(range(pool), min(pool, nb))
        ids_d = rnd.sample(range(pool), min(pool, nd))
        if rnd.random() < 0.5:  # a few values: ties
            vals = [rnd.choice([1.0, 2.0, 2.5, 4.0, 8.0]) for _ in ids_b]
            cos = [rnd.choice([0.25, 0.5, 0.75]) for _ in ids_d]
        else:
            vals = [round(rnd.uniform(0.5, 30.0), 4) for _ in ids_b]
            cos = [round(rnd.uniform(-0.2, 0.95), 4) for _ in ids_d]
        vals.sort(reverse=True)
        if vals and rnd.random() < 0.3:  # the named documents' clauses first: a lower block at the head
            k = rnd.randint(1, len(vals))
            vals = sorted(vals[:k])[::-1][:k] if rnd.random() < 0.5 else [v / 3 for v in vals[:k]] + vals[k:]
        cos.sort(reverse=True)
        w = rnd.choice([0.0, 0.1, 0.3, 0.4, 0.5, 0.5, 0.7, 1.0])
        out.append(case(rs, list(zip(ids_b, vals)), list(zip(ids_d, cos)), rnd.choice(["minmax", "z"]), w,
                        rnd.choice([0, 0, 1, 2, 3, 60]), rnd.choice([0.0, 0.05, 0.1, 0.3, 2.0])))
    return out


def record_cases(rs, files):
    out = []
    for rec in fusion_cases.questions(files):
        b = [(k, s) for k, s, _ in rec["bm25"][:50]]
        d = [(k, s) for k, s, _ in rec["dense"][:50]]
        for norm, w, m, c in (("z", 0.5, 3, 0.05), ("z", 0.4, 3, 0.1), ("minmax", 0.5, 0, 0.0), ("z", 1.0, 1, 0.0)):
            out.append(case(rs, b, d, norm, w, m, c))
    return out


if __name__ == "__main__":
    sys.exit(fusion_cases.main(__doc__, lambda f: f.ranked_score, edge_cases, random_cases, record_cases,
                               "CLAUSEQA_FUSION_SCORE_CASES", 27, 500, "test_index_fusion_score"))
