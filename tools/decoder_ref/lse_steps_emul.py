#!/usr/bin/env python3
"""Issue 31, second look: the float emulation of test_decoder_cuda's batched-vs-single STEPS (not only a prompt's
last position as lse_batched_emul.py does), on the CPU with transformers' Gemma3ForCausalLM from the GGUF (float32,
eager), so the H100's log-sum-exp gaps can be told apart from numerics:
  prompt:   fed once with bf16-rounded activations (the GPU's prefill chunk, cuBLAS bf16 GEMMs), the cache then
            copied to both paths (the test prefills two sequences with the same kernels: equal caches)
  single:   each step with float activations and bf16 weights (the batch-1 decode kernels)
  batched:  each step with the batched step's activations: before every product the float input is cut into P bf16
            planes (x = hi + mid + lo, cq's CLAUSEQA_BATCH_PLANES) and the product is the sum of the planes'
            products; P = 1 is the bf16 rounding of the GEMMs before issue 31's fix (today's default), P = 3 the
            exact float input (the fixed kernels: one cuBLAS GEMM over 3 B rows, the planes summed by the consumer
            kernels), P = 2 keeps 16 bits
  logits:   the exact (Q8_0 as stored) embedding times the final-normed state on both (rows_logits = batch 1's,
            CLAUSEQA_BATCH_LOGITS=rows, which test_decoder_cuda sets); also the batched row's lse with the product's
            default logits (the cuBLAS GEMM on the bf16 copy of E, the state in P planes as well), and what a bf16
            state alone and the bf16 weights alone move it
Cases (the test's tokens, test_token ids, positions):
  batch   test_batched_decode: 6 sequences of 1, 5, 37, 300, W + 512 + 30, 2W + 5 tokens (BOS first), 5 steps
  conc    test_concurrent_decode: 8 sequences of 20 + 37 i tokens (no BOS), 12 steps
Prints every row's lse single / batched, its gap, top-1 of each and the worst rows, for each P asked (--planes,
default 1,3: the batched paths run side by side from the same prompt cache). Reference tool only: CI never runs it.
Measured on the dev box (2026-12-06, commit 472120b + this tool, ~3 min on 2 cores):
  batch: 30 rows, lse gap 0.386 at most (seq 1 pos 6, lse -68.6 vs -68.2), best agrees 29/30
  conc:  96 rows, lse gap 0.411 at most (seq 3 pos 142), best agrees 94/96
and with the planes (2026-12-07, branch cuda31 09bfe41, --planes 1,2,3, ~8-10 min a case on 2 shared cores):
  batch: P=1 0.386 (29/30), P=2 9.9e-4 (30/30), P=3 2.0e-4 (30/30); the GEMM's logits with the state in the
         planes too: P=1 0.337, P=3 0.0092 (a bf16 state alone 0.207, the bf16 weights alone 0.0092)
  conc:  P=1 0.411 (94/96), P=3 1.45e-4 (96/96); the GEMM's logits: P=1 0.450, P=3 0.0058
against the H100's 0.734 with 29/30 and 0.596 with 94/96 (test_decoder_cuda, the same rows): the bf16 activations
alone move these rows' log-sum-exp by 0.3-0.4, well over lse_batched_emul.py's 0.02-0.06 (a prompt's last
position only); the rows that move are those with a very negative log-sum-exp (-20 to -72: random-token states).
  /opt/venv-train/bin/python tools/decoder_ref/lse_steps_emul.py data/models/gemma-3-270m-q4_k_m.gguf [batch|conc]
      [--planes 1,2,3]
"""
import copy, os, sys
import torch, torch.nn.functional as F
from transformers import AutoModelForCausalLM

torch.set_num_threads(2)
args = sys.argv[1:]
planes_list = [1, 3]
if "--planes" in args:
    i = args.index("--planes")
    planes_list = [int(v) for v in args[i + 1].split(",")]
    del args[i:i + 2]
if not args or any(p not in (1, 2, 3) for p in planes_list):
    sys.exit(__doc__)
path = args[0]
cases = args[1:] or ["batch", "conc"]
d, f = os.path.split(os.path.abspath(path))
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, attn_implementation="eager")
model.eval()
V = model.config.vocab_size
W = getattr(model.config, "sliding_window", None) or 512
E = model.lm_head.weight.data.clone()
E16 = E.bfloat16().float()  # the bf16 copy the batched step's logits GEMM reads
mode = {"planes": 0}  # 0: float activations (batch 1); P > 0: the input cut into P bf16 planes
wcache = {}


