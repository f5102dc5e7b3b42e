#!/usr/bin/env python3
"""A tiny random Qwen2 GGUF that keeps a real Qwen2 GGUF's tokenizer (vocabulary, token types, merges, BOS / EOS):
the data packed for the real file (pack.py) can train it, so the device path (bundle, stash, join, train.py's fast
loader, LoRA, export) can be rehearsed on the CPU in seconds a step; and, with --adapter, a LoRA adapter of its
shapes (random factors, B non-zero, F32, the manifest naming the tiny file's sha256) to rehearse --init.

    /opt/venv-train/bin/python tools/decoder_train/tiny_qwen.py SRC.gguf OUT.gguf [--adapter DIR] [--rank 16]

Needs torch, transformers, gguf (the training venv). Q8_0 for the 2-D weights, F32 for the rest; 2 layers, d 64.
"""
import argparse
import hashlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import base as BASE  # noqa: E402


def write_gguf(src, out, seed=0):
    import gguf
    import torch
    from gguf.quants import quantize
    from transformers import Qwen2Config, Qwen2ForCausalLM
    r = BASE.reader(src)
    if BASE.field(r, "general.architecture") != "qwen2":
        raise SystemExit("tiny_qwen: %s is not a qwen2 GGUF" % src)
    toks, types = BASE.tokens_of(r)
    f = r.fields["tokenizer.ggml.merges"]
    merges = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(toks), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
                      rope_theta=1e6, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).float()
    w = gguf.GGUFWriter(out, "qwen2")
    w.add_block_count(2)
    w.add_context_length(32768)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(BASE.field(r, "tokenizer.ggml.pre") or "qwen2")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    for key, add in (("tokenizer.ggml.bos_token_id", w.add_bos_token_id),
                     ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
                     ("tokenizer.ggml.padding_token_id", w.add_pad_token_id)):
        v = BASE.field(r, key)
        if v is not None:
            add(int(v))
    w.add_add_bos_token(bool(BASE.field(r, "tokenizer.ggml.add_bos_token", False)))
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    inv = {v: k for k, v in BASE.QWEN2_NAMES.items()}
    for n, p in model.named_parameters():
        if n in top:
            g = top[n]
        else:   # model.layers.L.self_attn.q_proj.weight -> blk.L.attn_q.weight
            parts = n.split(".")
            g = "blk.%s.%s.%s" % (parts[2], inv[".".join(parts[3:-1])], parts[-1])
        a = p.detach().numpy().astype(np.float32)
        if a.ndim == 2:
            q = quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(g, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(g, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return len(toks)


def write_adapter(gguf_path, out_dir, rank, seed=1):
    """Random factors of the tiny model's shapes (A Kaiming-uniform, B small non-zero), F32, as train.py writes."""
    import torch
    import lora as L
    shapes = L.gguf_weight_shapes(gguf_path)
    g = torch.Generator().manual_seed(seed)

    class M:   # what adapter_tensors reads of a LoRA layer
        def __init__(self, out_f, in_f):
            self.lora_a = torch.rand(rank, in_f, generator=g) * 0.2 - 0.1
            self.lora_b = torch.randn(out_f, rank, generator=g) * 0.01
    loras = {}
    for name, (out_f, in_f) in shapes.items():
        parts = name.split(".")
        if len(parts) == 4 and parts[0] == "blk" and parts[2] in L.HF_TO_GGUF.values():
            loras[(int(parts[1]), parts[2])] = M(out_f, in_f)
    h = hashlib.sha256(open(gguf_path, "rb").read()).hexdigest()
    L.write_adapter(out_dir, loras, rank, 2.0 * rank, os.path.basename(gguf_path), h,
                    {"steps": 7, "commit": "tiny_qwen.py (random factors)"})
    return len(loras)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--adapter", default="", help="also write a random adapter of the tiny model's shapes here")
    ap.add_argument("--rank", type=int, default=16)
    args = ap.parse_args()
    n = write_gguf(args.src, args.out)
    print("tiny_qwen: %s, %d tokens" % (args.out, n))
    if args.adapter:
        k = write_adapter(args.out, args.adapter, args.rank)
        print("tiny_qwen: adapter of %d projections, rank %d in %s" % (k, args.rank, args.adapter))


if __name__ == "__main__":
    main()
