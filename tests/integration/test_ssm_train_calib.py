#!/usr/bin/env python3
"""Issue 14's calibration part and fusion (tools/dev_split.py, tools/ssm_train/train.py):
  - calibration documents are train documents only, about a fifth of them, and a question is calibration only when
    it is not validation and one of its gold documents is calibration;
  - train.fuse: m 0 / w 1 is search/retrieve.c's RRF (ties by clause id), w 0 is BM25's top 10, BM25's top m stay in place;
  - Data.window(prefix=True) reads the document from its start up to the positive when that fits, and the first
    clause + the clauses just before the positive when it does not;
  - the document head's input (issue 27): Data.doc_prefix and doc_vectors.
The train.py parts need numpy and torch (the training venv); without them only dev_split is checked.

usage: test_ssm_train_calib.py [path/to/clauseqa (unused)]"""
import os
import random
import sys

from checks import ROOT, check, failed  # noqa: E402 (tests/integration/checks.py)
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tools", "ssm_train"))
import dev_split  # noqa: E402



def test_split():
    names = ["doc-%d" % i for i in range(4000)]
    val = [n for n in names if dev_split.doc_is_validation("cjrc-dev", n)]
    cal = [n for n in names if dev_split.doc_is_calibration("cjrc-dev", n)]
    check(not set(val) & set(cal), "no document is both validation and calibration")
    share = len(cal) / (len(names) - len(val))
    check(0.15 < share < 0.25, "about a fifth of the train documents are calibration (%.3f)" % share)
    check(dev_split.doc_is_calibration("laws-zh-pdf", cal[0]) == dev_split.doc_is_calibration("laws-zh", cal[0]),
          "laws-zh-pdf splits as laws-zh")
    qc = {"id": "q1", "gold": [{"doc": cal[0]}]}
    qv = {"id": "q2", "gold": [{"doc": cal[0]}, {"doc": val[0]}]}
    qn = {"id": "q3", "gold": []}
    check(dev_split.question_is_calibration("cjrc-dev", qc), "a question on a calibration document is calibration")
    check(not dev_split.question_is_calibration("cjrc-dev", qv), "a question touching validation is not calibration")
    check(not dev_split.question_is_calibration("cjrc-dev", qn), "a question without gold documents is not")


class _Doc:
    """The parts of train.Data that window() reads: one document of clause lengths."""

    def __init__(self, lens):
        import numpy as np
        self.doc_off = np.asarray([0, len(lens)])
        self.clause_doc = np.zeros(len(lens), dtype=np.int64)
        self.lens = lens

    def clen(self, i):
        return self.lens[i] + 1

    def clause(self, i):
        import numpy as np
        return np.full(self.lens[i], 7, dtype=np.int64)


def test_train():
    try:
        import numpy
        import torch
        import train
    except ImportError as e:
        print("skip train.py checks (%s)" % e)
        return
    rng = random.Random(3)
    for _ in range(50):
        pool = list(range(100))
        b = rng.sample(pool, 10)
        d = rng.sample(pool, 50)
        sc = {}
        for lst in (b, d):
            for r, g in enumerate(lst):
                sc[g] = sc.get(g, 0.0) + 1.0 / (60 + r + 1)
        want = sorted(sc, key=lambda g: (-sc[g], g))  # search/retrieve.c: score, then clause id
        check_rrf = train.fuse(b, d, 1.0, 0) == want and set(want) == set(train.rrf([b, d], [1, 1], [10, 50]))
        if not check_rrf:
            break
    check(check_rrf, "fuse with m 0, w 1 is the runtime's RRF (ties by clause id)")
    check(train.fuse(b, d, 0.0, 0)[:10] == b, "fuse with w 0 is BM25's top 10")
    f = train.fuse(b, d, 3.0, 2)
    check(f[:2] == b[:2] and len(set(f)) == len(f), "fuse keeps BM25's top 2 in place, no clause twice")
    # prefix windows: clause lengths 10 tokens (+1 SEP), positive 6
    doc = _Doc([10] * 12)
    ids, _ = train.Data.window(doc, 6, 200, random.Random(0), prefix=True)
    check(ids[:7] == list(range(7)), "a prefix window that fits starts at the document's start (%s)" % ids)
    ids, _ = train.Data.window(doc, 9, 1 + 4 * 11, random.Random(0), prefix=True)
    check(ids == [0, 7, 8, 9], "a prefix window that does not fit: first clause + the clauses before (%s)" % ids)
    ids, _ = train.Data.window(doc, 9, 1 + 4 * 11, random.Random(0))
    check(0 in ids and 9 in ids and len(ids) == 4, "the usual window still holds the first clause and the positive")
    # the document head (issue 27, --doc-head): documents read from their start; vectors over valid tokens only
    doc.doc_off = numpy.asarray([0, 12])
    pre = train.Data.doc_prefix(doc, 0, 1 + 3 * 11)
    check(len(pre) == 3 and all(len(c) == 10 for c in pre), "doc_prefix: the clauses from the start that fit (%d)"
          % len(pre))
    check(len(train.Data.doc_prefix(doc, 0, 5)) == 1, "doc_prefix: at least the first clause")
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 3)
    o = torch.randn(2, 6, 4)
    lens = torch.tensor([6, 3])
    v = train.doc_vectors(None, head, o, lens)
    o2 = o.clone()
    o2[1, 3:] = 100.0  # padding beyond the document must not count
    v2 = train.doc_vectors(None, head, o2, lens)
    want = head(torch.cat([o[1, :3].mean(0), o[1, 2]]))
    check(torch.allclose(v.norm(dim=1), torch.ones(2)) and torch.allclose(v, v2) and
          torch.allclose(v[1], want / want.norm()), "doc_vectors: unit vectors of [mean; last] over the valid tokens")
    # --init's document head: its exported file when the folder has one, else the clause pooling
    import tempfile

    class _Pooled:
        pool = torch.nn.Linear(8, 3)
    d = tempfile.mkdtemp(prefix="cq-dochead-")
    mine = torch.nn.Linear(8, 3)
    check(train.init_doc_head(mine, _Pooled, d) == "the clause pooling" and torch.equal(mine.weight, _Pooled.pool.weight),
          "init_doc_head: no file in --init, the clause pooling")
    saved = torch.nn.Linear(8, 3)

    class _Args:
        out, doc_window, doc_head, doc_tau = d, 64, 0.5, 0.05
    train.export_doc_head(saved, _Args)
    src = train.init_doc_head(mine, _Pooled, d)
    check(src.endswith("doc_head.safetensors") and torch.equal(mine.weight, saved.weight.to(torch.bfloat16).float())
          and torch.equal(mine.bias, saved.bias.to(torch.bfloat16).float()), "init_doc_head: --init's exported head")


if __name__ == "__main__":
    test_split()
    test_train()
    print("%d failed" % failed())
    sys.exit(1 if failed() else 0)
