#!/usr/bin/env python3
"""Issue 26's held-out-document unanswerables (tools/decoder_train/heldout_unans.py) on two made-up suites:
  - the output is a function of the suite, the part and the share (two runs, and a shuffled questions.jsonl, give
    the same bytes);
  - the held-out documents are absent from docs/ (the others present, as links), every version of a held-out law
    with it; their questions are unanswerable with the reason, answers emptied, gold kept; every other question of
    the part is byte-for-byte the input's; cjrc-style unanswerable questions stay unanswerable; mixed-gold and
    `semantic` questions of a held-out document are left out;
  - bad input (no suite, a share out of (0, 1), a malformed line, a suite of corpus.txt, --out inside the suite,
    a docs/ holding a real file) is refused with a clear message and nothing lost;
  - refusal_threshold.py weights -heldout runs as they come and leaves a suite without reference answers out of the
    objective;
  - pack_parts.py cuts a bundle into .tar.xz parts each within the size a device call leaves beside the tree,
    every file in exactly one, and refuses a link or a file no part can hold;
  - with the clauseqa binary: `clauseqa eval --answers extractive` takes the written suite and reports abstention on
    the new unanswerable questions.

usage: test_heldout_unans.py [path/to/clauseqa]"""
import json
import os
import random
import subprocess
import sys
import tempfile

from checks import ROOT, check, finish, write_suite  # noqa: E402 (tests/integration/checks.py)
sys.path.insert(0, os.path.join(ROOT, "tools", "decoder_train"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import dev_split  # noqa: E402
import heldout_unans as hu  # noqa: E402
import pack_parts  # noqa: E402
import refusal_threshold  # noqa: E402
import tarfile  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "decoder_train", "heldout_unans.py")
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]


def toy_suite(root):
    """toy-dev: 80 contracts, each with its own terms, three questions each (the third unanswerable, as cjrc)."""
    docs, qs = {}, []
    for i in range(80):
        a, b = WORDS[i % 12], WORDS[(i * 5 + 3) % 12]
        doc = "Contract_%02d" % i
        docs[doc] = ("Section 1. The supplier %s%d shall pay the buyer %d dollars per month.\n\n"
                     "Section 2. The agreement with %s%d ends after %d years.\n" % (a, i, 100 + i, b, i, 2 + i % 7))
        for k, (qt, ans, gt) in enumerate([
                ("How much shall the supplier %s%d pay per month?" % (a, i), "%d dollars" % (100 + i),
                 "%d dollars per month" % (100 + i)),
                ("When does the agreement with %s%d end?" % (b, i), "after %d years" % (2 + i % 7), None),
                ("Who audits the accounts of %s%d?" % (a, i), None, None)]):
            q = {"id": "toy-dev-%d" % (3 * i + k + 1), "question": qt, "type": "span_qa", "answerable": ans is not None,
                 "gold": [{"doc": doc, "clause": None, "page": None, "text": gt}], "answers": [ans] if ans else []}
            qs.append(q)
    return write_suite(root, "toy-dev", docs, qs)


def laws_suite(root):
    """laws-toy: 90 laws, every other one in two versions; clause lookups, semantic questions, and questions citing two
    laws."""
    docs, qs = {}, []
    for i in range(90):
        names = ["法%d(2016-01-01)" % i, "法%d(2023-06-30)" % i] if i % 2 == 0 else ["法%d" % i]
        for n in names:
            docs[n] = "第一条 本法第%d号规定的事项。\n" % i
        qs.append({"id": "laws-toy-%d" % (len(qs) + 1),
                   "question": "法%d第一条的内容是什么？" % i, "type": "clause_lookup",
                   "answerable": True, "gold": [{"doc": n, "clause": "第一条", "page": None,
                                                 "text": "本法第%d号规定的事项。" % i} for n in names],
                   "answers": ["本法第%d号规定的事项。" % i]})
        qs.append({"id": "laws-toy-%d" % (len(qs) + 1),
                   "question": "第%d号事项怎么办？" % i, "type": "semantic",
                   "answerable": True, "gold": [{"doc": names[0], "clause": "第一条", "page": None, "text": None}],
                   "answers": ["依法办理。"]})
        other = "法%d" % ((i + 1) % 90) if (i + 1) % 2 else "法%d(2016-01-01)" % ((i + 1) % 90)
        qs.append({"id": "laws-toy-%d" % (len(qs) + 1),
                   "question": "第%d号和下一号事项？" % i, "type": "clause_lookup",
                   "answerable": True, "gold": [{"doc": names[-1], "clause": "第一条", "page": None, "text": None},
                                                {"doc": other, "clause": "第一条", "page": None, "text": None}],
                   "answers": ["见两法第一条。"]})
    return write_suite(root, "laws-toy", docs, qs)


