"""BM25 + dense fusion measured from the C runtime's own rankings (issue 14): the fixed reciprocal-rank fusion that
search/retrieve.c does today against fusions calibrated on the dev suites' TRAIN parts, scored on the validation
parts (tools/dev_split.py).

    python3 tools/ssm_train/fusion.py collect --clauseqa CQ --data DIR --suites DIR --tag T --out F.json.gz
        `clauseqa retrieve --jsonl` of every question of both parts (SUITES_DIR/<suite>/questions.jsonl and
        train.jsonl), --mode bm25 and --mode dense, 50 deep; each hit reduced to (clause key, score, hit by
        FORMAT.md's rule against the question's gold), so the file stays small
    python3 tools/ssm_train/fusion.py fit F.json.gz [...]      the table: BM25, dense, fixed RRF, calibrated fusions

Fusions (BM25's top 10 and dense's top 50, as `clauseqa eval` asks for 10 and retrieve.c fetches 50 dense hits):
  rrf            1/(60 + r_bm25) + 1/(60 + r_dense): today's
  rrf-w          1/(60 + r_bm25) + w/(60 + r_dense), w fit per suite/question type on the train part (by type)
  gate           rrf-w while BM25 is unsure, BM25 alone where it is confident: its top score leads the second by a
                 relative margin of at least c (by score confidence; w, c fit per suite/type on the train part)
  keep           BM25's top m kept in place, the rest rrf-w (w, m fit the same ways): search/fusion.c does exactly
                 this when the encoder's ssm.json names it (tests/unit/fusion_vs_py.py holds the two equal)
Equal scores go to the smaller key, i.e. the clause met first in BM25's list then the dense list (keys are numbered so
by collect). search/fusion.c's keep does the same; its rrf, today's, breaks ties by clause id instead, so `rrf` here
can differ from `clauseqa eval --mode router,bm25,dense` where a BM25 and a dense clause tie (docs/EVAL.md).
(`retrieve --mode dense` reports the cosines since issue 27 — fusion scores before, so collect files made with an
older binary hold ranks only on the dense side; `fit --method score` needs the cosines.)
  score          the lists' SCORES fused (issue 27, index/fusion_score.c): see `ranked_score` and `score_report`;
                 `fit --method score [--write ssm.json]` fits and writes it
Each is fit three ways: per suite and question type (what a calibration by question type can reach; the runtime
does not know a question's suite or type), per language of the suite (zh / en: the runtime knows a question's
script, so this one can ship) and once for all suites (each suite weighing the same).
Clause lookups are left out: the router answers them before any fusion (they stay at hit@1 1.000).
"""
import argparse
import gzip
import json
import math
import os
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dev_split  # noqa: E402

DEPTH_BM25, DEPTH_DENSE, K = 10, 50, 60.0


def part_questions(suites_dir, calib_only):
    """(suite, part, questions) of every suite folder: "val" (questions.jsonl) and "train" (train.jsonl), answerable
    questions with gold only; calib_only keeps only the train part's calibration questions (what a fit needs)."""
    for suite in sorted(os.listdir(suites_dir)):
        for part, fn in (("val", "questions.jsonl"), ("train", "train.jsonl")):
            p = os.path.join(suites_dir, suite, fn)
            if not os.path.exists(p):
                continue
            qs = [json.loads(x) for x in open(p, encoding="utf-8") if x.strip()]
            qs = [q for q in qs if q.get("answerable", True) and q.get("gold")]
            if part == "train" and calib_only:
                qs = [q for q in qs if dev_split.question_is_calibration(suite, q)]
            yield suite, part, qs


