#!/usr/bin/python3
"""tools/ssm_train/reproduce.py: the shipped encoder's manifest names a training chain that the script turns into
one train.py command per stage, each from the one before, with the stage's recorded step count and options, and the
teacher for the stages that distil; a manifest it cannot read faithfully is refused, not half-run.
Runs only --dry-run (training needs the GPU box).

usage: test_ssm_reproduce.py [path/to/clauseqa (unused)]"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("CLAUSEQA_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "tools", "ssm_train", "reproduce.py")
SHIPPED = os.path.join(ROOT, "data", "models", "ssm", "ssm.json")
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    failures += 0 if cond else 1


def run(manifest, out="/tmp/repro-test"):
    p = subprocess.run([sys.executable, SCRIPT, "--manifest", manifest, "--out", out, "--dry-run"],
                       capture_output=True, text=True)
    cmds = [line.split() for line in p.stdout.splitlines() if line and not line.startswith("#")]
    return p.returncode, cmds, p.stderr


def opt(cmd, name):
    return cmd[cmd.index(name) + 1] if name in cmd else None


# 1. the shipped chain
shipped = json.load(open(SHIPPED, encoding="utf-8"))["manifest"]
stages = []
m = shipped
while m:
    stages.append(m)
    m = m.get("init_manifest")
stages.reverse()
rc, cmds, err = run(SHIPPED)
check(rc == 0, "the shipped manifest is accepted (%s)" % err.strip()[-200:])
check(len(cmds) == len(stages) >= 2, "one command per stage: %d commands, %d stages" % (len(cmds), len(stages)))
for i, (c, st) in enumerate(zip(cmds, stages)):
    check(opt(c, "--steps") == str(st["steps_done"]), "stage %d: --steps %s as recorded" % (i + 1, st["steps_done"]))
    check(opt(c, "--out") == "/tmp/repro-test/stage%d" % (i + 1), "stage %d: its own output folder" % (i + 1))
    check(opt(c, "--init") == (None if i == 0 else "/tmp/repro-test/stage%d" % i),
          "stage %d: starts from %s" % (i + 1, "scratch" if i == 0 else "stage %d" % i))
    hp = st["hyper_parameters"]
    check(opt(c, "--lr") == str(hp["lr"]) and opt(c, "--window") == str(hp["window"]),
          "stage %d: lr %s, window %s as recorded" % (i + 1, hp["lr"], hp["window"]))
    distils = float(hp.get("distill") or 0) > 0
    check(("--teacher" in c) == distils, "stage %d: teacher %s" % (i + 1, "given" if distils else "not given"))
    if hp.get("distill_suites"):
        check(opt(c, "--distill-suites") == ",".join(hp["distill_suites"]), "stage %d: distillation suites" % (i + 1))
teach = [c for c in cmds if "--teacher" in c]
check(len(teach) >= 1 and "--teacher-save" in teach[0] and all("--teacher-save" not in c for c in teach[1:]),
      "the teacher is computed once (by the first distilling stage) and read after")

# 2. what it refuses
with tempfile.TemporaryDirectory() as d:
    def write(obj):
        p = os.path.join(d, "ssm.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(obj, f)
        return p
    bad = json.loads(json.dumps(shipped))
    bad["hyper_parameters"]["mystery_knob"] = 3
    rc, cmds, err = run(write({"manifest": bad}))
    check(rc != 0 and "mystery_knob" in err and not cmds, "an unknown hyper-parameter stops it before any command")
    bad = json.loads(json.dumps(shipped))
    del bad["steps_done"]
    rc, cmds, err = run(write({"manifest": bad}))
    check(rc != 0 and "step count" in err, "a stage without a step count is refused")
    rc, cmds, err = run(write({"format": "clauseqa-ssm"}))
    check(rc != 0 and "no manifest" in err, "weights without a manifest are refused")

print("%d failed" % failures)
sys.exit(1 if failures else 0)