def run_tool(*args):
    p = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def read_out(d):
    with open(os.path.join(d, "questions.jsonl"), encoding="utf-8") as f:
        qs = [json.loads(line) for line in f]
    with open(os.path.join(d, "heldout.txt"), encoding="utf-8") as f:
        held = f.read().split("\n")[:-1]
    return qs, held, sorted(os.listdir(os.path.join(d, "docs")))


def tree_bytes(d):
    out = {}
    for f in ("questions.jsonl", "heldout.txt"):
        with open(os.path.join(d, f), "rb") as fh:
            out[f] = fh.read()
    out["docs"] = sorted((n, os.readlink(os.path.join(d, "docs", n))) for n in os.listdir(os.path.join(d, "docs")))
    return out


def test_toy(ev, out):
    originals = {q["id"]: q for q in hu.read_questions(ev, "toy-dev")}
    for part in ("calibration", "validation"):
        rc, msg = run_tool("--eval", ev, "--out", os.path.join(out, part), "--part", part, "toy-dev")
        check(rc == 0 and "held out" in msg, "toy-dev %s: written (%s)" % (part, msg.strip()))
        d = os.path.join(out, part, "toy-dev")
        qs, held, docs = read_out(d)
        pred = dev_split.question_is_calibration if part == "calibration" else dev_split.question_is_validation
        want = [q for q in originals.values() if pred("toy-dev", q)]
        check(sorted(q["id"] for q in qs) == sorted(q["id"] for q in want),
              "%s: every question of the part, and only those (%d)" % (part, len(qs)))
        part_docs = set(g["doc"] for q in want for g in q["gold"])
        check(len(held) == round(0.2 * len(part_docs)) and set(held) <= part_docs,
              "%s: a fifth of the part's %d documents held out (%d)" % (part, len(part_docs), len(held)))
        check(not set(held) & set(os.path.splitext(n)[0] for n in docs) and len(docs) == 80 - len(held),
              "%s: held-out documents absent from docs/, the other %d there" % (part, len(docs)))
        check(all(os.path.islink(os.path.join(d, "docs", n)) and os.path.isfile(os.path.join(d, "docs", n))
                  for n in docs), "%s: docs/ holds links to the suite's files" % part)
        made = [q for q in qs if q.get("unanswerable_by")]
        check(made and all(q["unanswerable_by"] == "heldout-document" and q["answerable"] is False
                           and q["answers"] == [] and q["gold"] == originals[q["id"]]["gold"]
                           and q["gold"][0]["doc"] in held for q in made),
              "%s: %d questions of held-out documents unanswerable, answers emptied, gold kept" % (part, len(made)))
        check(len(made) == sum(1 for q in want if q["gold"][0]["doc"] in held),
              "%s: every question of a held-out document made so" % part)
        check(any(originals[q["id"]]["answerable"] is False for q in made),
              "%s: an originally unanswerable question of a held-out document keeps answerable false" % part)
        rest = [q for q in qs if not q.get("unanswerable_by")]
        check(all(q == originals[q["id"]] for q in rest) and any(q["answerable"] is False for q in rest),
              "%s: the other %d questions unchanged (their own unanswerables too)" % (part, len(rest)))
        again = os.path.join(out, part + "-again")
        run_tool("--eval", ev, "--out", again, "--part", part, "toy-dev")
        check(tree_bytes(d) == tree_bytes(os.path.join(again, "toy-dev")), "%s: a second run, the same bytes" % part)
        rc, _ = run_tool("--eval", ev, "--out", os.path.join(out, part), "--part", part, "toy-dev")
        check(rc == 0 and tree_bytes(d) == tree_bytes(os.path.join(again, "toy-dev")),
              "%s: rewriting over its own output" % part)
    # the order of questions.jsonl does not choose the documents
    shuffled = os.path.join(out, "shuffled")
    lines = open(os.path.join(ev, "toy-dev", "questions.jsonl"), encoding="utf-8").read().splitlines()
    random.Random(3).shuffle(lines)
    write_suite(shuffled, "toy-dev", {}, [])
    os.rmdir(os.path.join(shuffled, "toy-dev", "docs"))
    os.symlink(os.path.join(ev, "toy-dev", "docs"), os.path.join(shuffled, "toy-dev", "docs"))
    with open(os.path.join(shuffled, "toy-dev", "questions.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    _, held_a, _ = hu.heldout_part(ev, "toy-dev", "validation")
    _, held_b, _ = hu.heldout_part(shuffled, "toy-dev", "validation")
    check(held_a == held_b, "the held-out documents do not depend on the questions' order")
    # the calibration part keeps refusal_split's order: its every 3rd holds the part's unanswerable share
    qs, _, _ = read_out(os.path.join(out, "calibration", "toy-dev"))
    un = lambda L: sum(1 for q in L if q["answerable"] is False)  # noqa: E731
    check(abs(un(qs[::3]) - un(qs) / 3) <= 1, "calibration: every 3rd keeps the class mix (%d of %d; %d of %d)"
          % (un(qs[::3]), len(qs[::3]), un(qs), len(qs)))
    n1 = hu.heldout_part(ev, "toy-dev", "validation", share=0.4)[2]["heldout_docs"]
    check(n1 > len(held_a), "--share 0.4 holds out more (%d > %d)" % (n1, len(held_a)))


def test_laws(ev, out):
    originals = {q["id"]: q for q in hu.read_questions(ev, "laws-toy")}
    seen = {"family": 0, "mixed": 0, "semantic": 0, "made": 0}
    for part in ("calibration", "validation"):
        rc, msg = run_tool("--eval", ev, "--out", os.path.join(out, part), "--part", part, "laws-toy")
        check(rc == 0, "laws-toy %s: %s" % (part, msg.strip()))
        qs, held, docs = read_out(os.path.join(out, part, "laws-toy"))
        fams = set(h.split("(")[0] for h in held)  # 法26(2016-01-01) and 法26(2023-06-30) are one law
        all_docs = set(os.path.splitext(n)[0] for n in os.listdir(os.path.join(ev, "laws-toy", "docs")))
        check(set(held) == set(n for n in all_docs if n.split("(")[0] in fams),
              "%s: every version of a held-out law held out (%s)" % (part, ", ".join(held)))
        seen["family"] += sum(1 for h in held if "(" in h)
        ids = set(q["id"] for q in qs)
        pred = dev_split.question_is_calibration if part == "calibration" else dev_split.question_is_validation
        for q in originals.values():
            if not pred("laws-toy", q):
                continue
            gd = set(g["doc"] for g in q["gold"])
            if gd & set(held) and not gd <= set(held):
                seen["mixed"] += 1
                check(q["id"] not in ids, "%s: %s cites a held-out and a kept law: left out" % (part, q["id"]))
            elif gd <= set(held) and q["type"] == "semantic":
                seen["semantic"] += 1
                check(q["id"] not in ids, "%s: semantic %s of a held-out law: left out" % (part, q["id"]))
            elif gd <= set(held):
                seen["made"] += 1
        check(all(q.get("unanswerable_by") == "heldout-document" and q["answerable"] is False
                  for q in qs if set(g["doc"] for g in q["gold"]) <= set(held)),
              "%s: clause lookups of held-out laws unanswerable" % part)
    check(all(seen.values()), "laws-toy: every case occurred (%s)" % json.dumps(seen))


def test_bad_input(ev, out):
    rc, msg = run_tool("--eval", ev, "--out", out, "--part", "validation", "no-such-dev")
    check(rc != 0 and "no suite no-such-dev" in msg, "an unknown suite: %s" % msg.strip())
    for share in ("0", "1", "1.5", "-0.2"):
        rc, msg = run_tool("--eval", ev, "--out", out, "--part", "validation", "--share", share, "toy-dev")
        check(rc != 0 and "--share" in msg, "--share %s refused: %s" % (share, msg.strip()))
    rc, msg = run_tool("--eval", ev, "--out", out, "--part", "train", "toy-dev")
    check(rc != 0 and "invalid choice" in msg, "--part train refused (calibration or validation)")
    bad = os.path.join(out, "bad")
    write_suite(bad, "broken-dev", {"a": "x", "b": "y"},
                [{"id": "broken-dev-1", "question": "?", "gold": [{"doc": "a"}], "answers": []}])
    with open(os.path.join(bad, "broken-dev", "questions.jsonl"), "a", encoding="utf-8") as f:
        f.write('{"id": "broken-dev-2", "question": \n')
    rc, msg = run_tool("--eval", bad, "--out", out, "--part", "validation", "broken-dev")
    check(rc != 0 and "line 2: not JSON" in msg, "a malformed line named: %s" % msg.strip())
    write_suite(bad, "noid-dev", {"a": "x", "b": "y"}, [{"question": "?", "gold": []}])
    rc, msg = run_tool("--eval", bad, "--out", out, "--part", "validation", "noid-dev")
    check(rc != 0 and "line 1: not a question" in msg, "a line without id: %s" % msg.strip())
    write_suite(bad, "pdf-dev", {}, [{"id": "pdf-dev-1", "question": "?", "gold": [{"doc": "a"}]}])
    with open(os.path.join(bad, "pdf-dev", "corpus.txt"), "w") as f:
        f.write("../toy-dev\n")
    rc, msg = run_tool("--eval", bad, "--out", out, "--part", "validation", "pdf-dev")
    check(rc != 0 and "corpus.txt" in msg, "a suite whose documents live elsewhere: %s" % msg.strip())
    write_suite(bad, "tiny-dev", {"a": "x"}, [{"id": "tiny-dev-%d" % i, "question": "?", "gold": [{"doc": "a"}]}
                                              for i in range(1, 4)])
    rc, msg = run_tool("--eval", bad, "--out", out, "--part", "validation", "tiny-dev")
    check(rc != 0 and "too few" in msg, "a part of one document: %s" % msg.strip())
    before = sorted(os.listdir(os.path.join(ev, "toy-dev", "docs")))
    rc, msg = run_tool("--eval", ev, "--out", ev, "--part", "validation", "toy-dev")
    after = sorted(os.listdir(os.path.join(ev, "toy-dev", "docs")))
    check(rc != 0 and "into the suite itself" in msg and after == before,
          "--out the suite's own folder: refused, nothing touched (%s)" % msg.strip())
    mine = os.path.join(out, "mine", "toy-dev", "docs")
    os.makedirs(mine)
    with open(os.path.join(mine, "notes.txt"), "w") as f:
        f.write("mine")
    rc, msg = run_tool("--eval", ev, "--out", os.path.join(out, "mine"), "--part", "validation", "toy-dev")
    check(rc != 0 and "not a link this tool wrote" in msg and open(os.path.join(mine, "notes.txt")).read() == "mine",
          "a docs/ holding a real file: refused, the file kept (%s)" % msg.strip())


def test_threshold():
    check(refusal_threshold.prior_for("train-rerank-heldout") == "run", "-heldout runs: weighted as they come")
    check(refusal_threshold.prior_for("train-rerank") == "train", "other runs: the train part's mix")
    check(refusal_threshold.prior_for("train-rerank-heldout", "train") == "train", "an explicit --prior stands")
    rows = [{"answerable": True, "has_answers": False, "f1": 0.0, "p": 0.1 * i} for i in range(10)]
    rows += [{"answerable": False, "has_answers": False, "f1": 0.0, "p": 0.9}] * 3
    s = refusal_threshold.score(rows, 0.0)
    check(s["score"] is None and s["falseA"] == 1.0 and s["abst"] == 1.0,
          "no reference answers: out of the objective, false refusals and abstention still reported")
    rows[0] = dict(rows[0], has_answers=True, f1=1.0)
    check(refusal_threshold.score(rows, 0.95)["score"] == 0.25, "one reference answer: scored (1 of 4 units)")


def test_pack(t):
    root, out = os.path.join(t, "bundle"), os.path.join(t, "parts")
    rng = random.Random(5)
    want = {}
    for i in range(12):  # incompressible files of 30-400 kB in three folders, and many small text files
        rel = os.path.join("vs", "s%d" % (i % 3), "docs", "f%02d.pdf" % i)
        want[rel] = bytes(rng.getrandbits(8) for _ in range(rng.randint(30000, 400000)))
    for i in range(300):
        want[os.path.join("tq", "s%d" % (i % 2), "q%03d.txt" % i)] = ("question %d " % i * 50).encode()
    for rel, data in want.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    cap = 900000
    sizes = pack_parts.write(root, out, cap, "heldout")
    got = {}
    for path, n, k in sizes:
        check(os.path.getsize(path) == n <= cap, "part %s: %d bytes, within %d" % (os.path.relpath(path, out), n, cap))
        with tarfile.open(path) as tf:
            for m in tf.getmembers():
                if m.name in got:
                    check(False, "%s in two parts" % m.name)
                got[m.name] = tf.extractfile(m).read()
    check(len(sizes) >= 3 and got == want, "%d parts hold every file once, byte for byte (%d files)"
          % (len(sizes), len(got)))
    again = pack_parts.write(root, out, cap, "heldout")
    check(len(again) == len(sizes) and sorted(os.listdir(out)) == ["p%d" % i for i in range(1, len(sizes) + 1)],
          "a second pack replaces the parts")
    try:
        pack_parts.write(root, out, 300000, "heldout")
        check(False, "a file over the part size: refused")
    except pack_parts.Error as e:
        check("no part can hold it" in str(e), "a file over the part size: refused (%s)" % e)
    os.symlink(os.path.join(root, "tq"), os.path.join(root, "vs", "link"))
    try:
        pack_parts.write(root, out, cap, "heldout")
        check(False, "a link in the bundle: refused")
    except pack_parts.Error as e:
        check("is a link" in str(e), "a link in the bundle: refused (%s)" % e)


def test_eval(cq, out):
    """clauseqa eval takes the held-out suite and scores abstention on its new unanswerable questions."""
    d = os.path.join(out, "validation", "toy-dev")
    data = os.path.join(out, "data")
    p = subprocess.run([cq, "eval", "--data", data, "--kb", "toy", "--suite", d, "--answers", "extractive", "--json",
                        "--out", os.path.join(out, "eval.jsonl")], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "clauseqa eval on the held-out suite: exit %d (%s)" % (p.returncode, p.stderr[-300:]))
    try:
        r = json.loads(p.stdout)
    except ValueError:
        check(False, "eval --json prints JSON: %s" % p.stdout[-300:])
        return
    qs, held, docs = read_out(d)
    n_un = sum(1 for q in qs if q["answerable"] is False)
    a = r.get("all", {})
    check(a.get("questions") == len(qs) and a.get("unanswerable") == n_un and "abstention_accuracy" in a
          and "false_abstention_rate" in a, "eval scores abstention over the %d unanswerable questions: %s"
          % (n_un, json.dumps(a)[:400]))
    with open(os.path.join(out, "eval.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    check(len(lines) == len(qs), "one line per question (%d)" % len(lines))
    cited = set()
    for ln in lines:
        for c in ln["prediction"].get("citations") or []:
            cited.add(c.get("doc") or c.get("doc_name"))
    check(cited and cited <= set(os.path.splitext(n)[0] for n in docs),
          "answers cite only the KB's documents, none held out (%d cited)" % len(cited))


def main():
    cq = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory() as t:
        ev, out = os.path.join(t, "eval"), os.path.join(t, "out")
        toy_suite(ev)
        laws_suite(ev)
        test_toy(ev, out)
        test_laws(ev, os.path.join(t, "laws"))
        test_bad_input(ev, os.path.join(t, "bad"))
        test_threshold()
        test_pack(t)
        if cq and os.access(cq, os.X_OK):
            test_eval(cq, out)
        else:
            print("skip the clauseqa eval check: no binary given")
    finish()


if __name__ == "__main__":
    main()