def collect(a):
    from prepare import hits, norm  # numpy: only collecting needs it (fit runs on Debian's python3)
    out = {}
    for suite, part, qs in part_questions(a.suites, a.calib_only):
        lines = "".join(json.dumps({"id": q["id"], "question": q["question"]}, ensure_ascii=False) + "\n"
                        for q in qs)
        lists = {}
        for mode in ("bm25", "dense"):
            r = subprocess.run([a.clauseqa, "retrieve", "--data", a.data, "--kb", suite, "--mode", mode, "--jsonl",
                                "--k", "50"], input=lines, capture_output=True, text=True)
            if r.returncode:
                print("%s %s: %s" % (suite, mode, r.stderr[-500:]), file=sys.stderr)
                continue
            for line in r.stdout.splitlines():
                o = json.loads(line)
                lists.setdefault(o["id"], {})[mode] = o.get("results", [])
        for q in qs:
            gold = [(g["doc"], norm(g["text"]) if g.get("text") else None) for g in q["gold"]]
            keys, rec = {}, {"suite": suite, "type": q["type"], "part": part,
                             "calib": part == "train" and dev_split.question_is_calibration(suite, q)}
            for mode in ("bm25", "dense"):
                items = []
                for h in lists.get(q["id"], {}).get(mode, []):
                    k = keys.setdefault((h["doc"], h.get("path"), h["text"][:64]), len(keys))
                    hn = norm(h["text"])
                    hit = any(d == h["doc"] and (gt is None or hits(hn, gt)) for d, gt in gold)
                    items.append([k, round(float(h.get("score", 0.0)), 5), int(hit)])
                rec[mode] = items
            out[q["id"]] = rec
        print("%s %s: %d questions" % (suite, part, len(qs)), flush=True)
    with gzip.open(a.out, "wt") as f:
        json.dump({"tag": a.tag, "questions": out}, f)


def ranked(rec, method, w=1.0, c=0.0):
    b, d = rec["bm25"][:DEPTH_BM25], rec["dense"][:DEPTH_DENSE]
    if method == "bm25":
        return [(k, h) for k, _, h in b]
    if method == "dense":
        return [(k, h) for k, _, h in d]
    hit = {k: h for k, _, h in b + d}
    sc = defaultdict(float)
    if method == "gate" and len(b) >= 2 and (b[0][1] - b[1][1]) / max(abs(b[0][1]), 1e-9) >= c:
        return [(k, h) for k, _, h in b]
    if method == "keep":  # BM25's top c kept in place, the rest fused with the dense side weighted w (train.py fuse)
        top = [(k, h) for k, _, h in b[:int(c)]]
        kept = set(k for k, _ in top)
        for r, (k, _, _) in enumerate(b):
            if k not in kept:
                sc[k] += 1.0 / (K + r + 1)
        for r, (k, _, _) in enumerate(d):
            if k not in kept:
                sc[k] += w / (K + r + 1)
        return top + [(k, hit[k]) for k in sorted(sc, key=lambda k: (-sc[k], k))]
    if method in ("rrf", "rrf-w", "gate"):
        wd = 1.0 if method == "rrf" else w
        for r, (k, _, _) in enumerate(b):
            sc[k] += 1.0 / (K + r + 1)
        for r, (k, _, _) in enumerate(d):
            sc[k] += wd / (K + r + 1)
    return [(k, hit[k]) for k in sorted(sc, key=lambda k: (-sc[k], k))]


# ---- score fusion (issue 27) ----------------------------------------------------------------------------------
# The lists' SCORES fused instead of their ranks: each list's scores normalized (per question), a clause absent from
# a list takes that list's lowest normalized score, fused = (1 - w) * bm25 + w * dense; BM25's top m stay in place
# when BM25 is confident (its first score leads its second by a relative margin of at least c). index/fusion_score.c
# does exactly this (tests/unit/fusion_score_vs_py.py holds the two equal). BM25 is read SCORE_DEPTH deep (the runtime
# fetches that many BM25 hits when it fuses by score), dense DEPTH_DENSE deep (its cosines).
SCORE_DEPTH = 50
NORMS = ("minmax", "z")


def envelope(xs):
    """BM25's scores made non-increasing down its list (x_i = min(x_i, x_{i-1})): the list puts the documents a
    question names first, whose best clauses may score below later ones; the fusion must not undo that order."""
    out = []
    for x in xs:
        out.append(x if not out or x < out[-1] else out[-1])
    return out


