"""LoRA on the decoder's projections (Gemma-3 or Qwen2: the same names) and the adapter file `clauseqa-lora-v1`
(docs/ANSWERS.md).

Our own small LoRA (no peft): each adapted nn.Linear y = W x becomes y = W x + (alpha / r) · B (A x), A of shape
(r, in) and B of shape (out, r) — exactly the runtime's W' = W + (alpha / r) · B · A, so the tensors are written
as they are. GGUF names: model.layers.{l}.self_attn.{q,k,v,o}_proj -> blk.{l}.attn_{q,k,v,output};
model.layers.{l}.mlp.{gate,up,down}_proj -> blk.{l}.ffn_{gate,up,down}. HF's weight is (out, in), GGUF's ne is
[in, out]: the same matrix.
"""
import json
import math
import os

import torch

FORMAT = "clauseqa-lora-v1"
HF_TO_GGUF = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


class LoRALinear(torch.nn.Module):
    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        self.base = base
        self.r, self.alpha = r, alpha
        self.scale = alpha / r
        self.lora_a = torch.nn.Parameter(torch.empty(r, base.in_features, dtype=torch.float32,
                                                     device=base.weight.device))
        self.lora_b = torch.nn.Parameter(torch.zeros(base.out_features, r, dtype=torch.float32,
                                                     device=base.weight.device))
        torch.nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.drop = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()

    def forward(self, x):
        return self.base(x) + (self.drop(x) @ self.lora_a.t().to(x.dtype) @ self.lora_b.t().to(x.dtype)) * self.scale


def decoder_layers(model):
    """The decoder layers of a Gemma3ForCausalLM / Qwen2ForCausalLM (model.model.layers)."""
    return model.model.layers


def add_lora(model, r, alpha, dropout=0.0, projections=tuple(HF_TO_GGUF)):
    """Freezes the model and wraps the projections; returns {(layer, gguf proj): LoRALinear}."""
    for p in model.parameters():
        p.requires_grad_(False)
    out = {}
    for l, layer in enumerate(decoder_layers(model)):
        for name in projections:
            parent = layer.self_attn if name in ATTN else layer.mlp
            base = getattr(parent, name)
            m = LoRALinear(base, r, alpha, dropout)
            setattr(parent, name, m)
            out[(l, HF_TO_GGUF[name])] = m
    return out


def tensor_name(layer, proj, which):
    return "blk.%d.%s.lora_%s" % (layer, proj, which)


def adapter_tensors(loras, dtype=torch.float32):
    t = {}
    for (l, proj), m in sorted(loras.items()):
        t[tensor_name(l, proj, "a")] = m.lora_a.detach().to("cpu", dtype).contiguous()
        t[tensor_name(l, proj, "b")] = m.lora_b.detach().to("cpu", dtype).contiguous()
    return t


def adapter_bytes(weight_shapes, rank, bytes_per=2, projections=tuple(HF_TO_GGUF.values())):
    """Bytes of the adapter tensors at this rank for every adapted projection of the base ({gguf weight name:
    (out, in)}, gguf_weight_shapes): r * (in + out) values per projection (the safetensors header adds ~20 kB)."""
    n = 0
    for name, (out_f, in_f) in weight_shapes.items():
        parts = name.split(".")
        if len(parts) == 4 and parts[0] == "blk" and parts[2] in projections and parts[3] == "weight":
            n += rank * (in_f + out_f)
    return n * bytes_per


def pick_dtype(loras, name="auto", max_bytes=15.5e6):
    """F32 while the file stays under max_bytes (a device call brings back files of at most 16 MiB), else F16."""
    if name != "auto":
        return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]
    n = sum(m.lora_a.numel() + m.lora_b.numel() for m in loras.values())
    return torch.float32 if 4 * n <= max_bytes else torch.float16


def write_adapter(out_dir, loras, rank, alpha, base_file, base_sha256, manifest, dtype=torch.float32,
                  prompt_format="cq-prompt-v1"):
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    tensors = adapter_tensors(loras, dtype)
    tmp = os.path.join(out_dir, "adapter.safetensors.tmp")
    save_file(tensors, tmp, metadata={"format": FORMAT})
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(out_dir, "adapter.safetensors"))
    write_adapter_json(out_dir, rank, alpha, base_file, base_sha256, manifest, prompt_format)
    return tensors


