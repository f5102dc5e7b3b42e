"""The fused selective scan (scan_triton.py) against the plain loop, outputs and every input gradient, and the
training model's fused forward against ssm_ref's sequential loop. On the CPU it needs Triton's interpreter:

    TRITON_INTERPRET=1 python3 tools/ssm_train/test_scan.py          (about a minute on 2 cores)
    python3 tools/ssm_train/test_scan.py                               (on a GPU: the same checks, compiled)

Tolerances (max |fused - ref| / max |ref|): float64 1e-12, float32 1e-5 (the float32 inputs are the float64 ones
rounded; the reference runs in float64).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scan_triton  # noqa: E402

CASES = [  # (Bsz, L, Di, N, lens, BD, CH): odd lengths, a channel block cut by Di, chunk edges, length 1
    (2, 37, 24, 4, [37, 20], 16, 16),
    (3, 70, 40, 16, [70, 64, 1], 16, 16),
    (1, 33, 8, 8, [32], 8, 32),
]


def check_devices(tm, small):
    """ssm_ref's loop and the prefix path on the meta device: a tensor made on the CPU inside them (as ssm_ref's zero
    state once was, which stopped this test on the H200) fails here too, without a GPU."""
    import copy
    m = copy.deepcopy(small).double().to("meta")
    tok = torch.randint(5, 64, (9,)).to("meta")
    m(tok, [4, 9])
    o = tm.encode(m, tok.unsqueeze(0), fused=False)
    tm.pool(m, o, torch.zeros(2, dtype=torch.long, device="meta"), torch.tensor([0, 4], device="meta"),
            torch.tensor([4, 9], device="meta"))
    print("ssm_ref and model.py keep their tensors on the model's device (meta)")


def main():
    dev = "cuda" if torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET") else "cpu"
    worst = {}
    saved = dict(scan_triton.CONFIG)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        for (B, L, Di, N, lens, BD, CH) in CASES:
            scan_triton.CONFIG.update(BD=BD, CH=CH)
            r = scan_triton.check(B, L, Di, N, dtype=dtype, device=dev, lens=lens, seed=L)
            bad = {k: v for k, v in r.items() if v > tol}
            print("%s B=%d L=%d Di=%d N=%d lens=%s BD=%d CH=%d: %s" % (str(dtype)[6:], B, L, Di, N, lens, BD, CH,
                  " ".join("%s %.1e" % kv for kv in r.items())), flush=True)
            if bad:
                sys.exit("FAILED: relative error above %g: %s" % (tol, bad))
            w = worst.setdefault(str(dtype)[6:], 0.0)
            worst[str(dtype)[6:]] = max(w, max(r.values()))
    scan_triton.CONFIG.clear()
    scan_triton.CONFIG.update(saved)
    # the training model's fused forward (model.py, fused=True) against ssm_ref's sequential loop
    import model as tm
    small = tm.SSMEncoder(tm.Config(vocab_size=64, d_model=8, n_layer=2, d_state=4, d_conv=4, expand=2, dt_rank=2,
                                    d_embed=8))
    tm.random_init(small, 1)
    check_devices(tm, small)
    e = tm.check_against_reference(small.double().to(dev), dev, lengths=(1, 5, 70), tol=1e-9, fused=True)
    print("model.py fused forward vs ssm_ref (float64): %.1e" % e)
    # every parameter's gradient through the whole encoder: fused scan against the prefix scan, padded batch
    g = torch.Generator().manual_seed(3)
    lens = [70, 41, 1]
    tok = torch.zeros(3, 70, dtype=torch.long)
    for i, n in enumerate(lens):
        tok[i, :n] = torch.randint(5, 64, (n,), generator=g)
    w = torch.randn(3, 70, 8, generator=g, dtype=torch.float64)
    mask = (torch.arange(70)[None, :] < torch.as_tensor(lens)[:, None]).unsqueeze(-1).double()
    grads = []
    for fused in (True, False):
        small.zero_grad()
        o = tm.encode(small, tok.to(dev), fused=fused)
        (o * (w * mask).to(dev)).sum().backward()
        grads.append({k: p.grad.detach().clone() for k, p in small.named_parameters() if p.grad is not None})
    ge = max(((grads[0][k] - grads[1][k]).abs().max() / grads[1][k].abs().max().clamp_min(1e-300)).item()
             for k in grads[0])
    print("model.py parameter gradients, fused vs prefix scan (float64): %.1e" % ge)
    if e > 1e-9 or ge > 1e-9:
        sys.exit("FAILED: the model's fused path differs")
    print("OK worst relative error: %s" % worst)


if __name__ == "__main__":
    main()
