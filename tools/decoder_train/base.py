"""The base model of an answer adapter, read from its GGUF file: which architecture (gemma3 or qwen2), its
tokenizer conventions (BOS or not, which token ends a completion, which tokens stop decoding), every token's bytes
for the copy constraint, and — for qwen2 — a fast loader that dequantizes the GGUF into a transformers model on all
cores (transformers' own GGUF path parses the file three times and dequantizes on one core: minutes for 1.5B).

numpy + gguf only at import; torch / transformers are imported by the functions that need them.

    info = describe(path)          # {"arch", "add_bos", "bos", "eos", "stop_ids", "n_vocab", ...}
    vocab = vocab_bytes(path)      # [bytes or None] per token id
    model = load_fast(path)        # Qwen2ForCausalLM, weights = the GGUF's tensors dequantized
"""
import os
import time

import numpy as np

# default LoRA rank per architecture: the adapter file must stay committable (<= 50 MB, F16 above 15.5 MB)
DEFAULT_RANK = {"gemma3": 32, "qwen2": 16}
# tokens that end a completion besides the GGUF's eos (the runtime stops on them too)
EXTRA_STOPS = ("<end_of_turn>", "<|im_end|>", "<|endoftext|>")

_READERS = {}


def reader(path):
    """One gguf.GGUFReader per file (parsing a 150k-262k token vocabulary takes seconds)."""
    path = os.path.abspath(path)
    if path not in _READERS:
        from gguf import GGUFReader
        _READERS[path] = GGUFReader(path)
    return _READERS[path]


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    try:
        return f.contents()
    except Exception:  # noqa: BLE001 - older gguf-py: scalar in the last part
        v = f.parts[f.data[0]]
        return v.tobytes().decode("utf-8") if v.dtype == np.uint8 else v[0].item()


def tokens_of(r):
    f_tok = r.fields["tokenizer.ggml.tokens"]
    f_typ = r.fields["tokenizer.ggml.token_type"]
    toks = [bytes(f_tok.parts[i]).decode("utf-8", errors="replace") for i in f_tok.data]
    types = [int(f_typ.parts[i][0]) for i in f_typ.data]
    return toks, types


def describe(path):
    """What training and packing need to know about a base GGUF."""
    r = reader(path)
    arch = field(r, "general.architecture")
    model = field(r, "tokenizer.ggml.model")
    toks, types = tokens_of(r)
    ids = {t: i for i, t in enumerate(toks)}
    eos = field(r, "tokenizer.ggml.eos_token_id")
    bos = field(r, "tokenizer.ggml.bos_token_id")
    add_bos = field(r, "tokenizer.ggml.add_bos_token")
    if add_bos is None:          # llama.cpp's default: SentencePiece models add BOS, GPT-2 BPE models do not
        add_bos = model == "llama"
    stops = [int(eos)] + [ids[t] for t in EXTRA_STOPS if t in ids and ids[t] != eos]
    tensors = {t.name for t in r.tensors}
    return {"arch": arch, "tokenizer": model, "pre": field(r, "tokenizer.ggml.pre"), "add_bos": bool(add_bos),
            "bos": None if bos is None else int(bos), "eos": int(eos), "eos_text": toks[int(eos)],
            "stop_ids": stops, "n_vocab": len(toks), "n_layers": int(field(r, arch + ".block_count")),
            "tied_output": "output.weight" not in tensors, "name": field(r, "general.name")}


