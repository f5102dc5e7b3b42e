"""The decoder's vocabulary as the SSM encoder's input (docs/SSM.md, "Input layer"): tokenizer and token-embedding
table of the Gemma-3 GGUF, read exactly as the C runtime reads them.

- Tokenizer: the C tokenizer itself (decoder/tokenizer.c with decoder/gguf.c), compiled here into a small shared
  library and called through ctypes, so training sees the ids the runtime makes, byte for byte. Plain text: no
  BOS, control tokens in the text are not parsed (ids 0..4 never come out; the encoder uses them as its markers).
- Table: token_embd.weight rows dequantized as decoder/quant.c does (Q8_0: x = f16(d) * q, in float32).
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
SOURCES = ["app/ssm_vocab.c", "decoder/tokenizer.c", "decoder/gguf.c", "decoder/quant.c", "core/strbuf.c",
           "core/error.c", "core/utf8.c", "core/sha256.c", "core/grow.c",
           "decoder/cpu_isa.c", "decoder/quant_avx512.c"]  # quant.c dispatches to the ISA kernels
ROW_STRIDE = 64          # table_id: every 64th row
N_MARKERS = 5


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class _Vocab(ctypes.Structure):  # cq_ssm_vocab (ssm/ssm.h)
    _fields_ = [("name", ctypes.c_char_p), ("n_vocab", ctypes.c_int32), ("n_embd", ctypes.c_int32),
                ("table_id", ctypes.c_char_p), ("ctx", ctypes.c_void_p), ("tokenize", ctypes.c_void_p),
                ("row", ctypes.c_void_p)]


_TOKENIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                             ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)), ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(_Err))
_ROW = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_float))


# core/utf8.c measures display width with utf8proc, and the Qwen2 pre-tokenizer of decoder/tokenizer.c asks it for
# Unicode categories; the Gemma vocabulary calls neither: where utf8proc (header or library) is missing, as on a bare
# GPU box, a stand-in header lets the library build without it (the Qwen2 path must not run on it).
_UTF8PROC_SHIM = """#include <stdint.h>
typedef int32_t utf8proc_int32_t;
typedef enum { UTF8PROC_CATEGORY_CN, UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT,
               UTF8PROC_CATEGORY_LM, UTF8PROC_CATEGORY_LO, UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NL,
               UTF8PROC_CATEGORY_NO } utf8proc_category_t;
static inline int utf8proc_charwidth(utf8proc_int32_t c) { (void)c; return 1; } /* unused by the Gemma tokenizer */
static inline utf8proc_category_t utf8proc_category(utf8proc_int32_t c) { (void)c; return UTF8PROC_CATEGORY_CN; }
"""


def _lib():
    # CQ_TOK_SHIM=1 (device27.sh's CPU dry run): take the GPU box's path here, the stand-in header, never
    # -lutf8proc, into a library of its own name so that a cached regular build cannot hide a failure
    shim_only = os.environ.get("CQ_TOK_SHIM") == "1"
    so = os.path.join(LIB_DIR, "libcqtok-shim.so" if shim_only else "libcqtok.so")
    srcs = [os.path.join(ROOT, s) for s in SOURCES]
    if not os.path.exists(so) or any(os.path.getmtime(s) > os.path.getmtime(so) for s in srcs + [__file__]):
        os.makedirs(LIB_DIR, exist_ok=True)
        cmd = ["gcc", "-O2", "-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE", "-I", ROOT] + srcs
        if shim_only or subprocess.run(cmd + ["-lutf8proc", "-lm", "-o", so + ".tmp"],
                                       capture_output=True).returncode:
            shim = os.path.join(LIB_DIR, "shim")
            os.makedirs(shim, exist_ok=True)
            with open(os.path.join(shim, "utf8proc.h"), "w") as f:
                f.write(_UTF8PROC_SHIM)
            subprocess.run(cmd[:-len(srcs)] + ["-I", shim] + srcs + ["-Wl,--no-undefined", "-lm", "-o", so + ".tmp"],
                           check=True)
        os.replace(so + ".tmp", so)
    lib = ctypes.CDLL(so)
    lib.cq_ssm_gemma_vocab_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Err)]
    lib.cq_ssm_gemma_vocab_get.argtypes = [ctypes.c_void_p]
    lib.cq_ssm_gemma_vocab_get.restype = ctypes.POINTER(_Vocab)
    return lib


class Vocab:
    """The decoder's vocabulary exactly as app/ssm_vocab.c lends it to the encoder."""

    def __init__(self, gguf=DEFAULT_GGUF):
        self.lib = _lib()
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [ctypes.c_void_p]
        h, err = ctypes.c_void_p(), _Err()
        if self.lib.cq_ssm_gemma_vocab_open(gguf.encode(), ctypes.byref(h), ctypes.byref(err)):
            raise RuntimeError(err.msg.decode())
        self.h = h
        v = self.lib.cq_ssm_gemma_vocab_get(h).contents
        self.name, self.n_vocab, self.n_embd = v.name.decode(), v.n_vocab, v.n_embd
        self.table_id = v.table_id.decode()
        self._ctx = v.ctx
        self._tokenize = _TOKENIZE(v.tokenize)
        self._row = _ROW(v.row)

    def encode(self, text):
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, n, err = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_size_t(), _Err()
        if self._tokenize(self._ctx, b, len(b), ctypes.byref(ids), ctypes.byref(n), ctypes.byref(err)):
            raise RuntimeError("encode: %s" % err.msg.decode())
        out = np.ctypeslib.as_array(ids, shape=(n.value,)).astype(np.int32) if n.value else np.zeros(0, np.int32)
        self.libc.free(ids)
        return out

    def rows(self, ids):
        """float32 (len(ids), n_embd): the table rows as the runtime dequantizes them."""
        out = np.zeros((len(ids), self.n_embd), np.float32)
        for k, i in enumerate(np.asarray(ids).tolist()):
            self._row(self._ctx, int(i), out[k].ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        return out


Tokenizer = Vocab


def table_rows(ids, gguf=DEFAULT_GGUF):
    return Vocab(gguf).rows(ids)


def table_id(gguf=DEFAULT_GGUF):
    return Vocab(gguf).table_id


def table_info(gguf=DEFAULT_GGUF):
    v = Vocab(gguf)
    return {"name": v.name, "n_embd": v.n_embd, "n_vocab": v.n_vocab, "table_id": v.table_id}


def _table(gguf):
    import gguf as gg
    r = gg.GGUFReader(gguf)
    t = next(x for x in r.tensors if x.name == "token_embd.weight")
    return r, t, np.asarray(t.data).reshape(int(t.shape[1]), -1)


def trim(keep_ids, out, gguf=DEFAULT_GGUF):
    """Writes `out`: tokenizer metadata + token_embd.weight with only keep_ids' rows (and every 64th) non-zero."""
    import gguf as gg
    r, t, raw = _table(gguf)
    n_vocab = raw.shape[0]
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
