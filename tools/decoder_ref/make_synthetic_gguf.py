#!/usr/bin/env python3
"""Writes a Gemma-3-architecture GGUF with random weights, using numpy only (no gguf package), for runs where the
real weights cannot go (the GPU box: the 253 MB model is over what a device call carries) and for shapes the real
model does not have:
  small     odd shapes: d=192, 7 layers (one global), 3 heads / 1 KV head of 64, window 16, vocab 1024, weights in
            F32, F16, BF16, Q8_0 and Q5_0 across the tensors (every upload path)
  270m      the shapes of gemma-3-270m (d=640, 18 layers, 4/1 heads of 256, ff 2048, window 512, vocab 262144)
            with the real file's types where we can write them (Q8_0 embedding and V, Q5_0 Q/K/gate/up; Q8_0
            standing in for its Q4_K/Q6_K output and down projections): same speed, random text
  qwen2     a Qwen2-architecture file for the CUDA path (d=256, 3 layers, 4 query heads : 2 KV heads of 64, ff 512,
            vocab 1024 byte-level BPE, Q/K/V biases, untied output; F32, F16, BF16, Q8_0, Q5_0 across the tensors)
  qwen2-1.5b the shapes of Qwen2.5-1.5B (d=1536, 28 layers, 12 query heads : 2 KV heads of 128, ff 8960, vocab
            151936, biases, untied output) in Q8_0 (output F16, decoded like the real file's Q6_K through bf16): the
            GPU uploads every weight as bf16 whatever its format, so decode and prefill speeds on CUDA are the real
            model's; made on the GPU box, where the 1.1 GB file is costly to carry
  python3 tools/decoder_ref/make_synthetic_gguf.py small|270m|qwen2|qwen2-1.5b OUT.gguf
"""
import struct
import sys

import numpy as np

GGML = {"F32": 0, "F16": 1, "Q5_0": 6, "Q8_0": 8, "BF16": 30}
ALIGN = 32


def q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1, keepdims=True)
    d = (amax / 127.0).astype(np.float16).astype(np.float32)
    q = np.where(d > 0, np.round(b / np.where(d > 0, d, 1)), 0).clip(-127, 127).astype(np.int8)
    out = np.zeros((b.shape[0], 34), np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def q5_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(b).argmax(axis=1)
    mx = b[np.arange(len(b)), idx][:, None]  # signed value of largest magnitude
    d = (mx / -16.0).astype(np.float16).astype(np.float32)
    q = np.where(d != 0, np.round(b / np.where(d != 0, d, 1)) + 16, 16).clip(0, 31).astype(np.uint32)
    lo = (q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)
    hb = (q >> 4) & 1
    qh = (hb << np.arange(32, dtype=np.uint32)).sum(axis=1).astype(np.uint32)
    out = np.zeros((b.shape[0], 22), np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:6] = qh.view(np.uint8).reshape(-1, 4)
    out[:, 6:] = lo.astype(np.uint8)
    return out.tobytes()


def encode(x, ty):
    if ty == "F32":
        return x.astype(np.float32).tobytes()
    if ty == "F16":
        return x.astype(np.float16).tobytes()
    if ty == "BF16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    if ty == "Q8_0":
        return q8_0(x)
    return q5_0(x)


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def s(self, v):
        b = v.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add_u32(self, k, v):
        self.kv.append(self.s(k) + struct.pack("<II", 4, v))

    def add_f32(self, k, v):
        self.kv.append(self.s(k) + struct.pack("<If", 6, v))

    def add_bool(self, k, v):
        self.kv.append(self.s(k) + struct.pack("<IB", 7, 1 if v else 0))

    def add_str(self, k, v):
        self.kv.append(self.s(k) + struct.pack("<I", 8) + self.s(v))

    def add_arr(self, k, ty, vals):
        head = self.s(k) + struct.pack("<IIQ", 9, ty, len(vals))
        if ty == 8:
            body = b"".join(self.s(v) for v in vals)
        elif ty == 6:
            body = np.asarray(vals, np.float32).tobytes()
        else:
            body = np.asarray(vals, np.int32).tobytes()
        self.kv.append(head + body)

    def add_tensor(self, name, arr, ty):
        shape = arr.shape[::-1]  # GGUF lists the innermost dimension first
        self.tensors.append((name, shape, GGML[ty], encode(arr, ty)))

    def write(self, path):
        info = b""
        off = 0
        offsets = []
        for name, shape, ty, data in self.tensors:
            offsets.append(off)
            info += self.s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", n) for n in shape)
            info += struct.pack("<IQ", ty, off)
            off += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)) + b"".join(self.kv) + info
        with open(path, "wb") as f:
            f.write(head)
            f.write(b"\0" * ((-len(head)) % ALIGN))
            for (_, _, _, data), o in zip(self.tensors, offsets):
                f.write(data)
                f.write(b"\0" * ((-len(data)) % ALIGN))


