"""The load test's KB (tests/bench/bench_load.py on the GPU box; tools/device_serve31.sh, tools/device_cuda31.sh):
the documents of a suite's validation questions' gold first, then the others by name, N in all, copied to OUT.

    python3 tools/load_kb_pick.py VALIDATION_DIR DOCS_DIR OUT_DIR [N]   (N: 200)
"""
import json
import os
import shutil
import sys


def pick(val, docs, n):
    names = sorted(os.listdir(docs))
    by_stem = {os.path.splitext(name)[0]: name for name in names}
    chosen = []
    for line in open(os.path.join(val, "questions.jsonl"), encoding="utf-8"):
        for g in json.loads(line).get("gold") or []:
            name = by_stem.get(g.get("doc"))
            if name and name not in chosen:
                chosen.append(name)
    for name in names:
        if len(chosen) >= n:
            break
        if name not in chosen:
            chosen.append(name)
    return chosen[:n]


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    val, docs, out = argv[1:4]
    chosen = pick(val, docs, int(argv[4]) if len(argv) == 5 else 200)
    for name in chosen:
        shutil.copy(os.path.join(docs, name), out)
    print(f"{len(chosen)} documents")


if __name__ == "__main__":
    main(sys.argv)
