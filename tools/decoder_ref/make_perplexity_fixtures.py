#!/usr/bin/env python3
"""Reference perplexities for tests/unit/test_decoder_perplexity.c: transformers' Gemma3ForCausalLM loaded from
the same GGUF (float32, eager, CPU) scores tests/data/decoder/ppl_zh.txt (articles 1-2 of the PRC Labour Contract
Law) and ppl_en.txt (the project's fictitious services agreement) exactly as `clauseqa perplexity` does: BOS +
the text's tokens (no special-token parsing), one window (the texts are shorter than 512 tokens), every token
scored. Reference tool only: CI never runs it.
  /tmp/refvenv/bin/python tools/decoder_ref/make_perplexity_fixtures.py data/models/gemma-3-270m-q4_k_m.gguf \
      tests/data/decoder
"""
import json
import math
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    path, outdir = sys.argv[1], sys.argv[2]
    d, f = os.path.split(os.path.abspath(path))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    cases = []
    for name in ("ppl_zh.txt", "ppl_en.txt"):
        with open(os.path.join(outdir, name), encoding="utf-8") as fp:
            text = fp.read()
        ids = [tok.bos_token_id] + tok.encode(text, add_special_tokens=False)
        assert len(ids) <= 512, "keep the fixture texts within one window"
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double()
        lp = torch.log_softmax(logits[:-1], dim=-1)
        nll = -lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].sum().item()
        n = len(ids) - 1
        cases.append({"file": name, "n_tokens": n, "nll_sum": nll, "perplexity": math.exp(nll / n)})
        print(name, n, "tokens, perplexity", math.exp(nll / n))
    with open(os.path.join(outdir, "perplexity_ref.json"), "w") as fp:
        json.dump({"model": f, "reference": "transformers Gemma3ForCausalLM from the GGUF, float32, eager, CPU",
                   "context": 512, "cases": cases}, fp, indent=1)
        fp.write("\n")


if __name__ == "__main__":
    main()
