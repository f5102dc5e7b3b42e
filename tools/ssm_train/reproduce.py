#!/usr/bin/env python3
"""Re-runs the training chain of a shipped encoder from its own manifest: one command.

The shipped ssm.json holds every stage's manifest, each stage's under "init_manifest" of the one after it. This
walks that chain from the first stage, and runs train.py once per stage with the stage's recorded hyper-parameters
and its recorded step count (--steps, so the learning-rate schedule is the same as the time budget gave), each
stage starting from the one before. A stage that used the teacher gets --teacher (computed once by the first such
stage and kept with --teacher-save). GPU kernels are not bit-deterministic: a repeat gives close, not identical,
weights; every stage's validation is in its own new manifest to compare. It runs today's train.py: the commit
each stage was trained at is in its manifest ("commit"), for the exact code of that time.

  python3 tools/ssm_train/reproduce.py --out .device/repro                     # stages in .device/repro/stageN
  python3 tools/ssm_train/reproduce.py --out .device/repro --dry-run           # only print the commands
Needs what train.py needs (the H200 box: .device/ssm_data from prepare.py, .device/teacher from
tools/teacher/export.py when a stage distils).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

# hyper-parameters recorded in a manifest -> train.py option; the rest are not options of a stage
FLAGS = {"seed": "--seed", "batch": "--batch", "window": "--window", "lr": "--lr", "wd": "--wd", "warmup": "--warmup",
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


def stage_command(m, i, out, data, teacher_src, teacher_pt, have_teacher_pt, python="python3"):
    hp = m.get("hyper_parameters") or {}
    unknown = sorted(set(hp) - set(FLAGS) - NOT_OPTIONS)
    if unknown:
        raise SystemExit("stage %d: hyper-parameters this script does not know: %s" % (i + 1, ", ".join(unknown)))
    if not m.get("steps_done"):
        raise SystemExit("stage %d: the manifest has no step count" % (i + 1))
    train = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py")
    cmd = [python, train, "--data", data, "--out", os.path.join(out, "stage%d" % (i + 1)),
           "--steps", str(m["steps_done"]), "--checkpoint-every", "1e9", "--commit", "reproduce of " + str(m.get("commit"))]
    if i > 0:
        cmd += ["--init", os.path.join(out, "stage%d" % i)]
    for k in sorted(hp):
        if k in FLAGS:
            v = hp[k]
            if isinstance(v, list):
                if not v:
                    continue
                v = ",".join(v)
            cmd += [FLAGS[k], str(v)]
    if float(hp.get("distill") or 0) > 0:
        if have_teacher_pt:
            cmd += ["--teacher", teacher_pt]
        else:
            cmd += ["--teacher", teacher_src, "--teacher-save", teacher_pt]
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", default="data/models/ssm/ssm.json", help="the shipped encoder's ssm.json")
    ap.add_argument("--out", required=True, help="folder for stage1 … stageN (the last is the reproduced encoder)")
    ap.add_argument("--data", default=".device/ssm_data", help="prepare.py's output")
    ap.add_argument("--teacher", default=".device/teacher", help="tools/teacher/export.py's output")
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
        have = have or "--teacher" in cmds[-1]
    for i, (m, cmd) in enumerate(zip(stages, cmds)):
        print("# stage %d of %d (shipped from commit %s): %d steps" % (i + 1, len(stages), m.get("commit"),
                                                                       m["steps_done"]), flush=True)
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        if not args.dry_run:
            os.makedirs(args.out, exist_ok=True)
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    sys.exit(main())
