#!/usr/bin/env python3
"""Trains the answer model's LoRA adapter (issue 13) on the GPU box and writes it as `clauseqa-lora-v1`
(docs/ANSWERS.md): OUT/adapter.safetensors + OUT/adapter.json (manifest inside).

The base is the shipped GGUF, dequantized by transformers (fp32 master weights, frozen); LoRA (our lora.py) on every
attention and MLP projection of the 18 layers; bf16 autocast; loss on completion tokens only (logits only there:
the 262k-row output matrix is never applied to prompt positions); tasks drawn by mixture weights, examples within a
task by per-source weights; batches grouped by length; AdamW, linear warm-up then cosine to --min-lr-ratio.
--budget SECONDS times --time-steps steps after --time-after, then fixes the step count (written to the manifest,
so --steps N repeats the same schedule). Seeds fixed (--seed: Python, NumPy, torch, the batch sampler).

The adapter is written as soon as training ends; then a validation on prepare.py's validation examples (the dev
suites' validation parts, passages as retrieval gave them): copy-constrained greedy answers as app/generate_answer.c
decodes (char-F1 / EM per shared/eval/FORMAT.md, abstention on unanswerable, false abstention), completion loss
before / after, and rerank hit@1 of each question's candidates by logit(yes) - logit(no) against the retrieval order;
then adapter.json is rewritten with the scores.

  python3 tools/decoder_train/train.py --data .device/dec_data --gguf /tmp/model/gemma-3-270m-q4_k_m.gguf \
      --out .device/dec_run --budget 300 --commit $(git rev-parse --short HEAD)
Tiny CPU check: --device cpu --steps 2 --batch 2 --val-limit 4 --max-len 512
"""
import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import base as BASE  # noqa: E402
import cqprompt as P  # noqa: E402
import lora as L  # noqa: E402
import refusal_threshold as RT  # noqa: E402

DEFAULT_MIX = "answer=0.44,abstain=0.12,abstain_syn=0.12,abstain_heldout=0.08,relevance=0.24"
DEFAULT_SOURCE_WEIGHTS = ("c3_train_extractive=0.5,cail2021_argpair_retrieval=0.5,lawyer_llama_query2article=0.5,"
                          "cuad-dev=2,contracts-en-dev=1.5,policy-zh-dev=2")
T0 = time.time()


def log(*a):
    print("[%6.1f s]" % (time.time() - T0), *a, flush=True)


def parse_weights(s):
    out = {}
    for item in (s or "").split(","):
        if item.strip():
            k, v = item.split("=")
            out[k.strip()] = float(v)
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 22), b""):
            h.update(b)
    return h.hexdigest()


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


# ---------------------------------------------------------------- data

class Data:
    def __init__(self, folder, gguf, max_len, max_completion):
        path = os.path.join(folder, "tokens.npz")
        if not os.path.exists(path):
            log("no tokens.npz in %s: tokenizing here (pack.py)" % folder)
            import pack
            pack.pack(folder, gguf, log=log)
        z = np.load(path)
        self.meta = json.loads(str(z["meta"]))
        self.z = z
        # NpzFile reads an array from the file at every access: keep the validation arrays
        self.va = {k: np.asarray(z[k]) for k in ("va_p", "va_p_off", "va_c", "va_c_off", "vr_p", "vr_p_off", "vr_q_off",
                                                 "ca_p", "ca_p_off", "ca_c", "ca_c_off") if k in z}
        self.tasks, self.sources = self.meta["tasks"], self.meta["sources"]
        self.tr_p, self.tr_p_off, self.tr_c, self.tr_c_off = z["tr_p"], z["tr_p_off"], z["tr_c"], z["tr_c_off"]
        self.task, self.source = z["tr_task"].astype(np.int64), z["tr_source"].astype(np.int64)
        self.max_completion = max_completion
        plen = np.diff(self.tr_p_off)
        clen = np.minimum(np.diff(self.tr_c_off), max_completion)
        self.length = plen + clen
        self.ok = self.length <= max_len
        self.n = len(self.task)
        ok = np.asarray(z["vocab_ok"]).astype(bool)
        voc, off = z["vocab"], z["vocab_off"]
        self.vocab = [bytes(voc[off[i]:off[i + 1]].astype(np.uint8)) if ok[i] else None for i in range(len(ok))]
        self.val_answer = read_jsonl(os.path.join(folder, "val_answer.jsonl"))
        self.val_rerank = read_jsonl(os.path.join(folder, "val_rerank.jsonl"))
        cal = os.path.join(folder, "cal_answer.jsonl")
        self.cal_answer = read_jsonl(cal) if os.path.exists(cal) and "ca_p" in self.va else []
        self.stop_ids = self.meta.get("stop_ids") or ([self.meta["eos"]] + ([self.meta["end_of_turn"]] if
                                                                            self.meta.get("end_of_turn") is not None
                                                                            else []))
        dm = os.path.join(folder, "meta.json")
        self.data_meta = json.load(open(dm, encoding="utf-8")) if os.path.exists(dm) else {}

    def example(self, i):
        p = self.tr_p[self.tr_p_off[i]:self.tr_p_off[i + 1]]
        c = self.tr_c[self.tr_c_off[i]:self.tr_c_off[i + 1]][:self.max_completion]
        return p, c

    def val_prompt(self, i, part="va"):
        """(prompt ids, completion ids) of validation answer i (part "ca": of calibration answer i)."""
        z = self.va
        p, po, c, co = z[part + "_p"], z[part + "_p_off"], z[part + "_c"], z[part + "_c_off"]
        return p[po[i]:po[i + 1]], c[co[i]:co[i + 1]]

    def answer_rows(self, part):
        return self.val_answer if part == "va" else self.cal_answer

    def rerank_prompts(self, q):
        z = self.va
        a, b = z["vr_q_off"][q], z["vr_q_off"][q + 1]
        return [z["vr_p"][z["vr_p_off"][j]:z["vr_p_off"][j + 1]] for j in range(a, b)]


