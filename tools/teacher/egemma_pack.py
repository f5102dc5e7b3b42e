"""Prepares, here on the CPU, everything the GPU box needs to compute EmbeddingGemma teacher vectors (issue 27):

    python3 tools/teacher/egemma_pack.py --model /work/cache/egemma/model --data .device/ssm27/data \
        --out .device/ssm27/teacher [--int8] [--jobs 2] [--max-len 512] [--check 16]

writes into --out
  tokens.npz      for each kind k in c (clauses, corpus.npz order), q (queries.json "questions"), h ("headings"),
                  i ("ict"): k_tok (the pack's compact ids, uint16 or int32, BOS ... EOS, cut to --max-len) and k_off;
                  the teacher's own inputs: egemma.prompted(kind, text) through the decoder's C tokenizer
                  (gemma_vocab.py), the same ids the HF tokenizer gives (checked on --check-tok texts)
  pack/           egemma.py's trimmed pack: only the embedding rows the data uses (bf16, or --int8)
  reference.npz   kind, index, vec: --check texts of the data embedded by sentence-transformers with the FULL model
                  (fp32, its own tokenizer and prompts); the pack's forward must give cosine >= 0.999 here (fp32) and
                  train.py checks it again on the GPU (bf16, >= 0.995) before computing anything
  meta.json       counts, the checks' numbers, the pack's storage and size

--tiny-random D: no real model; a small random Gemma-3 text model (vocab of the data's ids, 2 layers, width 64) in
a sentence-transformers-like folder D, for the CPU dry run of the whole chain (reference vectors then come from the
pack's own forward at fp32 before trimming: the check still compares the trimmed pack against the full one).
"""
import argparse
import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ssm_train"))
import egemma  # noqa: E402

_ENC = None


def _init(gguf):
    global _ENC
    import gemma_vocab
    _ENC = gemma_vocab.Vocab(gguf).encode


def _enc_chunk(args):
    kind, texts, max_len = args
    out = [egemma.wrap(_ENC(egemma.prompted(kind, t)), max_len).astype(np.int32) for t in texts]
    return np.concatenate(out) if out else np.zeros(0, np.int32), np.asarray([len(x) for x in out], np.int64)


def tokenize(pool, kind, texts, max_len, chunk=2000):
    parts = pool.map(_enc_chunk, [(kind, texts[i:i + chunk], max_len) for i in range(0, len(texts), chunk)])
    tok = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    lens = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    off = np.zeros(len(lens) + 1, np.int64)
    off[1:] = np.cumsum(lens)
    return tok, off


def data_texts(data):
    z = np.load(os.path.join(data, "corpus.npz"))
    blob, off = z["text"].tobytes(), z["text_off"]
    q = json.load(open(os.path.join(data, "queries.json"), encoding="utf-8"))
    return {"c": [blob[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)],
            "q": [x["text"] for x in q["questions"]], "h": [x["text"] for x in q["headings"]],
            "i": [x["text"] for x in q["ict"]]}


