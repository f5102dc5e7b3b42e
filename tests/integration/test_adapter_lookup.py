#!/usr/bin/env python3
"""Which adapter a model gets (docs/DECODER.md): `answer-STEM/` next to the model file STEM.gguf first, then
`answer/`; an adapter trained on another base model is refused with a warning (the base model answers); --adapter
none turns it off. The adapters here are written by hand (no numpy): int8 factors with a scale a row, the storage
tools/decoder_train/adapter_int8.py makes, on the tiny qwen2 model of tests/data/decoder (d = 128, 2 layers).

  python3 tests/integration/test_adapter_lookup.py build/clauseqa
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TINY = os.path.join(ROOT, "tests", "data", "decoder", "qwen2_tiny.gguf")
FAILS = []


def check(cond, what, detail=""):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, detail[-1500:] if detail else "")
    else:
        print("ok:", what)


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, shape, bytes)} -> a safetensors file."""
    header, blob = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def int8_rows(rows, cols, seed):
    """(int8 bytes, F32 scale bytes): small deterministic values, one scale a row."""
    q = bytes(((seed * 31 + i * 17) % 255 - 127) & 0xFF for i in range(rows * cols))
    scales = struct.pack("<%df" % rows, *[0.002 * (1 + (r % 5)) for r in range(rows)])
    return q, scales


def write_adapter(folder, base_sha, name):
    os.makedirs(folder, exist_ok=True)
    a, sa = int8_rows(2, 128, 1)
    b, sb = int8_rows(128, 2, 2)
    write_safetensors(os.path.join(folder, "adapter.safetensors"), {
        "blk.0.attn_q.lora_a": ("I8", [2, 128], a), "blk.0.attn_q.lora_a.scale": ("F32", [2], sa),
        "blk.0.attn_q.lora_b": ("I8", [128, 2], b), "blk.0.attn_q.lora_b.scale": ("F32", [128], sb)})
    with open(os.path.join(folder, "adapter.json"), "w") as f:
        json.dump({"format": "clauseqa-lora-v1", "rank": 2, "alpha": 4, "prompt_format": "cq-prompt-v1",
                   "base": {"file": "x.gguf", "sha256": base_sha}, "manifest": {"name": name, "steps": 1}}, f)


def generate(exe, model, *extra):
    p = subprocess.run([exe, "generate", "--model", model, "--device", "cpu", "--threads", "1", "--max-tokens", "2",
                        *extra, "hello"], capture_output=True, text=True, errors="replace", timeout=120)
    return p.returncode, p.stdout + p.stderr


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "clauseqa")
    tmp = tempfile.mkdtemp(prefix="cq_adapter_lookup_")
    try:
        model = os.path.join(tmp, "qwen2_tiny.gguf")
        shutil.copy(TINY, model)
        sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
        # only answer/, trained on another model: refused by name, the base model answers
        write_adapter(os.path.join(tmp, "answer"), "ab" * 32, "other-base")
        rc, out = generate(exe, model)
        check(rc == 0, "answer/ of another base: the command still works", out)
        check("trained on base model x.gguf" in out and "no adapter" in out,
              "answer/ of another base: refused with a warning, the base model answers", out)
        # answer-qwen2_tiny/ made for this model: taken before answer/
        write_adapter(os.path.join(tmp, "answer-qwen2_tiny"), sha, "tiny-int8")
        rc, out = generate(exe, model)
        check(rc == 0 and "adapter tiny-int8" in out and "answer-qwen2_tiny" in out,
              "answer-STEM/ is the model's adapter (int8 factors read)", out)
        rc, out = generate(exe, model, "--adapter", "none")
        check(rc == 0 and "no adapter" in out, "--adapter none", out)
        # its int8 factors broken: a clear warning naming the tensor, the base model answers
        os.remove(os.path.join(tmp, "answer-qwen2_tiny", "adapter.safetensors"))
        a, _ = int8_rows(2, 128, 1)
        b, sb = int8_rows(128, 2, 2)
        write_safetensors(os.path.join(tmp, "answer-qwen2_tiny", "adapter.safetensors"), {
            "blk.0.attn_q.lora_a": ("I8", [2, 128], a),
            "blk.0.attn_q.lora_b": ("I8", [128, 2], b), "blk.0.attn_q.lora_b.scale": ("F32", [128], sb)})
        rc, out = generate(exe, model)
        check(rc == 0 and "blk.0.attn_q.lora_a.scale is not there" in out and "no adapter" in out,
              "int8 factor without its scales: refused by name", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_adapter_lookup:", "FAILED " + ", ".join(FAILS) if FAILS else "all passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
