"""PyTorch reference of the clauseqa SSM encoder (docs/SSM.md), written with plain torch ops and a sequential scan
so that it reads like the math. It is the ground truth the C runtime is tested against (make_fixtures.py) and the
model the training pipeline (tools/ssm_train/, issue 6) is to build on: same tensor names, same shapes, same
tokenizer (tokenizer.py).

Shapes: L tokens, d_model, Di = expand * d_model, N = d_state, K = d_conv, R = dt_rank, E = d_embed.

Two input layers (docs/SSM.md, "Input layer"): tokenizer "cq-hash-v1" has its own table `embedding.weight`
(vocab_size, d_model); tokenizer "gemma3" reads the decoder's vocabulary (262,144 ids) through its frozen
token-embedding table (token_embd_dim = 640 wide, not part of these weights) projected to d_model by
`embedding.proj.weight`, and ids 0..4 (Gemma's control tokens, which tokenizing text never gives) are this
encoder's markers PAD, UNK, BOS, SEP, QRY with rows of their own, `embedding.markers`.
"""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, **kw):
        self.vocab_size = kw.get("vocab_size", 32768)
        self.d_model = kw["d_model"]
        self.n_layer = kw["n_layer"]
        self.d_state = kw["d_state"]
        self.d_conv = kw["d_conv"]
        self.expand = kw["expand"]
        self.dt_rank = kw["dt_rank"]
        self.d_embed = kw["d_embed"]
        self.bidirectional = kw.get("bidirectional", False)
        self.norm_eps = kw.get("norm_eps", 1e-5)
        self.tokenizer = kw.get("tokenizer", "cq-hash-v1")
        self.token_embd_dim = kw.get("token_embd_dim", 0)     # gemma3: the table's width (640)
        self.token_table_id = kw.get("token_table_id", "")   # gemma3: the table's fingerprint (gemma_vocab.py)
        if self.external and self.token_embd_dim <= 0:
            raise ValueError("tokenizer %s (an external vocabulary) needs token_embd_dim" % self.tokenizer)

    @property
    def external(self):
        """True when the input is an external vocabulary's table (any tokenizer but the built-in cq-hash-v1)."""
        return self.tokenizer != "cq-hash-v1"

    @property
    def d_inner(self):
        return self.expand * self.d_model

    def to_json(self):
        j = {"format": "clauseqa-ssm", "version": 1, "tokenizer": self.tokenizer,
             "vocab_size": self.vocab_size, "d_model": self.d_model, "n_layer": self.n_layer,
             "d_state": self.d_state, "d_conv": self.d_conv, "expand": self.expand, "dt_rank": self.dt_rank,
             "d_embed": self.d_embed, "bidirectional": self.bidirectional, "norm_eps": self.norm_eps}
        if self.external:
            j["token_embd_dim"] = self.token_embd_dim
            j["token_table_id"] = self.token_table_id
        return j


N_MARKERS = 5  # PAD, UNK, BOS, SEP, QRY


