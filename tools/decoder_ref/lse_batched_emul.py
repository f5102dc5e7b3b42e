#!/usr/bin/env python3
"""Issue 31: how far apart the batched CUDA decode step's log-sum-exp and batch 1's can be from numerics alone, in a
float emulation of both paths on the CPU (transformers' Gemma3ForCausalLM from the GGUF, float32, eager):
  batch 1:  bf16 weights, float activations (the decode kernels), logits from the Q8_0 embedding as stored (exact)
  batched:  bf16 weights, activations rounded to bf16 before every product (cuBLAS bf16 GEMMs), and (before the
            fix) the logits from bf16 states times the bf16 copy of the embedding
on the sequences of test_decoder_cuda's batched test (its test_token ids). Prints the log-sum-exp gap of each
path, the logits stage alone and the hidden states alone. Reference tool only: CI never runs it.
  /opt/venv-train/bin/python tools/decoder_ref/lse_batched_emul.py data/models/gemma-3-270m-q4_k_m.gguf
Measured on the dev box (2026-12-06): gaps of 0.02-0.06 (the logits stage -0.02..-0.003, the hidden states
-0.009..+0.03) on 5, 37 and 300 tokens: nowhere near the 1.3 the GPU showed.
"""
import os, sys, math
import torch, torch.nn.functional as F
from transformers import AutoModelForCausalLM
torch.set_num_threads(2)
path = sys.argv[1]
d, f = os.path.split(os.path.abspath(path))
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="eager")
model.eval()
V = model.config.vocab_size
E = model.lm_head.weight.data.clone()
Eb = E.bfloat16().float()
mode = {"act_bf16": False}
orig = torch.nn.Linear.forward
wcache = {}
def lin(self, x):
    w = wcache.get(id(self))
    if w is None:
        w = self.weight.data.bfloat16().float(); wcache[id(self)] = w
    if mode["act_bf16"]:
        x = x.bfloat16().float()
    return F.linear(x, w, None if self.bias is None else self.bias)
torch.nn.Linear.forward = lin
def test_token(i, t):
    return 300 + ((i * 7919 + t * 104729) % (2**32)) % (V - 300)
def run(ids, act_bf16):
    mode["act_bf16"] = act_bf16
    with torch.no_grad():
        out = model.model(torch.tensor([ids]), output_hidden_states=False)
    return out.last_hidden_state[0, -1]
for i, L in enumerate([5, 37, 300]):
    ids = [2] + [test_token(i, t) for t in range(1, L)]
    h1 = run(ids, False)   # batch-1 numerics: float activations, bf16 weights
    hb = run(ids, True)    # batched numerics: bf16 activations
    la = h1 @ E.T          # batch-1 logits: exact (Q8_0) embedding, float x
    lb = hb.bfloat16().float() @ Eb.T  # batched: bf16 x, bf16 E
    lc = h1.bfloat16().float() @ Eb.T  # same hidden, only the logit stage differs
    ld = hb @ E.T                       # batched hidden, exact logit stage
    lse = lambda l: torch.logsumexp(l.double(), 0).item()
    top = torch.topk(la, 64)
    print(f"L={L}: lse a {lse(la):.4f} b {lse(lb):.4f} (diff {lse(lb)-lse(la):+.4f}); logit stage only {lse(lc)-lse(la):+.4f};"
          f" hidden only {lse(ld)-lse(la):+.4f}; top1 a {top.values[0]:.3f} b {lb[top.indices[0]]:.3f};"
          f" mean shift top64 {(lb[top.indices]-la[top.indices]).mean():+.4f}; bulk mean a {la.mean():.3f} b {lb.mean():.3f}")
