"""Builds the SSM encoder's training data (issue 14), here on the CPU (no torch): texts, not token ids, so that one
data set serves every input layer (tokenize.py turns it into the ids of cq-hash-v1 or of the Gemma-3 vocabulary).

Inputs
  --db        a clauseqa store in which the dev suites were ingested with BM25 only, one KB per suite named as the
              suite (`clauseqa eval --kb SUITE --suite build/val/SUITE --mode bm25`): clause texts exactly as ingest
              cuts them, in document order
  --eval      ../shared/eval (questions.jsonl of every suite); --train ../shared/train (lawyer_llama, argpair)
  --clauseqa  the clauseqa binary, to mine BM25 hard negatives (`retrieve --mode bm25 --jsonl`)

Split: BY DOCUMENT (tools/dev_split.py): a document is validation when int(sha256("<suite>/<doc>"), 16) % 5 == 0;
nothing from a validation document is trained on: not its clauses (windows, inverse-cloze, distillation), not its
headings, not a question whose gold lies in it, not a BM25 negative drawn from it. Validation documents stay in the
corpus (retrieval runs over every document of a suite, as a user's KB would).

Output (--out, default .device/ssm14/data, git-ignored):
  corpus.npz    text (uint8: every clause's UTF-8 text end to end), text_off (clause i = text[text_off[i]:
                text_off[i+1]]), doc_off (document d = clauses doc_off[d] .. doc_off[d+1]-1), doc_suite (index into
                meta["suites"]), doc_val (1 = validation document)
  queries.json  "questions": dev questions of both parts (split recorded), lawyer_llama consultations, argpair claims,
                each {text, src, suite, type, split, pos: global clause ids, neg: BM25 / given hard negatives,
                bm25 (dev questions): BM25's top 50 (global clause ids), `clauseqa retrieve --mode bm25`};
                "headings": document title + heading path -> the clauses under it (train documents);
                "ict": inverse-cloze sentences, a sentence of a train clause -> that clause (a fixed set, so that the
                teacher can embed them)
  docs.json     every document's suite, name, title, validation flag
  meta.json     counts, the split rule, sources and their licenses (LICENSES below)

--licensed-only leaves out every research-only or non-commercial source (RESEARCH_ONLY): what remains may train
weights that ship with the product.
"""
import argparse
import hashlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import unicodedata
from collections import Counter, defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import dev_split  # noqa: E402

SUITES = ["laws-zh", "policy-zh-dev", "cjrc-dev", "cuad-dev", "contracts-en-dev"]
EXTRA = ["argpair"]  # documents built here: each argpair item's positive and negatives as one small document
LICENSES = {
    "laws-zh": "laws: outside copyright (PRC Copyright Law art. 5); questions LawBench Apache-2.0, LeCoQA MIT",
    "policy-zh-dev": "DataFountain 2020 competition data, no license: research use only",
    "cjrc-dev": "CAIL2019 (CJRC), no license file: research use only",
    "cuad-dev": "CUAD, CC BY 4.0 (public EDGAR filings)",
    "contracts-en-dev": "ContractNLI CC BY 4.0, PrivacyQA MIT",
    "lawyer_llama": "lawyer-llama repository Apache-2.0, README: academic research only; labels chosen automatically",
    "argpair": "CAIL2021 argument-pair data from China Judgements Online: research use only",
}
RESEARCH_ONLY = {"policy-zh-dev", "cjrc-dev", "lawyer_llama", "argpair"}
SENT_END = re.compile(r"(?<=[。；！？;!?])|(?<=\.)\s+")


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
    """(doc_id, name, title, rows) of a suite's KB in ingest order: its ready documents by id (every document when
    none is ready), rows = its clauses (id, path, label, text) by position. Exits without the KB."""
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


def heading_groups(rows, first_gid):
    groups = defaultdict(list)
    for k, (_, path, label, _) in enumerate(rows):
        parts = [p for p in (path or "").split(" > ") if p]
        if label and parts and parts[-1] == label:
            parts = parts[:-1]
        if parts:
            groups[" ".join(parts)].append(first_gid + k)
    return groups