def qwen2(out, big=False):
    rng = np.random.default_rng(4321)
    d, L, H, KV, ff = (1536, 28, 12, 2, 8960) if big else (256, 3, 4, 2, 512)
    n_vocab = 151936 if big else 1024
    hd = d // H
    # GPT-2's byte alphabet, one merge, filler tokens, then ChatML's specials
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b), cs.append(256 + n)
            n += 1
    tokens = [chr(c) for c in cs] + ["\u0120t"]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens += [f"tok{i}" for i in range(n_vocab - len(tokens) - len(specials))] + specials
    V = len(tokens)
    w = Writer()
    w.add_str("general.architecture", "qwen2")
    w.add_str("general.name", "synthetic qwen2" + (" 1.5b" if big else ""))
    for k, v in [("context_length", 32768), ("embedding_length", d), ("block_count", L), ("feed_forward_length", ff),
                 ("attention.head_count", H), ("attention.head_count_kv", KV)]:
        w.add_u32("qwen2." + k, v)
    w.add_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_f32("qwen2.rope.freq_base", 1e6)
    w.add_str("tokenizer.ggml.model", "gpt2")
    w.add_str("tokenizer.ggml.pre", "qwen2")
    w.add_arr("tokenizer.ggml.tokens", 8, tokens)
    w.add_arr("tokenizer.ggml.token_type", 5, [1] * (V - 3) + [3] * 3)
    w.add_arr("tokenizer.ggml.merges", 8, ["\u0120 t"])
    w.add_u32("tokenizer.ggml.bos_token_id", V - 3)
    w.add_u32("tokenizer.ggml.eos_token_id", V - 1)
    w.add_bool("tokenizer.ggml.add_bos_token", False)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float32)

    def vec(n, mean, sd):
        return (mean + sd * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(V, d, 1.0), "Q8_0")
    w.add_tensor("output.weight", mat(V, d, d ** -0.5 * 4), "F16" if big else "Q5_0")
    w.add_tensor("output_norm.weight", vec(d, 1.0, 0.1), "F32")
    types = [("F16", "Q8_0", "F32", "Q5_0", "Q8_0", "F16", "Q5_0"), ("Q8_0", "Q5_0", "Q8_0", "BF16", "Q5_0", "Q8_0", "F16"),
             ("Q5_0", "F16", "Q8_0", "Q8_0", "BF16", "Q5_0", "Q8_0")]
    for l in range(L):
        p, ty = f"blk.{l}.", ("Q8_0",) * 7 if big else types[l]
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
    w.write(out)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind in ("qwen2", "qwen2-1.5b"):
        return qwen2(out, kind == "qwen2-1.5b")
    rng = np.random.default_rng(1234)
    if kind == "small":
        d, L, H, KV, hd, ff, win, V = 192, 7, 3, 1, 64, 512, 16, 1024
        types = {"embd": "Q8_0", "q": "F16", "k": "BF16", "v": "F32", "o": "Q5_0", "gate": "Q8_0", "up": "F16",
                 "down": "BF16"}
    else:
        d, L, H, KV, hd, ff, win, V = 640, 18, 4, 1, 256, 2048, 512, 262144
        types = {"embd": "Q8_0", "q": "Q5_0", "k": "Q5_0", "v": "Q8_0", "o": "Q8_0", "gate": "Q5_0", "up": "Q5_0",
                 "down": "Q8_0"}
    w = Writer()
    w.add_str("general.architecture", "gemma3")
    w.add_str("general.name", f"synthetic gemma3 {kind}")
    for k, v in [("context_length", 32768), ("embedding_length", d), ("block_count", L), ("feed_forward_length", ff),
                 ("attention.head_count", H), ("attention.head_count_kv", KV), ("attention.key_length", hd),
                 ("attention.value_length", hd), ("attention.sliding_window", win)]:
        w.add_u32("gemma3." + k, v)
    w.add_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_f32("gemma3.rope.freq_base", 1e6)
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    tokens = specials + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581"] + [chr(ord("a") + i) for i in range(26)]
    tokens += [f"tok{i}" for i in range(V - len(tokens))]
    ttype = [3] * len(specials) + [6] * 256 + [1] * (V - len(specials) - 256)
    ttype[3] = 2
    w.add_str("tokenizer.ggml.model", "llama")
    w.add_arr("tokenizer.ggml.tokens", 8, tokens)
    w.add_arr("tokenizer.ggml.scores", 6, [-float(i) for i in range(V)])
    w.add_arr("tokenizer.ggml.token_type", 5, ttype)
    w.add_u32("tokenizer.ggml.bos_token_id", 2)
    w.add_u32("tokenizer.ggml.eos_token_id", 1)
    w.add_u32("tokenizer.ggml.unknown_token_id", 3)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float32)

    def norm(n):  # GGUF stores Gemma's 1 + w
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(V, d, 0.05), types["embd"])
    w.add_tensor("output_norm.weight", norm(d), "F32")
    for l in range(L):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", norm(d), "F32")
        w.add_tensor(p + "attn_q.weight", mat(H * hd, d, d ** -0.5), types["q"])
        w.add_tensor(p + "attn_k.weight", mat(KV * hd, d, d ** -0.5), types["k"])
        w.add_tensor(p + "attn_v.weight", mat(KV * hd, d, d ** -0.5), types["v"])
        w.add_tensor(p + "attn_q_norm.weight", norm(hd), "F32")
        w.add_tensor(p + "attn_k_norm.weight", norm(hd), "F32")
        w.add_tensor(p + "attn_output.weight", mat(d, H * hd, (H * hd) ** -0.5), types["o"])
        w.add_tensor(p + "post_attention_norm.weight", norm(d), "F32")
        w.add_tensor(p + "ffn_norm.weight", norm(d), "F32")
        w.add_tensor(p + "ffn_gate.weight", mat(ff, d, d ** -0.5), types["gate"])
        w.add_tensor(p + "ffn_up.weight", mat(ff, d, d ** -0.5), types["up"])
        w.add_tensor(p + "ffn_down.weight", mat(d, ff, ff ** -0.5), types["down"])
        w.add_tensor(p + "post_ffw_norm.weight", norm(d), "F32")
    w.write(out)


if __name__ == "__main__":
    main()