def normalized(xs, how):
    """A best-first list of scores normalized: minmax (x - min) / (max - min), 1 where all are equal; z (x - mean) /
    sd (population sd), 0 where sd is 0. Sums run in list order in doubles, as in the C code."""
    if not xs:
        return []
    if how == "minmax":
        lo, hi = min(xs), max(xs)
        return [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in xs]
    if how != "z":
        raise ValueError("unknown normalization %r" % how)
    total = 0.0
    for x in xs:
        total += x
    mean = total / len(xs)
    var = 0.0
    for x in xs:
        var += (x - mean) * (x - mean)
    sd = math.sqrt(var / len(xs))
    return [(x - mean) / sd if sd > 0 else 0.0 for x in xs]


def bm25_confidence(scores):
    """(s1 - s2) / |s1| of BM25's (enveloped) scores; 1 when the list holds fewer than two."""
    if len(scores) < 2:
        return 1.0
    return (scores[0] - scores[1]) / max(abs(scores[0]), 1e-9)


def ranked_score(rec, w, m=0, c=0.0, norm="minmax", depth=SCORE_DEPTH):
    """The score fusion's ranking [(key, hit)] of a record (module comment above). Ties: the clause met first,
    reading BM25's list and then the dense list."""
    b, d = rec["bm25"][:depth], rec["dense"][:DEPTH_DENSE]
    bs = normalized(envelope([float(s) for _, s, _ in b]), norm)
    ds = normalized([float(s) for _, s, _ in d], norm)
    low_b, low_d = (bs[-1] if bs else 0.0), (ds[-1] if ds else 0.0)
    nb, nd, hit, order = {}, {}, {}, []
    for (k, _, h), x in zip(b, bs):
        if k not in nb:
            nb[k] = x
        if k not in hit:
            hit[k] = h
            order.append(k)
    for (k, _, h), x in zip(d, ds):
        if k not in nd:
            nd[k] = x
        if k not in hit:
            hit[k] = h
            order.append(k)
    top = []
    if m > 0 and b and bm25_confidence(envelope([float(s) for _, s, _ in b])) >= c:
        for k, _, _ in b[:m]:
            if k not in top:
                top.append(k)
    kept = set(top)
    rest = [k for k in order if k not in kept]
    sc = {k: (1.0 - w) * nb.get(k, low_b) + w * nd.get(k, low_d) for k in rest}
    pos = {k: i for i, k in enumerate(rest)}
    return [(k, hit[k]) for k in top] + [(k, hit[k]) for k in sorted(rest, key=lambda k: (-sc[k], pos[k]))]


def first_hit(rl, depth=10):
    return next((i + 1 for i, (_, h) in enumerate(rl[:depth]) if h), None)


def metrics_ranks(ranks):
    n = len(ranks)
    return {"n": n, "hit@1": sum(1 for r in ranks if r and r <= 1) / max(1, n),
            "hit@5": sum(1 for r in ranks if r and r <= 5) / max(1, n),
            "hit@10": sum(1 for r in ranks if r and r <= 10) / max(1, n),
            "mrr": sum(1.0 / r for r in ranks if r) / max(1, n)}


SCORE_VARIANT_SHIPPED = "best, never below BM25 on calib."
SCORE_GRID_W = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
SCORE_GRID_M = [0, 1, 2, 3]
SCORE_GRID_C = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5]


