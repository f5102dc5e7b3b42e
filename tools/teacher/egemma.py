"""EmbeddingGemma-300M as the SSM encoder's training teacher (issue 27): its inputs, a trimmed pack of its weights
that travels to the GPU box, and its forward there (transformers' Gemma3TextModel, then our own pooling and dense
layers, as the model's sentence-transformers modules say: mean pooling over every token, prompt included; 768 ->
3072 -> 768 without bias or activation; L2 normalization).

Inputs. The tokenizer is the decoder's (Gemma-3, 262,144 ids; tools/ssm_train/gemma_vocab.py runs the runtime's own
C tokenizer), and EmbeddingGemma's tokenizer adds <bos> (2) before and <eos> (1) after: a text of kind k becomes
[2] + encode(PROMPT[k] + text) + [1], cut to --max-len tokens as the HF tokenizer truncates (the text's tail goes, the
two markers stay). The prompt is tokenized with the text, not apart: "query: the" merges the space into "▁the".
Queries (dev questions, consultations, claims, title + heading queries, inverse-cloze sentences) take
"task: search result | query: ", clauses "title: none | text: ".

The pack (a folder, egemma_pack.py): egemma.json (the HF text config with vocab_size = the rows kept, the prompts,
max_len, the storage), ids.npy (the original ids of the rows kept, sorted: compact id = position), and
egemma.safetensors: every tensor of the transformer (embedding rows trimmed), dense1.weight and dense2.weight, either
bf16 or, with --int8, the 2-D matrices as int8 with one fp32 scale per output row (W = q * scale[:, None]) and the
rest fp32.
"""
import json
import os

import numpy as np

PROMPTS = {"query": "task: search result | query: ", "document": "title: none | text: "}
KIND_PROMPT = {"c": "document", "q": "query", "h": "query", "i": "query"}
BOS, EOS, PAD = 2, 1, 0
MAX_LEN = 512


def wrap(ids, max_len=MAX_LEN):
    """[BOS] + ids + [EOS], the text cut so that the whole is at most max_len."""
    ids = np.asarray(ids, np.int64)[:max_len - 2]
    return np.concatenate([[BOS], ids, [EOS]]).astype(np.int64)


def prompted(kind, text):
    return PROMPTS[KIND_PROMPT[kind]] + text


# ------------------------------------------------------------------------------------------------ the pack

def read_dense(model_dir):
    from safetensors.numpy import load_file
    out = []
    for sub in ("2_Dense", "3_Dense"):
        cfg = json.load(open(os.path.join(model_dir, sub, "config.json")))
        if cfg.get("bias") or "Identity" not in cfg.get("activation_function", ""):
            raise SystemExit("%s: a bias or an activation this forward does not do: %s" % (sub, cfg))
        out.append(load_file(os.path.join(model_dir, sub, "model.safetensors"))["linear.weight"])
    pool = json.load(open(os.path.join(model_dir, "1_Pooling", "config.json")))
    if not pool.get("pooling_mode_mean_tokens") or not pool.get("include_prompt", True):
        raise SystemExit("1_Pooling: not mean pooling over every token: %s" % pool)
    return out


