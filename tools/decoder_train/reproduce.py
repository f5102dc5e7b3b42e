#!/usr/bin/env python3
"""Re-runs the training of a shipped answer adapter from its own manifest: one command.

Reads adapter.json (default data/models/answer/adapter.json), and runs
  1. prepare.py with the recorded options (--licensed-only, seed, rates, validation sizes),
  2. pack.py (tokens from the base GGUF),
  3. train.py with the recorded hyper-parameters and the recorded step count (--steps, so the learning-rate
     schedule is the one the time budget gave).
Retrieval needs a clauseqa binary and a data folder (the KBs are ingested when missing); training needs a GPU for
speed (the H200: tools/decoder_train/device_train.sh runs step 3 there). GPU kernels are not bit-deterministic: a
repeat gives close, not identical, weights; the validation scores land in the new adapter.json to compare. It runs
today's tools: the manifest's "commit" names the code of the shipped run.

  python3 tools/decoder_train/reproduce.py --out .device/repro [--dry-run] [--skip-prepare]
"""
import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# recorded hyper-parameter -> train.py option
TRAIN_FLAGS = {"rank": "--rank", "alpha": "--alpha", "dropout": "--dropout", "lr": "--lr",
               "min_lr_ratio": "--min-lr-ratio", "warmup": "--warmup", "wd": "--wd", "clip": "--clip",
               "batch": "--batch", "max_len": "--max-len", "max_completion": "--max-completion", "mix": "--mix",
               "source_weights": "--source-weights", "loss_norm": "--loss-norm", "seed": "--seed", "attn": "--attn",
               "micro_tokens": "--micro-tokens", "base_dtype": "--base-dtype"}
# recorded prepare.py option -> flag (paths are this machine's, from the command line)
PREPARE_FLAGS = {"seed": "--seed", "syn_rate_zh": "--syn-rate-zh", "syn_rate_en": "--syn-rate-en",
                 "en_variants": "--en-variants", "rel_pairs": "--rel-pairs", "val_answer": "--val-answer",
                 "val_rerank": "--val-rerank", "syn_same_doc": "--syn-same-doc", "cal_answer": "--cal-answer",
                 "heldout_share": "--heldout-share", "heldout_rounds": "--heldout-rounds", "suites": "--suites",
                 "aux": "--aux"}
PREPARE_PATHS = {"eval", "train", "clauseqa", "data", "work", "out", "limit", "licensed_only"}


def init_folder(m, folder):
    """An adapter trained on from another (manifest "init", train.py --init) needs that adapter: folder must hold
    it (adapter.safetensors of the recorded sha256). None when the manifest has no init."""
    init = m.get("init")
    if not init:
        return None
    if not folder:
        raise SystemExit("this adapter continued from another (%s steps, commit %s, adapter.safetensors sha256 %s): "
                         "pass --init FOLDER holding that adapter (its own manifest says how it was trained)"
                         % (init.get("steps"), init.get("commit"), init.get("sha256")))
    path = os.path.join(folder, "adapter.safetensors")
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
    except OSError as e:
        raise SystemExit("--init %s: %s" % (folder, e))
    if h.hexdigest() != init.get("sha256"):
        raise SystemExit("--init %s: adapter.safetensors sha256 %s, the manifest's init is %s"
                         % (folder, h.hexdigest(), init.get("sha256")))
    return folder


def commands(doc, out, python, clauseqa, data_dir, gguf, eval_dir, train_dir, work, init=None):
    m = doc.get("manifest") or {}
    init = init_folder(m, init)
    hp = m.get("hyper_parameters") or {}
    unknown = sorted(set(hp) - set(TRAIN_FLAGS))
    if unknown:
        raise SystemExit("hyper-parameters this script does not know: %s" % ", ".join(unknown))
    if not m.get("steps"):
        raise SystemExit("the manifest has no step count")
    opts = (m.get("data") or {}).get("prepare_options") or {}
    unknown = sorted(set(opts) - set(PREPARE_FLAGS) - PREPARE_PATHS)
    if unknown:
        raise SystemExit("prepare options this script does not know: %s" % ", ".join(unknown))
    dec_data = os.path.join(out, "dec_data")
    prep = [python, os.path.join(HERE, "prepare.py"), "--eval", eval_dir, "--train", train_dir, "--clauseqa", clauseqa,
            "--data", data_dir, "--work", work, "--out", dec_data]
    if (m.get("data") or {}).get("licensed_only"):
        prep.append("--licensed-only")
    for k in sorted(opts):
        if k in PREPARE_FLAGS and opts[k] is not None:
            prep += [PREPARE_FLAGS[k], str(opts[k])]
    pack = [python, os.path.join(HERE, "pack.py"), "--data", dec_data, "--base", gguf]
    train = [python, os.path.join(HERE, "train.py"), "--data", dec_data, "--base", gguf,
             "--out", os.path.join(out, "adapter"), "--steps", str(m["steps"]),
             "--commit", "reproduce of %s" % m.get("commit")]
    for k in sorted(hp):
        if hp[k] is not None:
            train += [TRAIN_FLAGS[k], str(hp[k])]
    if init:
        train += ["--init", init]
    return [("prepare", prep), ("pack", pack), ("train", train)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--adapter", default="data/models/answer/adapter.json")
    ap.add_argument("--out", required=True, help="folder for dec_data/ and the reproduced adapter/")
    ap.add_argument("--clauseqa", default="build/clauseqa")
    ap.add_argument("--data", default="/tmp/dectrain-data", help="clauseqa data folder (KBs made when missing)")
    ap.add_argument("--base", "--gguf", dest="gguf", default=None,
                    help="the base GGUF (default data/models/ + the manifest's base file)")
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--train", default="../shared/train")
    ap.add_argument("--work", default="/tmp/dectrain-work")
    ap.add_argument("--python", default=sys.executable, help="a Python with torch, transformers, gguf, safetensors")
    ap.add_argument("--skip-prepare", action="store_true", help="OUT/dec_data is already there")
    ap.add_argument("--init", default=None, help="the adapter this one continued from (manifest init: train.py --init)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args()
    with open(args.adapter, encoding="utf-8") as f:
        doc = json.load(f)
    if args.gguf is None:
        args.gguf = os.path.join("data", "models", (doc.get("base") or {}).get("file") or "gemma-3-270m-q4_k_m.gguf")
    cmds = commands(doc, args.out, args.python, args.clauseqa, args.data, args.gguf, args.eval, args.train, args.work,
                    args.init)
    m = doc["manifest"]
    print("# reproducing the adapter of commit %s: %d steps, rank %s" % (m.get("commit"), m["steps"], doc.get("rank")),
          flush=True)
    for name, cmd in cmds:
        if name in ("prepare", "pack") and args.skip_prepare:
            continue
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        if not args.dry_run:
            os.makedirs(args.out, exist_ok=True)
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    sys.exit(main())
