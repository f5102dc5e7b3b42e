"""Document routing measured with the teacher (issue 27, item 3): does a question's nearest document hold its gold
clause, and how much does clause retrieval gain when it prefers the routed documents (a prior, not a filter)?

    python3 tools/teacher/doc_routing.py --data DATA --vectors DIR --records F.json.gz [--eval ../shared/eval]

DATA: prepare.py's output; DIR: the teacher cache (egemma_vectors.py: cache.c.* clause vectors, 256-d, corpus.npz
order; cache.q.* the questions' vectors, queries.json order); F: teacher_fusion.py --bm25-scores' records (BM25 50
deep with its scores, the teacher's top 50 with cosines, hit flags).

Document vectors, from the cache (no new teacher pass): "mean" = the normalized mean of all the document's clause
vectors; "head" = the mean of its first 3 clauses (title, preamble: what a question naming the document says).
Doc hit@k: one of the question's gold documents among the k documents of its suite nearest the question.

Prior: a candidate clause (BM25's 50 and the dense 50) of one of the top R routed documents gets + beta on its
score; scores are the score fusion's (fusion.py ranked_score: z-score, BM25's top m kept when confident, which the
prior does not move): BM25 alone (w 0, m 0), the teacher alone (w 1), and the fusion fitted in docs/EVAL.md (zh w 0.5
m 3 c 0.05, en w 0.4 m 3 c 0.1). beta and R fitted by language on the calibration questions (objective hit@5 +
MRR/10, beta 0 = no routing among the choices), hit@5 on the validation part.
"""
import argparse
import gzip
import json
import os
import sys
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ssm_train"))
sys.path.insert(0, os.path.join(HERE, ".."))
import dev_split  # noqa: E402
import egemma_vectors  # noqa: E402
import fusion  # noqa: E402

FUSED = {"zh": (0.5, 3, 0.05), "en": (0.4, 3, 0.1)}
BETAS = [0.0, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]
ROUTES = [1, 2, 3, 5, 10]


def doc_vectors(C, doc_off, head):
    D = np.zeros((len(doc_off) - 1, C.shape[1]), np.float32)
    for d in range(len(doc_off) - 1):
        a, b = doc_off[d], doc_off[d + 1]
        if b > a:
            D[d] = C[a:min(b, a + head) if head else b].mean(0)
    n = np.linalg.norm(D, axis=1, keepdims=True)
    return D / np.maximum(n, 1e-9)


def fused_scores(rec, w, m, c):
    """(kept keys, {key: fused score}, {key: hit}) as fusion.ranked_score computes them (z-score)."""
    b, d = rec["bm25"][:fusion.SCORE_DEPTH], rec["dense"][:fusion.DEPTH_DENSE]
    env = fusion.envelope([float(s) for _, s, _ in b])
    bs, ds = fusion.normalized(env, "z"), fusion.normalized([float(s) for _, s, _ in d], "z")
    low_b, low_d = (bs[-1] if bs else 0.0), (ds[-1] if ds else 0.0)
    nb, nd, hit, order = {}, {}, {}, []
    for (k, _, h), x in zip(b, bs):
        nb.setdefault(k, x)
        if k not in hit:
            hit[k] = h
            order.append(k)
    for (k, _, h), x in zip(d, ds):
        nd.setdefault(k, x)
        if k not in hit:
            hit[k] = h
            order.append(k)
    top = []
    if m > 0 and b and fusion.bm25_confidence(env) >= c:
        for k, _, _ in b[:m]:
            if k not in top:
                top.append(k)
    sc = {k: (1.0 - w) * nb.get(k, low_b) + w * nd.get(k, low_d) for k in order if k not in top}
    return top, sc, hit, order