class TableInput(nn.Module):
    """x = markers[id] for id < 5, else proj · table[id]. The table (the decoder's token_embd, dequantized) is a
    frozen buffer outside the state dict: `rows` holds the table rows of the ids in `ids` (set_table), since the
    whole 262,144 x 640 table is rarely needed; an id without a row is an error."""

    def __init__(self, c):
        super().__init__()
        self.markers = nn.Parameter(torch.zeros(N_MARKERS, c.d_model))
        self.proj = nn.Linear(c.token_embd_dim, c.d_model, bias=False)
        self.register_buffer("rows", torch.zeros(0, c.token_embd_dim), persistent=False)
        self.register_buffer("row_of", torch.full((c.vocab_size,), -1, dtype=torch.long), persistent=False)

    def set_table(self, ids, rows):
        """ids (n,) int: vocabulary ids; rows (n, token_embd_dim) float: their table rows."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        self.rows = torch.as_tensor(rows).to(device=self.markers.device, dtype=self.markers.dtype).contiguous()
        row_of = torch.full((self.row_of.shape[0],), -1, dtype=torch.long)
        row_of[ids] = torch.arange(len(ids))
        self.row_of = row_of.to(self.markers.device)

    def forward(self, tokens):
        marker = tokens < N_MARKERS
        r = self.row_of[tokens.clamp_min(N_MARKERS)]
        if bool((r[~marker] < 0).any()):
            raise ValueError("token ids without a table row: %s" % tokens[~marker][r[~marker] < 0][:8].tolist())
        # project the rows in use once, then gather (fewer rows than tokens in a training batch)
        used, inv = torch.unique(r.clamp_min(0), return_inverse=True)
        x = self.proj(self.rows[used])[inv]
        return torch.where(marker.unsqueeze(-1), self.markers[tokens.clamp(max=N_MARKERS - 1)], x)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):  # y = x / sqrt(mean(x^2) + eps) * w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Mixer(nn.Module):
    """One Mamba block: in_proj -> causal depthwise conv1d -> SiLU -> x_proj -> (dt, B, C) -> selective scan
    (A = -exp(A_log), D skip) -> gate by SiLU(z) -> out_proj."""

    def __init__(self, c):
        super().__init__()
        Di, N, R, K = c.d_inner, c.d_state, c.dt_rank, c.d_conv
        self.c = c
        self.in_proj = nn.Linear(c.d_model, 2 * Di, bias=False)
        self.conv1d = nn.Conv1d(Di, Di, K, groups=Di, bias=True)
        self.x_proj = nn.Linear(Di, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, Di, bias=True)
        self.A_log = nn.Parameter(torch.zeros(Di, N))
        self.D = nn.Parameter(torch.ones(Di))
        self.out_proj = nn.Linear(Di, c.d_model, bias=False)

    def forward(self, u, conv_state, h):
        """u (L, d_model); conv_state (Di, K-1) = the last K-1 conv inputs, oldest first; h (Di, N).
        Returns (out (L, d_model), conv_state, h) with the states after the last token."""
        c = self.c
        Di, N, R, K = c.d_inner, c.d_state, c.dt_rank, c.d_conv
        L = u.shape[0]
        x, z = self.in_proj(u).split([Di, Di], dim=-1)                       # (L, Di) each
        xpad = torch.cat([conv_state.T, x], dim=0)                           # (K-1+L, Di)
        xc = F.conv1d(xpad.T.unsqueeze(0), self.conv1d.weight, self.conv1d.bias, groups=Di)[0].T  # (L, Di)
        new_conv = xpad[xpad.shape[0] - (K - 1):].T.clone() if K > 1 else conv_state
        xc = F.silu(xc)
        dt_low, B, C = self.x_proj(xc).split([R, N, N], dim=-1)
        dt = F.softplus(self.dt_proj(dt_low))                                # (L, Di)
        A = -torch.exp(self.A_log)                                           # (Di, N)
        ys = []
        for t in range(L):                                                   # h_t = exp(dt A) h + dt B x
            h = torch.exp(dt[t, :, None] * A) * h + dt[t, :, None] * B[t][None, :] * xc[t, :, None]
            ys.append(h @ C[t] + self.D * xc[t])                             # y_t = C h_t + D x
        y = torch.stack(ys) if L else xc.new_zeros(0, Di)
        y = y * F.silu(z)
        return self.out_proj(y), new_conv, h


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = RMSNorm(c.d_model, c.norm_eps)
        self.mixer = Mixer(c)
        if c.bidirectional:
            self.mixer_rev = Mixer(c)


class SSMEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embedding = TableInput(c) if c.external else nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.n_layer)])
        self.norm_f = RMSNorm(c.d_model, c.norm_eps)
        self.pool = nn.Linear(2 * c.d_model, c.d_embed, bias=True)

    def zero_state(self, dtype=torch.float32, device=None):
        """Zero conv and scan states, on the model's device unless told (a model moved to CUDA runs there)."""
        c = self.c
        device = self.norm_f.weight.device if device is None else device
        return ([torch.zeros(c.d_inner, c.d_conv - 1, dtype=dtype, device=device) for _ in range(c.n_layer)],
                [torch.zeros(c.d_inner, c.d_state, dtype=dtype, device=device) for _ in range(c.n_layer)])

    def forward(self, tokens, segment_ends, state=None):
        """tokens (L,) int64 of one sequence; segment_ends ascending, last == L. Continues state (conv list, h list)
        or starts from zero. Returns (outputs (L, d_model), vectors (n_seg, E), final state)."""
        c = self.c
        dtype = self.norm_f.weight.dtype
        conv, hs = state if state is not None else self.zero_state(dtype)
        conv, hs = list(conv), list(hs)
        starts = [0] + list(segment_ends[:-1])
        x = self.embedding(tokens)
        for l, layer in enumerate(self.layers):
            xn = layer.norm(x)
            out, conv[l], hs[l] = layer.mixer(xn, conv[l], hs[l])
            if c.bidirectional:  # clause-local reversed scan from zero, results put back in forward order
                zc, zh = self.zero_state(dtype)
                parts = []
                for a, e in zip(starts, segment_ends):
                    r, _, _ = layer.mixer_rev(xn[a:e].flip(0), zc[l], zh[l])
                    parts.append(r.flip(0))
                out = out + torch.cat(parts)
            x = x + out
        o = self.norm_f(x)
        vecs = []
        for a, e in zip(starts, segment_ends):
            v = self.pool(torch.cat([o[a:e].mean(0), o[e - 1]]))
            vecs.append(v / v.norm())
        return o, torch.stack(vecs), (conv, hs)

    def state_dict_for_export(self):
        """The tensor names the C loader expects (ssm/weights.c)."""
        return {k: v.detach().float().contiguous() for k, v in self.state_dict().items()}


