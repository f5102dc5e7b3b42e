#!/usr/bin/env python3
"""Tokenizes prepare.py's examples for train.py (here on the CPU, so the GPU box needs no tokenizer): tokens.npz in
the data folder, for one base GGUF (gemma3 or qwen2: --base).

Token ids come from transformers' GGUF tokenizer of the base file (the C tokenizer is tested against the same one,
tools/decoder_ref/make_tokenizer_fixtures.py). An example is [<bos>] + ids(prompt) | ids(completion) + [<eos>]:
the prompt and the completion are tokenized apart, as at run time (the engine tokenizes the prompt, then decodes).
<bos> only where the GGUF says the tokenizer adds one (Gemma: yes; Qwen2: no); <eos> is the GGUF's eos token
(Gemma <eos>, Qwen2.5-Instruct <|im_end|>; --eos names another). Also stored: every token's bytes (the copy
constraint of train.py's validation; base.vocab_bytes: SentencePiece or GPT-2 byte-level pieces, control tokens
none), the tokens that stop decoding, and the first token of each verdict and refusal word.

  /opt/venv-train/bin/python tools/decoder_train/pack.py --data .device/dec_data \
      --base data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import base as BASE  # noqa: E402
import cqprompt as P  # noqa: E402

TASKS = ["answer", "abstain", "abstain_syn", "relevance", "abstain_heldout"]   # indices kept: new tasks at the end


def load_tokenizer(gguf_path):
    from transformers import AutoTokenizer
    d, f = os.path.split(os.path.abspath(gguf_path))
    return AutoTokenizer.from_pretrained(d, gguf_file=f)


def vocab_bytes(gguf_path):
    return BASE.vocab_bytes(gguf_path)


def encode_all(tok, texts, batch=512):
    out = []
    for i in range(0, len(texts), batch):
        enc = tok(texts[i:i + batch], add_special_tokens=False)["input_ids"]
        out.extend(enc)
    return out


def ragged(lists, dtype=np.int32):
    off = np.zeros(len(lists) + 1, np.int64)
    off[1:] = np.cumsum([len(x) for x in lists])
    ids = np.fromiter((t for x in lists for t in x), dtype, count=int(off[-1]))
    return ids, off


def _tf_version():
    import transformers
    return transformers.__version__


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def pack(data, gguf_path, tok=None, log=print, eos_text=None):
    t0 = time.time()
    info = BASE.describe(gguf_path)
    tok = tok or load_tokenizer(gguf_path)
    vb = vocab_bytes(gguf_path)
    head = [info["bos"]] if info["add_bos"] else []
    eos = info["eos"]
    if eos_text:
        eos = tok.convert_tokens_to_ids(eos_text)
        if eos is None or eos == tok.unk_token_id or vb[eos] is not None:
            raise SystemExit("pack: --eos %r is not a special token of %s" % (eos_text, gguf_path))
    stops = [eos] + [i for i in info["stop_ids"] if i != eos]
    log("tokenizer: %.1f s, %s, bos %s, eos %d (%s), stops %s, %d tokens"
        % (time.time() - t0, info["arch"], head or "none", eos, tok.convert_ids_to_tokens(eos), stops, len(tok)))
    train = read_jsonl(os.path.join(data, "train.jsonl"))
    va = read_jsonl(os.path.join(data, "val_answer.jsonl"))
    vr = read_jsonl(os.path.join(data, "val_rerank.jsonl"))
    cal_path = os.path.join(data, "cal_answer.jsonl")
    ca = read_jsonl(cal_path) if os.path.exists(cal_path) else []
    sources = sorted({r["source"] for r in train + va + vr + ca})
    z = {}
    p = encode_all(tok, [r["prompt"] for r in train])
    c = encode_all(tok, [r["completion"] for r in train])
    z["tr_p"], z["tr_p_off"] = ragged([head + x for x in p])
    z["tr_c"], z["tr_c_off"] = ragged([x + [eos] for x in c])
    z["tr_task"] = np.array([TASKS.index(r["task"]) for r in train], np.int8)
    z["tr_source"] = np.array([sources.index(r["source"]) for r in train], np.int16)
    z["tr_lang"] = np.array([r["lang"] == "zh" for r in train], np.int8)
    for key, rows in (("va", va), ("ca", ca)):
        p = encode_all(tok, [r["prompt"] for r in rows])
        c = encode_all(tok, [r["completion"] or "" for r in rows])
        z[key + "_p"], z[key + "_p_off"] = ragged([head + x for x in p])
        z[key + "_c"], z[key + "_c_off"] = ragged([x + [eos] if r["completion"] else [] for x, r in zip(c, rows)])
    prompts = [q for r in vr for q in r["prompts"]]
    p = encode_all(tok, prompts)
    z["vr_p"], z["vr_p_off"] = ragged([head + x for x in p])
    z["vr_q_off"] = np.concatenate([[0], np.cumsum([len(r["prompts"]) for r in vr])]).astype(np.int64)
    z["vocab_ok"] = np.array([b is not None for b in vb], np.int8)
    z["vocab"], z["vocab_off"] = ragged([list(b or b"") for b in vb], np.uint8)
    first = {}
    for lang in ("zh", "en"):
        for yes in (True, False):
            first["rel_%s_%s" % (lang, "yes" if yes else "no")] = tok.encode(P.RELEVANT[(lang, yes)],
                                                                            add_special_tokens=False)[0]
        first["refusal_" + lang] = tok.encode(P.REFUSAL[lang], add_special_tokens=False)[0]
    meta = {"tasks": TASKS, "sources": sources, "bos": head[0] if head else None, "eos": eos,
            "eos_token": tok.convert_ids_to_tokens(eos), "stop_ids": stops, "first_tokens": first,
            "n_vocab": len(vb), "gguf": os.path.basename(gguf_path), "arch": info["arch"],
            "tokenizer": "transformers %s AutoTokenizer.from_pretrained(gguf_file=...)" % _tf_version(),
            "data_files": {fn: hashlib.sha256(open(os.path.join(data, fn), "rb").read()).hexdigest()
                           for fn in ("train.jsonl", "val_answer.jsonl", "val_rerank.jsonl", "cal_answer.jsonl")
                           if os.path.exists(os.path.join(data, fn))}}
    z["meta"] = np.array(json.dumps(meta))
    np.savez(os.path.join(data, "tokens.npz"), **z)
    n = len(z["tr_task"])
    lens = np.diff(z["tr_p_off"]) + np.diff(z["tr_c_off"])
    log("packed %d train examples (%d tokens, mean %.0f, max %d), %d val answer, %d calibration, %d val rerank "
        "prompts in %.1f s" % (n, int(lens.sum()), lens.mean() if n else 0, lens.max() if n else 0, len(va), len(ca),
                               len(prompts), time.time() - t0))
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=".device/dec_data")
    ap.add_argument("--base", "--gguf", dest="gguf", default="data/models/gemma-3-270m-q4_k_m.gguf",
                    help="the base GGUF whose tokenizer packs the examples (gemma3 or qwen2)")
    ap.add_argument("--eos", default=None, help="the token ending a completion (default: the GGUF's eos token)")
    args = ap.parse_args()
    pack(args.data, args.gguf, eos_text=args.eos)


if __name__ == "__main__":
    main()