def first_hit_prior(item, doc_of, routed, beta):
    top, sc, hit, order = item
    pos = {k: i for i, k in enumerate(order)}
    s2 = {k: v + (beta if doc_of(k) in routed else 0.0) for k, v in sc.items()}
    ranked = top + sorted(s2, key=lambda k: (-s2[k], pos[k]))
    return next((i + 1 for i, k in enumerate(ranked[:10]) if hit[k]), 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--records", required=True)
    ap.add_argument("--eval", default="../shared/eval")
    a = ap.parse_args()
    z = np.load(os.path.join(a.data, "corpus.npz"))
    doc_off, doc_suite = z["doc_off"], z["doc_suite"]
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    docs = json.load(open(os.path.join(a.data, "docs.json"), encoding="utf-8"))
    data_q = json.load(open(os.path.join(a.data, "queries.json"), encoding="utf-8"))["questions"]
    row = {(x["suite"], x["id"]): j for j, x in enumerate(data_q) if x["src"] == "dev"}
    doc_index = {(x["suite"], x["name"]): i for i, x in enumerate(docs)}
    C = egemma_vectors.load_cache(a.vectors, "c")
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    Q = egemma_vectors.load_cache(a.vectors, "q")
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    kinds = {"mean": doc_vectors(C, doc_off, 0), "head": doc_vectors(C, doc_off, 3)}
    recs = json.load(gzip.open(a.records, "rt"))["questions"]
    gold_docs = {}
    for suite in fusion.LANG:
        for q in dev_split.read_questions(a.eval, suite):
            gold_docs["%s/%s" % (suite, q["id"])] = [doc_index.get((suite, g["doc"])) for g in q.get("gold") or []]

    doc_list = np.repeat(np.arange(len(doc_off) - 1), np.diff(doc_off)).tolist()
    doc_of = doc_list.__getitem__

    suites = [s for s in meta["suites"] if s in fusion.LANG]
    suite_docs = {s: np.flatnonzero(doc_suite == meta["suites"].index(s)) for s in suites}
    # doc ranks of every question, both kinds
    rows = []
    for key, rec in recs.items():
        if rec["type"] == "clause_lookup" or not (rec["part"] == "val" or rec.get("calib")):
            continue
        suite, qid = rec["suite"], key.split("/", 1)[1]
        j = row.get((suite, qid))
        gd = [g for g in gold_docs.get(key, []) if g is not None]
        if j is None or not gd:
            continue
        sd = suite_docs[suite]
        entry = {"key": key, "rec": rec, "suite": suite, "type": rec["type"], "part": "val" if rec["part"] == "val"
                 else "calib"}
        for kind, D in kinds.items():
            s = D[sd] @ Q[j]
            order = sd[np.argsort(-s, kind="stable")]
            rank = {int(d): i + 1 for i, d in enumerate(order[:max(ROUTES + [10])])}
            entry[kind] = order[:max(ROUTES)].tolist()
            entry[kind + "_rank"] = min((rank.get(g, 10 ** 6) for g in gd), default=10 ** 6)
        rows.append(entry)
    groups = sorted(set((r["suite"], r["type"]) for r in rows))
    print("### Document routing with the teacher (EmbeddingGemma-300M, cache 256-d), validation part\n")
    print("| suite | type | n | documents | doc hit@1 / @3 / @5 / @10, mean | head (first 3 clauses) |")
    print("|---|---|---|---|---|---|")
    for s, t in groups:
        va = [r for r in rows if (r["suite"], r["type"], r["part"]) == (s, t, "val")]
        if not va:
            continue
        cells = [" / ".join("%.3f" % np.mean([r[kind + "_rank"] <= k for r in va]) for k in (1, 3, 5, 10))
                 for kind in ("mean", "head")]
        print("| %s | %s | %d | %d | %s |" % (s, t, len(va), len(suite_docs[s]), " | ".join(cells)))
    # the prior
    methods = {"BM25": lambda lang: (0.0, 0, 0.0), "teacher dense": lambda lang: (1.0, 0, 0.0),
               "score fusion": lambda lang: FUSED[lang]}
    for kind in ("mean", "head"):
        print("\n### Clause hit@5 with the routed documents preferred (%s document vectors), validation part\n" % kind)
        table = defaultdict(dict)
        fits = {}
        for name, params in methods.items():
            items = [fused_scores(r["rec"], *params(fusion.LANG[r["suite"]])) for r in rows]
            cache = {}
            for beta in BETAS:
                for R in (ROUTES if beta else [1]):
                    cache[beta, R] = [first_hit_prior(it, doc_of, set(r[kind][:R]), beta) for it, r in zip(items, rows)]
            for lang in ("zh", "en"):
                cal = [[i for i, r in enumerate(rows) if r["part"] == "calib" and r["suite"] == s]
                       for s in suites if fusion.LANG[s] == lang]
                cal = [g for g in cal if g]

                def obj(ranks):
                    return np.mean([np.mean([0 < ranks[i] <= 5 for i in g]) +
                                    np.mean([1.0 / ranks[i] if ranks[i] else 0.0 for i in g]) / 10 for g in cal])
                best = max(sorted(cache, key=lambda x: (x[0], x[1])), key=lambda x: obj(cache[x]) + 1e-9 * (x == (0.0, 1)))
                fits[name, lang] = best
            for s, t in groups:
                idx = [i for i, r in enumerate(rows) if (r["suite"], r["type"], r["part"]) == (s, t, "val")]
                if not idx:
                    continue
                base = cache[0.0, 1]
                fit = cache[fits[name, fusion.LANG[s]]]
                table[s, t][name] = "%.3f → %.3f" % (np.mean([0 < base[i] <= 5 for i in idx]),
                                                     np.mean([0 < fit[i] <= 5 for i in idx]))
                table[s, t]["n"] = len(idx)
        print("fitted (beta, R): %s\n" % "; ".join("%s %s %s" % (n, l, fits[n, l]) for n in methods for l in ("zh", "en")))
        print("| suite | type | n | %s |" % " | ".join("%s: without → with routing" % n for n in methods))
        print("|---|---|---|%s" % ("---|" * len(methods)))
        for s, t in groups:
            if table[s, t]:
                print("| %s | %s | %d | %s |" % (s, t, table[s, t]["n"], " | ".join(table[s, t][n] for n in methods)))

    # routing inside the dense search: the teacher's 50 nearest clauses of the suite (cache, 256-d) with + beta on
    # the clauses of the top R routed documents, fused with BM25 as above; beta 0 = the same 256-d search unrouted
    print("\n### Dense search preferring the routed documents (cos + beta on their clauses), then the score fusion; "
          "validation part\n")
    pos = {k: set(data_q[row[(r["suite"], k.split("/", 1)[1])]]["pos"]) for r in rows for k in [r["key"]]}
    dbetas, droutes = [0.0, 0.02, 0.05, 0.1, 0.2], [1, 3, 10]
    for kind in ("mean", "head"):
        cache = defaultdict(list)
        by_suite = defaultdict(list)
        for i, r in enumerate(rows):
            by_suite[r["suite"]].append(i)
        ranks = {}
        for suite, idx in by_suite.items():
            sd = suite_docs[suite]
            lo, hi = int(doc_off[sd[0]]), int(doc_off[sd[-1] + 1])
            js = [row[(suite, rows[i]["key"].split("/", 1)[1])] for i in idx]
            for s0 in range(0, len(idx), 64):
                S = Q[js[s0:s0 + 64]] @ C[lo:hi].T
                for t, i in enumerate(idx[s0:s0 + 64]):
                    r, cos = rows[i], S[t]
                    top_all = np.argpartition(-cos, min(50, len(cos) - 1))[:50]
                    for beta in dbetas:
                        for R in (droutes if beta else [1]):
                            cand = set(top_all.tolist())
                            if beta:
                                for d in r[kind][:R]:
                                    a, b = int(doc_off[d]) - lo, int(doc_off[d + 1]) - lo
                                    cand.update(range(a, b))
                            cand = np.fromiter(cand, np.int64)
                            sc = cos[cand].astype(np.float64)
                            if beta:
                                routed = np.zeros(len(cand), bool)
                                for d in r[kind][:R]:
                                    routed |= (cand >= int(doc_off[d]) - lo) & (cand < int(doc_off[d + 1]) - lo)
                                sc = sc + beta * routed
                            o = np.argsort(-sc, kind="stable")[:50]
                            g = (cand[o] + lo).tolist()
                            rec = dict(r["rec"])
                            rec["dense"] = [[k, float(x), int(k in pos[r["key"]])] for k, x in zip(g, sc[o])]
                            w, m, c = FUSED[fusion.LANG[suite]]
                            ranks.setdefault((beta, R), {})[i] = fusion.first_hit(fusion.ranked_score(rec, w, m, c, "z")) or 0
        fits = {}
        for lang in ("zh", "en"):
            cal = [[i for i, r in enumerate(rows) if r["part"] == "calib" and r["suite"] == s]
                   for s in suites if fusion.LANG[s] == lang]
            cal = [g for g in cal if g]

            def obj(rk):
                return np.mean([np.mean([0 < rk[i] <= 5 for i in g]) + np.mean([1.0 / rk[i] if rk[i] else 0.0
                                                                                for i in g]) / 10 for g in cal])
            fits[lang] = max(sorted(ranks), key=lambda x: obj(ranks[x]) + 1e-9 * (x == (0.0, 1)))
        print("%s document vectors, fitted (beta, R): zh %s, en %s\n" % (kind, fits["zh"], fits["en"]))
        print("| suite | type | n | fused (dense 256-d, unrouted) | fused, dense routed (fit) | best (beta, R) on "
              "validation |\n|---|---|---|---|---|---|")
        for s, t in groups:
            idx = [i for i, r in enumerate(rows) if (r["suite"], r["type"], r["part"]) == (s, t, "val")]
            if not idx:
                continue
            h5 = {k: np.mean([0 < v[i] <= 5 for i in idx]) for k, v in ranks.items()}
            best = max(h5, key=lambda k: h5[k])
            print("| %s | %s | %d | %.3f | %.3f | %.3f %s |" % (s, t, len(idx), h5[0.0, 1], h5[fits[fusion.LANG[s]]],
                                                             h5[best], best))


if __name__ == "__main__":
    main()
