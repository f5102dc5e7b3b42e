"""BM25's rankings WITH their scores for the dev questions of prepare.py's data (issue 27: score fusion of the teacher
and BM25 needs BM25's scores; prepare.py keeps only the ranked clause ids).

    python3 tools/teacher/bm25_scores.py --db DB --data DATA [--eval ../shared/eval] [--clauseqa build/clauseqa] [--k 50] [--out F.json.gz]
        [--all]

DB: the store prepare.py read (`--db`; its data folder beside it), DATA: prepare.py's output. Runs `clauseqa retrieve
--mode bm25 --jsonl --k K` on every dev question of the validation part and the calibration questions of the train
part (tools/dev_split.py; --all: every dev question), maps each hit's store clause id to prepare.py's global clause
id (the same walk over the store: prepare.suite_documents) and writes
    {"store_sha256", "k", "questions": {"<suite>/<id>": [[gid, score], ...]}}     (best first, score: higher better)
(default OUT: DATA/bm25_scores.json.gz). The store must be the one prepare.py read: its clause texts must be
corpus.npz's store clauses byte for byte, or nothing is written. The ranking is checked against prepare.py's BM25 top 50 of each
question (the same binary's ranking up to the depth both hold: a difference is printed).
"""
import argparse
import gzip
import hashlib
import json
import os
import sqlite3
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ssm_train"))
sys.path.insert(0, os.path.join(HERE, ".."))
import dev_split  # noqa: E402
import prepare  # noqa: E402


def clause_gids(db, suites):
    """{store clause id: global clause id} and the sha256 of the store clauses' texts end to end (corpus.npz's
    first n_store_clauses texts, as prepare.py wrote them)."""
    gid, blob = {}, []
    for suite in suites:
        for _, _, _, rows in prepare.suite_documents(db, suite):
            for cid, _, _, text in rows:
                gid[cid] = len(blob)
                blob.append(text.encode("utf-8"))
    return gid, hashlib.sha256(b"".join(blob)).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--clauseqa", default="build/clauseqa")
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--out", default="")
    ap.add_argument("--all", action="store_true", help="every dev question, not only validation + calibration")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    suites = [s for s in meta["suites"] if s in prepare.SUITES]
    db = sqlite3.connect("file:%s?mode=ro" % os.path.abspath(a.db), uri=True)
    gid, sha = clause_gids(db, suites)
    import numpy as np
    z = np.load(os.path.join(a.data, "corpus.npz"))
    want = hashlib.sha256(z["text"][:z["text_off"][meta["n_store_clauses"]]].tobytes()).hexdigest()
    if len(gid) != meta["n_store_clauses"] or sha != want:
        sys.exit("bm25_scores: %s is not the store %s was prepared from (its clauses' sha256 %s, corpus.npz's %s)"
                 % (a.db, a.data, sha[:12], want[:12]))
    data_q = json.load(open(os.path.join(a.data, "queries.json"), encoding="utf-8"))["questions"]
    prepared = {(x["suite"], x["id"]): x.get("bm25", []) for x in data_q if x["src"] == "dev"}
    data_dir = os.path.dirname(os.path.abspath(a.db))
    out, differ = {}, 0
    for suite in suites:
        qs = [q for q in dev_split.read_questions(a.eval, suite) if q.get("answerable", True) and q.get("gold")]
        if not a.all:
            qs = [q for q in qs if dev_split.question_is_validation(suite, q) or
                  dev_split.question_is_calibration(suite, q)]
        lines = "".join(json.dumps({"id": q["id"], "question": q["question"]}, ensure_ascii=False) + "\n" for q in qs)
        r = subprocess.run([a.clauseqa, "retrieve", "--data", data_dir, "--kb", suite, "--mode", "bm25", "--jsonl",
                            "--k", str(a.k)], input=lines, capture_output=True, text=True)
        if r.returncode:
            sys.exit("clauseqa retrieve (%s): %s" % (suite, r.stderr[-2000:]))
        for line in r.stdout.splitlines():
            o = json.loads(line)
            hits = [[gid[h["clause_id"]], float(h["score"])] for h in o.get("results", []) if h["clause_id"] in gid]
            out["%s/%s" % (suite, o["id"])] = hits
            p = prepared.get((suite, o["id"]))
            n = min(len(p or []), len(hits))
            if p is not None and [g for g, _ in hits[:n]] != p[:n]:
                differ += 1
        print("%s: %d questions" % (suite, len(qs)), flush=True)
    if differ:
        print("warning: %d rankings differ from prepare.py's" % differ, file=sys.stderr)
    path = a.out or os.path.join(a.data, "bm25_scores.json.gz")
    with gzip.open(path, "wt") as f:
        json.dump({"store_sha256": meta["store_sha256"], "k": a.k, "questions": out}, f)
    print("%d rankings -> %s (%d differ from prepare.py's)" % (len(out), path, differ))


if __name__ == "__main__":
    main()
