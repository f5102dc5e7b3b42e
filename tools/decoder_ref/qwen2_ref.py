#!/usr/bin/env python3
"""An independent Qwen2 forward in numpy (weights dequantized by gguf-py), and the fixtures of
tests/unit/test_decoder_qwen2.c made with it. Reference tool only: CI never runs it.

  tiny OUT.gguf OUT.json     writes a tiny random qwen2 GGUF (d=128, 2 layers, 4 query heads : 2 KV heads of 32,
                             Q/K/V biases, untied output, a 512-token byte-level BPE vocabulary; F32, F16, Q8_0,
                             Q5_0 tensors) and the logits of two prompts at every position
  real MODEL.gguf OUT.json   top-k logits of the real model on fixed zh/en/ChatML prompts (ids from transformers'
                             GGUF tokenizer, as stored in qwen2_tokenizer_ids.json), at 3 positions each

  /opt/venv-train/bin/python tools/decoder_ref/qwen2_ref.py tiny tests/data/decoder/qwen2_tiny.gguf \
      tests/data/decoder/qwen2_tiny_logits.json
  /opt/venv-train/bin/python tools/decoder_ref/qwen2_ref.py real \
      data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tests/data/decoder/qwen2_logits_ref.json

The formulas (decoder/decoder.h): h = RMSNorm(x) w; q, k, v = Wq h + bq, Wk h + bk, Wv h + bv; RoPE NeoX halves
with theta = qwen2.rope.freq_base; query head i reads KV head i // (H / H_kv); softmax(q.k / sqrt(hd)) causal;
x += Wo a; x += Wdown(silu(Wgate h') * Wup h'); logits = output (or token_embd) . RMSNorm(x) w_out. Everything in
float64 here for the tiny model; float32 for the real one, a weight at a time (the C exact mode is float32 too:
differences are summation order and rounding).
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Model:
    def __init__(self, path, dtype=np.float64):
        self.dtype = dtype
        self.r = GGUFReader(path)
        self.t = {t.name: t for t in self.r.tensors}
        f = self.r.fields
        arch = f["general.architecture"].contents()
        assert arch == "qwen2", arch
        g = lambda k, d=None: f[f"qwen2.{k}"].contents() if f"qwen2.{k}" in f else d
        self.L, self.d = g("block_count"), g("embedding_length")
        self.H, self.KV = g("attention.head_count"), g("attention.head_count_kv", g("attention.head_count"))
        self.hd = self.d // self.H
        self.eps = g("attention.layer_norm_rms_epsilon", 1e-6)
        self.theta = g("rope.freq_base", 10000.0)
        self.cache = {}

    def w(self, name):
        if name in self.cache:
            return self.cache[name]
        t = self.t[name]
        a = dequantize(t.data, t.tensor_type).astype(self.dtype)
        shape = [int(x) for x in t.shape[::-1]]
        a = a.reshape(shape)
        if a.size < 4_000_000:
            self.cache[name] = a
        return a

    def has(self, name):
        return name in self.t

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):  # x (T, heads, hd)
        half = self.hd // 2
        inv = self.theta ** (-2.0 * np.arange(half) / self.hd)
        ang = np.asarray(pos)[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., :half], x[..., half:]
        return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)

    def layer(self, l, x, T):
        p = f"blk.{l}."
        pos = np.arange(T)
        group = self.H // self.KV
        mask = np.triu(np.full((T, T), -np.inf), 1)
        h = self.rms(x, self.w(p + "attn_norm.weight"))
        q = h @ self.w(p + "attn_q.weight").T + self.w(p + "attn_q.bias")
        k = h @ self.w(p + "attn_k.weight").T + self.w(p + "attn_k.bias")
        v = h @ self.w(p + "attn_v.weight").T + self.w(p + "attn_v.bias")
        q = self.rope(q.reshape(T, self.H, self.hd), pos)
        k = self.rope(k.reshape(T, self.KV, self.hd), pos)
        v = v.reshape(T, self.KV, self.hd)
        a = np.zeros((T, self.H, self.hd))
        for hh in range(self.H):
            kv = hh // group
            sc = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(self.hd) + mask
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            sc /= sc.sum(-1, keepdims=True)
            a[:, hh, :] = sc @ v[:, kv, :]
        return x + a.reshape(T, -1) @ self.w(p + "attn_output.weight").T

    def ffn(self, l, x):
        p = f"blk.{l}."
        h = self.rms(x, self.w(p + "ffn_norm.weight"))
        gt = h @ self.w(p + "ffn_gate.weight").T
        up = h @ self.w(p + "ffn_up.weight").T
        return x + (gt / (1 + np.exp(-gt)) * up) @ self.w(p + "ffn_down.weight").T

    def forward_many(self, seqs):
        """Logits (T, V) of each id list; layer by layer over all of them, so each weight is dequantized once."""
        xs = [self.rows("token_embd.weight", ids) for ids in seqs]
        for l in range(self.L):
            xs = [self.ffn(l, self.layer(l, x, len(x))) for x in xs]
        hs = [self.rms(x, self.w("output_norm.weight")) for x in xs]
        name = "output.weight" if self.has("output.weight") else "token_embd.weight"
        t = self.t[name]
        V = int(t.shape[-1])
        out = [np.zeros((len(h), V), self.dtype) for h in hs]
        for r0 in range(0, V, 16384):  # the output matrix a slice of rows at a time (memory)
            part = self.rows(name, range(r0, min(V, r0 + 16384)))
            for o, h in zip(out, hs):
                o[:, r0:r0 + len(part)] = h @ part.T
        return out

    def rows(self, name, ids):
        """Rows ids of a 2-D weight, dequantized alone."""
        t = self.t[name]
        data = t.data[np.asarray(list(ids))]
        return dequantize(data, t.tensor_type).astype(self.dtype).reshape(len(data), -1)

    def forward(self, ids):
        return self.forward_many([ids])[0]


def make_tiny(out_gguf, out_json):
    from make_synthetic_gguf import Writer, GGML  # noqa: F401
    rng = np.random.default_rng(2026)
    d, L, H, KV, hd, ff = 128, 2, 4, 2, 32, 256
    # GPT-2 byte alphabet: bytes_to_unicode
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b), cs.append(256 + n)
            n += 1
    alphabet = [chr(c) for c in cs]
    tokens, merges = list(alphabet), []
    seen = set(tokens)
    words = ["Ġthe", "Ġof", "Ġand", "ing", "tion", "Ġa", "er", "Ġin", "Ġto", "ĠÐ", "äº", "ä¸", "ĠĠ", "ĠĠĠĠ", "ĊĊ"]
    for wd in words:  # merges that build each word left to right
        cur = wd[0]
        for ch in wd[1:]:
            nxt = cur + ch
            if nxt not in seen:
                merges.append(f"{cur} {ch}")
                tokens.append(nxt)
                seen.add(nxt)
            cur = nxt
    while len(tokens) < 509:
        a, b = tokens[rng.integers(0, len(tokens))], tokens[rng.integers(0, 256)]
        if a + b not in seen and len(a + b) < 6:
            merges.append(f"{a} {b}")
            tokens.append(a + b)
            seen.add(a + b)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens += specials
    V = len(tokens)
    ttype = [1] * (V - 3) + [3] * 3
    w = Writer()
    w.add_str("general.architecture", "qwen2")
    w.add_str("general.name", "synthetic qwen2 tiny")
    for k, v in [("context_length", 4096), ("embedding_length", d), ("block_count", L), ("feed_forward_length", ff),
                 ("attention.head_count", H), ("attention.head_count_kv", KV)]:
        w.add_u32("qwen2." + k, v)
    w.add_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_f32("qwen2.rope.freq_base", 1e6)
    w.add_str("tokenizer.ggml.model", "gpt2")
    w.add_str("tokenizer.ggml.pre", "qwen2")
    w.add_arr("tokenizer.ggml.tokens", 8, tokens)
    w.add_arr("tokenizer.ggml.token_type", 5, ttype)
    w.add_arr("tokenizer.ggml.merges", 8, merges)
    w.add_u32("tokenizer.ggml.eos_token_id", V - 1)
    w.add_u32("tokenizer.ggml.bos_token_id", V - 3)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_str("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def vec(n, mean, sd):
        return (mean + sd * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(V, d, 1.0), "Q8_0")
    w.add_tensor("output.weight", mat(V, d, d ** -0.5 * 4), "Q5_0")
    w.add_tensor("output_norm.weight", vec(d, 1.0, 0.1), "F32")
    types = [("F16", "Q8_0", "F32", "Q5_0", "Q8_0", "F16", "Q5_0"), ("Q8_0", "Q5_0", "Q8_0", "F16", "Q5_0", "Q8_0", "F16")]
    for l in range(L):
        p, ty = f"blk.{l}.", types[l]
        w.add_tensor(p + "attn_norm.weight", vec(d, 1.0, 0.1), "F32")
        w.add_tensor(p + "attn_q.weight", mat(H * hd, d, d ** -0.5 * 2), ty[0])
        w.add_tensor(p + "attn_q.bias", vec(H * hd, 0.0, 0.5), "F32")
        w.add_tensor(p + "attn_k.weight", mat(KV * hd, d, d ** -0.5 * 2), ty[1])
        w.add_tensor(p + "attn_k.bias", vec(KV * hd, 0.0, 0.5), "F32")
        w.add_tensor(p + "attn_v.weight", mat(KV * hd, d, d ** -0.5), ty[2])
        w.add_tensor(p + "attn_v.bias", vec(KV * hd, 0.0, 0.2), "F32")
        w.add_tensor(p + "attn_output.weight", mat(d, H * hd, (H * hd) ** -0.5), ty[3])
        w.add_tensor(p + "ffn_norm.weight", vec(d, 1.0, 0.1), "F32")
        w.add_tensor(p + "ffn_gate.weight", mat(ff, d, d ** -0.5 * 2), ty[4])
        w.add_tensor(p + "ffn_up.weight", mat(ff, d, d ** -0.5), ty[5])
        w.add_tensor(p + "ffn_down.weight", mat(d, ff, ff ** -0.5), ty[6])
    w.write(out_gguf)
    m = Model(out_gguf)
    prompts = [[int(x) for x in rng.integers(0, V - 3, 11)], [int(x) for x in rng.integers(0, V, 300)]]
    cases = []
    for ids in prompts:  # the short prompt at every position; the long one around the 64-token chunks and 256 keys
        lg = m.forward(ids)
        pos = range(len(ids)) if len(ids) < 20 else [0, 63, 64, 65, 200, 255, 256, 257, 298, 299]
        cases.append({"ids": ids, "positions": list(pos), "logits": [[round(float(v), 5) for v in lg[p]] for p in pos]})
    # the tokenizer on this vocabulary: texts whose BPE uses the word merges
    with open(out_json, "w") as fp:
        json.dump({"gguf": os.path.basename(out_gguf), "reference": "tools/decoder_ref/qwen2_ref.py (numpy, float64)",
                   "cases": cases}, fp)
        fp.write("\n")
    print("wrote", out_gguf, os.path.getsize(out_gguf), "bytes;", out_json)


# texts of tests/data/decoder/qwen2_tokenizer_ids.json, whose ids are transformers' (checked equal to the C
# tokenizer's by test_decoder_qwen2): zh law, en, zh ChatML, en with contractions
PROMPTS = [
    ("zh_law", "中华人民共和国劳动法第一条 为了保护劳动者的合法权益，调整劳动关系。"),
    ("en", "The capital of France is Paris."),
    ("chat_zh", "<|im_start|>user\n公司的注册资本最低限额是多少？<|im_end|>\n<|im_start|>assistant\n"),
    ("en_mixed", "Article 44: overtime pay is 150% (not 200%) of the wage."),
]
TOP_K = 16


def make_real(path, out_json, tok_json):
    """One forward of the 4 prompts (each weight dequantized once, float32, ~1 GB of memory at most): the top-16
    logits at positions 0, n/2 and n-1. No greedy continuation (that would take a forward per token here); the C
    test checks the argmax at those positions."""
    by_text = {c["text"]: c["ids"] for c in json.load(open(tok_json, encoding="utf-8"))["cases"]}
    m = Model(path, np.float32)
    seqs = [by_text[text] for _, text in PROMPTS]
    first = m.forward_many(seqs)
    cases = []
    for (name, text), ids, lg in zip(PROMPTS, seqs, first):
        n = len(ids)
        rows = []
        for p in sorted({0, n // 2, n - 1}):
            top = np.argsort(-lg[p])[:TOP_K]
            rows.append({"pos": int(p), "argmax": int(top[0]), "top_ids": [int(i) for i in top],
                         "top_logits": [round(float(lg[p, i]), 5) for i in top]})
        cases.append({"name": name, "text": text, "ids": ids, "positions": rows, "greedy": []})
        print(name, n, "tokens; argmax at the end", rows[-1]["argmax"], flush=True)
    with open(out_json, "w", encoding="utf-8") as fp:
        json.dump({"model": os.path.basename(path), "reference": "tools/decoder_ref/qwen2_ref.py: numpy float32, "
                   "weights dequantized by gguf-py; ids by transformers' GGUF tokenizer (qwen2_tokenizer_ids.json)",
                   "top_k": TOP_K, "cases": cases}, fp, ensure_ascii=False)
        fp.write("\n")


if __name__ == "__main__":
    if sys.argv[1] == "tiny":
        make_tiny(sys.argv[2], sys.argv[3])
    else:
        make_real(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "tests/data/decoder/qwen2_tokenizer_ids.json")
