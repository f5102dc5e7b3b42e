"""A small slice of prepare.py's output with the same layout, for testing the whole chain on a CPU (tokenize_data.py,
tools/teacher/export.py, train.py, the device_*.sh scripts with TINY=1) in minutes:

    python3 tools/ssm_train/tiny_data.py --data .device/ssm14/data --out .device/ssm14/tiny \
        [--teacher .device/ssm27/teacher --teacher-out .device/ssm27/tiny-teacher]

Per suite: the documents of a few validation and train questions plus a few others; every question, heading and
inverse-cloze sentence whose positives all lie in kept documents; clause ids renumbered.
--teacher (tools/teacher/egemma_pack.py's folder, whose tokens.npz follows --data): its tokens.npz cut the same way
and its reference.npz to the kept texts (renumbered; at least one must remain), pack/ and meta.json linked, into
--teacher-out, for train.py --teacher-only on the slice (device27.sh dry).
"""
import argparse
import json
import os
import random

import numpy as np


def cut_teacher(src, out, keep, n_clauses, n_q):
    """tokens.npz's k_tok/k_off for kept old indices keep[k] (in the new order); reference.npz's rows whose text is
    kept, renumbered; pack/ and meta.json linked."""
    if not out:
        raise SystemExit("tiny_data.py: --teacher needs --teacher-out")
    z = np.load(os.path.join(src, "tokens.npz"))
    want = {"c": n_clauses, "q": n_q["questions"], "h": n_q["headings"], "i": n_q["ict"]}
    os.makedirs(out, exist_ok=True)
    tok = {}
    for k, idx in keep.items():
        t, off = z[k + "_tok"], z[k + "_off"]
        if len(off) - 1 != want[k]:
            raise SystemExit("tiny_data.py: %s/tokens.npz has %d %s texts, --data %d: not the same data"
                             % (src, len(off) - 1, k, want[k]))
        pieces = [t[off[i]:off[i + 1]] for i in idx]
        tok[k + "_tok"] = np.concatenate(pieces) if pieces else t[:0]
        tok[k + "_off"] = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(off.dtype)
    np.savez(os.path.join(out, "tokens.npz"), **tok)
    ref = np.load(os.path.join(src, "reference.npz"))
    new_of = {k: {int(o): n for n, o in enumerate(idx)} for k, idx in keep.items()}
    rows = [(r, new_of[k][int(i)]) for r, (k, i) in enumerate(zip(ref["kind"].tolist(), ref["index"].tolist()))
            if int(i) in new_of[k]]
    if not rows:
        raise SystemExit("tiny_data.py: none of the teacher's %d reference texts is in the slice: keep more"
                         % len(ref["kind"]))
    np.savez(os.path.join(out, "reference.npz"), kind=ref["kind"][[r for r, _ in rows]],
             index=np.asarray([n for _, n in rows], ref["index"].dtype), vec=ref["vec"][[r for r, _ in rows]])
    for name in ("pack", "meta.json"):
        dst = os.path.join(out, name)
        if not os.path.lexists(dst):
            os.symlink(os.path.abspath(os.path.join(src, name)), dst)
    print(json.dumps({"teacher_slice": {k: len(v) for k, v in keep.items()}, "reference": len(rows)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".device/ssm14/data")
    ap.add_argument("--out", default=".device/ssm14/tiny")
    ap.add_argument("--val", type=int, default=6)
    ap.add_argument("--train", type=int, default=25)
    ap.add_argument("--others", type=int, default=6)
    ap.add_argument("--max-doc-clauses", type=int, default=60)
    ap.add_argument("--max-ict", type=int, default=300)
    ap.add_argument("--max-clause-chars", type=int, default=None, help="longer clauses are cut (teacher cost on a "
                    "CPU; default 400, none with --teacher: its tokens are of the whole clauses, and a cut clause "
                    "tokenizes to ids a trimmed GGUF may lack)")
    ap.add_argument("--teacher", default="", help="egemma_pack.py's folder to cut the same way")
    ap.add_argument("--teacher-out", default="")
    a = ap.parse_args()
    if a.max_clause_chars is None:
        a.max_clause_chars = 0 if a.teacher else 400
    if a.teacher and a.max_clause_chars:
        ap.error("--teacher keeps whole clauses (its tokens.npz is of them): no --max-clause-chars")
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
    if a.teacher:  # the documents of a few of the teacher's reference clauses, so that its check has texts
        ref = np.load(os.path.join(a.teacher, "reference.npz"))
        ref_docs = sorted(set(int(clause_doc[int(i)]) for k, i in zip(ref["kind"].tolist(), ref["index"].tolist())
                              if k == "c" and int(i) < len(clause_doc)) & small)
        keep.update(ref_docs[:2])
    keep = sorted(keep)
    remap = np.full(int(doc_off[-1]), -1, np.int64)
    new_text, new_off, new_doc_off = [], [0], [0]
    for d in keep:
        for g in range(int(doc_off[d]), int(doc_off[d + 1])):
            remap[g] = len(new_off) - 1
            b = text[text_off[g]:text_off[g + 1]].tobytes().decode("utf-8")[:a.max_clause_chars or None].encode("utf-8")
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
    kept_i = {k: [i for i, x in enumerate(q[k]) if ok(x)] for k in ("questions", "headings", "ict")}
    kept_i["ict"] = kept_i["ict"][:a.max_ict]
    out_q = {k: [fix(q[k][i]) for i in kept_i[k]] for k in kept_i}
    if a.teacher:
        kept_c = np.flatnonzero(remap >= 0)  # old clause ids in new order (documents kept in order)
        cut_teacher(a.teacher, a.teacher_out, {"c": kept_c, "q": kept_i["questions"], "h": kept_i["headings"],
                                               "i": kept_i["ict"]}, int(doc_off[-1]), {k: len(q[k]) for k in q})
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
