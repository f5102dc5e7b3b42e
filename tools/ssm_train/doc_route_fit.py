"""Document routing's R and beta fitted from the C runtime's own rankings (issue 27 item 3; docs/SSM.md, "Document
routing"): the routed dense search (CLAUSEQA_DOC_ROUTE=search:R,BETA) fused with BM25 by the weights' own score fusion
(their ssm.json "fusion", method score), fitted by language on the calibration questions, scored on the validation
parts, written into the weights' ssm.json as "doc_route".

    python3 tools/ssm_train/doc_route_fit.py collect --clauseqa CQ --data DIR --suites DIR --out F.json.gz \
        [--tops 1,3,10] [--betas 0.02,0.05,0.1,0.2]
        `clauseqa retrieve --jsonl --k 50` of every validation question and every calibration question of the train
        parts (tools/dev_split.py): --mode bm25 once, --mode dense unrouted (CLAUSEQA_DOC_ROUTE=off) and once per
        (R, BETA) of the grid; hits reduced as fusion.py collect reduces them. The data folder must have been ingested
        with the weights (and their document head: documents without a stored document vector are routed by the
        mean of their clause vectors). Needs numpy (prepare.py's hit rule).
    python3 tools/ssm_train/doc_route_fit.py fit F.json.gz --weights SSM_JSON [--write]
        The table (validation part, hit@1/5/10, MRR per suite): BM25, fused unrouted, fused routed at the fit, and
        the fit: per language, the (R, BETA) with the best mean over its calibration suites of hit@5 + MRR/10 among
        those whose hit@5 is at least the unrouted fusion's on every calibration suite of the language; "off" (top 0)
        when none beats it. --write puts "doc_route": {"method": "search", "fitted_on", "zh": {"top", "beta"},
        "en": {...}} into SSM_JSON, which the runtime reads when the dense retriever opens.

The fusion is the weights' score fusion as it is (fitted unrouted: `fusion.py fit --method score --write`, first);
the routed list's scores are cosine + BETA (what the runtime fuses), so ranked_score here is the runtime's ranking
(tests/unit/fusion_score_vs_py.py holds them equal).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import fusion  # noqa: E402

OFF = "off"


def setting_name(top, beta):
    return "%d,%g" % (top, beta)


def retrieve(a, suite, lines, mode, route):
    env = dict(os.environ, CLAUSEQA_DOC_ROUTE=route)
    env.setdefault("CLAUSEQA_DENSE", "on")  # the encoder on the CPU too (auto: only on a GPU)
    r = subprocess.run([a.clauseqa, "retrieve", "--data", a.data, "--kb", suite, "--mode", mode, "--jsonl", "--k",
                        "50"], input=lines, capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit("%s %s (CLAUSEQA_DOC_ROUTE=%s): %s" % (suite, mode, route, r.stderr[-800:]))
    out = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        out[o["id"]] = o.get("results", [])
    return out


def collect(a):
    from prepare import hits, norm  # numpy
    settings = [OFF] + [setting_name(int(t), float(b)) for t in a.tops.split(",") for b in a.betas.split(",")]
    out = {}
    for suite, part, qs in fusion.part_questions(a.suites, calib_only=True):
        if not qs:
            continue
        lines = "".join(json.dumps({"id": q["id"], "question": q["question"]}, ensure_ascii=False) + "\n"
                        for q in qs)
        lists = {"bm25": retrieve(a, suite, lines, "bm25", OFF)}
        for s in settings:
            lists[s] = retrieve(a, suite, lines, "dense", OFF if s == OFF else "search:" + s)
        for q in qs:
            gold = [(g["doc"], norm(g["text"]) if g.get("text") else None) for g in q["gold"]]
            keys, rec = {}, {"suite": suite, "type": q["type"], "part": part, "calib": part == "train",
                             "dense": {}}

            def reduce(results):
                items = []
                for h in results:
                    k = keys.setdefault((h["doc"], h.get("path"), h["text"][:64]), len(keys))
                    hn = norm(h["text"])
                    hit = any(d == h["doc"] and (gt is None or hits(hn, gt)) for d, gt in gold)
                    items.append([k, round(float(h.get("score", 0.0)), 5), int(hit)])
                return items
            rec["bm25"] = reduce(lists["bm25"].get(q["id"], []))
            for s in settings:
                rec["dense"][s] = reduce(lists[s].get(q["id"], []))
            out[q["id"]] = rec
        print("%s %s: %d questions, %d settings" % (suite, part, len(qs), len(settings)), flush=True)
    with gzip.open(a.out, "wt") as f:
        json.dump({"settings": settings, "questions": out}, f)


def weights_fusion(path):
    with open(path, encoding="utf-8") as f:
        fu = json.load(f).get("fusion") or {}
    if fu.get("method") != "score":
        raise SystemExit("%s: the weights carry no score fusion (\"fusion\": {\"method\": \"score\", ...}); fit it "
                         "first (fusion.py fit --method score --write)" % path)
    return {lang: (fu[lang]["w"], int(fu[lang]["m"]), fu[lang].get("c", 0.0), fu.get("norm", "minmax"))
            for lang in ("zh", "en")}


def ranks_of(recs, setting, fu):
    """First-hit rank (top 10) of each record, fused by the weights' score fusion with the setting's dense list."""
    out = []
    for rec in recs:
        w, m, c, how = fu[fusion.LANG[rec["suite"]]]
        r = dict(rec, dense=rec["dense"][setting])
        out.append(fusion.first_hit(fusion.ranked_score(r, w, m, c, how)) or 0)
    return out


def bm25_ranks(recs):
    return [fusion.first_hit([(k, h) for k, _, h in rec["bm25"]]) or 0 for rec in recs]


def choose(groups, settings, fu):
    """groups: {suite: records} of one language's calibration part. The best setting (module comment)."""
    def score(s):
        vals, ok = [], True
        for recs in groups.values():
            m = fusion.metrics_ranks(ranks_of(recs, s, fu))
            base = fusion.metrics_ranks(ranks_of(recs, OFF, fu))
            ok = ok and m["hit@5"] >= base["hit@5"] - 1e-12
            vals.append(m["hit@5"] + m["mrr"] / 10)
        return ok, sum(vals) / max(1, len(vals))
    best, best_s = OFF, score(OFF)[1]
    for s in settings:
        if s == OFF:
            continue
        ok, v = score(s)
        if ok and v > best_s + 1e-12:
            best, best_s = s, v
    return best


