#!/usr/bin/env python3
"""search/fusion.c's keep fusion against its reference, `ranked(rec, "keep", w, m)` of tools/ssm_train/fusion.py.

    fusion_vs_py.py TEST_INDEX_FUSION         fresh cases (another seed than the committed ones) ranked by fusion.py,
                                              then the C test program ranks them (CLAUSEQA_FUSION_CASES) and must
                                              agree on every one; 77 (skipped) when fusion.py cannot be loaded
    fusion_vs_py.py --write FILE              writes the cases the C unit test checks without Python
                                              (tests/data/fusion/keep_rankings.jsonl)
    fusion_vs_py.py --records F.json.gz ... TEST_INDEX_FUSION
                                              the questions of `fusion.py collect` files instead (BM25's top 10, dense's
                                              top 50, g192c's fitted w and m by the suite's language and a few others)

A case is {"w", "m", "bm25": [ids], "dense": [ids], "ranked": [ids]}: lists of at most 10 and 50 clauses (the depths
fusion.py reads), numbered by first appearance as `fusion.py collect` numbers its keys (ties in fusion.py go to the
smaller key, in C to the clause met first: the same order). Edge cases first (m 0, m beyond the list, w 0, the same
clauses in both lists, an empty list, equal scores, a clause twice in one list), then random ones over a small pool of ids, so that the two lists
share clauses and scores tie (w 1)."""
import random
import sys

import fusion_cases


def renumber(b, d):
    keys = {}
    for k in b + d:
        keys.setdefault(k, len(keys) + 1)
    return [keys[k] for k in b], [keys[k] for k in d]


def case(ranked, b, d, w, m):
    b, d = renumber(b, d)
    rec = {"bm25": [[k, 0.0, 0] for k in b], "dense": [[k, 0.0, 0] for k in d]}
    return {"w": w, "m": m, "bm25": b, "dense": d, "ranked": [k for k, _ in ranked(rec, "keep", w=w, c=m)]}


def edge_cases(ranked):
    b, d = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [11, 3, 12, 1, 13, 9, 14, 15, 2, 16, 17]
    out = []
    for w, m in ((0.1, 2), (0.0, 0), (0.0, 3), (1.0, 0), (0.5, 10), (3.0, 11), (0.25, 1), (1.5, 0), (2.0, 3)):
        out.append(case(ranked, b, d, w, m))
        out.append(case(ranked, b, [], w, m))           # no dense list
        out.append(case(ranked, [], d, w, m))           # no BM25 list
        out.append(case(ranked, b[:3], d[:3], w, m))    # short lists
        out.append(case(ranked, b, list(reversed(b)), w, m))  # the same clauses
        out.append(case(ranked, [1, 2], [3, 4], w, m))  # disjoint: ties at w 1
    out.append(case(ranked, [], [], 0.1, 2))
    for w, m in ((0.1, 2), (1.0, 0), (0.0, 1), (2.0, 5)):  # a clause twice in one list (collect's keys can repeat)
        out.append(case(ranked, [1, 2, 1, 3, 2], [4, 1, 4, 5, 3], w, m))
    return out


def random_cases(ranked, n, seed):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        pool = rnd.randint(2, 80)
        b = rnd.sample(range(pool), min(pool, rnd.randint(0, 10)))
        d = rnd.sample(range(pool), min(pool, rnd.randint(0, 50)))
        w = rnd.choice([0.0, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 1.0, 1.0, 1.5, 2.0, 3.0])
        out.append(case(ranked, b, d, w, rnd.randint(0, 12)))
    return out


def record_cases(ranked, files):
    """collect numbers keys over BM25's top 50, of which ranked() reads 10: renumbered over the two lists read (as
    a collect 10 deep would number them); how often that changes fusion.py's own top 10 is printed."""
    lang = {"laws-zh": "zh", "policy-zh-dev": "zh", "cjrc-dev": "zh", "cuad-dev": "en", "contracts-en-dev": "en"}
    fitted = {"zh": (0.1, 2), "en": (0.0, 0)}  # g192c's fit (docs/EVAL.md)
    out, top10_moved = [], 0
    for rec in fusion_cases.questions(files):
        b = [k for k, _, _ in rec["bm25"][:10]]
        d = [k for k, _, _ in rec["dense"][:50]]
        for w, m in (fitted[lang.get(rec["suite"], "en")], (1.0, 0), (0.5, 1), (3.0, 3)):
            c = case(ranked, b, d, w, m)
            back = {new: old for new, old in zip(c["bm25"] + c["dense"], b + d)}
            raw = [k for k, _ in ranked(rec, "keep", w=w, c=m)]
            top10_moved += [back[k] for k in c["ranked"][:10]] != raw[:10]
            out.append(c)
    print("%d of %d cases: fusion.py's top 10 on collect's own keys differs from it on keys numbered over the "
          "lists read (equal scores ordered otherwise)" % (top10_moved, len(out)))
    return out


if __name__ == "__main__":
    sys.exit(fusion_cases.main(__doc__, lambda f: f.ranked, edge_cases, random_cases, record_cases,
                               "CLAUSEQA_FUSION_CASES", 14, 1000, "test_index_fusion"))
