"""The training step's time, today's prefix scan against the fused Triton scan, at the same batch (issue 14 asks for
>= 20x), after the fused kernel's check against the loop on this GPU:

    python3 tools/ssm_train/bench_step.py [--out F.json] [--batch 64] [--steps 10]

The batch has the shape of the issue-6 trainings (64 queries of up to 96 tokens, two windows each of up to 512
tokens, about 61,000 tokens in all; random ids) and the model today's production shape (cq-hash-v1, d_model 192,
4 layers, d_state 16): one step = forward (windows with block checkpointing, as train.py), InfoNCE loss, backward,
AdamW. Also times the scan alone (one layer's shape, forward + backward) both ways. Prints and writes JSON.
"""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model as tm  # noqa: E402
import scan_triton  # noqa: E402

PROD = dict(vocab_size=32768, d_model=192, n_layer=4, d_state=16, d_conv=4, expand=2, dt_rank=12, d_embed=256)


def synthetic_batch(n_queries, device, seed=0, w_range=(300, 513)):
    g = torch.Generator().manual_seed(seed)
    q_len = torch.randint(8, 97, (n_queries,), generator=g)
    w_len = torch.randint(w_range[0], w_range[1], (2 * n_queries,), generator=g)
    q = torch.zeros(n_queries, int(q_len.max()), dtype=torch.long)
    w = torch.zeros(2 * n_queries, int(w_len.max()), dtype=torch.long)
    for i, n in enumerate(q_len.tolist()):
        q[i, :n] = torch.randint(5, 32768, (n,), generator=g)
    for i, n in enumerate(w_len.tolist()):
        w[i, :n] = torch.randint(5, 32768, (n,), generator=g)
    # segments: clauses of ~60 tokens in each window
    rows, st, en = [], [], []
    for i, n in enumerate(w_len.tolist()):
        a = 0
        while a < n:
            b = min(n, a + 60)
            rows.append(i)
            st.append(a)
            en.append(b)
            a = b
    mask = torch.zeros(n_queries, len(rows), dtype=torch.bool)
    for i in range(n_queries):
        mask[i, rows.index(2 * i)] = True
    t = lambda v: torch.as_tensor(v, device=device)  # noqa: E731
    return {"q": q.to(device), "q_len": q_len.to(device), "w": w.to(device), "w_len": w_len.to(device),
            "rows": t(rows), "st": t(st), "en": t(en), "mask": mask.to(device), "ntok": int(w_len.sum() + q_len.sum())}


def step_fn(model, opt, bt, fused, tau=0.05):
    qo = tm.encode(model, bt["q"], lens=bt["q_len"], fused=fused)
    idx = torch.arange(len(bt["q_len"]), device=qo.device)
    qv = tm.pool(model, qo, idx, torch.zeros_like(bt["q_len"]), bt["q_len"])
    o = tm.encode(model, bt["w"], ckpt=True, lens=bt["w_len"], fused=fused)
    cv = tm.pool(model, o, bt["rows"], bt["st"], bt["en"])
    s = qv @ cv.T / tau
    loss = (torch.logsumexp(s, 1) - torch.logsumexp(s.masked_fill(~bt["mask"], float("-inf")), 1)).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def timed(fn, steps, device):
    fn()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.time()
    for _ in range(steps):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.time() - t) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--old-steps", type=int, default=4)
    ap.add_argument("--out", default="")
    ap.add_argument("--tf32", type=int, default=0, help="0: fp32 products, as the issue-6 step was timed")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (a CPU run under TRITON_INTERPRET=1)")
    a = ap.parse_args()
    global PROD
    if a.smoke:
        PROD = dict(PROD, d_model=16, n_layer=1, dt_rank=2, d_embed=16)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
    res = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
           "triton": __import__("triton").__version__, "batch_queries": a.batch, "tf32": bool(a.tf32)}
    # 1. the kernel against the loop, on this device
    checks = {}
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        for (B, L, Di, N, lens) in ((2, 37, 24, 4, [37, 20]),) + (() if a.smoke else ((3, 300, 384, 16, [300, 257, 1]),)):
            r = scan_triton.check(B, L, Di, N, dtype=dtype, device=device, lens=lens, seed=L)
            checks["%s B%d L%d Di%d N%d" % (str(dtype)[6:], B, L, Di, N)] = {k: float("%.2e" % v) for k, v in r.items()}
            if max(r.values()) > tol:
                res["kernel_check"] = checks
                print(json.dumps(res, indent=1))
                sys.exit("FAILED: fused scan vs loop above %g" % tol)
    res["kernel_check"] = checks
    res["autotune_ms"] = scan_triton.autotune(PROD["d_model"] * 2, 16, device)
    res["scan_config"] = dict(scan_triton.CONFIG)
    print(json.dumps(res, indent=1), flush=True)
    # 2. the scan alone, one layer of a batch: forward + backward
    sb, sl = (2, 40) if a.smoke else (192, 512)
    x, dt, A, Bm, Cm = scan_triton.random_inputs(sb, sl, PROD["d_model"] * 2, 16, torch.float32, device)
    for v in (x, dt, A, Bm, Cm):
        v.requires_grad_(True)
    w = torch.randn_like(x)

    def fused_scan():
        y = scan_triton.selective_scan(x, dt, A, Bm, Cm)
        torch.autograd.grad((y * w).sum(), (x, dt, A, Bm, Cm))

    def prefix_scan():
        a_ = torch.exp(dt.unsqueeze(-1) * A)
        b_ = (dt * x).unsqueeze(-1) * Bm.unsqueeze(2)
        y = torch.einsum("bldn,bln->bld", tm.prefix_scan(a_, b_), Cm)
        torch.autograd.grad((y * w).sum(), (x, dt, A, Bm, Cm))
    res["scan_fwd_bwd_ms"] = {"shape": "%d x %d tokens, Di %d, N 16" % (sb, sl, PROD["d_model"] * 2),
                              "fused": round(timed(fused_scan, 1 if a.smoke else 10, device) * 1000, 2),
                              "prefix": round(timed(prefix_scan, 1 if a.smoke else 3, device) * 1000, 2)}
    print(json.dumps(res["scan_fwd_bwd_ms"]), flush=True)
    # 3. the whole training step, same batch, both ways
    bt = synthetic_batch(a.batch, device, w_range=(20, 70) if a.smoke else (300, 513))
    res["batch_tokens"] = bt["ntok"]
    for name, fused, n in (("fused", True, a.steps), ("prefix", False, a.old_steps)):
        model = tm.SSMEncoder(tm.Config(**PROD))
        tm.random_init(model, 1)
        model.to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        res["step_s_" + name] = round(timed(lambda: step_fn(model, opt, bt, fused), n, device), 4)
        if device == "cuda":
            res["peak_gib_" + name] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 2)
        print(name, res["step_s_" + name], flush=True)
    res["speedup"] = round(res["step_s_prefix"] / res["step_s_fused"], 1)
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