def fit(a):
    with gzip.open(a.file, "rt") as f:
        d = json.load(f)
    settings, qs = d["settings"], list(d["questions"].values())
    fu = weights_fusion(a.weights)
    chosen, n = {}, {}
    for lang in ("zh", "en"):
        groups = {}
        for rec in qs:
            if rec["calib"] and fusion.LANG.get(rec["suite"]) == lang:
                groups.setdefault(rec["suite"], []).append(rec)
        n[lang] = sum(len(g) for g in groups.values())
        chosen[lang] = choose(groups, settings, fu) if groups else OFF
    print("fitted on the calibration questions (zh %d, en %d): zh %s, en %s" % (n["zh"], n["en"], chosen["zh"],
                                                                                  chosen["en"]))
    print("\n| suite | type | n | BM25 | fused, unrouted | fused, routed (fit) | routed setting |")
    print("|---|---|---|---|---|---|---|")
    by = {}
    for rec in qs:
        if rec["part"] == "val":
            by.setdefault((rec["suite"], rec["type"]), []).append(rec)

    def fmt(m):
        return "%.3f / %.3f / %.3f / %.3f" % (m["hit@1"], m["hit@5"], m["hit@10"], m["mrr"])
    for (suite, typ), recs in sorted(by.items()):
        s = chosen[fusion.LANG[suite]]
        print("| %s | %s | %d | %s | %s | %s | %s |" % (
            suite, typ, len(recs), fmt(fusion.metrics_ranks(bm25_ranks(recs))),
            fmt(fusion.metrics_ranks(ranks_of(recs, OFF, fu))), fmt(fusion.metrics_ranks(ranks_of(recs, s, fu))), s))
    print("(hit@1 / hit@5 / hit@10 / MRR, validation part)")
    if a.write:
        with open(a.weights, encoding="utf-8") as f:
            cfg = json.load(f)

        def member(s):
            if s == OFF:
                return {"top": 0, "beta": 0}
            t, b = s.split(",")
            return {"top": int(t), "beta": float(b)}
        cfg["doc_route"] = {"method": "search",
                            "fitted_on": "calibration questions of the dev suites' train parts (zh %d, en %d), the "
                                         "C runtime's routed dense lists fused by this file's score fusion "
                                         "(tools/ssm_train/doc_route_fit.py; grid %s)"
                                         % (n["zh"], n["en"], " ".join(settings)),
                            "zh": member(chosen["zh"]), "en": member(chosen["en"])}
        with open(a.weights, "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("wrote %s: %s" % (a.weights, json.dumps(cfg["doc_route"]["zh"]) + " " +
                                json.dumps(cfg["doc_route"]["en"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--clauseqa", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--suites", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--tops", default="1,3,10")
    c.add_argument("--betas", default="0.02,0.05,0.1,0.2")
    f = sub.add_parser("fit")
    f.add_argument("file")
    f.add_argument("--weights", required=True, help="the encoder's ssm.json (its score fusion is used)")
    f.add_argument("--write", action="store_true", help="write the fitted \"doc_route\" into --weights")
    a = ap.parse_args()
    collect(a) if a.cmd == "collect" else fit(a)


if __name__ == "__main__":
    main()
