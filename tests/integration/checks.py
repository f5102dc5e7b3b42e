"""What the tool tests written as plain scripts share (standard library only): ROOT, the source tree; check(cond,
what), which prints "ok" or "FAIL" and counts the failures; failed(), how many so far; finish(), the script's end
(exit 1 when any failed)."""
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
