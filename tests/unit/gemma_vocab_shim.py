#!/usr/bin/env python3
"""tools/ssm_train/gemma_vocab.py builds the decoder's tokenizer into a small library for the training tools; on a
GPU box without utf8proc it builds against a stand-in utf8proc.h. Twice a device window was lost because that
build failed only there (the Qwen2 pre-tokenizer's Unicode categories missing from the stand-in; core/grow.c missing
from the source list). This builds the library the stand-in way here, with every symbol resolved at link time.
SOURCES and the stand-in are read from gemma_vocab.py's text (it imports numpy, which CI's python3 lacks)."""
import ast
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
tree = ast.parse(open(os.path.join(ROOT, "tools", "ssm_train", "gemma_vocab.py"), encoding="utf-8").read())
vals = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
sources = ast.literal_eval(vals["SOURCES"])
shim = ast.literal_eval(vals["_UTF8PROC_SHIM"])
with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "shim"))
    with open(os.path.join(d, "shim", "utf8proc.h"), "w") as f:
        f.write(shim)
    cmd = ["gcc", "-O0", "-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE", "-Wl,--no-undefined", "-I", ROOT,
           "-I", os.path.join(d, "shim")] + [os.path.join(ROOT, s) for s in sources] + ["-lm", "-o",
                                                                                      os.path.join(d, "t.so")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write(r.stderr[-3000:])
        print("FAIL: the tokenizer library does not build with the stand-in utf8proc.h and gemma_vocab's SOURCES")
        sys.exit(1)
    nm = subprocess.run(["nm", "-D", "--undefined-only", os.path.join(d, "t.so")], capture_output=True, text=True)
    if "utf8proc" in nm.stdout:
        print("FAIL: the library still needs libutf8proc:\n" + nm.stdout)
        sys.exit(1)
print("OK: %d sources build and link with the stand-in utf8proc.h" % len(sources))
