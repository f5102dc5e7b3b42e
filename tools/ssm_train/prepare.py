"""Builds the SSM encoder's training data from the development material only (runs here, on the CPU; no torch).

Inputs
  --db       a clauseqa store (clauseqa.db) in which the dev suites were ingested with BM25 only, one KB per suite
             named as the suite (`clauseqa eval --kb SUITE --suite ../shared/eval/SUITE --mode bm25` makes one);
             the clause texts are read from it, so the training sees exactly the clauses ingest makes
  --eval     the eval folder (../shared/eval): questions.jsonl of each suite
  --clauseqa the clauseqa binary, to mine BM25 hard negatives (`retrieve --mode bm25 --jsonl`)

Output (--out, default .device/ssm_data, git-ignored; carried to the GPU machine):
  corpus.npz    tok (uint16, every clause's cq-hash-v1 ids end to end), cl_off (clause i = tok[cl_off[i]:cl_off[i+1]]),
                doc_off (document d = clauses doc_off[d]..doc_off[d+1]-1, in ingest order), doc_suite
  queries.json  the questions of the train AND validation splits (split recorded) with their gold clauses (global
                clause indexes, by shared/eval/FORMAT.md's hit rule) and, for train questions only, BM25 hard
                negatives; heading queries (document title + heading path -> the clauses under it)
  meta.json     counts, split rule, suites

Split rule (deterministic): a question is in validation when int(sha256(id), 16) % 5 == 0, else train.
"""
import argparse
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import unicodedata
from collections import Counter, defaultdict

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ssm_ref"))
import tokenizer  # noqa: E402

SUITES = ["laws-zh", "policy-zh-dev", "cuad-dev", "contracts-en-dev"]


def is_validation(qid):
    return int(hashlib.sha256(qid.encode()).hexdigest(), 16) % 5 == 0


def norm(s):
    return "".join(unicodedata.normalize("NFKC", s).lower().split())


def char_f1(a, b):
    ca, cb = Counter(a), Counter(b)
    common = sum((ca & cb).values())
    if not common:
        return 0.0
    p, r = common / sum(ca.values()), common / sum(cb.values())
    return 2 * p * r / (p + r)


def hits(clause_norm, gold_norm):
    """FORMAT.md's retrieval hit rule for one passage and one gold text (both normalized)."""
    if gold_norm in clause_norm:
        return True
    if clause_norm in gold_norm and len(clause_norm) >= 20:
        return True
    return char_f1(clause_norm, gold_norm) >= 0.5


