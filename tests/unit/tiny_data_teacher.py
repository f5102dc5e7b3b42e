#!/usr/bin/env python3
"""tools/ssm_train/tiny_data.py --teacher cuts egemma_pack.py's tokens.npz and reference.npz the same way as the data,
so that train.py --teacher-only runs on the slice (device27.sh dry, issue 27): every kept text keeps its own teacher
tokens, every kept reference row points at its own text, clauses are never cut with --teacher. Needs numpy: run with
a python that has it (falls back to /opt/venv-train/bin/python; 77 = skipped when none has it)."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    alt = "/opt/venv-train/bin/python"
    if os.path.exists(alt) and sys.prefix != os.path.dirname(os.path.dirname(alt)):  # a venv: compare prefixes
        os.execv(alt, [alt] + sys.argv)
    print("SKIP: no numpy")
    sys.exit(77)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tok_of(text):  # a stand-in teacher tokenization: one id per character, distinct per text
    return [ord(ch) % 60000 for ch in text]


with tempfile.TemporaryDirectory() as d:
    data, teacher = os.path.join(d, "data"), os.path.join(d, "teacher")
    os.makedirs(data)
    os.makedirs(os.path.join(teacher, "pack"))
    clauses, doc_off = [], [0]
    for doc in range(12):
        for c in range(3 + doc % 3):
            clauses.append("doc %d clause %d %s" % (doc, c, "x" * (30 * c)))
        doc_off.append(len(clauses))
    raw = [c.encode() for c in clauses]
    text_off = np.concatenate([[0], np.cumsum([len(b) for b in raw])])
    np.savez(os.path.join(data, "corpus.npz"), text=np.frombuffer(b"".join(raw), np.uint8), text_off=text_off,
             doc_off=np.asarray(doc_off), doc_suite=np.asarray([i % 2 for i in range(12)]),
             doc_val=np.asarray([i % 3 == 0 for i in range(12)]))
    qs = []
    for i in range(40):
        doc = i % 12
        qs.append({"suite": ["a", "b"][doc % 2], "split": ["val", "train"][i % 2], "text": "question %d" % i,
                   "pos": [doc_off[doc] + i % (doc_off[doc + 1] - doc_off[doc])]})
    hs = [{"suite": "a", "split": "train", "text": "heading %d" % i, "pos": [doc_off[i]]} for i in range(12)]
    ict = [{"suite": "b", "split": "train", "text": "ict %d" % i, "pos": [i]} for i in range(len(clauses))]
    json.dump({"questions": qs, "headings": hs, "ict": ict}, open(os.path.join(data, "queries.json"), "w"))
    json.dump([{"title": "doc %d" % i} for i in range(12)], open(os.path.join(data, "docs.json"), "w"))
    json.dump({"suites": ["a", "b"]}, open(os.path.join(data, "meta.json"), "w"))
    texts = {"c": clauses, "q": [x["text"] for x in qs], "h": [x["text"] for x in hs], "i": [x["text"] for x in ict]}
    tok = {}
    for k, ts in texts.items():
        pieces = [np.asarray(tok_of(t), np.int32) for t in ts]
        tok[k + "_tok"] = np.concatenate(pieces)
        tok[k + "_off"] = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
    np.savez(os.path.join(teacher, "tokens.npz"), **tok)
    ref = [("c", 7), ("q", 3), ("i", 20), ("c", 40), ("h", 5)]
    np.savez(os.path.join(teacher, "reference.npz"), kind=np.asarray([k for k, _ in ref]),
             index=np.asarray([i for _, i in ref]), vec=np.arange(len(ref) * 4, dtype=np.float32).reshape(-1, 4))
    json.dump({"storage": "test"}, open(os.path.join(teacher, "meta.json"), "w"))

    tool = [sys.executable, os.path.join(ROOT, "tools", "ssm_train", "tiny_data.py"), "--data", data, "--val", "1",
            "--train", "2", "--others", "1", "--max-ict", "5"]
    out, tout = os.path.join(d, "tiny"), os.path.join(d, "tiny-teacher")
    r = subprocess.run(tool + ["--out", out, "--teacher", teacher, "--teacher-out", tout], capture_output=True,
                       text=True)
    if r.returncode:
        print(r.stdout + r.stderr)
        print("FAIL: tiny_data.py --teacher failed")
        sys.exit(1)
    z = np.load(os.path.join(out, "corpus.npz"))
    q = json.load(open(os.path.join(out, "queries.json")))
    new = {"c": [z["text"][z["text_off"][i]:z["text_off"][i + 1]].tobytes().decode()
                 for i in range(len(z["text_off"]) - 1)],
           "q": [x["text"] for x in q["questions"]], "h": [x["text"] for x in q["headings"]],
           "i": [x["text"] for x in q["ict"]]}
    t = np.load(os.path.join(tout, "tokens.npz"))
    bad = []
    for k, ts in new.items():
        off = t[k + "_off"]
        if len(off) - 1 != len(ts):
            bad.append("%s: %d teacher texts for %d kept" % (k, len(off) - 1, len(ts)))
            continue
        for n, text in enumerate(ts):
            if text not in texts[k]:
                bad.append("%s %d: %r is not a whole original text (cut?)" % (k, n, text))
            elif t[k + "_tok"][off[n]:off[n + 1]].tolist() != tok_of(text):
                bad.append("%s %d: teacher tokens of another text" % (k, n))
    rr = np.load(os.path.join(tout, "reference.npz"))
    if len(rr["kind"]) == 0:
        bad.append("no reference row kept")
    for k, i, v in zip(rr["kind"].tolist(), rr["index"].tolist(), rr["vec"]):
        j = [r for r, (k0, i0) in enumerate(ref) if k0 == k and texts[k][i0] == new[k][i]]
        if not j or not np.array_equal(v, np.arange(j[0] * 4, j[0] * 4 + 4, dtype=np.float32)):
            bad.append("reference %s %d does not point at its own text and vector" % (k, i))
    if not os.path.isdir(os.path.join(tout, "pack")) or not os.path.exists(os.path.join(tout, "meta.json")):
        bad.append("pack/ or meta.json not linked")
    r = subprocess.run(tool + ["--out", out + "2", "--teacher", teacher, "--teacher-out", tout + "2",
                               "--max-clause-chars", "10"], capture_output=True, text=True)
    if r.returncode == 0:
        bad.append("--max-clause-chars with --teacher accepted (cut clauses disagree with the teacher's tokens)")
    if bad:
        print("FAIL:\n" + "\n".join(bad))
        sys.exit(1)
print("OK: tiny_data.py --teacher keeps each kept text's own teacher tokens and reference rows")
