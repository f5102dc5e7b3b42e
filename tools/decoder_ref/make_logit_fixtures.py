#!/usr/bin/env python3
"""Reference logits for tests/unit/test_decoder_forward.c from an independent Gemma-3 implementation:
transformers' Gemma3ForCausalLM loaded from the same GGUF (weights dequantized by gguf-py), float32, eager
attention, on the CPU. Writes small fixtures: prompt ids, and at a few positions the top-k logits and the
argmax; plus a few greedy tokens for the short prompts. One prompt is longer than the 512-token sliding window.
Reference tool only: CI never runs it.
  /tmp/refvenv/bin/python tools/decoder_ref/make_logit_fixtures.py data/models/gemma-3-270m-q4_k_m.gguf \
      tests/data/decoder/logits_ref.json [--dump DIR]   (--dump: full logits as .npy, for local digging)
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TOP_K = 16
GREEDY = 8


def long_text():
    # A synthetic regulation of ~620 tokens (past the 512 window and the 576-slot ring): numbered articles mixing Chinese and English terms.
    parts = []
    for i in range(1, 19):
        parts.append(f"第{i}条 本条例所称数字经济，是指以数据资源为关键要素，以现代信息网络为主要载体的经济形态（Article {i}）。")
    return "".join(parts)


PROMPTS = [
    ("en_short", "The capital of France is"),
    ("zh_law", "中华人民共和国劳动法第一条 为了保护劳动者的合法权益，调整劳动关系，"),
    ("chat", "<start_of_turn>user\nWhat does Article 5 say about overtime pay?<end_of_turn>\n<start_of_turn>model\n"),
    ("long_window", long_text()),
]


def main():
    path, out = sys.argv[1], sys.argv[2]
    dump = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--dump" else None
    torch.set_num_threads(os.cpu_count())
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    cfg = model.config
    print("config:", {k: getattr(cfg, k, None) for k in ("sliding_window", "layer_types", "rope_theta", "rope_parameters",
                                                          "query_pre_attn_scalar", "final_logit_softcapping",
                                                          "attn_logit_softcapping", "rms_norm_eps")})
    cases = []
    for name, text in PROMPTS:
        ids = [tok.bos_token_id] + tok.encode(text, add_special_tokens=False)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        n = len(ids)
        positions = sorted({n - 1, min(n - 1, 3)} | ({100, 511, 512, 513, 600, n - 2} if n > 520 else set()))
        rows = []
        for p in positions:
            top = np.argsort(-logits[p])[:TOP_K]
            rows.append({"pos": int(p), "argmax": int(top[0]), "top_ids": [int(i) for i in top],
                         "top_logits": [float(logits[p, i]) for i in top]})
        greedy = []
        if n < 100:
            cur = list(ids)
            with torch.no_grad():
                for _ in range(GREEDY):
                    nxt = int(model(torch.tensor([cur])).logits[0, -1].argmax())
                    greedy.append(nxt)
                    cur.append(nxt)
        # Log-probabilities of the prompt's own tokens: a perplexity reference.
        lp = torch.log_softmax(torch.tensor(logits[:-1]), dim=-1)
        nll = -lp[torch.arange(n - 1), torch.tensor(ids[1:])].mean().item()
        cases.append({"name": name, "text": text, "ids": ids, "positions": rows, "greedy": greedy,
                      "mean_nll": nll})
        if dump:
            np.save(os.path.join(dump, f"{name}.npy"), logits)
        print(f"{name}: {n} tokens, argmax at end {rows[-1]['argmax']}, greedy {greedy}, ppl {np.exp(nll):.3f}")
    doc = {"model": f, "reference": "transformers Gemma3ForCausalLM from the GGUF, float32, eager attention, CPU",
           "top_k": TOP_K, "cases": cases}
    with open(out, "w", encoding="utf-8") as fp:
        json.dump(doc, fp, ensure_ascii=False)
        fp.write("\n")


if __name__ == "__main__":
    main()
