"""The decoder's vocabulary as the SSM encoder's input (docs/SSM.md, "Input layer"): tokenizer and token-embedding
table of the Gemma-3 GGUF, read exactly as the C runtime reads them.

- Tokenizer: the C tokenizer itself (attention/tokenizer.c with attention/gguf.c), compiled here into a small shared
  library and called through ctypes, so training sees the ids the runtime makes, byte for byte. Plain text: no
  BOS, control tokens in the text are not parsed (ids 0..4 never come out; the encoder uses them as its markers).
- Table: token_embd.weight rows dequantized as attention/quant.c does (Q8_0: x = f16(d) * q, in float32).
- table_id(): the table's fingerprint the encoder's ssm.json records ("token_table_id") and the runtime checks:
  SHA-256 of "<type name>:<n_embd>x<n_vocab>\\n" followed by the raw bytes of rows 0, 64, 128, ... (every 64th).
- trim(): a GGUF with the tokenizer's metadata and a token_embd.weight of the full shape in which only the rows
  asked for (and every 64th, so the fingerprint holds) are kept and the rest are zero: it compresses to a few MB
  and lets the C runtime run on the GPU box, where the 241 MB model does not travel in one call (device plan).

    python3 tools/ssm_train/gemma_vocab.py tokenize "第十二条 text"          (ids)
    python3 tools/ssm_train/gemma_vocab.py id                                  (the table's fingerprint)
"""
import argparse
import ctypes
import hashlib
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_GGUF = os.path.join(ROOT, "data", "models", "gemma-3-270m-q4_k_m.gguf")
LIB_DIR = os.path.join(ROOT, "build-gemma-tok")
SOURCES = ["attention/tokenizer.c", "attention/gguf.c", "attention/quant.c", "core/strbuf.c", "core/error.c",
           "core/utf8.c"]
ROW_STRIDE = 64          # table_id: every 64th row
N_MARKERS = 5


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


def _lib():
    so = os.path.join(LIB_DIR, "libcqtok.so")
    srcs = [os.path.join(ROOT, s) for s in SOURCES]
    if not os.path.exists(so) or any(os.path.getmtime(s) > os.path.getmtime(so) for s in srcs):
        os.makedirs(LIB_DIR, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE", "-I", ROOT] + srcs +
                       ["-lm", "-o", so + ".tmp"], check=True)
        os.replace(so + ".tmp", so)
    lib = ctypes.CDLL(so)
    lib.cq_gguf_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Err)]
    lib.cq_tokenizer_from_gguf.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Err)]
    lib.cq_tokenizer_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint,
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                        ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_Err)]
    lib.cq_tokenizer_vocab_size.argtypes = [ctypes.c_void_p]
    lib.cq_gguf_close.argtypes = [ctypes.c_void_p]
    return lib


class Tokenizer:
    """Gemma-3's tokenizer through the C code. encode(text) -> list of ids (no BOS, no special parsing)."""

    def __init__(self, gguf=DEFAULT_GGUF):
        self.lib = _lib()
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [ctypes.c_void_p]
        g, t, err = ctypes.c_void_p(), ctypes.c_void_p(), _Err()
        if self.lib.cq_gguf_open(gguf.encode(), ctypes.byref(g), ctypes.byref(err)):
            raise RuntimeError("gguf %s: %s" % (gguf, err.msg.decode()))
        if self.lib.cq_tokenizer_from_gguf(g, ctypes.byref(t), ctypes.byref(err)):
            raise RuntimeError("tokenizer: %s" % err.msg.decode())
        self.lib.cq_gguf_close(g)
        self.t = t
        self.n_vocab = self.lib.cq_tokenizer_vocab_size(t)

    def encode(self, text):
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, n, err = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_size_t(), _Err()
        if self.lib.cq_tokenizer_encode(self.t, b, len(b), 0, ctypes.byref(ids), ctypes.byref(n), ctypes.byref(err)):
            raise RuntimeError("encode: %s" % err.msg.decode())
        out = np.ctypeslib.as_array(ids, shape=(n.value,)).copy() if n.value else np.zeros(0, np.int32)
        self.libc.free(ids)
        # the runtime does the same (app/ssm_vocab.c): an id below 5 could only be a control token; read as UNK
        out[out < N_MARKERS] = 1
        return out.astype(np.int32)