class Sampler:
    """Tasks by mixture weight, examples within a task by source weight; batches of similar length."""

    def __init__(self, data, mix, source_weights, batch, seed, group=16):
        self.d, self.batch, self.group = data, batch, group
        self.rng = np.random.default_rng(seed)
        self.task_ids, self.task_p, self.pools = [], [], []
        self.effective = {}
        for t, name in enumerate(data.tasks):
            w = mix.get(name, 0.0)
            idx = np.nonzero((data.task == t) & data.ok)[0]
            if w <= 0 or not len(idx):
                continue
            sw = np.array([source_weights.get(data.sources[s], 1.0) for s in data.source[idx]], np.float64)
            if sw.sum() <= 0:
                continue
            self.task_ids.append(t)
            self.task_p.append(w)
            self.pools.append((idx, sw / sw.sum()))
        tp = np.array(self.task_p)
        self.task_p = tp / tp.sum()
        for t, p, (idx, w) in zip(self.task_ids, self.task_p, self.pools):
            per_src = {}
            for s, ww in zip(data.source[idx], w):
                per_src[data.sources[s]] = per_src.get(data.sources[s], 0.0) + ww * p
            self.effective[data.tasks[t]] = {"share": round(float(p), 4), "examples": int(len(idx)),
                                             "sources": {k: round(v, 4) for k, v in sorted(per_src.items())}}
        self.queue = []

    def next(self):
        if not self.queue:
            n = self.batch * self.group
            tasks = self.rng.choice(len(self.task_ids), size=n, p=self.task_p)
            ex = np.empty(n, np.int64)
            for k in range(len(self.task_ids)):
                m = tasks == k
                if m.any():
                    idx, w = self.pools[k]
                    ex[m] = self.rng.choice(idx, size=int(m.sum()), p=w)
            ex = ex[np.argsort(self.d.length[ex], kind="stable")]
            batches = [ex[i:i + self.batch] for i in range(0, n, self.batch)]
            order = self.rng.permutation(len(batches))
            self.queue = [batches[i] for i in order]
        return self.queue.pop()


def collate(data, idx, device, pad=0):
    """input ids (B, T) of prompt + completion minus the last token, the attention mask, and the loss positions:
    (batch index, position, target token, example slot) of every completion token."""
    seqs, spans = [], []
    for i in idx:
        p, c = data.example(int(i))
        s = np.concatenate([p, c])
        seqs.append(s[:-1])
        spans.append((len(p) - 1, len(s) - 1, s))
    T = max(len(s) for s in seqs)
    ids = np.full((len(seqs), T), pad, np.int64)
    mask = np.zeros((len(seqs), T), np.int64)
    bi, ti, tg, slot = [], [], [], []
    for b, (s, (a, e, full)) in enumerate(zip(seqs, spans)):
        ids[b, :len(s)] = s
        mask[b, :len(s)] = 1
        for t in range(a, e):
            bi.append(b)
            ti.append(t)
            tg.append(int(full[t + 1]))
            slot.append(b)
    f = lambda x: torch.tensor(np.asarray(x, np.int64), device=device)  # noqa: E731
    return f(ids), f(mask), f(bi), f(ti), f(tg), f(slot)


# ---------------------------------------------------------------- model

def load_base(gguf, attn, device, loader="hf", dtype=torch.float32):
    """The base dequantized: loader "hf" is transformers' GGUF path, "fast" base.load_fast (qwen2: all cores)."""
    from transformers import AutoModelForCausalLM
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
    d, f = os.path.split(os.path.abspath(gguf))
    t = time.time()
    if loader == "fast":
        model = BASE.load_fast(gguf, dtype=dtype, log=log, attn=attn)
    else:
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=dtype, attn_implementation=attn)
    log("base model loaded from %s in %.1f s (%s, %s loader, attention %s)" % (f, time.time() - t,
                                                                             type(model).__name__, loader, attn))
    model.config.use_cache = False
    return model.to(device)


def check_orientation(model, gguf, layers=(0,), projections=("q_proj", "o_proj", "down_proj"), relative=False):
    """The HF projection weights are the GGUF tensors (out, in), dequantized: the adapter's A (r, in) / B (out, r)
    then apply to the runtime's weights as they are. Returns the largest difference seen (relative: |diff| / |w|
    where |w| > 1e-3, for a bf16 base)."""
    from gguf.quants import dequantize
    r = L.gguf_reader(gguf)
    by_name = {t.name: t for t in r.tensors}
    worst = 0.0
    for l in layers:
        layer = L.decoder_layers(model)[l]
        for hf in projections:
            g = L.HF_TO_GGUF[hf]
            parent = layer.self_attn if hf in L.ATTN else layer.mlp
            m = getattr(parent, hf)
            w = (m.base if isinstance(m, L.LoRALinear) else m).weight.detach().float().cpu().numpy()
            t = by_name["blk.%d.%s.weight" % (l, g)]
            gw = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(w.shape[0], -1)
            if gw.shape != w.shape:
                raise SystemExit("orientation check: %s is %s in the GGUF, %s in the model" % (t.name, gw.shape,
                                                                                               w.shape))
            d = np.abs(gw - w)
            if relative:
                d = np.where(np.abs(gw) > 1e-3, d / np.maximum(np.abs(gw), 1e-3), 0.0)
            worst = max(worst, float(d.max()))
    return worst


def head_logits(model, h):
    logits = model.lm_head(h)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def completion_loss(model, batch, autocast, norm="example"):
    ids, mask, bi, ti, tg, slot = batch
    with autocast():
        h = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        logits = head_logits(model, h[bi, ti])
    tok = F.cross_entropy(logits.float(), tg, reduction="none")
    if norm == "token":
        return tok.mean(), tok
    B = ids.shape[0]
    s = torch.zeros(B, device=tok.device).index_add_(0, slot, tok)
    n = torch.zeros(B, device=tok.device).index_add_(0, slot, torch.ones_like(tok))
    return (s / n.clamp(min=1)).mean(), tok


def completion_sums(model, batch, autocast):
    """Per-example mean token losses (a tensor, for the example-normalized loss) and the token losses of a
    micro-batch."""
    ids, mask, bi, ti, tg, slot = batch
    with autocast():
        h = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        logits = head_logits(model, h[bi, ti])
    tok = F.cross_entropy(logits.float(), tg, reduction="none")
    B = ids.shape[0]
    s = torch.zeros(B, device=tok.device).index_add_(0, slot, tok)
    n = torch.zeros(B, device=tok.device).index_add_(0, slot, torch.ones_like(tok))
    return s / n.clamp(min=1), tok


def micro_batches(data, idx, micro_tokens):
    """idx cut into micro-batches whose padded size (examples x longest) stays within micro_tokens (0: one batch);
    one example per micro-batch at least."""
    if not micro_tokens:
        return [np.asarray(idx)]
    order = sorted((int(i) for i in idx), key=lambda i: -int(data.length[i]))
    out, cur = [], []
    for i in order:
        longest = int(data.length[cur[0]]) if cur else int(data.length[i])
        if cur and (len(cur) + 1) * longest > micro_tokens:
            out.append(np.asarray(cur))
            cur = []
        cur.append(i)
    if cur:
        out.append(np.asarray(cur))
    return out


def _grads_finite(params):
    """True when every gradient of params is finite (None counts as zero)."""
    gs = [p.grad for p in params if p.grad is not None]
    if not gs:
        return True
    return bool(torch.isfinite(torch.stack(torch._foreach_norm(gs))).all())