def write_adapter_json(out_dir, rank, alpha, base_file, base_sha256, manifest, prompt_format="cq-prompt-v1"):
    doc = {"format": FORMAT, "rank": rank, "alpha": alpha, "prompt_format": prompt_format,
           "base": {"file": base_file, "sha256": base_sha256}, "manifest": manifest}
    tmp = os.path.join(out_dir, "adapter.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, "adapter.json"))


def read_adapter(out_dir):
    from safetensors.torch import load_file
    with open(os.path.join(out_dir, "adapter.json"), encoding="utf-8") as f:
        doc = json.load(f)
    return doc, load_file(os.path.join(out_dir, "adapter.safetensors"))


def check_adapter(doc, tensors, weight_shapes):
    """Problems of an adapter against docs/ANSWERS.md and the base's weight shapes {gguf weight name: (out, in)}
    (an empty list when it is right)."""
    bad = []
    if doc.get("format") != FORMAT:
        bad.append("format %r" % doc.get("format"))
    r = doc.get("rank")
    for k in ("rank", "alpha", "prompt_format", "base", "manifest"):
        if k not in doc:
            bad.append("adapter.json lacks %s" % k)
    names = set(tensors)
    for n in sorted(names):
        if not (n.startswith("blk.") and (n.endswith(".lora_a") or n.endswith(".lora_b"))):
            bad.append("unexpected tensor %s" % n)
            continue
        stem = n[:-len(".lora_a")]
        other = stem + (".lora_b" if n.endswith(".lora_a") else ".lora_a")
        if other not in names:
            bad.append("%s without %s" % (n, other))
        w = weight_shapes.get(stem + ".weight")
        if w is None:
            bad.append("%s: no base weight %s.weight" % (n, stem))
            continue
        out_f, in_f = w
        want = (r, in_f) if n.endswith(".lora_a") else (out_f, r)
        if tuple(tensors[n].shape) != want:
            bad.append("%s: shape %s, want %s" % (n, tuple(tensors[n].shape), want))
    return bad


def gguf_reader(gguf_path):
    """One gguf.GGUFReader per file, shared with base.py (parsing a 150k-262k token vocabulary takes seconds)."""
    import base
    return base.reader(gguf_path)


def gguf_weight_shapes(gguf_path):
    """{tensor name: (out, in)} of the 2-D weights of a GGUF file (GGUF ne = [in, out])."""
    r = gguf_reader(gguf_path)
    out = {}
    for t in r.tensors:
        ne = [int(x) for x in t.shape]
        if len(ne) == 2:
            out[t.name] = (ne[1], ne[0])
    return out


def hf_weight_shapes(model):
    """The same map from the HF model: {blk.l.proj.weight: (out, in)}."""
    out = {}
    for l, layer in enumerate(decoder_layers(model)):
        for name, proj in HF_TO_GGUF.items():
            parent = layer.self_attn if name in ATTN else layer.mlp
            m = getattr(parent, name)
            w = m.base.weight if isinstance(m, LoRALinear) else m.weight
            out["blk.%d.%s.weight" % (l, proj)] = tuple(w.shape)
    return out


def factor(tensors, name):
    """A factor as float32: stored F32 / F16 / BF16, or int8 with NAME.scale (one a row, adapter_int8.py)."""
    t = tensors[name]
    if t.dtype == torch.int8:
        s = tensors.get(name + ".scale")
        if s is None or s.dim() != 1 or s.shape[0] != t.shape[0]:
            raise ValueError("%s: int8 without a scale a row (%s.scale)" % (name, name))
        return t.float() * s.float()[:, None]
    if not t.is_floating_point():
        raise ValueError("%s: dtype %s" % (name, t.dtype))
    return t.float()


@torch.no_grad()
def load_into(loras, doc, tensors, rank, alpha):
    """Starts the LoRA layers from an adapter (adapter.json's doc, its tensors): each lora_a / lora_b copied in. The
    adapter must have this rank and alpha and exactly the layers' factors of the right shapes, every value finite;
    else ValueError naming what differs (nothing half-loaded is used: the caller stops)."""
    if int(doc.get("rank", -1)) != rank or float(doc.get("alpha", -1)) != float(alpha):
        raise ValueError("the adapter has rank %s alpha %s, this run rank %d alpha %g"
                         % (doc.get("rank"), doc.get("alpha"), rank, alpha))
    want = {tensor_name(l, p, w) for (l, p) in loras for w in "ab"}
    have = {n for n in tensors if not n.endswith(".scale")}
    if have != want:
        raise ValueError("the adapter's factors differ from this model's: missing %s, extra %s"
                         % (sorted(want - have)[:4], sorted(have - want)[:4]))
    vals = {}
    for (l, p), m in loras.items():
        for w, param in (("a", m.lora_a), ("b", m.lora_b)):
            n = tensor_name(l, p, w)
            x = factor(tensors, n)
            if tuple(x.shape) != tuple(param.shape):
                raise ValueError("%s: shape %s, this model's %s" % (n, tuple(x.shape), tuple(param.shape)))
            if not torch.isfinite(x).all():
                raise ValueError("%s: values that are not finite" % n)
            vals[n] = (param, x)
    for param, x in vals.values():
        param.copy_(x.to(param.device, param.dtype))
    return len(vals)


@torch.no_grad()
def merged_weight(base_weight, a, b, rank, alpha):
    return base_weight.float() + (alpha / rank) * (b.float() @ a.float())