def _table(gguf):
    import gguf as gg
    r = gg.GGUFReader(gguf)
    t = next(x for x in r.tensors if x.name == "token_embd.weight")
    n_embd, n_vocab = int(t.shape[0]), int(t.shape[1])
    raw = np.asarray(t.data)                    # Q8_0: (n_vocab, n_embd / 32 * 34) bytes
    return r, t, t.tensor_type.name, n_embd, n_vocab, raw.reshape(n_vocab, -1)


def dequant_rows(type_name, raw_rows, n_embd):
    if type_name == "Q8_0":
        b = raw_rows.reshape(len(raw_rows), n_embd // 32, 34)
        d = b[:, :, :2].copy().view(np.float16).astype(np.float32)
        q = b[:, :, 2:].copy().view(np.int8).astype(np.float32)
        return (q * d).reshape(len(raw_rows), n_embd)
    if type_name == "F32":
        return raw_rows.copy().view(np.float32).reshape(len(raw_rows), n_embd)
    if type_name == "F16":
        return raw_rows.copy().view(np.float16).astype(np.float32).reshape(len(raw_rows), n_embd)
    raise ValueError("token_embd type %s: only Q8_0, F16 and F32 are read here" % type_name)


def table_rows(ids, gguf=DEFAULT_GGUF):
    """float32 rows (len(ids), n_embd) of token_embd, as the runtime dequantizes them."""
    _, _, tn, n_embd, _, raw = _table(gguf)
    return dequant_rows(tn, raw[np.asarray(ids, dtype=np.int64)], n_embd)


def table_id(gguf=DEFAULT_GGUF):
    _, _, tn, n_embd, n_vocab, raw = _table(gguf)
    h = hashlib.sha256(("%s:%dx%d\n" % (tn, n_embd, n_vocab)).encode())
    h.update(np.ascontiguousarray(raw[::ROW_STRIDE]).tobytes())
    return h.hexdigest()


def table_info(gguf=DEFAULT_GGUF):
    _, _, tn, n_embd, n_vocab, _ = _table(gguf)
    return {"type": tn, "n_embd": n_embd, "n_vocab": n_vocab}


def trim(keep_ids, out, gguf=DEFAULT_GGUF):
    """Writes `out`: tokenizer metadata + token_embd.weight with only keep_ids' rows (and every 64th) non-zero."""
    import gguf as gg
    r, t, tn, n_embd, n_vocab, raw = _table(gguf)
    keep = np.zeros(n_vocab, bool)
    keep[np.asarray(keep_ids, dtype=np.int64)] = True
    keep[::ROW_STRIDE] = True
    data = np.where(keep[:, None], raw, 0).astype(np.uint8)
    w = gg.GGUFWriter(out, arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name.startswith("tokenizer.") or name.startswith("general.") or ".embedding_length" in name:
            w.add_key_value(name, f.contents(), f.types[0], f.types[-1] if f.types[0] == gg.GGUFValueType.ARRAY
                            else None)
    w.add_tensor("token_embd.weight", data, raw_shape=data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return int(keep.sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["tokenize", "id", "info"])
    ap.add_argument("text", nargs="?", default="")
    ap.add_argument("--gguf", default=DEFAULT_GGUF)
    a = ap.parse_args()
    if a.what == "tokenize":
        print(Tokenizer(a.gguf).encode(a.text).tolist())
    elif a.what == "id":
        print(table_id(a.gguf))
    else:
        print(table_info(a.gguf))


if __name__ == "__main__":
    sys.exit(main())