def _math_attention():
    """A context running scaled_dot_product_attention on the plain math backend (a retry of a micro-batch whose
    fused-kernel forward or backward gave non-finite values: see train_step)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([SDPBackend.MATH])


def train_step(model, data, idx, dev, autocast, norm, micro_tokens, params=None, report=None):
    """One optimizer step's forward and backward over the batch idx in micro-batches (gradients accumulate; the loss
    is the batch's: mean of the examples' mean token losses, or the mean token loss). Returns (loss, [(example,
    its mean token loss)], [skipped examples]).

    Each micro-batch's loss and gradients are checked before they join the step's: a non-finite one is done again
    with the math attention backend (on CUDA: the fused SDPA kernels have given NaN gradients on valid padding
    masks), then example by example; an example still non-finite on its own is skipped and reported (report(msg)),
    and the step's loss and gradients are those of the other examples (renormalized to them)."""
    if params is None:
        params = [p for p in model.parameters() if p.requires_grad]
    report = report or log
    idx = np.asarray(idx)
    clen = {int(i): int(min(len(data.example(int(i))[1]), data.max_completion)) for i in idx}
    n_tok = sum(clen[int(i)] for i in idx) if norm == "token" else 0
    acc = [None] * len(params)
    total, per, skipped = 0.0, [], []

    def one(mb, math_attn=False):
        """Forward + backward of micro-batch mb into fresh gradients: (loss, ex_mean list) when the loss and the
        gradients are finite, else None (the gradients are then dropped)."""
        for p in params:
            p.grad = None
        batch = collate(data, mb, dev)
        ctx = _math_attention() if math_attn else contextlib.nullcontext()
        with ctx:
            ex_mean, tok = completion_sums(model, batch, autocast)
            loss = tok.sum() / max(n_tok, 1) if norm == "token" else ex_mean.sum() / len(idx)
            if not torch.isfinite(loss):
                return None, ex_mean.detach().tolist()
            loss.backward()
        if not _grads_finite(params):
            return None, ex_mean.detach().tolist()
        return float(loss.detach()), ex_mean.detach().tolist()

    def keep(mb, lv, ex):
        nonlocal total
        for k, p in enumerate(params):
            if p.grad is not None:
                acc[k] = p.grad if acc[k] is None else acc[k].add_(p.grad)
        total += lv
        per.extend(zip([int(i) for i in mb], ex))

    for mb in micro_batches(data, idx, micro_tokens):
        lv, ex = one(mb)
        if lv is not None:
            keep(mb, lv, ex)
            continue
        shape = (len(mb), max(int(data.length[int(i)]) for i in mb) - 1)
        what = "loss" if not all(math.isfinite(v) for v in ex) else "gradients"
        if dev.type == "cuda":
            lv, ex2 = one(mb, math_attn=True)
            report("non-finite %s in a micro-batch %s (examples %s, per-example losses %s); math attention retry: %s"
                   % (what, shape, [int(i) for i in mb], ["%.4g" % v for v in ex], "finite" if lv is not None else
                      "non-finite"))
            if lv is not None:
                keep(mb, lv, ex2)
                continue
        else:
            report("non-finite %s in a micro-batch %s (examples %s, per-example losses %s)"
                   % (what, shape, [int(i) for i in mb], ["%.4g" % v for v in ex]))
        for i in mb:          # example by example: keep the finite ones
            single = np.asarray([i])
            lv, ex1 = one(single, math_attn=dev.type == "cuda")
            if lv is None:
                p_, c_ = data.example(int(i))
                report("example %d skipped: non-finite alone (prompt %d tokens, completion %d, loss %s)"
                       % (int(i), len(p_), len(c_), ex1))
                skipped.append(int(i))
            else:
                keep(single, lv, ex1)
    for p, a in zip(params, acc):
        p.grad = a
    if skipped:
        # renormalize to the examples kept (the loss was divided by the whole batch's examples / tokens)
        kept = (n_tok - sum(clen[i] for i in skipped)) if norm == "token" else len(idx) - len(skipped)
        whole = n_tok if norm == "token" else len(idx)
        scale = whole / kept if kept > 0 else 0.0
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale)
        total *= scale
    return total, per, skipped


# ---------------------------------------------------------------- validation

def _strip_end(b):
    """app/generate_answer.c: whole characters, then no dangling space, comma or Chinese pause punctuation."""
    while True:
        try:
            s = b.decode("utf-8")
            break
        except UnicodeDecodeError:
            b = b[:-1]
    changed = True
    while changed:
        changed = False
        s2 = s.rstrip(" ,")
        for d in ("，", "、", "；", "："):
            while s2.endswith(d):
                s2 = s2[:-1]
        if s2 != s:
            s, changed = s2, True
    return s


class CopyConstraint:
    """Greedy, copy-constrained decoding as app/generate_answer.c does it, as a transformers logits processor: of the
    --candidates best tokens the first whose piece keeps the answer a verbatim span of a shown (flattened) passage,
    a prefix of the refusal phrase (when the row's words hold it) or of a verdict word wins; the end of text (or a
    newline piece) ends a non-empty answer; nothing admissible ends it too. At the first step each row's
    p_refuse is what the runtime calls refusal_p: the probability of the candidates whose piece, leading spaces
    dropped, starts the refusal phrase."""

    def __init__(self, rows, vocab, stop_ids, n_cand):
        self.rows, self.vocab, self.stop, self.n_cand = rows, vocab, set(stop_ids), n_cand
        self.stop_id = stop_ids[0]
        self.step = 0

    def admissible(self, st, a):
        if any(w.startswith(a) for w in st["words"]):
            return True
        return any(a in f for f in st["flat"])

    def __call__(self, input_ids, scores):
        B = scores.shape[0]
        top = torch.topk(scores, min(self.n_cand, scores.shape[-1]), dim=-1).indices.tolist()
        if self.step == 0:
            probs = torch.softmax(scores.float(), dim=-1)
            for b in range(B):
                st = self.rows[b]
                p = 0.0
                for tid in top[b]:
                    piece = self.vocab[tid] if tid < len(self.vocab) else None
                    piece = piece.lstrip(b" ") if piece else b""
                    if piece and st["refusal"].startswith(piece):
                        p += float(probs[b, tid])
                st["p_refuse"] = p
        self.step += 1
        out = torch.full_like(scores, float("-inf"))
        for b in range(B):
            st = self.rows[b]
            pick = None
            if not st["done"]:
                for tid in top[b]:
                    if tid in self.stop:
                        if not st["ans"]:
                            continue
                        break
                    piece = self.vocab[tid] if tid < len(self.vocab) else None
                    if not piece:
                        continue
                    if b"\n" in piece:
                        if not st["ans"]:
                            continue
                        break
                    p = piece.lstrip(b" ") if not st["ans"] else piece
                    if not p:
                        continue
                    cand = st["ans"] + p
                    if self.admissible(st, cand):
                        pick = tid
                        st["ans"] = cand
                        st["n"] += 1
                        break
            if pick is None:
                st["done"] = True
                out[b, self.stop_id] = 0.0
            else:
                out[b, pick] = 0.0
                if st["ans"] == st["refusal"]:
                    st["done"] = True
        return out