class ScoreTable:
    """Every record's first-hit rank (top 10) under every (norm, w, m, c) of the grids, computed at once with numpy
    (the same fusion as ranked_score, vectorized; used to fit, while the tables report ranked_score's own ranks)."""

    def __init__(self, recs, depth=SCORE_DEPTH, norms=NORMS):
        self.recs, self.configs, self.ranks = recs, [], {}
        try:
            import numpy as np
        except ImportError:  # Debian's python3 (CI): ranked_score itself, slower, the same ranks
            for norm in norms:
                for w in SCORE_GRID_W:
                    for m in SCORE_GRID_M:
                        for c in (SCORE_GRID_C if m else [0.0]):
                            self.configs.append((norm, w, m, c))
                            self.ranks[norm, w, m, c] = [first_hit(ranked_score(r, w, m, c, norm, depth)) or 0
                                                         for r in recs]
            return
        R, W = len(recs), depth + DEPTH_DENSE
        for norm in norms:
            NB = np.zeros((R, W))
            ND = np.zeros((R, W))
            HIT = np.zeros((R, W), bool)
            VALID = np.zeros((R, W), bool)
            ISB = np.zeros((R, W), bool)  # the clause is among BM25's first m: index < m where set
            conf = np.zeros(R)
            for i, rec in enumerate(recs):
                b, d = rec["bm25"][:depth], rec["dense"][:DEPTH_DENSE]
                env = envelope([float(s) for _, s, _ in b])
                bs, ds = normalized(env, norm), normalized([float(s) for _, s, _ in d], norm)
                low_b, low_d = (bs[-1] if bs else 0.0), (ds[-1] if ds else 0.0)
                conf[i] = bm25_confidence(env) if b else -1.0
                keys, nbk, ndk, hk = [], {}, {}, {}
                for (k, _, h), x in zip(b, bs):
                    if k not in hk:
                        keys.append(k)
                        hk[k] = h
                    nbk.setdefault(k, x)
                for (k, _, h), x in zip(d, ds):
                    if k not in hk:
                        keys.append(k)
                        hk[k] = h
                    ndk.setdefault(k, x)
                for j, k in enumerate(keys):
                    NB[i, j], ND[i, j], HIT[i, j], VALID[i, j] = nbk.get(k, low_b), ndk.get(k, low_d), hk[k], True
                ISB[i, :len(set(k for k, _, _ in b))] = True
            ar = np.arange(W)
            for w in SCORE_GRID_W:
                F = np.where(VALID, (1.0 - w) * NB + w * ND, -np.inf)
                for m in SCORE_GRID_M:
                    for c in (SCORE_GRID_C if m else [0.0]):
                        G = F
                        if m:
                            keep = (conf >= c)[:, None] & ISB & (ar[None, :] < m)
                            G = np.where(keep, 1e9 - ar[None, :], F)
                        o = np.argsort(-G, axis=1, kind="stable")[:, :10]
                        h = np.take_along_axis(HIT & VALID, o, axis=1)
                        r = np.where(h.any(1), h.argmax(1) + 1, 0)
                        self.configs.append((norm, w, m, c))
                        self.ranks[norm, w, m, c] = r.tolist()

    def objective(self, groups, cfg):
        """mean over groups (lists of record indices) of hit@5 + MRR / 10 (fusion.py's objective)"""
        r = self.ranks[cfg]
        vals = []
        for g in groups:
            x = [r[i] for i in g]
            vals.append(sum(1 for v in x if 0 < v <= 5) / len(x) + sum(1.0 / v for v in x if v > 0) / len(x) / 10)
        return sum(vals) / len(vals) if vals else 0.0

    def hit5(self, idx, cfg):
        r = self.ranks[cfg]
        return sum(1 for i in idx if 0 < r[i] <= 5) / len(idx) if len(idx) else 0.0

    def fit(self, groups, norms=NORMS, ms=SCORE_GRID_M, floor=None):
        """The (norm, w, m, c) maximizing the mean objective over groups (index lists); the smallest w, then m, then
        the largest c among ties. floor: only configurations whose hit@5 on every group is at least BM25's
        (w 0, m 0) there minus floor ("never below BM25" on the calibration questions)."""
        groups = [g for g in groups if len(g)]
        best, arg = -1.0, None
        for cfg in sorted(self.configs, key=lambda x: (x[1], x[2], -x[3], x[0])):
            if cfg[0] not in norms or cfg[2] not in ms:
                continue
            if floor is not None and any(self.hit5(g, cfg) < self.hit5(g, (cfg[0], 0.0, 0, 0.0)) - floor - 1e-12
                                         for g in groups):
                continue
            s = self.objective(groups, cfg)
            if s > best + 1e-12:
                best, arg = s, cfg
        return arg


