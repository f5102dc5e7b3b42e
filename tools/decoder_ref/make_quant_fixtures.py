#!/usr/bin/env python3
"""Reference dequantization for tests/unit/test_decoder_quant.c: for each weight format in the model, the raw
bytes of a few blocks of a real tensor and their values as dequantized by gguf-py (numpy, independent of our C).
F16 and BF16 (absent from the model) come from numpy's own conversions of fixed values. Reference tool only.
  /tmp/refvenv/bin/python tools/decoder_ref/make_quant_fixtures.py data/models/gemma-3-270m-q4_k_m.gguf \
      tests/data/decoder/quant_blocks.json
"""
import json
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize


def main():
    path, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(path)
    cases = []
    wanted = {T.F32: "output_norm.weight", T.Q8_0: "blk.0.attn_v.weight", T.Q5_0: "blk.0.attn_q.weight",
              T.Q4_K: "blk.0.attn_output.weight", T.Q6_K: None}
    for t in r.tensors:
        if t.tensor_type == T.Q6_K and wanted[T.Q6_K] is None:
            wanted[T.Q6_K] = t.name
    for qtype, name in wanted.items():
        t = next(x for x in r.tensors if x.name == name)
        block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)
        # Take whole leading elements of row 3 (a row that is not the first), at most 512 elements.
        row_elems = int(t.shape[0])
        row_bytes = row_elems // block_elems * block_bytes
        n = min(row_elems, 512)
        data = raw[3 * row_bytes: 3 * row_bytes + n // block_elems * block_bytes] if len(t.shape) > 1 else raw[: n // block_elems * block_bytes]
        values = dequantize(data, qtype).reshape(-1)
        cases.append({"type": int(qtype), "name": qtype.name, "tensor": name, "n": int(values.size),
                      "hex": data.tobytes().hex(), "values": [float(v) for v in values]})
    rng = np.random.default_rng(7)
    f = np.concatenate([rng.normal(0, 3, 56).astype(np.float32), np.array([0, -0.0, 1e-7, 65504, 6e-5, -2.5, 1 / 3, 7],
                                                                          np.float32)])
    h = f.astype(np.float16)
    cases.append({"type": int(T.F16), "name": "F16", "tensor": "synthetic", "n": int(h.size),
                  "hex": h.tobytes().hex(), "values": [float(v) for v in h.astype(np.float32)]})
    b = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact values of the stored bf16
    cases.append({"type": int(T.BF16), "name": "BF16", "tensor": "synthetic", "n": int(b.size),
                  "hex": b.tobytes().hex(),
                  "values": [float(v) for v in (b.astype(np.uint32) << 16).view(np.float32)]})
    with open(out, "w") as fp:
        json.dump({"about": "raw blocks and gguf-py dequantized values; tools/decoder_ref/make_quant_fixtures.py",
                   "cases": cases}, fp)
        fp.write("\n")
    for c in cases:
        print(c["name"], c["tensor"], c["n"])


if __name__ == "__main__":
    main()
