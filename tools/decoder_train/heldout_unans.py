#!/usr/bin/env python3
"""Unanswerable questions made by holding documents out of the KB (issue 26 item 5, "abstention you can trust"):
the dev suites hold no unanswerable English question and only cjrc-dev's one kind (a question about a passage that
does not answer it); nothing measured "the KB lacks the document entirely", the user-visible failure (a question
about company law asked of a KB without it got an amount quoted from an unrelated clause).

For one part of a suite (calibration: tools/dev_split.py's calibration part, as refusal_split.py writes it for
device_calibrate.sh's train-* runs; validation: dev_split's validation part) this picks a deterministic share of the
part's documents (those that are gold of the part's questions, ranked by sha256("heldout/<suite>/<doc>"); the
first round(share * n), at least one, never all) and writes

    OUT/<suite>/docs/            the suite's documents WITHOUT the held-out ones (symlinks to the kept files)
    OUT/<suite>/heldout.txt      the held-out doc names, one a line (device_calibrate.sh links docs/ from it)
    OUT/<suite>/questions.jsonl  the part's questions: those whose gold documents are all held out become
                                 unanswerable ("answerable": false, "answers": [], "unanswerable_by":
                                 "heldout-document"; gold kept, it names the missing document; eval scores
                                 abstention on them), every other question unchanged

Per-suite details:
- versions of one law (laws-zh: "慈善法(2016-03-16)", "慈善法(2023-12-29)") are one unit: a document's family is its
  name without a "(YYYY-MM-DD)" and what follows; holding one out holds out every version, else the question would
  still be answered from another version;
- cjrc-dev's own unanswerable questions are kept as they are (those of a held-out document get the field too);
- a question with gold documents both held out and kept is left out (its answer is partly in the KB), and so is a
  `semantic` question (a lay question whose gold are the relevant articles: laws-zh) whose documents are held out:
  other laws in the KB may well answer it (a repealed law's successor has another name), so "unanswerable" would
  be a guess. Both are counted in the summary line;
- questions that name their document (contracts-en-dev "Consider the Non-Disclosure Agreement between ...", cuad-dev
  "Contract: ... (file ...)") are the hard case the tool is for: the KB holds similar contracts, not that one.

The calibration part is written in refusal_split.py's stratified order (`--every N` keeps the answerable /
unanswerable mix); the validation part in the suite's order. Everything is a function of the suite, the part and
--share: refusal_report.sh rewrites the questions on the CPU to score the device's runs.

    python3 tools/decoder_train/heldout_unans.py --eval ../shared/eval --out /tmp/vsh --part validation \
        [--share 0.2] [--every 3] [SUITE ...]
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import dev_split  # noqa: E402
import refusal_split  # noqa: E402

SUITES = ["cjrc-dev", "cmrc-dev", "policy-zh-dev", "cuad-dev", "contracts-en-dev"]
REASON = "heldout-document"
UNSURE_TYPES = {"semantic"}  # questions other documents of the KB may answer: never labelled unanswerable
_VERSION = re.compile(r"\(\d{4}-\d{2}-\d{2}\).*$")


class Error(Exception):
    pass


def family(doc):
    """The unit held out: versions of one document (a "(YYYY-MM-DD)" suffix and what follows) go together."""
    return _VERSION.sub("", doc) or doc


def _rank(suite, doc):
    return hashlib.sha256(("heldout/%s/%s" % (suite, doc)).encode("utf-8")).hexdigest()


def gold_docs(q):
    return sorted(set(g["doc"] for g in q.get("gold") or [] if g.get("doc")))


def read_questions(eval_dir, suite):
    """The suite's questions; a line that is not a question object (FORMAT.md: id, question) is an error naming
    the line, never skipped."""
    path = os.path.join(eval_dir, suite, "questions.jsonl")
    qs = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                q = json.loads(line)
            except ValueError as e:
                raise Error("%s line %d: not JSON (%s)" % (path, i, e))
            if not isinstance(q, dict) or not isinstance(q.get("id"), str) or not isinstance(q.get("question"), str):
                raise Error("%s line %d: not a question (FORMAT.md: an object with id and question)" % (path, i))
            if not isinstance(q.get("gold") or [], list) or any(not isinstance(g, dict) for g in q.get("gold") or []):
                raise Error("%s line %d (%s): gold is not a list of objects" % (path, i, q["id"]))
            qs.append(q)
    return qs


def part_questions(eval_dir, suite, part):
    qs = read_questions(eval_dir, suite)
    if part == "calibration":
        return [q for q in qs if dev_split.question_is_calibration(suite, q)]
    return [q for q in qs if dev_split.question_is_validation(suite, q)]


def doc_in_part(suite, doc, part):
    if part == "calibration":
        return dev_split.doc_is_calibration(suite, doc)
    return dev_split.doc_is_validation(suite, doc)


def suite_doc_names(eval_dir, suite):
    """{doc name: file name} of the suite's docs/ (FORMAT.md: flat, names unique)."""
    d = os.path.join(eval_dir, suite, "docs")
    if os.path.isfile(os.path.join(eval_dir, suite, "corpus.txt")):
        raise Error("%s keeps its documents in other suites (corpus.txt): hold them out there" % suite)
    if not os.path.isdir(d):
        raise Error("no docs/ in %s" % os.path.join(eval_dir, suite))
    names = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("."):
            continue
        stem = os.path.splitext(f)[0]
        if stem in names:
            raise Error("%s: two documents named %s (%s, %s)" % (suite, stem, names[stem], f))
        names[stem] = f
    return names