def make_pack(model_dir, keep_ids, out, int8=False, max_len=MAX_LEN):
    """The trimmed pack of the sentence-transformers folder model_dir, with the embedding rows of keep_ids only."""
    from safetensors.numpy import load_file, save_file
    keep = np.unique(np.concatenate([np.asarray(keep_ids, np.int64), [PAD, EOS, BOS]])).astype(np.int64)
    sd = load_file(os.path.join(model_dir, "model.safetensors"))
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    if not cfg.get("use_bidirectional_attention"):
        raise SystemExit("config.json: not bidirectional; is this EmbeddingGemma?")
    d1, d2 = read_dense(model_dir)
    sd = dict(sd)
    sd["embed_tokens.weight"] = sd["embed_tokens.weight"][keep]
    sd["dense1.weight"], sd["dense2.weight"] = d1, d2
    tensors = {}
    for k, v in sd.items():
        v = v.astype(np.float32)
        if int8 and v.ndim == 2:
            scale = np.abs(v).max(1) / 127.0
            scale[scale == 0] = 1.0
            tensors[k + ".q8"] = np.clip(np.rint(v / scale[:, None]), -127, 127).astype(np.int8)
            tensors[k + ".scale"] = scale.astype(np.float32)
        elif int8:
            tensors[k] = v
        else:
            tensors[k] = _to_bf16_bits(v)
    os.makedirs(out, exist_ok=True)
    if int8:
        save_file(tensors, os.path.join(out, "egemma.safetensors"))
    else:  # numpy has no bfloat16: torch writes it
        import torch
        from safetensors.torch import save_file as save_t
        save_t({k: torch.from_numpy(v).view(torch.bfloat16) for k, v in tensors.items()},
               os.path.join(out, "egemma.safetensors"))
    cfg["vocab_size"] = int(len(keep))
    cfg["pad_token_id"], cfg["bos_token_id"], cfg["eos_token_id"] = [int(np.searchsorted(keep, i))
                                                                      for i in (PAD, BOS, EOS)]
    np.save(os.path.join(out, "ids.npy"), keep.astype(np.int32))
    meta = {"model": "EmbeddingGemma-300M (Gemma terms), sentence-transformers folder, trimmed by "
                     "tools/teacher/egemma_pack.py", "config": cfg, "storage": "int8-row" if int8 else "bf16",
            "prompts": PROMPTS, "kind_prompt": KIND_PROMPT, "max_len": max_len, "rows_kept": int(len(keep)),
            "dense": [list(d1.shape), list(d2.shape)]}
    with open(os.path.join(out, "egemma.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def _to_bf16_bits(a):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16)


def remap(pack_dir, seq):
    """Original Gemma ids -> the pack's compact ids (every id must be kept)."""
    keep = np.load(os.path.join(pack_dir, "ids.npy")).astype(np.int64)
    seq = np.asarray(seq, np.int64)
    pos = np.searchsorted(keep, seq)
    if len(seq) and (pos.max() >= len(keep) or (keep[np.minimum(pos, len(keep) - 1)] != seq).any()):
        raise ValueError("ids not in the pack: %s" % sorted(set(seq.tolist()) - set(keep.tolist()))[:10])
    return pos


# ------------------------------------------------------------------------------------------------ the forward

class Teacher:
    """The pack's forward in torch: transformers' Gemma3TextModel (bidirectional, sdpa), mean pooling over the
    attention mask, the two dense layers (fp32), L2 normalization."""

    def __init__(self, pack_dir, device="cpu", dtype=None):
        import torch
        from safetensors.torch import load_file
        from transformers import Gemma3TextConfig, Gemma3TextModel
        self.torch, self.device = torch, device
        self.dtype = dtype or torch.float32
        meta = json.load(open(os.path.join(pack_dir, "egemma.json")))
        self.meta = meta
        cfgd = dict(meta["config"])
        for k in ("architectures", "transformers_version", "dtype", "torch_dtype"):
            cfgd.pop(k, None)
        cfg = Gemma3TextConfig(**cfgd)
        cfg._attn_implementation = "sdpa"
        raw = load_file(os.path.join(pack_dir, "egemma.safetensors"))
        sd = {}
        for k, v in raw.items():
            if k.endswith(".scale"):
                continue
            if k.endswith(".q8"):
                sd[k[:-3]] = v.float() * raw[k[:-3] + ".scale"][:, None]
            else:
                sd[k] = v.float()
        self.dense = [sd.pop("dense1.weight").to(device), sd.pop("dense2.weight").to(device)]
        with torch.device(device):
            m = Gemma3TextModel(cfg)
        missing, unexpected = m.load_state_dict(sd, strict=False)
        if [k for k in missing if "inv_freq" not in k] or unexpected:
            raise SystemExit("pack does not fit Gemma3TextModel: missing %s, unexpected %s" % (missing, unexpected))
        self.model = m.to(device=device, dtype=self.dtype).eval()
        self.dim = self.dense[1].shape[0]

    def embed(self, seqs, max_tokens=65536, log=None):
        """seqs: compact id arrays (BOS ... EOS) -> float32 (n, 768) unit vectors on self.device, in input order."""
        torch = self.torch
        F = torch.nn.functional
        order = np.argsort([len(s) for s in seqs], kind="stable")[::-1]  # longest first: memory peaks at once
        out = torch.zeros(len(seqs), self.dim, device=self.device)
        i, n_batches = 0, 0
        with torch.inference_mode():
            while i < len(order):
                L = len(seqs[order[i]])
                B = max(1, min(len(order) - i, max_tokens // max(L, 1)))
                idx = order[i:i + B]
                ids = np.full((B, L), 0, np.int64)
                mask = np.zeros((B, L), np.int64)
                for r, s in enumerate(idx):
                    ids[r, :len(seqs[s])] = seqs[s]
                    mask[r, :len(seqs[s])] = 1
                ids_t = torch.from_numpy(ids).to(self.device)
                m_t = torch.from_numpy(mask).to(self.device)
                h = self.model(input_ids=ids_t, attention_mask=m_t).last_hidden_state.float()
                mf = m_t.unsqueeze(-1).float()
                o = (h * mf).sum(1) / mf.sum(1)
                o = o @ self.dense[0].T @ self.dense[1].T
                out[torch.from_numpy(idx.copy()).to(self.device)] = F.normalize(o, dim=-1)
                i += B
                n_batches += 1
                if log and n_batches % 200 == 0:
                    log("teacher: %d of %d texts" % (i, len(order)))
        return out

