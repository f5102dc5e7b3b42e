"""The selective scan of the training model as one fused Triton kernel, forward and backward (issue 14).

    y[b,t,d] = sum_n C[b,t,n] h[b,t,d,n]       h[b,t,d,n] = exp(dt[b,t,d] A[d,n]) h[b,t-1,d,n] + dt[b,t,d] x[b,t,d] B[b,t,n]

from h[b,-1] = 0, over the first lens[b] steps of each sequence (the rest of y is 0: sequences are right-padded and
the network is causal, so padding never changes a real output). The D skip and the SiLU(z) gate stay in torch
(elementwise over (B, L, Di), cheap); what the kernel removes is the (B, L, Di, N) state that model.py's prefix scan
materializes about a hundred times a layer.

Forward: one program per (sequence, block of BD channels) runs the recurrence in time order with h (BD x N) in
registers, writes y, and keeps h at the end of every chunk of CH steps (B x n_chunks x Di x N, the only saved
state). Backward: the same programs walk the chunks from last to first; each chunk is recomputed forward from its
saved start state into a per-program scratch (CH x BD x N, L2-resident), then walked backwards with the adjoint
g_t = dy_t C_t + a_{t+1} g_{t+1}:
    dC_t[n]  = sum_d dy_t[d] h_t[d,n]                  dB_t[n] = sum_d g_t[d,n] dt_t[d] x_t[d]
    s_t[d]   = sum_n g_t[d,n] B_t[n]                   dx_t[d] = s_t[d] dt_t[d]
    e_t[d,n] = g_t[d,n] h_{t-1}[d,n] a_t[d,n]          ddt_t[d] = s_t[d] x_t[d] + sum_n e_t[d,n] A[d,n]
    dA[d,n]  = sum_{b,t} e_t[d,n] dt_t[d]
dB and dC are summed over channel blocks, dA over sequences, by torch on per-program partials (deterministic).

check() compares both directions with scan_reference() (a plain sequential loop) in float64 and float32; it runs on
the CPU under TRITON_INTERPRET=1 (tools/ssm_train/test_scan.py) and on the GPU at the start of training.
"""
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _scan_fwd(x_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, len_ptr, y_ptr, hs_ptr, L, Di, NCH,
              N: tl.constexpr, BD: tl.constexpr, CH: tl.constexpr):
    pid_b = tl.program_id(0).to(tl.int64)
    pid_d = tl.program_id(1)
    d = pid_d * BD + tl.arange(0, BD)
    n = tl.arange(0, N)
    dmask = d < Di
    m2 = dmask[:, None]
    A = tl.load(A_ptr + d[:, None] * N + n[None, :], mask=m2, other=0.0)
    T = tl.load(len_ptr + pid_b)
    xb = x_ptr + pid_b * L * Di
    db = dt_ptr + pid_b * L * Di
    yb = y_ptr + pid_b * L * Di
    bb = B_ptr + pid_b * L * N
    cb = C_ptr + pid_b * L * N
    hb = hs_ptr + pid_b * NCH * Di * N
    h = A * 0.0
    for t in range(0, T):
        xt = tl.load(xb + t * Di + d, mask=dmask, other=0.0)
        dtt = tl.load(db + t * Di + d, mask=dmask, other=0.0)
        Bt = tl.load(bb + t * N + n)
        Ct = tl.load(cb + t * N + n)
        h = tl.exp(dtt[:, None] * A) * h + (dtt * xt)[:, None] * Bt[None, :]
        tl.store(yb + t * Di + d, tl.sum(h * Ct[None, :], axis=1), mask=dmask)
        # the state at the end of each full chunk: where the backward pass restarts chunk t // CH + 1
        tl.store(hb + ((t // CH) * Di + d[:, None]) * N + n[None, :], h, mask=m2 & ((t + 1) % CH == 0))


@triton.jit
def _scan_bwd(x_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, len_ptr, dy_ptr, hs_ptr, ws_ptr,
              dx_ptr, ddt_ptr, dA_ptr, dB_ptr, dC_ptr, L, Di, NCH, NDB,
              N: tl.constexpr, BD: tl.constexpr, CH: tl.constexpr):
    pid_b = tl.program_id(0).to(tl.int64)
    pid_d = tl.program_id(1)
    dl = tl.arange(0, BD)
    d = pid_d * BD + dl
    n = tl.arange(0, N)
    dmask = d < Di
    m2 = dmask[:, None]
    A = tl.load(A_ptr + d[:, None] * N + n[None, :], mask=m2, other=0.0)
    T = tl.load(len_ptr + pid_b)
    xb = x_ptr + pid_b * L * Di
    db = dt_ptr + pid_b * L * Di
    dyb = dy_ptr + pid_b * L * Di
    dxb = dx_ptr + pid_b * L * Di
    ddb = ddt_ptr + pid_b * L * Di
    bb = B_ptr + pid_b * L * N
    cb = C_ptr + pid_b * L * N
    dBb = dB_ptr + (pid_b * L * NDB + pid_d) * N     # partials (B, L, NDB, N)
    dCb = dC_ptr + (pid_b * L * NDB + pid_d) * N
    hb = hs_ptr + pid_b * NCH * Di * N
    ws = ws_ptr + (pid_b * NDB + pid_d) * CH * BD * N  # this program's scratch: CH states of BD x N
    wofs = dl[:, None] * N + n[None, :]
    g = A * 0.0
    dA = A * 0.0
    nch = (T + CH - 1) // CH
    for ci in range(0, nch):
        c = nch - 1 - ci
        t0 = c * CH
        t1 = tl.minimum(t0 + CH, T)
        hstart = tl.load(hb + (tl.maximum(c - 1, 0) * Di + d[:, None]) * N + n[None, :], mask=m2, other=0.0)
        hstart = tl.where(c > 0, hstart, 0.0)
        h = hstart
        for t in range(t0, t1):
            xt = tl.load(xb + t * Di + d, mask=dmask, other=0.0)
            dtt = tl.load(db + t * Di + d, mask=dmask, other=0.0)
            Bt = tl.load(bb + t * N + n)
            h = tl.exp(dtt[:, None] * A) * h + (dtt * xt)[:, None] * Bt[None, :]
            tl.store(ws + (t - t0) * BD * N + wofs, h)
        tl.debug_barrier()
        for i in range(0, t1 - t0):
            t = t1 - 1 - i
            xt = tl.load(xb + t * Di + d, mask=dmask, other=0.0)
            dtt = tl.load(db + t * Di + d, mask=dmask, other=0.0)
            dyt = tl.load(dyb + t * Di + d, mask=dmask, other=0.0)
            Bt = tl.load(bb + t * N + n)
            Ct = tl.load(cb + t * N + n)
            ht = tl.load(ws + (t - t0) * BD * N + wofs)
            hp = tl.load(ws + tl.maximum(t - t0 - 1, 0) * BD * N + wofs)
            hp = tl.where(t > t0, hp, hstart)
            a = tl.exp(dtt[:, None] * A)
            g = g + dyt[:, None] * Ct[None, :]
            tl.store(dCb + t * NDB * N + n, tl.sum(dyt[:, None] * ht, axis=0))
            tl.store(dBb + t * NDB * N + n, tl.sum(g * (dtt * xt)[:, None], axis=0))
            s = tl.sum(g * Bt[None, :], axis=1)
            e = g * hp * a
            tl.store(dxb + t * Di + d, s * dtt, mask=dmask)
            tl.store(ddb + t * Di + d, s * xt + tl.sum(e * A, axis=1), mask=dmask)
            dA += e * dtt[:, None]
            g = g * a
        tl.debug_barrier()
    tl.store(dA_ptr + (pid_b * Di + d[:, None]) * N + n[None, :], dA, mask=m2)


CONFIG = {"BD": 32, "CH": 64, "num_warps": 1}


def _blocks(Di, N):
    bd = min(CONFIG["BD"], triton.next_power_of_2(Di))
    return bd, triton.cdiv(Di, bd)


class SelectiveScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dt, A, Bm, Cm, lens):
        x, dt, A, Bm, Cm = (v.contiguous() for v in (x, dt, A, Bm, Cm))
        Bsz, L, Di = x.shape
        N = A.shape[1]
        if N & (N - 1):
            raise ValueError("d_state must be a power of two for the fused scan (got %d)" % N)
        lens = lens.to(device=x.device, dtype=torch.int32).contiguous()
        BD, NDB = _blocks(Di, N)
        CH = CONFIG["CH"]
        NCH = triton.cdiv(L, CH)
        y = torch.zeros_like(x)
        hs = torch.empty(Bsz, NCH, Di, N, device=x.device, dtype=x.dtype)
        _scan_fwd[(Bsz, NDB)](x, dt, A, Bm, Cm, lens, y, hs, L, Di, NCH, N=N, BD=BD, CH=CH,
                              num_warps=CONFIG["num_warps"])
        ctx.save_for_backward(x, dt, A, Bm, Cm, lens, hs)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, dt, A, Bm, Cm, lens, hs = ctx.saved_tensors
        dy = dy.contiguous()
        Bsz, L, Di = x.shape
        N = A.shape[1]
        BD, NDB = _blocks(Di, N)
        CH = CONFIG["CH"]
        NCH = hs.shape[1]
        dx = torch.zeros_like(x)
        ddt = torch.zeros_like(dt)
        dA = torch.empty(Bsz, Di, N, device=x.device, dtype=x.dtype)
        dB = torch.zeros(Bsz, L, NDB, N, device=x.device, dtype=x.dtype)
        dC = torch.zeros(Bsz, L, NDB, N, device=x.device, dtype=x.dtype)
        ws = torch.empty(Bsz * NDB * CH * BD * N, device=x.device, dtype=x.dtype)
        _scan_bwd[(Bsz, NDB)](x, dt, A, Bm, Cm, lens, dy, hs, ws, dx, ddt, dA, dB, dC, L, Di, NCH, NDB,
                              N=N, BD=BD, CH=CH, num_warps=CONFIG["num_warps"])
        return dx, ddt, dA.sum(0), dB.sum(2), dC.sum(2), None


def autotune(Di, N, device, Bsz=128, L=512):
    """Times forward + backward of a few configurations on the GPU at a training batch's shape and keeps the
    fastest in CONFIG (a second or two). Returns {config: ms}."""
    if device != "cuda":
        return {}
    x, dt, A, Bm, Cm = random_inputs(Bsz, L, Di, N, torch.float32, device)
    for v in (x, dt, A, Bm, Cm):
        v.requires_grad_(True)
    lens = torch.full((Bsz,), L, dtype=torch.int32, device=device)
    w = torch.randn_like(x)
    times = {}
    for bd, nw in ((16, 1), (32, 1), (64, 2)):
        CONFIG.update(BD=bd, num_warps=nw)
        try:
            for rep in range(3):
                if rep == 1:
                    torch.cuda.synchronize()
                    t = time.time()
                y = selective_scan(x, dt, A, Bm, Cm, lens)
                torch.autograd.grad((y * w).sum(), (x, dt, A, Bm, Cm))
            torch.cuda.synchronize()
            times[(bd, nw)] = (time.time() - t) / 2 * 1000
        except Exception as e:  # a configuration this GPU or Triton refuses
            times[(bd, nw)] = float("inf")
            print("scan config BD=%d warps=%d failed: %r" % (bd, nw, e), flush=True)
    best = min(times, key=times.get)
    CONFIG.update(BD=best[0], num_warps=best[1])
    return {"BD=%d,warps=%d" % k: round(v, 3) for k, v in times.items()}


def selective_scan(x, dt, A, Bm, Cm, lens=None):
    """x, dt (B, L, Di); A (Di, N); Bm, Cm (B, L, N); lens (B,) real lengths (default L). Returns y (B, L, Di)."""
    if lens is None:
        lens = torch.full((x.shape[0],), x.shape[1], dtype=torch.int32, device=x.device)
    return SelectiveScan.apply(x, dt, A, Bm, Cm, lens)


def scan_reference(x, dt, A, Bm, Cm, lens=None):
    """The same scan as a plain loop over time (the yardstick), zero past each sequence's length."""
    Bsz, L, Di = x.shape
    h = x.new_zeros(Bsz, Di, A.shape[1])
    ys = []
    for t in range(L):
        h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * x[:, t])[:, :, None] * Bm[:, t, None, :]
        ys.append((h * Cm[:, t, None, :]).sum(-1))
    y = torch.stack(ys, 1)
    if lens is not None:
        y = y * (torch.arange(L, device=x.device)[None, :] < lens.to(x.device)[:, None]).unsqueeze(-1).to(y.dtype)
    return y


def random_inputs(Bsz, L, Di, N, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(Bsz, L, Di, generator=g, dtype=torch.float64)
    dt = torch.nn.functional.softplus(torch.randn(Bsz, L, Di, generator=g, dtype=torch.float64) - 1.0)
    A = -torch.exp(torch.log(torch.arange(1, N + 1, dtype=torch.float64)).repeat(Di, 1)
                   + 0.1 * torch.randn(Di, N, generator=g, dtype=torch.float64))
    Bm = torch.randn(Bsz, L, N, generator=g, dtype=torch.float64)
    Cm = torch.randn(Bsz, L, N, generator=g, dtype=torch.float64)
    return [v.to(device=device, dtype=dtype) for v in (x, dt, A, Bm, Cm)]


def check(Bsz=3, L=70, Di=40, N=8, dtype=torch.float64, device="cpu", lens=None, seed=0):
    """Relative errors (max |fused - ref| / max |ref|) of y and of every input gradient, fused kernel against
    scan_reference in float64 (the reference always runs in float64 from the same inputs). Returns a dict."""
    ins = random_inputs(Bsz, L, Di, N, dtype, device, seed)
    lens_t = torch.as_tensor(lens if lens is not None else [L] * Bsz, dtype=torch.int32, device=device)
    g = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(Bsz, L, Di, generator=g, dtype=torch.float64).to(device)
    a = [v.detach().clone().requires_grad_(True) for v in ins]
    y = selective_scan(*a, lens_t)
    (y.double() * w).sum().backward()
    r = [v.detach().double().clone().requires_grad_(True) for v in ins]
    y_ref = scan_reference(*r, lens_t)
    (y_ref * w).sum().backward()
    out = {}
    for name, f, ref in [("y", y.detach(), y_ref.detach())] + [
            ("d" + nm, v.grad, u.grad) for nm, v, u in zip(("x", "dt", "A", "B", "C"), a, r)]:
        out[name] = ((f.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
    return out