def lin(self, x):
    w = wcache.get(id(self))
    if w is None:
        w = self.weight.data.bfloat16().float()
        wcache[id(self)] = w
    b = None if self.bias is None else self.bias
    if not mode["planes"]:
        return F.linear(x, w, b)
    y, r = None, x
    for _ in range(mode["planes"]):  # hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid): exact for P = 3
        h = r.bfloat16().float()
        r = r - h
        yp = F.linear(h, w)
        y = yp if y is None else y + yp  # (hi W + mid W) + lo W: the consumer kernels' order
    return y if b is None else y + b


torch.nn.Linear.forward = lin


def test_token(i, t):
    return 300 + ((i * 7919 + t * 104729) % (2**32)) % (V - 300)


def fwd(ids, pos0, cache, planes):
    mode["planes"] = planes
    with torch.no_grad():
        out = model.model(torch.tensor([ids]), past_key_values=cache, use_cache=True,
                          position_ids=torch.arange(pos0, pos0 + len(ids)).unsqueeze(0))
    return out.last_hidden_state[0, -1], out.past_key_values


def gemm_logits(h, planes):
    """The batched step's default logits (CLAUSEQA_BATCH_LOGITS unset): the state cut into P bf16 planes, each plane
    times the bf16 copy of E, the planes' products summed (softcap_kernel's order)."""
    y, r = None, h
    for _ in range(planes):
        p = r.bfloat16().float()
        r = r - p
        yp = p @ E16.T
        y = yp if y is None else y + yp
    return y


def lse(l):
    return torch.logsumexp(l.double(), 0).item()


def run_case(name, prompts, step_tok, steps):
    rows = {p: [] for p in planes_list}
    for i, ids in enumerate(prompts):
        h, cache = fwd(ids, 0, None, 1)  # the prefill chunk's bf16 GEMMs
        ca = cache
        cb = {p: copy.deepcopy(cache) for p in planes_list}
        for s in range(steps):
            tok, pos = step_tok(i, s), len(ids) + s
            ha, ca = fwd([tok], pos, ca, 0)
            la = ha @ E.T
            ta = torch.topk(la, 64)
            for p in planes_list:
                hb, cb[p] = fwd([tok], pos, cb[p], p)
                lb = hb @ E.T
                lg = lse(gemm_logits(hb, p))  # the default logits GEMM: the state in P planes, bf16 weights
                h16 = hb.bfloat16().float()
                lgs, lgw = lse(h16 @ E.T), lse(hb @ E16.T)  # a bf16 state's rounding and the weights' apart
                tb = int(lb.argmax())
                moved = (lb[ta.indices] - la[ta.indices]).abs().max().item()
                rows[p].append((abs(lse(lb) - lse(la)), i, len(ids), pos, lse(la), lse(lb), int(ta.indices[0]), tb,
                                moved, abs(lg - lse(la)), abs(lgs - lse(la)), abs(lgw - lse(la))))
                print(f"  {name} P={p} seq {i} (len {len(ids)}) pos {pos}: lse single {lse(la):.4f} batched "
                      f"{lse(lb):.4f} gap {lse(lb) - lse(la):+.4f}, top-1 {int(ta.indices[0])} / {tb}, top-64 moved "
                      f"{moved:.2e} at most; the GEMM's logits lse {lg:.4f}", flush=True)
    for p in planes_list:
        r = sorted(rows[p], reverse=True)
        agree = sum(x[6] == x[7] for x in r)
        print(f"{name} planes={p}: {len(r)} rows, lse gap {r[0][0]:.2e} at most (seq {r[0][1]} pos {r[0][3]}), "
              f"best agrees {agree}/{len(r)}, top-64 logits moved {max(x[8] for x in r):.2e} at most, with the "
              f"GEMM's logits (the state in {p} planes too) lse gap {max(x[9] for x in r):.2e} at most (a bf16 state "
              f"alone {max(x[10] for x in r):.2e}, the bf16 weights alone {max(x[11] for x in r):.2e}); worst five: " +
              ", ".join(f"seq {x[1]} pos {x[3]} {x[0]:.2e}" for x in r[:5]), flush=True)


if "batch" in cases:
    lens = [1, 5, 37, 300, W + 512 + 30, 2 * W + 5]
    prompts = [[2] + [test_token(i, t) for t in range(1, L)] for i, L in enumerate(lens)]
    run_case("batch", prompts, lambda i, s: test_token(i + 1000, s), 5)
if "conc" in cases:
    prompts = [[test_token(i, t) for t in range(20 + 37 * i)] for i in range(8)]
    run_case("conc", prompts, lambda i, s: test_token(i + 2000, s), 12)