def pick_check(texts, n, seed=27):
    """n texts spread over the kinds and lengths (short, median, long), as (kind, index)."""
    rng = np.random.default_rng(seed)
    picks = []
    kinds = [k for k in ("c", "q", "h", "i") if texts[k]]
    for j in range(n):
        k = kinds[j % len(kinds)]
        lens = np.asarray([len(t) for t in texts[k]])
        order = np.argsort(lens, kind="stable")
        frac = [0.05, 0.5, 0.9, 0.99][(j // len(kinds)) % 4]
        i = int(order[min(len(order) - 1, int(frac * len(order)) + int(rng.integers(0, 3)))])
        if (k, i) not in picks:
            picks.append((k, i))
    return picks


def st_reference(model_dir, items, max_len):
    """sentence-transformers' own vectors (full model, fp32, CPU) of items [(kind, text)]."""
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(model_dir, device="cpu")
    m.max_seq_length = max_len
    vecs = []
    for kind, text in items:
        name = egemma.KIND_PROMPT[kind]
        v = m.encode([text], prompt_name=name, normalize_embeddings=True, convert_to_numpy=True)
        vecs.append(v[0])
    tok = m.tokenizer
    ids = [tok(m.prompts[egemma.KIND_PROMPT[k]] + t, truncation=True, max_length=max_len)["input_ids"]
           for k, t in items]
    return np.asarray(vecs, np.float32), ids


def tiny_random_model(folder, vocab_ids):
    """A small random EmbeddingGemma-shaped folder (for the CPU dry run): full 262,144-row table."""
    import torch
    from safetensors.torch import save_file
    from transformers import Gemma3TextConfig, Gemma3TextModel
    cfg = Gemma3TextConfig(vocab_size=262144, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=16,
                           layer_types=["sliding_attention", "full_attention"], use_bidirectional_attention=True,
                           max_position_embeddings=2048, query_pre_attn_scalar=32, pad_token_id=0, bos_token_id=2,
                           eos_token_id=1)
    torch.manual_seed(27)
    m = Gemma3TextModel(cfg)
    os.makedirs(folder, exist_ok=True)
    save_file({k: v.contiguous() for k, v in m.state_dict().items() if "inv_freq" not in k},
              os.path.join(folder, "model.safetensors"))
    d = cfg.to_dict()
    d["architectures"] = ["Gemma3TextModel"]
    json.dump(d, open(os.path.join(folder, "config.json"), "w"), indent=1)
    for sub, (i, o) in (("2_Dense", (64, 128)), ("3_Dense", (128, 64))):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
        save_file({"linear.weight": torch.randn(o, i) / i ** 0.5}, os.path.join(folder, sub, "model.safetensors"))
        json.dump({"in_features": i, "out_features": o, "bias": False,
                   "activation_function": "torch.nn.modules.linear.Identity"},
                  open(os.path.join(folder, sub, "config.json"), "w"))
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    json.dump({"pooling_mode_mean_tokens": True, "include_prompt": True},
              open(os.path.join(folder, "1_Pooling", "config.json"), "w"))


def full_reference(model_dir, seqs_orig):
    """Vectors of the untrimmed model through our forward (fp32): the tiny random model's reference."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        egemma.make_pack(model_dir, np.arange(262144), t)  # bf16 storage: compare the trimmed one at the same
        te = egemma.Teacher(t)
        return te.embed([s for s in seqs_orig]).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="/work/cache/egemma/model")
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-len", type=int, default=egemma.MAX_LEN)
    ap.add_argument("--check", type=int, default=16)
    ap.add_argument("--tiny-random", default="", help="make and use a tiny random model in this folder")
    a = ap.parse_args()
    t0 = time.time()
    import gemma_vocab
    gguf = a.gguf or gemma_vocab.DEFAULT_GGUF
    gemma_vocab._lib()
    texts = data_texts(a.data)
    raw = {}
    with Pool(a.jobs, initializer=_init, initargs=(gguf,)) as pool:
        for k in ("c", "q", "h", "i"):
            raw[k] = tokenize(pool, k, texts[k], a.max_len)
            print("[%.0fs] %s: %d texts, %d tokens (prompt, BOS, EOS included; cut at %d)"
                  % (time.time() - t0, k, len(texts[k]), len(raw[k][0]), a.max_len), flush=True)
    keep = np.unique(np.concatenate([raw[k][0] for k in raw] + [np.asarray([0, 1, 2])]))
    if a.tiny_random:
        tiny_random_model(a.tiny_random, keep)
        a.model = a.tiny_random
    os.makedirs(a.out, exist_ok=True)
    pack = os.path.join(a.out, "pack")
    meta_pack = egemma.make_pack(a.model, keep, pack, int8=a.int8, max_len=a.max_len)
    print("[%.0fs] pack: %d rows kept, %s, %.1f MB" % (time.time() - t0, len(keep), meta_pack["storage"],
                                                        os.path.getsize(os.path.join(pack, "egemma.safetensors")) / 1e6),
          flush=True)
    dt = np.uint16 if len(keep) <= 65536 else np.int32
    out = {}
    for k, (tok, off) in raw.items():
        out[k + "_tok"] = egemma.remap(pack, tok).astype(dt)
        out[k + "_off"] = off
    np.savez(os.path.join(a.out, "tokens.npz"), **out)

    # the checks: the C tokenizer against the HF tokenizer, the trimmed pack against the full model
    picks = pick_check(texts, a.check)
    items = [(k, texts[k][i]) for k, i in picks]
    mine = [raw[k][0][raw[k][1][i]:raw[k][1][i + 1]] for k, i in picks]
    if a.tiny_random:
        ref = full_reference(a.model, [np.asarray(s, np.int64) for s in mine])
        tok_same = None
    else:
        ref, hf_ids = st_reference(a.model, items, a.max_len)
        tok_same = sum(list(map(int, m)) == list(h) for m, h in zip(mine, hf_ids))
        if tok_same < len(items):
            bad = [(k, i) for (k, i), m, h in zip(picks, mine, hf_ids) if list(map(int, m)) != list(h)]
            print("tokenizer: %d of %d texts differ from the HF tokenizer: %s" % (len(bad), len(items), bad[:5]))
    import torch
    compact = [egemma.remap(pack, s) for s in mine]
    te = egemma.Teacher(pack)
    v32 = te.embed(compact).numpy()
    cos32 = (v32 * ref).sum(1)
    te_bf = egemma.Teacher(pack, dtype=torch.bfloat16)
    vbf = te_bf.embed(compact).numpy()
    cosbf = (vbf * ref).sum(1)
    print("[%.0fs] check on %d texts: trimmed pack fp32 vs full model cosine min %.5f mean %.5f; bf16 compute "
          "min %.5f mean %.5f; tokenizer same as HF on %s" % (time.time() - t0, len(items), cos32.min(), cos32.mean(),
                                                              cosbf.min(), cosbf.mean(), tok_same), flush=True)
    np.savez(os.path.join(a.out, "reference.npz"), kind=np.asarray([k for k, _ in picks]),
             index=np.asarray([i for _, i in picks], np.int64), vec=ref.astype(np.float32))
    meta = {"model": a.tiny_random and "tiny random (dry run)" or os.path.abspath(a.model),
            "texts": {k: len(texts[k]) for k in texts}, "tokens": {k: int(raw[k][1][-1]) for k in raw},
            "max_len": a.max_len, "rows_kept": int(len(keep)), "storage": meta_pack["storage"],
            "check": {"n": len(items), "fp32_cos_min": float(cos32.min()), "bf16_cos_min": float(cosbf.min()),
                      "tokenizer_same_as_hf": tok_same}}
    json.dump(meta, open(os.path.join(a.out, "meta.json"), "w"), indent=1)
    if cos32.min() < 0.999:
        sys.exit("trimmed pack disagrees with the full model (cosine %.5f < 0.999)" % cos32.min())
    if tok_same is not None and tok_same < len(items):
        sys.exit("the C tokenizer's ids differ from the HF tokenizer's")


if __name__ == "__main__":
    main()
