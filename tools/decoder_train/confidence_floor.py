#!/usr/bin/env python3
"""Chooses the trained reader's confidence floor (adapter.json "min_confidence", clauseqa --min-confidence) from two
eval runs of the same questions: one generating with the floor off (--min-confidence -1, the shipped default before
issue 26's floor), one with --answers extractive. Below the floor app/answer.c replaces a generated answer (not a
verdict, not a refusal) by the extractive answer of the same retrieved clauses, which is exactly what the extractive
run answers, so every floor f is scored from the pair: a question keeps its generated line when it was not a
generated span or its confidence is at least f, else takes its extractive line.

Runs are RUNS/SUITE.TAG.jsonl (clauseqa eval --out). Per suite and f: F1 and EM over answerable questions with
reference answers (an abstention scores 0), cited gold (hit of the cited clause over answerable questions with gold),
false abstention on answerable questions, abstention on unanswerable ones, how many answers changed, and the F1 of
the answers that fell back before (generated) and after (extractive), and the generated spans still shown (answerable
questions with reference answers): how many, their F1, how many are wrong (F1 below WRONG_F1).

    python3 tools/decoder_train/confidence_floor.py --runs DIR --gen g-train --ext x-train --questions ../shared/eval
    python3 tools/decoder_train/confidence_floor.py --runs DIR --gen g-val --ext x-val --at 0.3 --suites cuad-dev

Without --at it scores a grid of floors; --suites picks one language's suites (a floor per language:
{"zh": f, "en": f}).
"""
import argparse
import glob
import json
import os
import sys

WRONG_F1 = 0.1  # a shown answer this far from every reference counts as wrong
GRID = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7]  # 0: no floor


def read_lines(path):
    rows = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:  # a run cut short ends in half a line
                print("%s: skipping a truncated line" % path, file=sys.stderr)
                continue
            rows[r["id"]] = r
    return rows


def row(gen, ext, q):
    """One question: what it scores with its generated line, with its extractive line, and whether the floor may
    replace the first by the second (a generated span, not a verdict)."""
    p = gen["prediction"]
    verdict = p.get("verdict") or gen.get("verdict")

    def side(r):
        return {"f1": r.get("f1", 0.0), "em": r.get("em", 0.0), "cited_gold": bool(r.get("cited_gold")),
                "abstained": bool(r["prediction"]["abstained"])}

    return {"id": q["id"], "answerable": q.get("answerable", True), "has_answers": bool(q.get("answers")),
            "has_gold": any(g.get("doc") for g in q.get("gold") or []),
            "swappable": bool(p.get("generated")) and not verdict,
            "confidence": gen.get("confidence", 0.0), "gen": side(gen), "ext": side(ext)}


def load(runs, gen_tag, ext_tag, questions_dir):
    suites = {}
    for path in sorted(glob.glob(os.path.join(runs, "*.%s.jsonl" % gen_tag))):
        suite = os.path.basename(path)[: -len(".%s.jsonl" % gen_tag)]
        ext_path = os.path.join(runs, "%s.%s.jsonl" % (suite, ext_tag))
        if not os.path.isfile(ext_path):
            sys.exit("confidence_floor: %s has no extractive run %s" % (path, ext_path))
        gen, ext = read_lines(path), read_lines(ext_path)
        meta = {}
        with open(os.path.join(questions_dir, suite, "questions.jsonl"), encoding="utf-8") as f:
            for line in f:
                q = json.loads(line)
                meta[q["id"]] = q
        missing = [i for i in gen if i not in ext]
        if missing:
            sys.exit("confidence_floor: %s: %d questions have no extractive line (e.g. %s)" % (suite, len(missing),
                                                                                              missing[0]))
        suites[suite] = [row(gen[i], ext[i], meta[i]) for i in gen]
    return suites


def at(rows, f):
    """The scores with floor f (0: none)."""
    s = {"n": len(rows), "f1": 0.0, "em": 0.0, "n_ref": 0, "cited": 0, "n_gold": 0, "falseA": 0, "n_ans": 0,
         "abst": 0, "n_un": 0, "changed": 0, "f1_before": 0.0, "f1_after": 0.0, "n_changed_ref": 0,
         "shown": 0, "shown_f1": 0.0, "shown_wrong": 0}
    for r in rows:
        swap = r["swappable"] and r["confidence"] < f
        a = r["ext"] if swap else r["gen"]
        s["changed"] += swap
        if r["answerable"]:
            s["n_ans"] += 1
            s["falseA"] += a["abstained"]
            if r["has_answers"]:
                s["n_ref"] += 1
                s["f1"] += a["f1"]
                s["em"] += a["em"]
                if r["swappable"] and not swap:  # a generated span still shown
                    s["shown"] += 1
                    s["shown_f1"] += a["f1"]
                    s["shown_wrong"] += a["f1"] < WRONG_F1
                if swap:
                    s["n_changed_ref"] += 1
                    s["f1_before"] += r["gen"]["f1"]
                    s["f1_after"] += r["ext"]["f1"]
            if r["has_gold"]:
                s["n_gold"] += 1
                s["cited"] += a["cited_gold"]
        else:
            s["n_un"] += 1
            s["abst"] += a["abstained"]
    return s


def ratio(a, b):
    return a / b if b else None


def fmt(v):
    return "   -  " if v is None else "%6.3f" % v


def line(name, f, s):
    return ("f %-5s %-17s n %4d  F1 %s  EM %s  cited %s  falseA %s (%d/%d)  abst %s  changed %3d  "
            "their F1 %s -> %s  generated shown %d, F1 %s, wrong %d" % ("none" if f == 0 else "%g" % f, name, s["n"], fmt(ratio(s["f1"], s["n_ref"])),
                                   fmt(ratio(s["em"], s["n_ref"])), fmt(ratio(s["cited"], s["n_gold"])),
                                   fmt(ratio(s["falseA"], s["n_ans"])), s["falseA"], s["n_ans"],
                                   fmt(ratio(s["abst"], s["n_un"])), s["changed"],
                                   fmt(ratio(s["f1_before"], s["n_changed_ref"])),
                                   fmt(ratio(s["f1_after"], s["n_changed_ref"])), s["shown"],
                                   fmt(ratio(s["shown_f1"], s["shown"])), s["shown_wrong"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--gen", required=True, help="tag of the generating runs (floor off)")
    ap.add_argument("--ext", required=True, help="tag of the extractive runs of the same questions")
    ap.add_argument("--questions", default="../shared/eval")
    ap.add_argument("--suites", help="only these suites (comma-separated), e.g. one language's")
    ap.add_argument("--at", type=float, action="append", help="score these floors (default: a grid)")
    args = ap.parse_args()
    suites = load(args.runs, args.gen, args.ext, args.questions)
    if args.suites:
        suites = {n: v for n, v in suites.items() if n in args.suites.split(",")}
    if not suites:
        sys.exit("confidence_floor: no %s/*.%s.jsonl" % (args.runs, args.gen))
    for f in args.at or GRID:
        f1s = []
        for n in sorted(suites):
            s = at(suites[n], f)
            print(line(n, f, s))
            if s["n_ref"]:
                f1s.append(s["f1"] / s["n_ref"])
        print("f %-5s mean F1 over the suites with reference answers: %s" % ("none" if f == 0 else "%g" % f,
                                                                             fmt(sum(f1s) / len(f1s) if f1s else None)))


if __name__ == "__main__":
    main()
