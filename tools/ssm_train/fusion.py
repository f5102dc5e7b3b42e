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
(`retrieve --mode dense` reports fusion scores, not cosines, so the dense side is used by rank only.)
Each is fit three ways: per suite and question type (what a calibration by question type can reach; the runtime
does not know a question's suite or type), per language of the suite (zh / en: the runtime knows a question's
script, so this one can ship) and once for all suites (each suite weighing the same).
Clause lookups are left out: the router answers them before any fusion (they stay at hit@1 1.000).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dev_split  # noqa: E402

DEPTH_BM25, DEPTH_DENSE, K = 10, 50, 60.0


def collect(a):
    from prepare import hits, norm  # numpy: only collecting needs it (fit runs on Debian's python3)
    out = {}
    for suite in sorted(os.listdir(a.suites)):
        for part, fn in (("val", "questions.jsonl"), ("train", "train.jsonl")):
            p = os.path.join(a.suites, suite, fn)
            if not os.path.exists(p):
                continue
            qs = [json.loads(x) for x in open(p, encoding="utf-8") if x.strip()]
            qs = [q for q in qs if q.get("answerable", True) and q.get("gold")]
            if part == "train" and a.calib_only:  # the fit needs only the calibration questions
                qs = [q for q in qs if dev_split.question_is_calibration(suite, q)]
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
        if a.write:
            write_fusion(a.write, fitted, d["tag"], calib, {lang: sum(len(by_suite[s]) for s in suites
                                                                      if LANG.get(s) == lang) for lang in ("zh", "en")},
                         a.note)


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
    f.add_argument("files", nargs="+")
    a = ap.parse_args()
    collect(a) if a.cmd == "collect" else fit_report(a)


if __name__ == "__main__":
    main()
