#!/usr/bin/env python3
"""Tokenizes prepare.py's examples for train.py (here on the CPU, so the GPU box needs no tokenizer): tokens.npz in
the data folder.

Token ids come from transformers' GGUF tokenizer of the base file (the C tokenizer is tested against the same one,
tools/decoder_ref/make_tokenizer_fixtures.py). An example is [<bos>] + ids(prompt) | ids(completion) + [<eos>]:
the prompt and the completion are tokenized apart, as at run time (the engine tokenizes the prompt, then decodes).
Also stored: every token's bytes (the copy constraint of train.py's validation), from the GGUF's own token list and
types (control / unused / unknown tokens: none), and the first token of each verdict and refusal word.

  /opt/venv-train/bin/python tools/decoder_train/pack.py --data .device/dec_data --gguf data/models/gemma-3-270m-q4_k_m.gguf
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
import cqprompt as P  # noqa: E402

TASKS = ["answer", "abstain", "abstain_syn", "relevance"]


def load_tokenizer(gguf_path):
    from transformers import AutoTokenizer
    d, f = os.path.split(os.path.abspath(gguf_path))
    return AutoTokenizer.from_pretrained(d, gguf_file=f)


def vocab_bytes(gguf_path):
    """[bytes or None] per token id: byte tokens their byte, text tokens their text ('▁' -> ' '), control / unused /
    unknown tokens None."""
    from gguf import GGUFReader
    r = GGUFReader(gguf_path)
    f_tok = r.fields["tokenizer.ggml.tokens"]
    f_typ = r.fields["tokenizer.ggml.token_type"]
    toks = [bytes(f_tok.parts[i]).decode("utf-8", errors="replace") for i in f_tok.data]
    types = [int(f_typ.parts[i][0]) for i in f_typ.data]
    out = []
    for t, ty in zip(toks, types):
        if ty in (2, 3, 5):          # unknown, control, unused
            out.append(None)
        elif ty == 6:                # byte: <0xNN>
            out.append(bytes([int(t[3:5], 16)]))
        else:
            out.append(t.replace("\u2581", " ").encode("utf-8"))
    return out


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


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def pack(data, gguf_path, tok=None, log=print):
    t0 = time.time()
    tok = tok or load_tokenizer(gguf_path)
    bos, eos = tok.bos_token_id, tok.eos_token_id
    log("tokenizer: %.1f s, bos %d eos %d, %d tokens" % (time.time() - t0, bos, eos, len(tok)))
    train = read_jsonl(os.path.join(data, "train.jsonl"))
    va = read_jsonl(os.path.join(data, "val_answer.jsonl"))
    vr = read_jsonl(os.path.join(data, "val_rerank.jsonl"))
    sources = sorted({r["source"] for r in train + va + vr})
    z = {}
    p = encode_all(tok, [r["prompt"] for r in train])
    c = encode_all(tok, [r["completion"] for r in train])
    z["tr_p"], z["tr_p_off"] = ragged([[bos] + x for x in p])
    z["tr_c"], z["tr_c_off"] = ragged([x + [eos] for x in c])
    z["tr_task"] = np.array([TASKS.index(r["task"]) for r in train], np.int8)
    z["tr_source"] = np.array([sources.index(r["source"]) for r in train], np.int16)
    z["tr_lang"] = np.array([r["lang"] == "zh" for r in train], np.int8)
    p = encode_all(tok, [r["prompt"] for r in va])
    c = encode_all(tok, [r["completion"] or "" for r in va])
    z["va_p"], z["va_p_off"] = ragged([[bos] + x for x in p])
    z["va_c"], z["va_c_off"] = ragged([x + [eos] if r["completion"] else [] for x, r in zip(c, va)])
    prompts = [q for r in vr for q in r["prompts"]]
    p = encode_all(tok, prompts)
    z["vr_p"], z["vr_p_off"] = ragged([[bos] + x for x in p])
    z["vr_q_off"] = np.concatenate([[0], np.cumsum([len(r["prompts"]) for r in vr])]).astype(np.int64)
    vb = vocab_bytes(gguf_path)
    z["vocab_ok"] = np.array([b is not None for b in vb], np.int8)
    z["vocab"], z["vocab_off"] = ragged([list(b or b"") for b in vb], np.uint8)
    first = {}
    for lang in ("zh", "en"):
        for yes in (True, False):
            first["rel_%s_%s" % (lang, "yes" if yes else "no")] = tok.encode(P.RELEVANT[(lang, yes)],
                                                                            add_special_tokens=False)[0]
        first["refusal_" + lang] = tok.encode(P.REFUSAL[lang], add_special_tokens=False)[0]
    meta = {"tasks": TASKS, "sources": sources, "bos": bos, "eos": eos, "first_tokens": first,
            "end_of_turn": tok.convert_tokens_to_ids("<end_of_turn>"), "n_vocab": len(vb),
            "gguf": os.path.basename(gguf_path),
            "data_files": {fn: hashlib.sha256(open(os.path.join(data, fn), "rb").read()).hexdigest()
                           for fn in ("train.jsonl", "val_answer.jsonl", "val_rerank.jsonl")}}
    z["meta"] = np.array(json.dumps(meta))
    np.savez(os.path.join(data, "tokens.npz"), **z)
    n = len(z["tr_task"])
    lens = np.diff(z["tr_p_off"]) + np.diff(z["tr_c_off"])
    log("packed %d train examples (%d tokens, mean %.0f, max %d), %d val answer, %d val rerank prompts in %.1f s"
        % (n, int(lens.sum()), lens.mean() if n else 0, lens.max() if n else 0, len(va), len(prompts),
           time.time() - t0))
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=".device/dec_data")
    ap.add_argument("--gguf", default="data/models/gemma-3-270m-q4_k_m.gguf")
    args = ap.parse_args()
    pack(args.data, args.gguf)


if __name__ == "__main__":
    main()