def score_report(recs, tag="", depth=SCORE_DEPTH):
    """Score fusion variants fitted on the calibration questions by language, scored on the validation part (BM25
    read `depth` deep); then hit@1 / hit@5 / hit@10 / MRR of BM25 and of the last variant (the one that ships).
    Returns {(variant, lang): (norm, w, m, c)}."""
    recs = [r for r in recs if r["type"] != "clause_lookup"]
    tab = ScoreTable(recs, depth=depth)
    idx = defaultdict(list)
    for i, r in enumerate(recs):
        part = "val" if r["part"] == "val" else "calib" if r.get("calib") else None
        if part:
            idx[part, r["suite"], r["type"]].append(i)
            idx[part, r["suite"]].append(i)
    suites = sorted(set(r["suite"] for r in recs))
    variants = [("min-max", dict(norms=("minmax",), ms=[0])), ("z-score", dict(norms=("z",), ms=[0])),
                ("min-max + keep", dict(norms=("minmax",))), ("z + keep", dict(norms=("z",))),
                (SCORE_VARIANT_SHIPPED, dict(floor=0.0))]
    fits = {}
    for name, kw in variants:
        for lang in ("zh", "en"):
            g = [idx["calib", s] for s in suites if LANG.get(s) == lang]
            fits[name, lang] = tab.fit(g, **kw)
    for norm in NORMS:  # the shipped variant per normalization (the runtime holds one norm for both languages)
        for lang in ("zh", "en"):
            g = [idx["calib", s] for s in suites if LANG.get(s) == lang]
            fits[SCORE_VARIANT_SHIPPED + "/" + norm, lang] = tab.fit(g, norms=(norm,), floor=0.0)
    print("\n### score fusion%s, BM25 %d deep: fitted by language on the calibration questions, hit@5 on the "
          "validation part\n" % (" (%s)" % tag if tag else "", depth))
    for name, _ in variants:
        print("- %s: %s" % (name, "; ".join("%s %s w %.1f m %d c %.2f" % ((lang,) + fits[name, lang])
                                           for lang in ("zh", "en") if fits[name, lang])))
    print("\n| suite | type | n val | BM25 | dense | RRF | %s |" % " | ".join(n for n, _ in variants))
    print("|---|---|---|---|---|---|" + "---|" * len(variants))
    for s, t in sorted(set((r["suite"], r["type"]) for r in recs)):
        va = [recs[i] for i in idx["val", s, t]]
        if not va:
            continue
        cells = ["%.3f" % metrics(va, m)["hit@5"] for m in ("bm25", "dense", "rrf")]
        for name, _ in variants:
            cfg = fits[name, LANG.get(s)]
            ranks = [first_hit(ranked_score(r, cfg[1], cfg[2], cfg[3], cfg[0], depth)) for r in va]
            cells.append("%.3f" % metrics_ranks(ranks)["hit@5"])
        print("| %s | %s | %d | %s |" % (s, t, len(va), " | ".join(cells)))
    last = variants[-1][0]
    print("\nBM25 and \"%s\", hit@1 / hit@5 / hit@10 / MRR on the validation part:\n" % last)
    print("| suite | type | BM25 | %s |\n|---|---|---|---|" % last)
    for s, t in sorted(set((r["suite"], r["type"]) for r in recs)):
        va = [recs[i] for i in idx["val", s, t]]
        if not va:
            continue
        cfg = fits[last, LANG.get(s)]
        mb = metrics(va, "bm25")
        mf = metrics_ranks([first_hit(ranked_score(r, cfg[1], cfg[2], cfg[3], cfg[0], depth)) for r in va])
        print("| %s | %s | %s |" % (s, t, " | ".join(" / ".join("%.3f" % m[x] for x in ("hit@1", "hit@5", "hit@10",
                                                                                          "mrr")) for m in (mb, mf))))
    return fits


def metrics(recs, method, **kw):
    n = h1 = h5 = h10 = 0
    mrr = 0.0
    for rec in recs:
        r = next((i + 1 for i, (_, h) in enumerate(ranked(rec, method, **kw)[:10]) if h), None)
        n += 1
        if r:
            h1 += r <= 1
            h5 += r <= 5
            h10 += r <= 10
            mrr += 1.0 / r
    return {"n": n, "hit@1": h1 / max(1, n), "hit@5": h5 / max(1, n), "hit@10": h10 / max(1, n), "mrr": mrr / max(1, n)}