def left_pad(seqs, pad, device):
    T = max(len(s) for s in seqs)
    ids = np.full((len(seqs), T), pad, np.int64)
    mask = np.zeros((len(seqs), T), np.int64)
    for b, s in enumerate(seqs):
        ids[b, T - len(s):] = s
        mask[b, T - len(s):] = 1
    return torch.tensor(ids, device=device), torch.tensor(mask, device=device)


def right_pad(seqs, pad, device):
    T = max(len(s) for s in seqs)
    ids = np.full((len(seqs), T), pad, np.int64)
    mask = np.zeros((len(seqs), T), np.int64)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = s
        mask[b, :len(s)] = 1
    return torch.tensor(ids, device=device), torch.tensor(mask, device=device)


@torch.no_grad()
def val_loss(model, data, rows, autocast, device, batch=16):
    """Mean completion NLL (per token) of the validation answer examples that have a target."""
    items = [i for i in rows if len(data.val_prompt(i)[1])]
    tot, n = 0.0, 0
    for k in range(0, len(items), batch):
        seqs, pos, tgt, bi = [], [], [], []
        for b, i in enumerate(items[k:k + batch]):
            p, c = data.val_prompt(i)
            s = np.concatenate([p, c])
            seqs.append(s[:-1])
            for t in range(len(p) - 1, len(s) - 1):
                bi.append(b)
                pos.append(t)
                tgt.append(int(s[t + 1]))
        ids, mask = right_pad(seqs, 0, device)
        with autocast():
            h = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
            lg = head_logits(model, h[torch.tensor(bi, device=device), torch.tensor(pos, device=device)])
        tot += float(F.cross_entropy(lg.float(), torch.tensor(tgt, device=device), reduction="sum"))
        n += len(tgt)
    return tot / max(n, 1)


@torch.no_grad()
def val_answers(model, data, rows, autocast, device, batch, max_new, n_cand, deadline, part="va"):
    """Copy-constrained greedy answers with the refusal masked, and each question's refusal_p: {row: (answer,
    refusal_p, tokens)}. With refusal threshold t the runtime refuses when refusal_p >= t (for t >= 0.5, up to a
    refusal whose probability is split over several first tokens) and gives this answer otherwise, so one pass scores
    every t."""
    from transformers import LogitsProcessorList
    meta = data.meta
    stop_ids = list(data.stop_ids)
    answers = data.answer_rows(part)
    order = sorted(rows, key=lambda i: len(data.val_prompt(i, part)[0]))
    preds = {}
    model.config.use_cache = True
    for k in range(0, len(order), batch):
        if deadline and time.time() > deadline:
            log("validation: deadline, %d of %d answers done" % (len(preds), len(order)))
            break
        chunk = order[k:k + batch]
        states = []
        for i in chunk:
            r = answers[i]
            lang = r["lang"]
            words = [P.VERDICT[(lang, True)].lstrip(" "), P.VERDICT[(lang, False)].lstrip(" ")]
            states.append({"flat": [f.encode("utf-8") for f in r["flat"]], "words": [w.encode() for w in words],
                           "refusal": P.REFUSAL[lang].lstrip(" ").encode(),
                           "refusal_id": meta["first_tokens"]["refusal_" + lang],
                           "ans": b"", "done": False, "n": 0})
        ids, mask = left_pad([data.val_prompt(i, part)[0] for i in chunk], 0, device)
        proc = CopyConstraint(states, data.vocab, stop_ids, n_cand)
        with autocast():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                           logits_processor=LogitsProcessorList([proc]), eos_token_id=stop_ids,
                           pad_token_id=0)
        for i, st in zip(chunk, states):
            preds[i] = (_strip_end(st["ans"]), st["p_refuse"], st["n"])
    model.config.use_cache = False
    return preds


def scored_rows(data, preds, part="va"):
    """One row per decoded question: its suite, whether answerable, the char-F1 / EM of the answer given when it may
    not refuse (FORMAT.md; a verdict word on a yes/no question scores as YES / NO), refusal_p."""
    out = []
    answers = data.answer_rows(part)
    for i, (ans, p_ref, n_tok) in sorted(preds.items()):
        r = answers[i]
        lang = r["lang"]
        verdict = None
        if ans == P.VERDICT[(lang, True)].lstrip(" "):
            verdict = "YES"
        elif ans == P.VERDICT[(lang, False)].lstrip(" "):
            verdict = "NO"
        pred = verdict if (verdict and r["qtype"] == "yes_no") else ans
        refs = r["refs"]
        has = bool(r["answerable"] and refs)
        out.append({"i": i, "id": r["id"], "source": r["source"], "answerable": r["answerable"], "has_answers": has,
                    "f1": max(P.char_f1(pred, a) for a in refs) if has else 0.0,
                    "em": float(any(P.norm(pred) == P.norm(a) for a in refs) and bool(pred)) if has else 0.0,
                    "p": p_ref, "gold_shown": r.get("gold_shown"), "answer": ans, "refs": refs[:2]})
    return out


def score_answers(rows, t):
    """Per suite at refusal threshold t (refuse when refusal_p >= t): F1 / EM over answerable questions with
    references (a refusal scores 0), F1 where the gold passage was shown, abstention on unanswerable, false
    abstention on answerable, and the refusal AUC (refusal_p of unanswerable vs answerable); samples."""
    per = {}
    examples = []
    for k, r in enumerate(rows):
        refused = r["p"] >= t
        s = per.setdefault(r["source"], {"n": 0, "f1": [], "em": [], "f1_shown": [], "abst": [], "false_abst": [],
                                         "p_ref_unans": [], "p_ref_ans": []})
        s["n"] += 1
        if r["answerable"]:
            s["false_abst"].append(refused)
            s["p_ref_ans"].append(r["p"])
            if r["has_answers"]:
                f1 = 0.0 if refused else r["f1"]
                s["f1"].append(f1)
                s["em"].append(0.0 if refused else r["em"])
                if r.get("gold_shown"):
                    s["f1_shown"].append(f1)
        else:
            s["abst"].append(refused)
            s["p_ref_unans"].append(r["p"])
        if len(examples) < 40 or r["i"] % 25 == 0:
            examples.append({"id": r["id"], "answer": "(refused)" if refused else r["answer"], "refs": r["refs"],
                             "answerable": r["answerable"], "refusal_p": round(r["p"], 4)})
    mean = lambda x: round(float(np.mean(x)), 4) if len(x) else None  # noqa: E731
    out = {}
    for src, s in sorted(per.items()):
        out[src] = {"n": s["n"], "f1": mean(s["f1"]), "em": mean(s["em"]), "n_f1": len(s["f1"]),
                    "f1_gold_shown": mean(s["f1_shown"]), "n_gold_shown": len(s["f1_shown"]),
                    "abstain_unanswerable": mean(s["abst"]), "n_unanswerable": len(s["abst"]),
                    "false_abstention": mean(s["false_abst"]),
                    "refusal_auc": auc(s["p_ref_unans"], s["p_ref_ans"])}
    return out, examples