def _byte_decoder():
    """GPT-2 byte-level BPE: the printable character standing for each byte, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def vocab_bytes(path):
    """[bytes or None] per token id, the bytes a token adds to the text: SentencePiece (gemma3) byte tokens their
    byte, text tokens their text ('▁' -> ' '); GPT-2 byte-level BPE (qwen2) normal tokens decoded through the byte
    map. Control / unused / unknown tokens, and BPE's user-defined specials (<|fim_prefix|> ...), None: the copy
    constraint never picks them."""
    r = reader(path)
    toks, types = tokens_of(r)
    model = field(r, "tokenizer.ggml.model")
    out = []
    if model == "gpt2":
        dec = _byte_decoder()
        for t, ty in zip(toks, types):
            if ty != 1:
                out.append(None)
                continue
            try:
                out.append(bytes(dec[c] for c in t))
            except KeyError:     # not byte-mapped text: not a piece of plain text
                out.append(None)
        return out
    for t, ty in zip(toks, types):
        if ty in (2, 3, 5):          # unknown, control, unused
            out.append(None)
        elif ty == 6:                # byte: <0xNN>
            out.append(bytes([int(t[3:5], 16)]))
        else:
            out.append(t.replace("\u2581", " ").encode("utf-8"))
    return out


# ---------------------------------------------------------------- the fast loader (qwen2)

QWEN2_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def hf_name(gguf_name):
    """GGUF tensor name -> transformers Qwen2ForCausalLM parameter name (None: not a model parameter)."""
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in QWEN2_NAMES:
        return "model.layers.%s.%s.%s" % (parts[1], QWEN2_NAMES[parts[2]], parts[3])
    return None


def qwen2_config(path):
    from transformers import Qwen2Config
    r = reader(path)
    a = "qwen2"
    info = describe(path)
    shapes = {t.name: [int(x) for x in t.shape] for t in r.tensors}
    cfg = Qwen2Config(
        vocab_size=shapes["token_embd.weight"][1],
        hidden_size=int(field(r, a + ".embedding_length")),
        intermediate_size=int(field(r, a + ".feed_forward_length")),
        num_hidden_layers=int(field(r, a + ".block_count")),
        num_attention_heads=int(field(r, a + ".attention.head_count")),
        num_key_value_heads=int(field(r, a + ".attention.head_count_kv")),
        max_position_embeddings=int(field(r, a + ".context_length")),
        rms_norm_eps=float(field(r, a + ".attention.layer_norm_rms_epsilon")),
        rope_theta=float(field(r, a + ".rope.freq_base", 10000.0)),
        tie_word_embeddings=info["tied_output"], use_sliding_window=False,
        bos_token_id=info["bos"], eos_token_id=info["eos"], pad_token_id=None)
    theta = float(field(r, a + ".rope.freq_base", 10000.0))
    rp = getattr(cfg, "rope_parameters", None)      # transformers >= 5 keeps rope_theta here
    if isinstance(rp, dict) and rp.get("rope_theta") != theta:
        rp["rope_theta"] = theta
    if hasattr(cfg, "rope_theta"):
        cfg.rope_theta = theta
    return cfg


def dequantize_all(path, names=None, threads=0):
    """{gguf name: float32 ndarray (out, in) / (n,)} of the GGUF's tensors, dequantized by gguf-py on a thread pool
    (numpy releases the GIL in the big array operations)."""
    from concurrent.futures import ThreadPoolExecutor
    from gguf.quants import dequantize
    r = reader(path)
    todo = [t for t in r.tensors if names is None or t.name in names]
    todo.sort(key=lambda t: -int(np.prod([int(x) for x in t.shape])))

    def one(t):
        a = np.asarray(dequantize(t.data, t.tensor_type), np.float32)
        shape = [int(x) for x in reversed([int(x) for x in t.shape])]
        return t.name, a.reshape(shape)

    n = threads or min(16, os.cpu_count() or 1)
    with ThreadPoolExecutor(n) as ex:
        return dict(ex.map(one, todo))


def load_fast(path, dtype=None, log=print, threads=0, attn="sdpa"):
    """Qwen2ForCausalLM whose weights are the GGUF's tensors dequantized (float32 unless dtype). Every parameter of
    the model must come from the file and every model tensor of the file must be used."""
    import torch
    from transformers import Qwen2ForCausalLM
    t0 = time.time()
    info = describe(path)
    if info["arch"] != "qwen2":
        raise SystemExit("load_fast: %s is %s, not qwen2 (use transformers' loader)" % (path, info["arch"]))
    cfg = qwen2_config(path)
    try:
        cfg._attn_implementation = attn
    except Exception:  # noqa: BLE001 - older transformers: set after construction below
        pass
    t1 = time.time()
    arrays = dequantize_all(path, threads=threads)
    t2 = time.time()
    dtype = dtype or torch.float32
    with torch.device("meta"):
        model = Qwen2ForCausalLM(cfg)
    state = {}
    unused = []
    for g, a in arrays.items():
        h = hf_name(g)
        if h is None:
            unused.append(g)
            continue
        if not a.flags.writeable:
            a = a.copy()
        state[h] = torch.from_numpy(a).to(dtype)
    want = set(k for k, _ in model.named_parameters())
    if cfg.tie_word_embeddings:
        want.discard("lm_head.weight")
    missing, extra = sorted(want - set(state)), sorted(set(state) - want)
    if missing or extra or unused:
        raise SystemExit("load_fast: missing %s, unexpected %s, unused GGUF tensors %s" % (missing[:5], extra[:5],
                                                                                          unused[:5]))
    for k, v in model.named_parameters():
        if k in state and tuple(v.shape) != tuple(state[k].shape):
            raise SystemExit("load_fast: %s is %s in the model, %s in the GGUF" % (k, tuple(v.shape),
                                                                                   tuple(state[k].shape)))
    model.load_state_dict(state, strict=False, assign=True)
    # buffers (the rotary inverse frequencies) were made on the meta device: make those modules again on the CPU
    for name, mod in list(model.named_modules()):
        if any(bb.device.type == "meta" for bb in mod.buffers(recurse=False)):
            parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
            setattr(parent, name.rsplit(".", 1)[-1], type(mod)(config=cfg))
    if cfg.tie_word_embeddings:
        model.tie_weights()
    left = [n for n, b in list(model.named_parameters()) + list(model.named_buffers()) if b.device.type == "meta"]
    if left:
        raise SystemExit("load_fast: still on the meta device: %s" % left[:5])
    model.config._attn_implementation = attn
    model.eval()
    log("fast GGUF load: config %.1f s, dequantize %.1f s (%d tensors), model %.1f s"
        % (t1 - t0, t2 - t1, len(arrays), time.time() - t2))
    return model