GRID_W = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0]
GRID_C = [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.1]
GRID_M = [0, 1, 2, 3]


def objective(groups, method, w, c):
    """mean over groups (lists of records) of hit@5 + MRR / 10"""
    vals = []
    for recs in groups:
        m = metrics(recs, method, w=w, c=c)
        vals.append(m["hit@5"] + m["mrr"] / 10)
    return sum(vals) / max(1, len(vals))


def fit(groups, method):
    """Parameters maximizing the mean objective over groups (train parts), the smallest dense weight among ties."""
    best, arg = -1.0, {"w": 1.0, "c": 0.0}
    for w in GRID_W:
        for c in (GRID_C if method == "gate" else GRID_M if method == "keep" else [0.0]):
            s = objective([g for g in groups if g], method, w, c)
            if s > best + 1e-12:
                best, arg = s, {"w": w, "c": c}
    return arg


LANG = {"laws-zh": "zh", "policy-zh-dev": "zh", "cjrc-dev": "zh", "cuad-dev": "en", "contracts-en-dev": "en"}


def fit_report(a):
    files = [json.load(gzip.open(p, "rt")) for p in a.files]
    if a.merge:  # one tag's per-suite files
        files = [{"tag": files[0]["tag"], "questions": {k: v for f in files for k, v in f["questions"].items()}}]
    for d in files:
        recs = [r for r in d["questions"].values() if r["type"] != "clause_lookup"]
        # fit on the calibration questions (train documents the encoder never trained on) where the file has them
        calib = any(r.get("calib") for r in recs)
        for r in recs:
            if r["part"] == "train" and calib and not r.get("calib"):
                r["part"] = "trained"
        groups = sorted(set((r["suite"], r["type"]) for r in recs))
        part = {(s, t, p): [r for r in recs if (r["suite"], r["type"], r["part"]) == (s, t, p)]
                for s, t in groups for p in ("train", "val")}
        suites = sorted(set(s for s, _ in groups))
        by_suite = {s: [r for r in recs if r["suite"] == s and r["part"] == "train"] for s in suites}
        fitted = {}
        for m in ("rrf-w", "gate", "keep"):
            fitted[m, "all"] = fit(list(by_suite.values()), m)
            for lang in set(LANG.get(s, "?") for s in suites):
                fitted[m, lang] = fit([by_suite[s] for s in suites if LANG.get(s, "?") == lang], m)
        print("\n### %s\n" % d["tag"])
        print("fitted on the %s: %s\n" % ("calibration questions (held out of training)" if calib else
                                           "train parts", json.dumps({"%s/%s" % k: v for k, v in fitted.items()})))
        print("| suite | type | n (fit/val) | bm25 | dense | rrf (today) | rrf-w: type / language / all | "
              "gate: type / language / all | keep: type / language / all |")
        print("|---|---|---|---|---|---|---|---|---|")
        for s, t in groups:
            tr, va = part[s, t, "train"], part[s, t, "val"]
            if not va:
                continue
            cells = ["%.3f" % metrics(va, m)["hit@5"] for m in ("bm25", "dense", "rrf")]
            for m in ("rrf-w", "gate", "keep"):
                kws = [fit([tr], m) if tr else {"w": 1.0, "c": 0.0}, fitted[m, LANG.get(s, "?")], fitted[m, "all"]]
                cells.append(" / ".join("%.3f" % metrics(va, m, **kw)["hit@5"] for kw in kws))
            print("| %s | %s | %d/%d | %s |" % (s, t, len(tr), len(va), " | ".join(cells)))
        n_calib = {lang: sum(len(by_suite[s]) for s in suites if LANG.get(s) == lang) for lang in ("zh", "en")}
        if getattr(a, "method", "keep") == "score":  # the rankings must carry scores (collect: BM25's, cosines)
            fits = score_report([r for r in recs if r["part"] != "trained"], d["tag"])
            if a.write:
                write_score_fusion(a.write, fits, d["tag"], calib, n_calib, a.note)
        elif a.write:
            write_fusion(a.write, fitted, d["tag"], calib, n_calib, a.note)