THRESHOLD_GRID = [0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 1.01]


def choose_threshold(rows, grid=THRESHOLD_GRID):
    """refusal_threshold.py's objective (SQuAD 2.0-style utility, the mean over suites) on the calibration rows
    (train parts held out of training): (best t, [[t, objective, {suite: [score, falseA, abst]}]])."""
    suites = {}
    for r in rows:
        suites.setdefault(r["source"], []).append(r)
    curve, best = [], None
    for t in grid:
        per = {n: RT.score(v, t) for n, v in sorted(suites.items())}
        vals = [x["score"] for x in per.values() if x["score"] is not None]
        obj = float(np.mean(vals)) if vals else 0.0
        curve.append([t, round(obj, 4), {n: [None if x[k] is None else round(x[k], 4) for k in ("score", "falseA", "abst")]
                                         for n, x in per.items()}])
        if best is None or obj > best[1]:
            best = (t, obj)
    return (best[0] if best else None), curve


def auc(pos, neg):
    if not pos or not neg:
        return None
    pos, neg = np.asarray(pos), np.asarray(neg)
    return round(float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                       / (len(pos) * len(neg))), 4)


@torch.no_grad()
def relevance_scores(model, prompts, yes_no, autocast, device):
    """logit(yes) - logit(no) at the last position of each prompt (token ids), the reranker's score."""
    ids, mask = right_pad(prompts, 0, device)
    last = torch.tensor([len(p) - 1 for p in prompts], device=device)
    with autocast():
        h = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        hl = h[torch.arange(len(prompts), device=device), last]
        y = torch.tensor([a for a, _ in yes_no], device=device)
        n = torch.tensor([b for _, b in yes_no], device=device)
        lg = head_logits(model, hl)
    lg = lg.float()
    r = torch.arange(len(prompts), device=device)
    return (lg[r, y] - lg[r, n]).tolist()


@torch.no_grad()
def val_rerank(model, data, autocast, device, batch, limit, deadline):
    ft = data.meta["first_tokens"]
    per = {}
    qs = list(range(len(data.val_rerank)))[:limit] if limit else range(len(data.val_rerank))
    items = []
    for q in qs:
        r = data.val_rerank[q]
        for j, p in enumerate(data.rerank_prompts(q)):
            items.append((q, j, p))
    items.sort(key=lambda x: len(x[2]))
    scores = {}
    for k in range(0, len(items), batch):
        if deadline and time.time() > deadline:
            log("rerank validation: deadline")
            break
        chunk = items[k:k + batch]
        yn = [(ft["rel_%s_yes" % data.val_rerank[q]["lang"]], ft["rel_%s_no" % data.val_rerank[q]["lang"]])
              for q, _, _ in chunk]
        sc = relevance_scores(model, [c[2] for c in chunk], yn, autocast, device)
        for (q, j, _), v in zip(chunk, sc):
            scores[(q, j)] = v
    for q in qs:
        r = data.val_rerank[q]
        n = len(r["hits"])
        if not n or any((q, j) not in scores for j in range(n)):
            continue
        sc = [scores[(q, j)] for j in range(n)]
        best = int(np.argmax(sc))
        s = per.setdefault(r["source"], {"n": 0, "base": [], "rerank": [], "acc": []})
        s["n"] += 1
        s["base"].append(float(r["hits"][0]))
        s["rerank"].append(float(r["hits"][best]))
        s["acc"].extend(float((x > 0) == h) for x, h in zip(sc, r["hits"]))
    return {src: {"n": s["n"], "hit1_retrieval": round(float(np.mean(s["base"])), 4),
                  "hit1_rerank": round(float(np.mean(s["rerank"])), 4),
                  "pair_accuracy": round(float(np.mean(s["acc"])), 4)} for src, s in sorted(per.items())}


def print_table(answers, rerank, loss_before, loss_after):
    log("validation (dev suites' validation parts, passages as retrieved; copy-constrained greedy)")
    print("  %-18s %5s %7s %7s %9s %9s %8s %7s" % ("suite", "n", "F1", "EM", "F1(gold)", "abst(un)", "falseA",
                                                   "refAUC"))
    f = lambda x: "-" if x is None else "%.3f" % x  # noqa: E731
    for src, s in answers.items():
        print("  %-18s %5d %7s %7s %9s %9s %8s %7s" % (src, s["n"], f(s["f1"]), f(s["em"]), f(s["f1_gold_shown"]),
                                                       f(s["abstain_unanswerable"]), f(s["false_abstention"]),
                                                       f(s["refusal_auc"])))
    print("  %-18s %5s %14s %12s %9s" % ("rerank", "n", "hit@1 retr.", "hit@1 rerank", "pair acc"))
    for src, s in rerank.items():
        print("  %-18s %5d %14.3f %12.3f %9.3f" % (src, s["n"], s["hit1_retrieval"], s["hit1_rerank"],
                                                   s["pair_accuracy"]))
    print("  completion loss on validation targets: before %s, after %s" % (f(loss_before), f(loss_after)),
          flush=True)


# ---------------------------------------------------------------- main

def oom_at_floor(args):
    """True the second time the micro-batches are down to one example (then the step cannot fit at all)."""
    args._oom_floor = getattr(args, "_oom_floor", 0) + 1
    return args._oom_floor > 1


def load_init(loras, folder, rank, alpha, base_sha):
    """--init: the LoRA layers start from the adapter in folder; what the manifest records of it."""
    from safetensors.torch import load_file
    path = os.path.join(folder, "adapter.safetensors")
    try:
        with open(os.path.join(folder, "adapter.json"), encoding="utf-8") as f:
            doc = json.load(f)
        tensors = load_file(path)
    except (OSError, ValueError) as e:
        raise SystemExit("--init %s: %s" % (folder, e))
    want = (doc.get("base") or {}).get("sha256")
    if want != base_sha:
        raise SystemExit("--init %s: the adapter is for base sha256 %s, this base is %s" % (folder, want, base_sha))
    try:
        n = L.load_into(loras, doc, tensors, rank, alpha)
    except ValueError as e:
        raise SystemExit("--init %s: %s" % (folder, e))
    m = doc.get("manifest") or {}
    return {"folder": os.path.abspath(folder), "sha256": sha256_file(path), "tensors": n, "steps": m.get("steps"),
            "commit": m.get("commit"), "storage": (m.get("storage") or {}).get("dtype") or m.get("export_dtype"),
            "hyper_parameters": m.get("hyper_parameters"), "data_files": (m.get("data") or {}).get("files"),
            "init": m.get("init")}


