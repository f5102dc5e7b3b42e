"""What fusion_vs_py.py and fusion_score_vs_py.py share: loading tools/ssm_train/fusion.py's reference and the
command line that writes the committed cases or runs the C test program over fresh ones (a case a JSON line)."""
import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_fusion():
    """tools/ssm_train/fusion.py; its module imports prepare.py (numpy) for `collect` only, so a stand-in is lent
    when numpy is missing (the ranking functions use neither)."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "ssm_train"))
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import numpy  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("prepare")
        stand_in.hits = stand_in.norm = None
        sys.modules["prepare"] = stand_in
    import fusion
    return fusion


def questions(files):
    """The questions of fusion.py record files (gzipped JSON)."""
    for f in files:
        yield from json.load(gzip.open(f, "rt"))["questions"].values()


def main(doc, reference, edge_cases, random_cases, record_cases, env_var, write_seed, write_n, program):
    """reference(fusion) gives the ranking function the case builders take; env_var names the cases file for the
    C program. Returns the exit status (77: skipped, fusion.py cannot be loaded)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--write", help="write the committed cases here (seed %d) and stop" % write_seed)
    ap.add_argument("--records", nargs="*", help="fusion.py record files to check instead of random cases")
    ap.add_argument("--seed", type=int, default=None, help="random cases' seed (default: a new one each run)")
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("program", nargs="?", help="the %s program" % program)
    a = ap.parse_args()
    try:
        rank = reference(load_fusion())
    except Exception as e:  # noqa: BLE001 - any failure to load the reference means: nothing to compare against
        print("skipped: tools/ssm_train/fusion.py cannot be loaded: %s" % e)
        return 77
    if a.write:
        cases = edge_cases(rank) + random_cases(rank, write_n, write_seed)
        with open(a.write, "w") as f:
            f.writelines(json.dumps(c, separators=(",", ":")) + "\n" for c in cases)
        print("%d cases written to %s" % (len(cases), a.write))
        return 0
    if not a.program:
        ap.error("give the %s program" % program)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    cases = record_cases(rank, a.records) if a.records else edge_cases(rank) + random_cases(rank, a.n, seed)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.writelines(json.dumps(c, separators=(",", ":")) + "\n" for c in cases)
    try:
        env = dict(os.environ, CMOCKA_TEST_ABORT="0", **{env_var: f.name})
        print("%d cases%s" % (len(cases), "" if a.records else " (seed %d)" % seed), flush=True)
        r = subprocess.run([a.program], env=env)
        return 1 if r.returncode else 0
    finally:
        os.unlink(f.name)