def choose_heldout(suite, part, questions, doc_names, share):
    """The held-out doc names: the first round(share * n) of the part's n gold documents in hashed order (at least
    one, never all), each with every document of its family."""
    cands = sorted(set(d for q in questions for d in gold_docs(q) if doc_in_part(suite, d, part) and d in doc_names),
                   key=lambda d: _rank(suite, d))
    if len(cands) < 2:
        raise Error("%s: its %s part has %d documents with questions, too few to hold one out"
                    % (suite, part, len(cands)))
    k = min(len(cands) - 1, max(1, int(round(share * len(cands)))))
    fams = set(family(d) for d in cands[:k])
    return sorted(d for d in doc_names if family(d) in fams)


def heldout_part(eval_dir, suite, part, share=0.2, every=1):
    """(questions in the order to write, held-out doc names, counts) for one part of one suite."""
    if not 0 < share < 1:
        raise Error("--share must lie strictly between 0 and 1 (got %g)" % share)
    if not os.path.isfile(os.path.join(eval_dir, suite, "questions.jsonl")):
        raise Error("no suite %s under %s" % (suite, eval_dir))
    doc_names = suite_doc_names(eval_dir, suite)
    qs = part_questions(eval_dir, suite, part)
    held = set(choose_heldout(suite, part, qs, doc_names, share))
    out = []
    n = {"questions": 0, "unanswerable": 0, "made_unanswerable": 0, "left_out_mixed": 0, "left_out_unsure": 0}
    for q in qs:
        docs = gold_docs(q)
        out_docs = [d for d in docs if d in held]
        if out_docs and len(out_docs) < len(docs):
            n["left_out_mixed"] += 1
            continue
        if out_docs:
            if q.get("type") in UNSURE_TYPES:
                n["left_out_unsure"] += 1
                continue
            q = dict(q)
            if q.get("answerable", True) is not False:
                n["made_unanswerable"] += 1
            q["answerable"] = False
            q["answers"] = []
            q["unanswerable_by"] = REASON
        out.append(q)
    if part == "calibration":
        out = refusal_split.stratified_order(out, every)
    n["questions"] = len(out)
    n["unanswerable"] = sum(1 for q in out if q.get("answerable", True) is False)
    n["heldout_docs"] = len(held)
    n["docs"] = len(doc_names)
    return out, sorted(held), n


def _clear(d):
    """Empties a docs/ folder this tool wrote (symlinks only); anything else there is refused, never deleted."""
    if not os.path.lexists(d):
        return
    if os.path.islink(d) or not os.path.isdir(d):
        raise Error("%s exists and is not a folder of links this tool wrote: not touched" % d)
    for f in os.listdir(d):
        if not os.path.islink(os.path.join(d, f)):
            raise Error("%s holds %s, not a link this tool wrote: not touched" % (d, f))
    shutil.rmtree(d)


def write_part(eval_dir, out_dir, suite, part, share=0.2, every=1):
    qs, held, n = heldout_part(eval_dir, suite, part, share, every)
    src = os.path.abspath(os.path.join(eval_dir, suite))
    dst = os.path.join(out_dir, suite)
    real_dst, real_src = os.path.realpath(dst), os.path.realpath(src)
    if real_dst == real_src or real_dst.startswith(real_src + os.sep):
        raise Error("--out %s would write into the suite itself" % out_dir)
    os.makedirs(dst, exist_ok=True)
    docs = os.path.join(dst, "docs")
    _clear(docs)
    os.makedirs(docs)
    held_set = set(held)
    for name, f in sorted(suite_doc_names(eval_dir, suite).items()):
        if name not in held_set:
            os.symlink(os.path.join(src, "docs", f), os.path.join(docs, f))
    with open(os.path.join(dst, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write("".join(d + "\n" for d in held))
    with open(os.path.join(dst, "questions.jsonl"), "w", encoding="utf-8") as f:
        for q in qs:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eval", default="../shared/eval")
    ap.add_argument("--out", required=True)
    ap.add_argument("--part", choices=["calibration", "validation"], required=True)
    ap.add_argument("--share", type=float, default=0.2, help="share of the part's documents held out (default 0.2)")
    ap.add_argument("--every", type=int, default=3, help="calibration: the sample device_calibrate.sh takes (EVERY)")
    ap.add_argument("suites", nargs="*")
    args = ap.parse_args()
    try:
        for suite in args.suites or SUITES:
            n = write_part(args.eval, args.out, suite, args.part, args.share,
                           args.every if args.part == "calibration" else 1)
            print("%s %s: %d of %d documents held out; %d questions, %d unanswerable (%d made so); left out: %d "
                  "mixed, %d semantic" % (suite, args.part, n["heldout_docs"], n["docs"], n["questions"],
                                          n["unanswerable"], n["made_unanswerable"], n["left_out_mixed"],
                                          n["left_out_unsure"]))
    except Error as e:
        sys.exit("heldout_unans: %s" % e)


if __name__ == "__main__":
    main()