def write_fusion(path, fitted, tag, calib, n, note=""):
    """The language-level `keep` fusion into an encoder's ssm.json, as the runtime reads it: "fusion": {"method":
    "keep", "fitted_on": ..., "zh": {"w", "m"}, "en": {"w", "m"}} (w: the dense list's RRF weight, 0 = BM25 alone;
    m: BM25's top m kept in place)."""
    for lang in ("zh", "en"):
        if ("keep", lang) not in fitted:
            raise SystemExit("fusion: no %s suite in the rankings, nothing fitted for it" % lang)
    if not calib:
        raise SystemExit("fusion: the rankings have no calibration questions (collect --calib-only): not written")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["fusion"] = {"method": "keep",
                     "fitted_on": "calibration questions (tools/dev_split.py doc_is_calibration, never trained on) of "
                                  "the dev suites' train parts, the C runtime's BM25 and dense rankings of %s "
                                  "(tools/ssm_train/fusion.py fit --merge; zh %d, en %d questions)"
                                  % (tag, n["zh"], n["en"]) + (("; " + note) if note else ""),
                     "zh": {"w": fitted["keep", "zh"]["w"], "m": int(fitted["keep", "zh"]["c"])},
                     "en": {"w": fitted["keep", "en"]["w"], "m": int(fitted["keep", "en"]["c"])}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %s: %s" % (path, json.dumps({k: cfg["fusion"][k] for k in ("zh", "en")})))


def write_score_fusion(path, fits, tag, calib, n, note=""):
    """The score fusion that ships (score_report's last variant: the best configuration never below BM25 on any
    calibration suite) into an encoder's ssm.json, as index/fusion_score.c reads it: "fusion": {"method": "score",
    "norm", "fitted_on", "zh": {"w", "m", "c"}, "en": {...}}. Both languages must share one norm (the runtime's is
    one): the zh fit's norm, and en refitted with it where they differ."""
    last = SCORE_VARIANT_SHIPPED
    for lang in ("zh", "en"):
        if not fits.get((last, lang)):
            raise SystemExit("fusion: no %s suite in the rankings, nothing fitted for it" % lang)
    if not calib:
        raise SystemExit("fusion: the rankings have no calibration questions (collect --calib-only): not written")
    zh, en = fits[last, "zh"], fits[last, "en"]
    if en[0] != zh[0]:
        en = fits.get((last + "/" + zh[0], "en")) or en
        if en[0] != zh[0]:
            raise SystemExit("fusion: the zh and en fits chose different normalizations (%s, %s)" % (zh[0], en[0]))
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["fusion"] = {"method": "score", "norm": zh[0],
                     "fitted_on": "calibration questions (tools/dev_split.py doc_is_calibration, never trained on) of "
                                  "the dev suites' train parts, BM25 %d deep with its scores and the dense cosines of %s "
                                  "(tools/ssm_train/fusion.py fit --method score; zh %d, en %d questions)"
                                  % (SCORE_DEPTH, tag, n["zh"], n["en"]) + (("; " + note) if note else ""),
                     "zh": {"w": zh[1], "m": int(zh[2]), "c": zh[3]}, "en": {"w": en[1], "m": int(en[2]), "c": en[3]}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %s: %s" % (path, json.dumps({k: cfg["fusion"][k] for k in ("norm", "zh", "en")})))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--clauseqa", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--suites", required=True)
    c.add_argument("--tag", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--calib-only", action="store_true", help="of the train part, only the calibration questions")
    f = sub.add_parser("fit")
    f.add_argument("--merge", action="store_true", help="the files are one tag's, per suite: fit them as one")
    f.add_argument("--write", default="", help="an ssm.json: write the language-level keep fusion into it")
    f.add_argument("--note", default="", help="added to the written fusion's fitted_on")
    f.add_argument("--method", choices=["keep", "score"], default="keep",
                   help="the fusion fitted and written: keep (ranks) or score (the lists' scores, issue 27)")
    f.add_argument("files", nargs="+")
    a = ap.parse_args()
    collect(a) if a.cmd == "collect" else fit_report(a)


if __name__ == "__main__":
    main()