def random_init(model, seed):
    """Weights on Mamba's scales, random enough that every path matters in a short test."""
    g = torch.Generator().manual_seed(seed)
    c = model.c

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    with torch.no_grad():
        if c.external:
            model.embedding.markers.copy_(rn(N_MARKERS, c.d_model))
            # unit-scale inputs: proj ~ N(0, 1 / (token_embd_dim * mean square of the table rows in use))
            ms = float(model.embedding.rows.double().pow(2).mean()) if model.embedding.rows.numel() else 1.0
            model.embedding.proj.weight.copy_(rn(c.d_model, c.token_embd_dim,
                                                 std=1 / math.sqrt(c.token_embd_dim * max(ms, 1e-12))))
        else:
            model.embedding.weight.copy_(rn(c.vocab_size, c.d_model))
        mixers = []
        for layer in model.layers:
            layer.norm.weight.copy_(1 + rn(c.d_model, std=0.1))
            mixers.append(layer.mixer)
            if c.bidirectional:
                mixers.append(layer.mixer_rev)
        for m in mixers:
            Di, N, R, K = c.d_inner, c.d_state, c.dt_rank, c.d_conv
            m.in_proj.weight.copy_(rn(2 * Di, c.d_model, std=1 / math.sqrt(c.d_model)))
            m.conv1d.weight.copy_(rn(Di, 1, K, std=1 / math.sqrt(K)))
            m.conv1d.bias.copy_(rn(Di, std=0.1))
            m.x_proj.weight.copy_(rn(R + 2 * N, Di, std=1 / math.sqrt(Di)))
            m.dt_proj.weight.copy_(rn(Di, R, std=1 / math.sqrt(R)))
            dt = torch.exp(torch.rand(Di, generator=g) * (math.log(0.5) - math.log(0.01)) + math.log(0.01))
            m.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
            m.A_log.copy_(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(Di, 1) + rn(Di, N, std=0.1))
            m.D.copy_(1 + rn(Di, std=0.1))
            m.out_proj.weight.copy_(rn(c.d_model, Di, std=1 / math.sqrt(Di)))
        model.norm_f.weight.copy_(1 + rn(c.d_model, std=0.1))
        model.pool.weight.copy_(rn(c.d_embed, 2 * c.d_model, std=1 / math.sqrt(2 * c.d_model)))
        model.pool.bias.copy_(rn(c.d_embed, std=0.1))


def save(model, directory):
    """Writes directory/ssm.json and directory/ssm.safetensors."""
    import os
    from safetensors.torch import save_file
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "ssm.json"), "w") as f:
        json.dump(model.c.to_json(), f, indent=2)
        f.write("\n")
    save_file(model.state_dict_for_export(), os.path.join(directory, "ssm.safetensors"))
