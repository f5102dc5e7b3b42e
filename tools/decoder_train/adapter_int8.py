#!/usr/bin/env python3
"""An adapter's factors stored as int8 with one float scale a row (half the bytes of F16).

    adapter_int8.py SRC_DIR DST_DIR

SRC_DIR holds adapter.json + adapter.safetensors (F32, F16 or BF16 factors, as train.py writes them); DST_DIR gets
the same adapter.json (with the storage recorded under manifest.storage) and an adapter.safetensors where each
factor NAME is an I8 matrix and NAME.scale its F32 scales (one a row: the row's largest |value| / 127, values
rounded to the nearest step). decoder/lora.c reads both forms (docs/ANSWERS.md). The runtime holds factors in
bf16 (8 significant bits), so a row's int8 steps add an error of the same order; the script reports it per tensor
(relative Frobenius norm of the difference) and for the product s*B*A of each projection, the term the model adds.

Exit status 1 when a tensor is not a 2-D float matrix or a value is not finite: nothing is written then.
"""
import hashlib
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def quantize_rows(m):
    """(int8 matrix, float32 scales a row) for a 2-D float matrix."""
    m = m.astype(np.float32)
    peak = np.abs(m).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(m / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def rel_err(a, b):
    n = float(np.linalg.norm(a))
    return float(np.linalg.norm(a - b)) / n if n else 0.0


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = argv[1], argv[2]
    meta = json.load(open(os.path.join(src, "adapter.json"), encoding="utf-8"))
    weights = os.path.join(src, "adapter.safetensors")
    raw = open(weights, "rb").read()
    tensors = load_file(weights)
    scale_lora = float(meta["alpha"]) / float(meta["rank"])
    out, worst, worst_term, n_bytes = {}, (0.0, ""), (0.0, ""), 0
    for name, t in sorted(tensors.items()):
        if t.ndim != 2 or t.dtype.kind != "f":
            print(f"{name}: shape {t.shape} dtype {t.dtype}: not a 2-D float matrix", file=sys.stderr)
            return 1
        t = t.astype(np.float32)
        if not np.isfinite(t).all():
            print(f"{name}: values that are not finite", file=sys.stderr)
            return 1
        q, s = quantize_rows(t)
        out[name], out[name + ".scale"] = q, s
        n_bytes += q.nbytes + s.nbytes
        e = rel_err(t, q.astype(np.float32) * s[:, None])
        worst = max(worst, (e, name))
    for name in tensors:
        if not name.endswith(".lora_a"):
            continue
        b_name = name[: -len("lora_a")] + "lora_b"
        a, b = tensors[name].astype(np.float32), tensors[b_name].astype(np.float32)
        qa = out[name].astype(np.float32) * out[name + ".scale"][:, None]
        qb = out[b_name].astype(np.float32) * out[b_name + ".scale"][:, None]
        e = rel_err(scale_lora * (b @ a), scale_lora * (qb @ qa))
        worst_term = max(worst_term, (e, name[: -len(".lora_a")]))
    os.makedirs(dst, exist_ok=True)
    save_file(out, os.path.join(dst, "adapter.safetensors"), metadata={"format": "pt", "storage": "int8-rows"})
    meta.setdefault("manifest", {})["storage"] = {
        "dtype": "I8 with an F32 scale a row (tools/decoder_train/adapter_int8.py)",
        "from_sha256": hashlib.sha256(raw).hexdigest(),
        "from_bytes": len(raw),
        "worst_factor_rel_err": [round(worst[0], 6), worst[1]],
        "worst_term_rel_err": [round(worst_term[0], 6), worst_term[1]],
    }
    with open(os.path.join(dst, "adapter.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(tensors)} factors: {len(raw) / 1e6:.1f} MB -> {n_bytes / 1e6:.1f} MB of data; worst factor "
          f"{worst[1]} rel. err {worst[0]:.2e}; worst term s*B*A {worst_term[1]} rel. err {worst_term[0]:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
