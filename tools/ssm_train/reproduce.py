#!/usr/bin/env python3
"""Re-runs the training chain of a shipped encoder from its own manifest: one command.

The shipped ssm.json holds every stage's manifest, each stage's under "init_manifest" of the one after it. This
walks that chain from the first stage, and runs train.py once per stage with the stage's recorded hyper-parameters
and its recorded step count (--steps, so the learning-rate schedule is the same as the time budget gave), each
stage starting from the one before. A stage that used the teacher gets --teacher (computed once by the first such
stage and kept with --teacher-save). GPU kernels are not bit-deterministic: a repeat gives close, not identical,
weights; every stage's validation is in its own new manifest to compare.

Two generations of manifests: issue 14's (train.py of today: "tokenizer", "mix", ... in its hyper-parameters; data
from prepare.py + tokenize_data.py in --data, the teacher from tools/teacher/export.py in --teacher) run today's
train.py; issue 6's (the first encoders: "frac_questions" ...) run the train.py of the commit the stage records,
unpacked with `git archive` into OUT/code-<commit>/ (their data format is that commit's prepare.py's).

  python3 tools/ssm_train/reproduce.py --out .device/repro                     # stages in .device/repro/stageN
  python3 tools/ssm_train/reproduce.py --out .device/repro --dry-run           # only print the commands
Needs what train.py needs (the H200 box).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# issue 14's train.py: recorded hyper-parameter -> option (booleans are flags)
FLAGS = {k: "--" + k.replace("_", "-") for k in (
    "tokenizer", "d_model", "n_layer", "d_state", "expand", "dt_rank", "d_embed", "token_embd_dim", "vocab_size",
    "seed", "batch", "window", "mix", "lr", "wd", "warmup", "tau", "validate", "distill", "distill_emb",
    "distill_tau", "distill_suites", "tf32", "long_frac", "long_window", "calib")}
BOOL_FLAGS = {"no_fused": "--no-fused"}
# issue 6's train.py (run at the stage's own commit)
FLAGS_V1 = {"seed": "--seed", "batch": "--batch", "window": "--window", "lr": "--lr", "wd": "--wd", "warmup": "--warmup",
            "tau": "--tau", "frac_questions": "--frac-questions", "frac_headings": "--frac-headings",
            "validate": "--validate", "distill": "--distill", "distill_tau": "--distill-tau",
            "distill_suites": "--distill-suites"}
NOT_OPTIONS = {"steps", "budget", "teacher", "teacher_save", "teacher_only"}


def chain(manifest):
    """The stages' manifests, first stage first."""
    out = []
    while manifest:
        out.append(manifest)
        manifest = manifest.get("init_manifest")
    return out[::-1]


def generation(hp):
    return 1 if "frac_questions" in hp or "frac_headings" in hp else 2


def stage_command(m, i, out, data, teacher_src, teacher_pt, have_teacher_pt, python="python3"):
    hp = m.get("hyper_parameters") or {}
    gen = generation(hp)
    flags = FLAGS_V1 if gen == 1 else FLAGS
    unknown = sorted(set(hp) - set(flags) - set(BOOL_FLAGS if gen == 2 else {}) - NOT_OPTIONS)
    if unknown:
        raise SystemExit("stage %d: hyper-parameters this script does not know: %s" % (i + 1, ", ".join(unknown)))
    if not m.get("steps_done"):
        raise SystemExit("stage %d: the manifest has no step count" % (i + 1))
    code = ROOT if gen == 2 else os.path.join(out, "code-%s" % m.get("commit"))
    train = os.path.join(code, "tools", "ssm_train", "train.py")
    cmd = [python, train, "--data", data, "--out", os.path.join(out, "stage%d" % (i + 1)),
           "--steps", str(m["steps_done"]), "--checkpoint-every", "1e9", "--commit", "reproduce of " + str(m.get("commit"))]
    if gen == 2:
        cmd += ["--workers", "3"]
        if "calib" not in hp:  # trained before the calibration part existed: every train document was trained on
            cmd += ["--calib", "0"]
    if i > 0:
        cmd += ["--init", os.path.join(out, "stage%d" % i)]
    for k in sorted(hp):
        v = hp[k]
        if k in BOOL_FLAGS and gen == 2:
            if v:
                cmd.append(BOOL_FLAGS[k])
            continue
        if k not in flags:
            continue
        if isinstance(v, list):
            if not v:
                continue
            v = ",".join(v)
        cmd += [flags[k], str(v)]
    if float(hp.get("distill") or 0) > 0 or float(hp.get("distill_emb") or 0) > 0:
        if have_teacher_pt:
            cmd += ["--teacher", teacher_pt]
        else:
            cmd += ["--teacher", teacher_src, "--teacher-save", teacher_pt]
    return cmd, (None if gen == 2 else (m.get("commit"), code))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", default="data/models/ssm/ssm.json", help="the shipped encoder's ssm.json")
    ap.add_argument("--out", required=True, help="folder for stage1 … stageN (the last is the reproduced encoder)")
    ap.add_argument("--data", default=".device/ssm14/data", help="prepare.py's output (+ tokenize_data.py's ids)")
    ap.add_argument("--teacher", default=".device/ssm14/teacher", help="tools/teacher/export.py's output")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args()
    top = json.load(open(args.manifest, encoding="utf-8")).get("manifest")
    if not top:
        raise SystemExit("%s has no manifest" % args.manifest)
    stages = chain(top)
    teacher_pt = os.path.join(args.out, "teacher.pt")
    have, cmds = False, []
    for i, m in enumerate(stages):  # every stage checked before the first one runs
        cmds.append(stage_command(m, i, args.out, args.data, args.teacher, teacher_pt, have))
        have = have or "--teacher" in cmds[-1][0]
    for i, (m, (cmd, code)) in enumerate(zip(stages, cmds)):
        print("# stage %d of %d (shipped from commit %s): %d steps" % (i + 1, len(stages), m.get("commit"),
                                                                       m["steps_done"]), flush=True)
        if code:
            print("# its train.py is the one of commit %s: git archive %s tools | tar -x -C %s" % (code[0], code[0],
                                                                                                 code[1]), flush=True)
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        if not args.dry_run:
            os.makedirs(args.out, exist_ok=True)
            if code and not os.path.exists(code[1]):
                os.makedirs(code[1])
                a = subprocess.run(["git", "-C", ROOT, "archive", code[0], "tools"], check=True, capture_output=True)
                subprocess.run(["tar", "-x", "-C", code[1]], input=a.stdout, check=True)
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    sys.exit(main())
