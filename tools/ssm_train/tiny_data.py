"""A small slice of prepare.py's output with the same layout, for testing the whole chain on a CPU (tokenize_data.py,
tools/teacher/export.py, train.py, the device_*.sh scripts with TINY=1) in minutes:

    python3 tools/ssm_train/tiny_data.py --data .device/ssm14/data --out .device/ssm14/tiny

Per suite: the documents of a few validation and train questions plus a few others; every question, heading and
inverse-cloze sentence whose positives all lie in kept documents; clause ids renumbered.
"""
import argparse
import json
import os
import random

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".device/ssm14/data")
    ap.add_argument("--out", default=".device/ssm14/tiny")
    ap.add_argument("--val", type=int, default=6)
    ap.add_argument("--train", type=int, default=25)
    ap.add_argument("--others", type=int, default=6)
    ap.add_argument("--max-doc-clauses", type=int, default=60)
    ap.add_argument("--max-ict", type=int, default=300)
    ap.add_argument("--max-clause-chars", type=int, default=400, help="longer clauses are cut (teacher cost on a CPU)")
    a = ap.parse_args()
    rng = random.Random(5)
    z = np.load(os.path.join(a.data, "corpus.npz"))
    text, text_off, doc_off, doc_suite, doc_val = (z[k] for k in ("text", "text_off", "doc_off", "doc_suite",
                                                                    "doc_val"))
    q = json.load(open(os.path.join(a.data, "queries.json"), encoding="utf-8"))
    docs = json.load(open(os.path.join(a.data, "docs.json"), encoding="utf-8"))
    meta = json.load(open(os.path.join(a.data, "meta.json")))
    clause_doc = np.searchsorted(doc_off, np.arange(int(doc_off[-1])), side="right") - 1
    small = set(d for d in range(len(docs)) if doc_off[d + 1] - doc_off[d] <= a.max_doc_clauses)
    keep = set()
    for si, suite in enumerate(meta["suites"]):
        for split, n in (("val", a.val), ("train", a.train)):
            cand = [x for x in q["questions"] if x["suite"] == suite and x["split"] == split
                    and all(int(clause_doc[g]) in small for g in x["pos"])]
            for x in rng.sample(cand, min(n, len(cand))):
                keep.update(int(clause_doc[g]) for g in x["pos"])
        others = [d for d in small if doc_suite[d] == si]
        keep.update(rng.sample(others, min(a.others, len(others))))
    keep = sorted(keep)
    remap = np.full(int(doc_off[-1]), -1, np.int64)
    new_text, new_off, new_doc_off = [], [0], [0]
    for d in keep:
        for g in range(int(doc_off[d]), int(doc_off[d + 1])):
            remap[g] = len(new_off) - 1
            b = text[text_off[g]:text_off[g + 1]].tobytes().decode("utf-8")[:a.max_clause_chars].encode("utf-8")
            b = np.frombuffer(b, np.uint8)
            new_text.append(b)
            new_off.append(new_off[-1] + len(b))
        new_doc_off.append(len(new_off) - 1)

    def ok(x):
        return all(remap[g] >= 0 for g in x["pos"])

    def fix(x):
        x = dict(x, pos=[int(remap[g]) for g in x["pos"]])
        for k in ("neg", "bm25"):
            if k in x:
                x[k] = [int(remap[g]) for g in x[k] if remap[g] >= 0]
        return x
    out_q = {k: [fix(x) for x in q[k] if ok(x)] for k in ("questions", "headings", "ict")}
    out_q["ict"] = out_q["ict"][:a.max_ict]
    os.makedirs(a.out, exist_ok=True)
    np.savez(os.path.join(a.out, "corpus.npz"), text=np.concatenate(new_text), text_off=np.asarray(new_off, np.int64),
             doc_off=np.asarray(new_doc_off, np.int64), doc_suite=doc_suite[keep], doc_val=doc_val[keep])
    json.dump(out_q, open(os.path.join(a.out, "queries.json"), "w", encoding="utf-8"), ensure_ascii=False)
    json.dump([docs[d] for d in keep], open(os.path.join(a.out, "docs.json"), "w", encoding="utf-8"),
              ensure_ascii=False)
    meta = dict(meta, tiny={"from": a.data, "docs": len(keep), "clauses": len(new_off) - 1,
                            "questions": len(out_q["questions"]), "headings": len(out_q["headings"]),
                            "ict": len(out_q["ict"])})
    json.dump(meta, open(os.path.join(a.out, "meta.json"), "w"), indent=1)
    print(json.dumps(meta["tiny"]))


if __name__ == "__main__":
    main()
