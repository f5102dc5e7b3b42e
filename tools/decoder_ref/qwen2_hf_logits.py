#!/usr/bin/env python3
"""Reference logits of a qwen2 GGUF from transformers (AutoModelForCausalLM with gguf_file: weights dequantized by
gguf-py, float32, eager attention), on the GPU when there is one, in the format of
tests/data/decoder/qwen2_logits_ref.json, for test_decoder_qwen2's external mode (CLAUSEQA_QWEN2_MODEL/_REF/
_DEVICE: the C decoder on CUDA or the CPU against it). For the GPU box (tools/device_qwen.sh), where torch is.
  python3 tools/decoder_ref/qwen2_hf_logits.py MODEL.gguf OUT.json [--ids-from REF.json | --random N]
    --ids-from: the prompts' ids of an existing fixture (the real model: the same prompts as the numpy reference)
    --random N: 4 prompts of N random ids (a synthetic model, whose vocabulary is not text)
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

TOP_K, GREEDY = 16, 4


def main():
    path, out = sys.argv[1], sys.argv[2]
    d, f = os.path.split(os.path.abspath(path))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="eager")
    model.to(dev).eval()
    V = model.config.vocab_size
    if sys.argv[3] == "--ids-from":
        prompts = [(c["name"], c["ids"]) for c in json.load(open(sys.argv[4], encoding="utf-8"))["cases"]]
    else:
        rng = np.random.default_rng(7)
        n = int(sys.argv[4])
        prompts = [(f"random{i}", [int(x) for x in rng.integers(0, V - 3, n + 9 * i)]) for i in range(4)]
    cases = []
    for name, ids in prompts:
        with torch.no_grad():
            lg = model(torch.tensor([ids], device=dev)).logits[0].float().cpu().numpy()
        n = len(ids)
        rows = []
        for p in sorted({0, n // 2, n - 1}):
            top = np.argsort(-lg[p])[:TOP_K]
            rows.append({"pos": int(p), "argmax": int(top[0]), "top_ids": [int(i) for i in top],
                         "top_logits": [round(float(lg[p, i]), 5) for i in top]})
        cur, greedy = list(ids), []
        with torch.no_grad():
            for _ in range(GREEDY):
                nxt = int(model(torch.tensor([cur], device=dev)).logits[0, -1].argmax())
                greedy.append(nxt)
                cur.append(nxt)
        cases.append({"name": name, "ids": ids, "positions": rows, "greedy": greedy})
        print(name, n, "tokens; argmax at end", rows[-1]["argmax"], "greedy", greedy, flush=True)
    with open(out, "w", encoding="utf-8") as fp:
        json.dump({"model": f, "reference": f"transformers {__import__('transformers').__version__} "
                   f"AutoModelForCausalLM(gguf_file), float32, eager, {dev}", "top_k": TOP_K, "cases": cases}, fp)
        fp.write("\n")


if __name__ == "__main__":
    main()
