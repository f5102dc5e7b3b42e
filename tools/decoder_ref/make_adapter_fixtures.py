#!/usr/bin/env python3
"""A reference for the decoder's LoRA adapters (docs/ANSWERS.md, clauseqa-lora-v1) from an independent
implementation: a small random adapter written in the adapter format, and the logits of transformers'
Gemma3ForCausalLM (loaded from the same GGUF, float32, eager attention, CPU) with every adapted weight replaced by
W + (alpha / rank) B A in torch, as PEFT merges LoRA (lora_A (r, in), lora_B (out, r)).
tests/unit/test_decoder_adapter.c loads the adapter onto the C decoder and checks its logits against these.
Reference tool only: CI never runs it.
  /opt/venv-train/bin/python tools/decoder_ref/make_adapter_fixtures.py data/models/gemma-3-270m-q4_k_m.gguf \
      tests/data/decoder/adapter tests/data/decoder/adapter_logits_ref.json
"""
import hashlib
import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

RANK, ALPHA, LAYERS, SEED, TOP_K = 4, 8.0, (0, 8, 17), 20261201, 16
# GGUF projection name -> the module of a transformers Gemma-3 decoder layer
PROJ = {"attn_q": ("self_attn", "q_proj"), "attn_k": ("self_attn", "k_proj"), "attn_v": ("self_attn", "v_proj"),
        "attn_output": ("self_attn", "o_proj"), "ffn_gate": ("mlp", "gate_proj"), "ffn_up": ("mlp", "up_proj"),
        "ffn_down": ("mlp", "down_proj")}
PROMPTS = [
    ("zh", "任务：回答\n材料：\n[1] 《中华人民共和国劳动法》第二十一条 劳动合同可以约定试用期。试用期最长不得超过六个月。\n"
           "问题：试用期最长多长时间？\n答案："),
    ("en", "Task: relevance\nPassage: Distribution Agreement, 12.1. Either party may terminate this Agreement on "
           "thirty (30) days written notice.\nQuestion: What does this agreement say about termination?\nRelevant:"),
]


def bf16(x):
    """x rounded to bfloat16 (kept as float32 values), and its bytes."""
    t = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    return t.float().numpy(), t.view(torch.int16).numpy()


def main():
    path, adapter_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(os.cpu_count())
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    rng = np.random.default_rng(SEED)
    tensors = {}
    with torch.no_grad():
        for layer in LAYERS:
            for name, (block, proj) in PROJ.items():
                w = getattr(getattr(model.model.layers[layer], block), proj).weight  # (out, in)
                out_dim, in_dim = w.shape
                a, a_raw = bf16(rng.uniform(-1, 1, (RANK, in_dim)) / np.sqrt(in_dim))
                b, b_raw = bf16(rng.uniform(-1, 1, (out_dim, RANK)) * 0.3 / np.sqrt(RANK))
                tensors[f"blk.{layer}.{name}.lora_a"] = a_raw
                tensors[f"blk.{layer}.{name}.lora_b"] = b_raw
                w += (ALPHA / RANK) * torch.from_numpy(b) @ torch.from_numpy(a)
    os.makedirs(adapter_dir, exist_ok=True)
    # safetensors.numpy has no bfloat16: write int16 and patch the dtype in the header (same bytes)
    tmp = os.path.join(adapter_dir, "adapter.safetensors")
    save_file(tensors, tmp, metadata={"format": "clauseqa-lora-v1"})
    raw = open(tmp, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for k, v in header.items():
        if k != "__metadata__":
            v["dtype"] = "BF16"
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(tmp, "wb") as fp:
        fp.write(len(hdr).to_bytes(8, "little") + hdr + raw[8 + n:])
    with open(os.path.join(adapter_dir, "adapter.json"), "w", encoding="utf-8") as fp:
        json.dump({"format": "clauseqa-lora-v1", "rank": RANK, "alpha": ALPHA, "prompt_format": "cq-prompt-v1",
                   "base": {"file": f, "sha256": sha},
                   "manifest": {"name": "reference-random", "steps": 0,
                                "note": "random factors (tools/decoder_ref/make_adapter_fixtures.py) for tests"}},
                  fp, ensure_ascii=False, indent=1)
        fp.write("\n")
    cases = []
    for name, text in PROMPTS:
        ids = [tok.bos_token_id] + tok.encode(text, add_special_tokens=False)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        rows = []
        for p in sorted({3, len(ids) // 2, len(ids) - 1}):
            top = np.argsort(-logits[p])[:TOP_K]
            rows.append({"pos": int(p), "argmax": int(top[0]), "top_ids": [int(i) for i in top],
                         "top_logits": [float(logits[p, i]) for i in top]})
        cases.append({"name": name, "text": text, "ids": ids, "positions": rows})
        print(f"{name}: {len(ids)} tokens, argmax at end {rows[-1]['argmax']}")
    doc = {"model": f, "adapter": os.path.basename(adapter_dir), "rank": RANK, "alpha": ALPHA, "layers": LAYERS,
           "reference": "transformers Gemma3ForCausalLM from the GGUF, float32, eager attention, CPU, W += alpha/r B A",
           "top_k": TOP_K, "cases": cases}
    with open(out, "w", encoding="utf-8") as fp:
        json.dump(doc, fp, ensure_ascii=False)
        fp.write("\n")


if __name__ == "__main__":
    main()