def suite_documents(db, suite):
    """(doc_id, name, title, rows) of a suite's KB in the order training uses: its ready documents by id (every
    document when none is ready), rows = its clauses (id, path, label, text) by position. Exits without the KB."""
    kb = db.execute("select id from kbs where name=?", (suite,)).fetchone()
    if not kb:
        sys.exit("no KB %s in the store" % suite)
    docs = db.execute("select id, name, coalesce(title, name) from documents where kb_id=? and status='ready' "
                      "order by id", (kb[0],)).fetchall()
    if not docs:
        docs = db.execute("select id, name, coalesce(title, name) from documents where kb_id=? order by id",
                          (kb[0],)).fetchall()
    for doc_id, name, title in docs:
        rows = db.execute("select id, path, label, text from clauses where doc_id=? order by ord", (doc_id,)).fetchall()
        yield doc_id, name, title, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--clauseqa", default="build-h6/clauseqa")
    ap.add_argument("--out", default=".device/ssm_data")
    ap.add_argument("--negatives", type=int, default=8)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    db = sqlite3.connect(args.db)
    data_dir = os.path.dirname(os.path.abspath(args.db))

    toks, cl_off, doc_off, doc_suite = [], [0], [0], []
    clause_gid = {}               # db clause id -> global clause index
    doc_clauses = {}              # (suite, doc name) -> (first global index, [normalized texts])
    heading_queries = []
    n_tok = 0
    for si, suite in enumerate(SUITES):
        for doc_id, name, title, rows in suite_documents(db, suite):
            if not rows:
                continue
            first = len(cl_off) - 1
            texts = []
            groups = defaultdict(list)
            for cid, path, label, text in rows:
                ids = tokenizer.tokenize(text)
                clause_gid[cid] = len(cl_off) - 1
                toks.append(np.asarray(ids, dtype=np.uint16))
                n_tok += len(ids)
                cl_off.append(n_tok)
                texts.append(norm(text))
                parts = [p for p in (path or "").split(" > ") if p]
                if label and parts and parts[-1] == label:
                    parts = parts[:-1]
                if parts:
                    groups[" ".join(parts)].append(clause_gid[cid])
            doc_clauses[(suite, name)] = (first, texts)
            doc_off.append(len(cl_off) - 1)
            doc_suite.append(si)
            for heading, members in groups.items():
                if 1 <= len(members) <= 30:
                    heading_queries.append({"tokens": tokenizer.tokenize(title + " " + heading), "pos": members})
        print("%s: %d docs, %d clauses so far, %d tokens" % (suite, len(doc_off) - 1, len(cl_off) - 1, n_tok),
              flush=True)
    np.savez_compressed(os.path.join(args.out, "corpus.npz"), tok=np.concatenate(toks),
                        cl_off=np.asarray(cl_off, dtype=np.int64), doc_off=np.asarray(doc_off, dtype=np.int64),
                        doc_suite=np.asarray(doc_suite, dtype=np.int32))

    queries, counts = [], Counter()
    for suite in SUITES:
        train_lines = []
        with open(os.path.join(args.eval, suite, "questions.jsonl"), encoding="utf-8") as f:
            for line in f:
                q = json.loads(line)
                if not q.get("answerable", True) or not q.get("gold"):
                    continue
                split = "val" if is_validation(q["id"]) else "train"
                pos = set()
                for g in q["gold"]:
                    d = doc_clauses.get((suite, g["doc"]))
                    if not d or not g.get("text"):
                        continue
                    gn = norm(g["text"])
                    for i, cn in enumerate(d[1]):
                        if cn and hits(cn, gn):
                            pos.add(d[0] + i)
                counts[suite, split, "with_pos" if pos else "no_pos"] += 1
                if not pos:
                    continue
                queries.append({"id": q["id"], "suite": suite, "type": q["type"], "split": split,
                                "tokens": tokenizer.tokenize(q["question"]), "pos": sorted(pos), "neg": []})
                if split == "train":
                    train_lines.append(json.dumps({"id": q["id"], "question": q["question"]}, ensure_ascii=False))
        # BM25 hard negatives for the train questions: the top hits that are not gold
        if train_lines:
            r = subprocess.run([args.clauseqa, "retrieve", "--data", data_dir, "--kb", suite, "--mode", "bm25",
                                "--jsonl", "--k", str(args.negatives + 8)], input="\n".join(train_lines) + "\n",
                               capture_output=True, text=True)
            by_id = {q["id"]: q for q in queries if q["suite"] == suite}
            for line in r.stdout.splitlines():
                o = json.loads(line)
                q = by_id.get(o.get("id"))
                if not q:
                    continue
                neg = [clause_gid[h["clause_id"]] for h in o.get("results", []) if h["clause_id"] in clause_gid]
                q["neg"] = [g for g in neg if g not in set(q["pos"])][:args.negatives]
                counts[suite, "train", "with_neg" if q["neg"] else "no_neg"] += 1
        print(suite, {k[1:]: v for k, v in counts.items() if k[0] == suite}, flush=True)
    with open(os.path.join(args.out, "queries.json"), "w") as f:
        json.dump({"questions": queries, "headings": heading_queries}, f)
    meta = {"suites": SUITES, "split_rule": "validation iff int(sha256(question id), 16) % 5 == 0",
            "n_docs": len(doc_off) - 1, "n_clauses": len(cl_off) - 1, "n_tokens": n_tok,
            "n_heading_queries": len(heading_queries),
            "questions": {"%s/%s/%s" % k: v for k, v in sorted(counts.items())}}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