def bm25_rankings(args, data_dir, suite, items, clause_gid, depth):
    """BM25's ranking (global clause ids, best first, `depth` deep) of each item's text in the suite's KB."""
    lines = ["%s\n" % json.dumps({"id": str(i), "question": it["text"]}, ensure_ascii=False)
             for i, it in enumerate(items)]
    r = subprocess.run([args.clauseqa, "retrieve", "--data", data_dir, "--kb", suite, "--mode", "bm25", "--jsonl",
                        "--k", str(depth)], input="".join(lines), capture_output=True, text=True)
    if r.returncode:
        sys.exit("clauseqa retrieve (%s): %s" % (suite, r.stderr[-2000:]))
    out = [[] for _ in items]
    for line in r.stdout.splitlines():
        o = json.loads(line)
        out[int(o["id"])] = [clause_gid[h["clause_id"]] for h in o.get("results", []) if h["clause_id"] in clause_gid]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--clauseqa", default="build/clauseqa")
    ap.add_argument("--out", default=".device/ssm14/data")
    ap.add_argument("--negatives", type=int, default=8)
    ap.add_argument("--ict", type=int, default=120000, help="inverse-cloze sentences (train clauses)")
    ap.add_argument("--licensed-only", action="store_true", help="leave out research-only / non-commercial sources")
    ap.add_argument("--seed", type=int, default=20261201)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    db = sqlite3.connect(args.db)
    data_dir = os.path.dirname(os.path.abspath(args.db))
    suites = [s for s in SUITES if not (args.licensed_only and s in RESEARCH_ONLY)]
    extra = [s for s in EXTRA if not (args.licensed_only and s in RESEARCH_ONLY)]
    all_suites = suites + extra

    texts, doc_off, doc_suite, doc_val, docs = [], [0], [], [], []
    clause_gid = {}                        # store clause id -> global clause index
    doc_by_name = {}                       # (suite, doc name) -> (first global index, [normalized texts])
    headings = []
    for si, suite in enumerate(suites):
        for doc_id, name, title, rows in suite_documents(db, suite):
            if not rows:
                continue
            first = len(texts)
            val = dev_split.doc_is_validation(suite, name)
            for cid, _, _, text in rows:
                clause_gid[cid] = len(texts)
                texts.append(text)
            doc_by_name[(suite, name)] = (first, [norm(r[3]) for r in rows])
            doc_off.append(len(texts))
            doc_suite.append(si)
            doc_val.append(int(val))
            docs.append({"suite": suite, "name": name, "title": title, "val": val})
            if not val:
                for heading, members in heading_groups(rows, first).items():
                    if 1 <= len(members) <= 30:
                        headings.append({"text": title + " " + heading, "suite": suite, "pos": members})
        print("%s: %d documents, %d clauses so far" % (suite, len(docs), len(texts)), flush=True)
    n_store = len(texts)

    questions, counts = [], Counter()
    # dev questions, both parts; gold clauses by FORMAT.md's hit rule
    for suite in suites:
        for q in dev_split.read_questions(args.eval, suite):
            if not q.get("answerable", True) or not q.get("gold"):
                continue
            split = "val" if dev_split.question_is_validation(suite, q) else "train"
            pos = set()
            for g in q["gold"]:
                d = doc_by_name.get((suite, g["doc"]))
                if not d:
                    continue
                if not g.get("text"):
                    pos.update(range(d[0], d[0] + len(d[1])))
                    continue
                gn = norm(g["text"])
                pos.update(d[0] + i for i, cn in enumerate(d[1]) if cn and hits(cn, gn))
            counts["%s/%s/%s" % (suite, split, "with_pos" if pos else "no_pos")] += 1
            if pos:
                questions.append({"id": q["id"], "text": q["question"], "src": "dev", "suite": suite, "type": q["type"],
                                  "split": split, "pos": sorted(pos), "neg": []})

    store_val = np.repeat(np.asarray(doc_val, bool), np.diff(np.asarray(doc_off)))  # per store clause

    def is_train_clause(g):
        return g < n_store and not store_val[g]

    # lawyer_llama: consultation -> Civil Code articles, found in the laws-zh store by their text
    if "laws-zh" in suites and not args.licensed_only:
        body = {}
        for suite, name in doc_by_name:
            if suite != "laws-zh":
                continue
            first, ns = doc_by_name[(suite, name)]
            for i, cn in enumerate(ns):
                body.setdefault(re.sub(r"^第[零一二三四五六七八九十百千]+条(之[一二三四五六七八九十]+)?", "", cn), first + i)
        import gzip
        with gzip.open(os.path.join(args.train, "lawyer_llama_query2article", "train.jsonl.gz"), "rt") as f:
            for line in f:
                o = json.loads(line)
                pos = []
                for p in o["positive"]:
                    t = norm(p.split("：", 1)[1] if "：" in p else p)
                    if t in body:
                        pos.append(body[t])
                if not pos or len(pos) < len(o["positive"]):
                    counts["lawyer_llama/unmatched"] += 1
                    continue
                if not all(is_train_clause(g) for g in pos):
                    counts["lawyer_llama/in_validation_documents"] += 1
                    continue
                counts["lawyer_llama/train"] += 1
                questions.append({"id": o["id"], "text": o["query"], "src": "lawyer_llama", "suite": "laws-zh",
                                  "type": "consultation", "split": "train", "pos": sorted(set(pos)), "neg": []})
    # argpair: claim -> counter-argument; the positive and its 4 same-judgment negatives make one small document
    if "argpair" in extra:
        import gzip
        si = all_suites.index("argpair")
        with gzip.open(os.path.join(args.train, "cail2021_argpair_retrieval", "train.jsonl.gz"), "rt") as f:
            for line in f:
                o = json.loads(line)
                items = [(p, True) for p in o["positive"]] + [(n, False) for n in o["negatives"]]
                rng.shuffle(items)
                first = len(texts)
                texts.extend(t for t, _ in items)
                doc_off.append(len(texts))
                doc_suite.append(si)
                doc_val.append(0)
                docs.append({"suite": "argpair", "name": o["id"], "title": "", "val": False})
                pos = [first + i for i, (_, p) in enumerate(items) if p]
                neg = [first + i for i, (_, p) in enumerate(items) if not p]
                questions.append({"id": o["id"], "text": o["query"], "src": "argpair", "suite": "argpair",
                                  "type": "argument", "split": "train", "pos": pos, "neg": neg})
                counts["argpair/train"] += 1

    # BM25 for every dev question (both parts: its top 10 is what `clauseqa eval` fuses with the dense list, so
    # train.py can score BM25 + dense fusion and fit a calibrated one on the train part) and lawyer_llama query;
    # hard negatives for the train ones: top hits neither gold nor in a validation document
    for suite in suites:
        items = [q for q in questions if q["suite"] == suite and q["src"] in ("dev", "lawyer_llama")]
        for q, ranked in zip(items, bm25_rankings(args, data_dir, suite, items, clause_gid, 50)):
            if q["src"] == "dev":
                q["bm25"] = ranked
            if q["split"] == "train":
                pos = set(q["pos"])
                q["neg"] = [g for g in ranked if g not in pos and is_train_clause(g)][:args.negatives]
                counts["%s/%s/with_bm25_negatives" % (suite, q["src"])] += bool(q["neg"])
        print(suite, {k: v for k, v in counts.items() if k.startswith(suite)}, flush=True)

    # inverse-cloze sentences of train clauses (store documents), a fixed set the teacher can embed
    train_clauses = np.flatnonzero(~store_val).tolist()
    ict = []
    for g in rng.sample(train_clauses, min(args.ict, len(train_clauses))):
        t = texts[g]
        sents = [s.strip() for s in SENT_END.split(t) if 8 <= len(s.strip()) <= 160]
        if len(t) < 24 or not sents:
            continue
        ict.append({"text": sents[rng.randrange(len(sents))], "pos": [g]})
    counts["ict"] = len(ict)
    counts["headings"] = len(headings)

    blob = [t.encode("utf-8") for t in texts]
    text_off = np.zeros(len(blob) + 1, np.int64)
    text_off[1:] = np.cumsum([len(b) for b in blob])
    np.savez(os.path.join(args.out, "corpus.npz"), text=np.frombuffer(b"".join(blob), np.uint8), text_off=text_off,
             doc_off=np.asarray(doc_off, np.int64), doc_suite=np.asarray(doc_suite, np.int8),
             doc_val=np.asarray(doc_val, np.int8))
    with open(os.path.join(args.out, "queries.json"), "w", encoding="utf-8") as f:
        json.dump({"questions": questions, "headings": headings, "ict": ict}, f, ensure_ascii=False)
    with open(os.path.join(args.out, "docs.json"), "w", encoding="utf-8") as f:
        json.dump(docs, f, ensure_ascii=False)
    sources = all_suites + ([] if args.licensed_only else ["lawyer_llama"])
    meta = {"suites": all_suites, "split_rule": "by document: tools/dev_split.py (int(sha256('<suite>/<doc>'), 16) % 5 "
            "== 0 -> validation); nothing of a validation document is trained on",
            "licensed_only": args.licensed_only, "licenses": {s: LICENSES[s] for s in sources},
            "research_only": sorted(set(sources) & RESEARCH_ONLY),
            "n_docs": len(docs), "n_val_docs": int(sum(doc_val)), "n_clauses": len(texts), "n_store_clauses": n_store,
            "n_questions": len(questions), "counts": dict(sorted(counts.items())),
            "store_sha256": hashlib.sha256(b"".join(blob)).hexdigest()}
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
