"""What the tool tests written as plain scripts share (standard library only): ROOT, the source tree; check(cond,
what), which prints "ok" or "FAIL" and counts the failures; failed(), how many so far; finish(), the script's end
(exit 1 when any failed); write_suite(root, name, docs, qs), a made-up eval suite in shared/eval's layout."""
import json
import os
import sys

ROOT = os.environ.get("CLAUSEQA_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_failed = 0


def check(cond, what):
    global _failed
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        _failed += 1


def failed():
    return _failed


def finish():
    if _failed:
        print("%d checks failed" % _failed)
        sys.exit(1)
    print("all passed")


def write_suite(root, name, docs, qs):
    """root/name/docs/<doc>.txt from docs ({name: text}) and root/name/questions.jsonl from qs; returns root/name."""
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "docs"))
    for doc, text in docs.items():
        with open(os.path.join(d, "docs", doc + ".txt"), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(d, "questions.jsonl"), "w", encoding="utf-8") as f:
        for q in qs:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    return d