def lr_at(step, total, peak, warmup, min_ratio):
    if step < warmup:
        return peak * (step + 1) / warmup
    if not total:
        return peak
    prog = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * prog)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=".device/dec_data")
    ap.add_argument("--base", "--gguf", dest="gguf", default="data/models/gemma-3-270m-q4_k_m.gguf",
                    help="the base GGUF (gemma3 or qwen2; the architecture comes from its metadata)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=0, help="LoRA rank (0: the architecture's default, base.DEFAULT_RANK: "
                                                        "gemma3 32, qwen2 16)")
    ap.add_argument("--loader", choices=["auto", "hf", "fast"], default="auto",
                    help="auto: fast (base.load_fast, all cores) for qwen2, transformers' GGUF path otherwise")
    ap.add_argument("--base-dtype", choices=["fp32", "bf16"], default="fp32",
                    help="the frozen base's weights (fp32: bf16 autocast casts them per step)")
    ap.add_argument("--micro-tokens", type=int, default=0,
                    help="gradient accumulation: micro-batches of at most this many padded tokens (0: the whole batch)")
    ap.add_argument("--max-skipped", type=int, default=64,
                    help="examples left out of their steps for a non-finite loss or gradients (reported with their "
                         "ids) before the run stops")
    ap.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing (less memory, ~1.5x compute)")
    ap.add_argument("--max-adapter-mb", type=float, default=50.0,
                    help="refuse a rank whose adapter file (F16) would exceed this")
    ap.add_argument("--alpha", type=float, default=None, help="LoRA alpha (default 2 x rank)")
    ap.add_argument("--init", default="", help="folder of an adapter (adapter.json + adapter.safetensors: F32/F16/BF16 "
                                               "or int8 rows) to start the LoRA factors from instead of A random, B 0; "
                                               "its rank, alpha and base must be this run's")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=1280, help="longest example (tokens); longer ones are not drawn")
    ap.add_argument("--max-completion", type=int, default=192)
    ap.add_argument("--mix", default=DEFAULT_MIX, help="task mixture weights")
    ap.add_argument("--source-weights", default=DEFAULT_SOURCE_WEIGHTS, help="per-source weights within a task")
    ap.add_argument("--loss-norm", choices=["example", "token"], default="example")
    ap.add_argument("--steps", type=int, default=0, help="exact step count (repeats); 0: --budget decides")
    ap.add_argument("--budget", type=float, default=300, help="training seconds when --steps is 0")
    ap.add_argument("--train-until", type=float, default=0, help="epoch seconds: the budget ends there at the "
                                                                 "latest (the device script's deadline less the "
                                                                 "validation's time)")
    ap.add_argument("--time-after", type=int, default=5, help="steps before the timing starts")
    ap.add_argument("--time-steps", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--attn", default="sdpa", help="attention implementation (sdpa, eager)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--export-dtype", default="auto", choices=["auto", "f32", "f16", "bf16"])
    ap.add_argument("--val-limit", type=int, default=0, help="validation answers / rerank questions at most")
    ap.add_argument("--cal-limit", type=int, default=0, help="calibration answers at most")
    ap.add_argument("--refusal-min-p", type=float, default=0,
                    help="the refusal threshold to report the validation at (0: the one chosen on the calibration "
                         "set, else the runtime's default 0.9)")
    ap.add_argument("--val-batch", type=int, default=64)
    ap.add_argument("--val-max-new", type=int, default=96)
    ap.add_argument("--candidates", type=int, default=64)
    ap.add_argument("--no-val", action="store_true")
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds: validation stops there")
    ap.add_argument("--commit", default="")
    ap.add_argument("--log-every", type=int, default=25)
    args = ap.parse_args()
    info = BASE.describe(args.gguf)
    if not args.rank:
        args.rank = BASE.DEFAULT_RANK.get(info["arch"], 16)
    if args.alpha is None:
        args.alpha = 2.0 * args.rank
    if args.loader == "auto":
        args.loader = "fast" if info["arch"] == "qwen2" else "hf"
    shapes = L.gguf_weight_shapes(args.gguf)
    mb = L.adapter_bytes(shapes, args.rank, 2) / 1e6
    if mb > args.max_adapter_mb:
        raise SystemExit("rank %d: the adapter would be %.1f MB in F16, over --max-adapter-mb %.0f"
                         % (args.rank, mb, args.max_adapter_mb))
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def autocast():
        return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")

    log("torch %s, device %s%s, python %s" % (torch.__version__, dev,
                                              " (%s)" % torch.cuda.get_device_name(0) if dev.type == "cuda" else "",
                                              platform.python_version()))
    data = Data(args.data, args.gguf, args.max_len, args.max_completion)
    log("data: %d train examples (%d within --max-len), %d val answers, %d calibration answers, %d val rerank "
        "questions" % (data.n, int(data.ok.sum()), len(data.val_answer), len(data.cal_answer), len(data.val_rerank)))
    log("base: %s, %d layers, bos %s, completion ends with %s, stops %s; rank %d -> adapter %.1f MB at F16"
        % (info["arch"], info["n_layers"], data.meta.get("bos"), data.meta.get("eos_token", data.meta["eos"]),
           data.stop_ids, args.rank, mb))
    if data.meta.get("arch", info["arch"]) != info["arch"] or data.meta.get("gguf", os.path.basename(args.gguf)) != \
            os.path.basename(args.gguf):
        raise SystemExit("tokens.npz was packed for %s (%s), not %s" % (data.meta.get("gguf"), data.meta.get("arch"),
                                                                       os.path.basename(args.gguf)))
    base_sha = sha256_file(args.gguf)
    want = os.path.join(HERE, "..", "..", "data", "models", os.path.basename(args.gguf) + ".sha256")
    if os.path.exists(want):
        expect = open(want).read().split()[0]
        if expect != base_sha:
            raise SystemExit("base %s: sha256 %s, data/models says %s" % (args.gguf, base_sha, expect))
    log("base sha256 %s" % base_sha)
    if args.init:   # before the base loads (a minute on the box): a wrong --init stops at once
        try:
            with open(os.path.join(args.init, "adapter.json"), encoding="utf-8") as f:
                idoc = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit("--init %s: %s" % (args.init, e))
        if (idoc.get("base") or {}).get("sha256") != base_sha or int(idoc.get("rank", -1)) != args.rank or \
                float(idoc.get("alpha", -1)) != float(args.alpha):
            raise SystemExit("--init %s: rank %s alpha %s base %s; this run: rank %d alpha %g base %s"
                             % (args.init, idoc.get("rank"), idoc.get("alpha"), (idoc.get("base") or {}).get("sha256"),
                                args.rank, args.alpha, base_sha))

    import transformers
    bdt = torch.bfloat16 if args.base_dtype == "bf16" else torch.float32
    model = load_base(args.gguf, args.attn, dev, args.loader, bdt)
    worst = check_orientation(model, args.gguf, relative=args.base_dtype == "bf16")
    log("orientation check (layer 0: q, o, down projections vs the GGUF dequantized): max |diff| %.3g%s"
        % (worst, " (relative to |w|, bf16)" if args.base_dtype == "bf16" else ""))
    if worst > (1e-3 if args.base_dtype == "fp32" else 1.0 / 128):
        raise SystemExit("the model's projection weights are not the GGUF's: %g" % worst)
    if args.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    loras = L.add_lora(model, args.rank, args.alpha, args.dropout)
    init = None
    if args.init:
        init = load_init(loras, args.init, args.rank, args.alpha, base_sha)
        log("LoRA factors from %s: %d tensors, its %s steps (commit %s), sha256 %s" % (
            args.init, init["tensors"], init["steps"], init["commit"], init["sha256"][:16]))
    params = [p for m in loras.values() for p in (m.lora_a, m.lora_b)]
    n_params = sum(p.numel() for p in params)
    log("LoRA r=%d alpha=%g on %d projections: %.2f M parameters" % (args.rank, args.alpha, len(loras),
                                                                      n_params / 1e6))
    model.train()
    mix, sw = parse_weights(args.mix), parse_weights(args.source_weights)
    sampler = Sampler(data, mix, sw, args.batch, args.seed)
    log("mixture: %s" % json.dumps(sampler.effective, ensure_ascii=False))
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), weight_decay=args.wd,
                            **({"fused": True} if dev.type == "cuda" else {}))

    rows_val = list(range(len(data.val_answer)))
    if args.val_limit:
        rows_val = rows_val[:args.val_limit]
    rows_cal = list(range(len(data.cal_answer)))
    if args.cal_limit:
        rows_cal = rows_cal[:args.cal_limit]
    model.eval()
    loss_before = None if args.no_val else val_loss(model, data, rows_val, autocast, dev)
    model.train()
    if loss_before is not None:
        log("validation completion loss before training: %.4f" % loss_before)

    total = args.steps or None
    history, task_hist = [], {}
    t_train = time.time()
    if not args.steps and args.train_until:
        left = args.train_until - t_train
        if left < args.budget:
            log("budget %.0f s -> %.0f s (--train-until)" % (args.budget, max(left, 0)))
            args.budget = max(left, 0)
    t_timing = None
    step, run_loss, run_n = 0, 0.0, 0
    task_loss = {}
    skipped = []          # [step, example] of the examples left out of a step for non-finite loss or gradients
    while True:
        if total is not None and step >= total:
            break
        if total is None:
            if step == args.time_after:
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                t_timing = time.time()
            if step == args.time_after + args.time_steps:
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                sps = (time.time() - t_timing) / args.time_steps
                left = args.budget - (time.time() - t_train)
                total = min(args.max_steps, step + max(0, int(left / sps)))
                total = max(total, args.warmup + 1)
                log("timing: %.3f s/step over %d steps -> %d steps in all (budget %.0f s)" % (sps, args.time_steps,
                                                                                             total, args.budget))
                continue
        idx = sampler.next()
        lr = lr_at(step, total, args.lr, args.warmup, args.min_lr_ratio)
        for g in opt.param_groups:
            g["lr"] = lr
        while True:
            opt.zero_grad(set_to_none=True)
            try:
                lv, per_ex, skip = train_step(model, data, idx, dev, autocast, args.loss_norm, args.micro_tokens,
                                              params, report=lambda m, s_=step + 1: log("step %d: %s" % (s_, m)))
                break
            except torch.cuda.OutOfMemoryError:
                # halve the micro-batches and do this step again (its gradients were dropped)
                whole = int(max(data.length[idx])) * len(idx)
                args.micro_tokens = max(int(data.length[idx].max()), (args.micro_tokens or whole) // 2)
                opt.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                log("step %d: out of GPU memory, micro-batches of %d tokens from now on" % (step, args.micro_tokens))
                if args.micro_tokens <= int(data.length[idx].max()) and oom_at_floor(args):
                    raise
        # steps are counted from 1 in the log and the manifest (the progress lines' numbering)
        skipped.extend([step + 1, int(i)] for i in skip)
        gn = torch.nn.utils.clip_grad_norm_(params, args.clip)
        apply = math.isfinite(lv) and math.isfinite(float(gn))
        if not apply:
            # train_step keeps only finite micro-batches, so this is not expected (finite parts adding up to an
            # overflow): the update is not applied (a non-finite gradient through clip_grad_norm_ and AdamW would make
            # every LoRA weight NaN); the step is done again on the next batch
            log("step %d: loss %s, gradient norm %s: update not applied (examples %s)"
                % (step + 1, lv, float(gn), [int(i) for i in idx]))
            skipped.extend([step + 1, int(i)] for i in idx)
        if len(skipped) > args.max_skipped:
            raise SystemExit("step %d: %d examples skipped for non-finite loss or gradients, over --max-skipped %d: %s"
                             % (step + 1, len(skipped), args.max_skipped, skipped))
        if not apply:
            opt.zero_grad(set_to_none=True)
            continue
        opt.step()
        run_loss += lv
        run_n += 1
        # per-task loss of this batch (examples' mean token loss)
        for i, v in per_ex:
            task_loss.setdefault(data.tasks[int(data.task[i])], []).append(v)
        step += 1
        if step % 10 == 0 or step == total:
            history.append([step, round(run_loss / run_n, 4)])
            for t, v in task_loss.items():
                if v:
                    task_hist.setdefault(t, []).append([step, round(float(np.mean(v)), 4)])
            task_loss = {t: [] for t in task_loss}
        if step % args.log_every == 0 or step == total or step == 1:
            el = time.time() - t_train
            log("step %d/%s loss %.4f lr %.2e |g| %.2f  %.2f s/step" % (step, total or "?", run_loss / run_n, lr,
                                                                       float(gn), el / step))
        if step % 10 == 0:
            run_loss, run_n = 0.0, 0
        if args.deadline and time.time() > args.deadline:
            log("deadline reached at step %d" % step)
            total = step
            break
    train_s = time.time() - t_train
    if run_n and (not history or history[-1][0] != step):     # the last steps' loss when they ended off the 10s
        history.append([step, round(run_loss / run_n, 4)])
        for t, v in task_loss.items():
            if v:
                task_hist.setdefault(t, []).append([step, round(float(np.mean(v)), 4)])
    log("trained %d steps in %.1f s" % (step, train_s))

    manifest = {
        "commit": args.commit,
        "base": {"file": os.path.basename(args.gguf), "sha256": base_sha,
                 "arch": info["arch"], "load": ("transformers %s AutoModelForCausalLM.from_pretrained(gguf_file=...)"
                                                % transformers.__version__ if args.loader == "hf" else
                                                "tools/decoder_train/base.py load_fast (gguf-py dequantize) into "
                                                "transformers %s Qwen2ForCausalLM" % transformers.__version__)
                 + ", dequantized to " + args.base_dtype},
        "data": {"sources": data.data_meta.get("sources", {}), "licensed_only": data.data_meta.get("licensed_only"),
                 "split": data.data_meta.get("split"), "files": data.meta.get("data_files"),
                 "prepare_options": data.data_meta.get("options"), "totals": data.data_meta.get("totals")},
        "hyper_parameters": {k: getattr(args, k) for k in ("rank", "alpha", "dropout", "lr", "min_lr_ratio", "warmup",
                                                           "wd", "clip", "batch", "max_len", "max_completion", "mix",
                                                           "source_weights", "loss_norm", "seed", "attn",
                                                           "micro_tokens", "base_dtype")},
        "precision": ("%s frozen base, fp32 LoRA, bf16 autocast" % args.base_dtype) if dev.type == "cuda" else "fp32",
        "tokens": {"arch": info["arch"], "bos": data.meta.get("bos"), "eos": data.meta["eos"],
                   "eos_token": data.meta.get("eos_token"), "stop_ids": data.stop_ids,
                   "tokenizer": data.meta.get("tokenizer")},
        "mixture_effective": sampler.effective,
        "init": init,
        "budget_s": None if args.steps else args.budget,
        "steps": step,
        "train_seconds": round(train_s, 1),
        "loss_history": history,
        "skipped_nonfinite": skipped,
        "task_loss_history": task_hist,
        "lora_parameters": n_params,
        "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else platform.processor() or "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "validation": None,
    }
    dtype = L.pick_dtype(loras, args.export_dtype)
    manifest["export_dtype"] = str(dtype).split(".")[-1]
    tensors = L.write_adapter(args.out, loras, args.rank, args.alpha, os.path.basename(args.gguf), base_sha,
                              manifest, dtype)
    log("adapter written: %s (%d tensors, %s, %.1f MB)" % (args.out, len(tensors), str(dtype).split(".")[-1],
                                                           os.path.getsize(os.path.join(args.out,
                                                                                        "adapter.safetensors")) / 1e6))
    # export self-check: names and shapes against the GGUF, and merged weights against the LoRA forward
    doc, back = L.read_adapter(args.out)
    bad = L.check_adapter(doc, back, L.gguf_weight_shapes(args.gguf))
    if bad:
        raise SystemExit("adapter check failed: %s" % "; ".join(bad[:5]))
    m = loras[(0, "attn_q")]
    x = torch.randn(3, m.base.in_features, device=dev, dtype=m.base.weight.dtype)
    with torch.no_grad():
        y1 = m(x).float()
        wm = L.merged_weight(m.base.weight, back["blk.0.attn_q.lora_a"].to(dev), back["blk.0.attn_q.lora_b"].to(dev),
                             args.rank, args.alpha)
        y2 = x.float() @ wm.t()
        if m.base.bias is not None:          # Qwen's q/k/v biases: in the base, not in the adapter
            y2 = y2 + m.base.bias.float()
    log("export check: tensors match the GGUF's shapes; merged-weight vs LoRA forward max |diff| %.2e"
        % float((y1 - y2).abs().max()))

    if not args.no_val:
        model.eval()
        t = time.time()
        loss_after = val_loss(model, data, rows_val, autocast, dev)
        preds = val_answers(model, data, rows_val, autocast, dev, args.val_batch, args.val_max_new, args.candidates,
                            args.deadline)
        vrows = scored_rows(data, preds, "va")
        log("validation answers: %d in %.1f s" % (len(preds), time.time() - t))
        # the refusal threshold, chosen on the calibration set (train parts held out of training)
        thr, curve, cal_answers = None, None, None
        if rows_cal and not (args.deadline and time.time() > args.deadline):
            tc = time.time()
            cpreds = val_answers(model, data, rows_cal, autocast, dev, args.val_batch, args.val_max_new,
                                 args.candidates, args.deadline, part="ca")
            crows = scored_rows(data, cpreds, "ca")
            if len(cpreds) == len(rows_cal):
                thr, curve = choose_threshold(crows)
                cal_answers, _ = score_answers(crows, thr)
            log("calibration: %d answers in %.1f s; refusal threshold %s" % (len(cpreds), time.time() - tc, thr))
            if curve:
                for t_, obj, per in curve:
                    log("  t %.2f objective %.4f  %s" % (t_, obj, json.dumps(per)))
        t_rep = args.refusal_min_p or thr or 0.9
        answers, examples = score_answers(vrows, t_rep)
        answers_09, _ = score_answers(vrows, 0.9)
        rer = val_rerank(model, data, autocast, dev, 128, args.val_limit, args.deadline)
        log("validation at refusal threshold %.2f%s" % (t_rep, " (chosen on the calibration set)"
                                                        if t_rep == thr and not args.refusal_min_p else ""))
        print_table(answers, rer, loss_before, loss_after)
        manifest["refusal_threshold"] = {
            "refusal_min_p": thr,
            "chosen_on": "calibration set: answer prompts of %d train-part questions whose documents were held out of "
                         "training (prepare.py --cal-answer: tools/dev_split.py's calibration part), passages as "
                         "retrieved; objective of "
                         "refusal_threshold.py (SQuAD 2.0-style utility, mean over suites)" % len(rows_cal),
            "curve": curve, "calibration": cal_answers}
        manifest["validation"] = {
            "what": "prepare.py's validation examples: dev suites' validation parts (tools/dev_split.py), passages "
                    "as `clauseqa retrieve --mode router,bm25` gave them (nothing inserted); copy-constrained greedy "
                    "answers (app/generate_answer.c's rule) from transformers in bf16 with the refusal masked, "
                    "refused when refusal_p >= the threshold; rerank = logit(yes) - logit(no) over each question's "
                    "first %d candidates. A quick check: the reported numbers come from `clauseqa eval` in C." % 8,
            "refusal_min_p": t_rep, "answers": answers, "answers_at_0.9": answers_09, "rerank": rer,
            "completion_loss_before": loss_before, "completion_loss_after": loss_after,
            "seconds": round(time.time() - t, 1), "samples": examples}
        L.write_adapter_json(args.out, args.rank, args.alpha, os.path.basename(args.gguf), base_sha, manifest)
        log("adapter.json rewritten with the validation scores")
    log("done")


if __name__ == "__main__":
    main()
