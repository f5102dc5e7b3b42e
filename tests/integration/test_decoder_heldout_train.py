#!/usr/bin/env python3
"""Issue 26: the reader's training examples never leak the dev suites' validation or calibration parts, and the
held-out-document unanswerables (prepare.py abstain_heldout) come from train parts only.

  - heldout_plan(): rounds hold disjoint sets of TRAIN documents out (versions of a law together), the round's KB is
    the other train documents (no validation / calibration document, none held out), its questions are those whose
    gold documents are all held out;
  - leak_problems() passes clean rows and names every injected leak: a validation question, a calibration question,
    a row showing a validation or a calibration document (a dev suite's, or laws-zh's through lawyer_llama), a row
    without its documents recorded;
  - with the clauseqa binary: prepare.py end to end on two made-up suites (zh "cmrc-dev", en "cuad-dev": names the
    split hashes, texts of our own) — the full KB's retrieval does show validation / calibration documents for train
    questions (so the guard has work), yet train.jsonl holds no example of a validation / calibration question and no
    passage of such a document; abstain_heldout examples exist in both languages, refuse, never show their own
    (held-out) document; the calibration / validation files hold only their parts' questions.

usage: test_decoder_heldout_train.py [path/to/clauseqa]"""
import json
import os
import subprocess
import sys
import tempfile

from checks import ROOT, check, finish, write_suite  # noqa: E402 (tests/integration/checks.py)
sys.path.insert(0, os.path.join(ROOT, "tools", "decoder_train"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import dev_split  # noqa: E402
import heldout_unans as hu  # noqa: E402
import prepare  # noqa: E402

PREPARE = os.path.join(ROOT, "tools", "decoder_train", "prepare.py")
ZH_ITEMS = ["货款", "租金", "工资", "违约金", "保证金", "运费", "利息", "押金", "服务费", "赔偿金"]
ZH_PARTY = ["甲公司", "乙公司", "丙公司", "丁公司", "戊公司", "己公司", "庚公司"]
EN_ITEMS = ["rent", "fees", "royalties", "interest", "deposit", "penalty", "commission", "wages"]


def zh_suite(root, n=60):
    """n contracts of similar wording: two answerable questions each and an unanswerable one."""
    docs, qs = {}, []
    for i in range(n):
        a, b = ZH_PARTY[i % 7], ZH_ITEMS[i % 10]
        doc = "合同%02d" % i
        amount = "%d元" % (1000 + 37 * i)
        days = "%d日" % (5 + i % 20)
        docs[doc] = ("第一条 %s应当向对方支付%s%s。\n\n第二条 %s应当在收到通知后%s内付清%s。\n\n"
                     "第三条 本合同第%d号的争议由双方协商解决。\n" % (a, b, amount, a, days, b, i))
        for k, (qt, ans) in enumerate([("%s应当支付多少%s？" % (a, b), amount),
                                       ("%s应当在几日内付清%s？" % (a, b), days),
                                       ("%s的%s由谁审计？" % (a, b), None)]):
            qs.append({"id": "cm-%d-%d" % (i, k), "question": qt, "type": "span_qa", "answerable": ans is not None,
                       "gold": [{"doc": doc, "clause": None, "page": None, "text": ans}],
                       "answers": [ans] if ans else []})
    write_suite(root, "cmrc-dev", docs, qs)
    return qs


def en_suite(root, n=50):
    docs, qs = {}, []
    for i in range(n):
        item = EN_ITEMS[i % 8]
        doc = "Agreement_%02d" % i
        amount = "%d dollars" % (200 + 11 * i)
        docs[doc] = ("Section 1. The tenant of unit %d shall pay %s of %s each month.\n\n"
                     "Section 2. Either party may terminate this agreement on %d days notice.\n\n"
                     "Section 3. The laws of state number %d govern this agreement.\n"
                     % (i, item, amount, 10 + i, i))
        for k, (qt, ans) in enumerate([("How much %s shall the tenant of unit %d pay each month?" % (item, i), amount),
                                       ("How many days notice ends the agreement of unit %d?" % i, "%d days" % (10 + i))]):
            qs.append({"id": "cu-%d-%d" % (i, k), "question": qt, "type": "span_qa", "answerable": True,
                       "gold": [{"doc": doc, "clause": None, "page": None, "text": ans}], "answers": [ans]})
    write_suite(root, "cuad-dev", docs, qs)
    return qs


def test_plan():
    names = {"合同%02d" % i: "合同%02d.txt" % i for i in range(60)}
    names.update({"法(2016-01-01)": "a.txt", "法(2023-06-30)": "b.txt"})
    qs = [{"id": "q%s" % d, "gold": [{"doc": d}]} for d in names]
    qs.append({"id": "mixed", "gold": [{"doc": "合同01"}, {"doc": "合同02"}]})
    plan = prepare.heldout_plan("cmrc-dev", qs, names, 0.25, 9)
    train = {d for d in names if prepare.train_doc("cmrc-dev", d)}
    check(len(plan) == 4 and train and len(train) < len(names),
          "heldout_plan: share 0.25 gives 4 rounds over the train documents (%d rounds, %d of %d train)"
          % (len(plan), len(train), len(names)))
    seen = set()
    for r, held, kb_docs, rq in plan:
        check(held and held <= train, "round %d: only train documents held out" % r)
        check(not (held & seen), "round %d: held-out sets disjoint" % r)
        seen |= held
        check(set(kb_docs) <= train and not (set(kb_docs) & held), "round %d: the KB is the other train documents" % r)
        check(all(hu.gold_docs(q) and set(hu.gold_docs(q)) <= held for q in rq) and
              {q["id"] for q in rq} == {"q" + d for d in held} | ({"mixed"} if {"合同01", "合同02"} <= held else set()),
              "round %d: its questions are exactly those of held-out documents" % r)
        versions = {"法(2016-01-01)", "法(2023-06-30)"} & train
        check(not (versions & held) or versions <= held, "round %d: versions of a law held out together" % r)
    check(seen == train, "heldout_plan: the rounds cover every train document once")
    again = prepare.heldout_plan("cmrc-dev", list(reversed(qs)), names, 0.25, 9)
    check([(r, sorted(h), k) for r, h, k, _ in again] == [(r, sorted(h), k) for r, h, k, _ in plan],
          "heldout_plan: a function of the suite and the documents, not the question order")
    try:
        prepare.heldout_plan("cmrc-dev", qs, names, 1.5, 1)
        check(False, "heldout_plan: a share out of (0, 1) is refused")
    except SystemExit as e:
        check("--heldout-share" in str(e), "heldout_plan: a share out of (0, 1) is refused")


def test_guard():
    def doc_of(suite, want_val, want_cal):
        for i in range(1000):
            d = "doc%d" % i
            if dev_split.doc_is_validation(suite, d) == want_val and dev_split.doc_is_calibration(suite, d) == want_cal:
                return d
    tr, va, ca = doc_of("cjrc-dev", False, False), doc_of("cjrc-dev", True, False), doc_of("cjrc-dev", False, True)
    qs = {"cjrc-dev": {"t": {"id": "t", "gold": [{"doc": tr}]}, "v": {"id": "v", "gold": [{"doc": va}]},
                       "c": {"id": "c", "gold": [{"doc": ca}]}}}
    row = lambda qid, docs, src="cjrc-dev": {"id": qid, "source": src, "meta": {"qid": qid, "docs": docs}}  # noqa
    check(prepare.leak_problems([row("t", [tr])], qs) == [], "guard: a train question over train documents passes")
    check(prepare.leak_problems([row("t", [tr, ca])], qs, cal_held=False) == [],
          "guard: calibration documents are train documents when the calibration part is not held out")
    laws_val = "民法典_总则"
    check(dev_split.doc_is_validation("laws-zh", laws_val), "民法典_总则 is a laws-zh validation document")
    cases = [("validation question", row("v", [tr])), ("calibration question", row("c", [tr])),
             ("validation document shown", row("t", [tr, va])), ("calibration document shown", row("t", [ca])),
             ("laws-zh validation document through lawyer_llama",
              {"id": "x", "source": "lawyer_llama_query2article", "meta": {"qid": "x", "docs": [laws_val]}}),
             ("no documents recorded", {"id": "t", "source": "cjrc-dev", "meta": {"qid": "t"}}),
             ("unknown question", row("nope", [tr]))]
    for what, r in cases:
        check(len(prepare.leak_problems([row("t", [tr]), r], qs)) == 1, "guard: catches a %s" % what)


def test_end_to_end(binary):
    if not binary or not os.access(binary, os.X_OK):
        print("skip: no clauseqa binary for the end-to-end run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        ev = os.path.join(tmp, "eval")
        zq, eq = zh_suite(ev), en_suite(ev)
        out = os.path.join(tmp, "out")
        cmd = [sys.executable, PREPARE, "--eval", ev, "--train", os.path.join(tmp, "none"), "--clauseqa", binary,
               "--data", os.path.join(tmp, "data"), "--work", os.path.join(tmp, "work"), "--out", out,
               "--suites", "cmrc-dev,cuad-dev", "--aux", "", "--heldout-share", "0.34",
               "--heldout-rounds", "cmrc-dev=3,cuad-dev=3", "--cal-answer", "cmrc-dev=20,cuad-dev=20",
               "--val-answer", "cmrc-dev=20,cuad-dev=20", "--val-rerank", "cmrc-dev=10,cuad-dev=10"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
        check(p.returncode == 0, "prepare.py runs%s" % (": " + (p.stdout + p.stderr)[-1500:] if p.returncode else ""))
        if p.returncode:
            return
        rows = [json.loads(l) for l in open(os.path.join(out, "train.jsonl"), encoding="utf-8")]
        by = {"cmrc-dev": {q["id"]: q for q in zq}, "cuad-dev": {q["id"]: q for q in eq}}
        bad_q = {s: {i for i, q in d.items() if dev_split.question_is_validation(s, q) or
                     dev_split.question_is_calibration(s, q)} for s, d in by.items()}
        bad_d = {s: {g["doc"] for q in d.values() for g in q["gold"] if not prepare.train_doc(s, g["doc"])}
                 for s, d in by.items()}
        check(all(bad_q.values()) and all(bad_d.values()), "the made-up suites have validation and calibration parts")
        # the full KB's retrieval shows such documents for train questions: the guard has work to do
        shown_bad = 0
        for f in os.listdir(os.path.join(tmp, "work", "retrieve")):
            s = "cmrc-dev" if f.startswith("cmrc-dev") else "cuad-dev" if f.startswith("cuad-dev") else None
            if not s:
                continue
            for line in open(os.path.join(tmp, "work", "retrieve", f), encoding="utf-8"):
                r = json.loads(line)
                if r["id"] in by[s] and r["id"] not in bad_q[s]:
                    shown_bad += sum(1 for x in r.get("results") or [] if x["doc"] in bad_d[s])
        check(shown_bad > 0, "retrieval over the whole suite offers validation / calibration passages to train "
                             "questions (%d)" % shown_bad)
        leaks = [r["id"] for r in rows if r["meta"]["qid"] in bad_q[r["source"]] or
                 set(r["meta"]["docs"]) & bad_d[r["source"]]]
        check(rows and not leaks, "no train example of a validation / calibration question or document (%d rows; "
                                  "leaks %s)" % (len(rows), leaks[:5]))
        check(prepare.leak_problems(rows, by) == [], "leak_problems agrees")
        # the prompts too: no held-out-part document's text in any train prompt
        texts = {}
        for s, suite_dir in (("cmrc-dev", "cmrc-dev"), ("cuad-dev", "cuad-dev")):
            for d in bad_d[s]:
                with open(os.path.join(ev, suite_dir, "docs", d + ".txt"), encoding="utf-8") as f:
                    texts[d] = [l.split(" ", 1)[1] for l in f.read().split("\n") if " " in l]
        hit = [r["id"] for r in rows for d, ls in texts.items() if any(l in r["prompt"] for l in ls)]
        check(not hit, "no validation / calibration document's clause text in a train prompt (%s)" % hit[:3])
        ho = [r for r in rows if r["task"] == "abstain_heldout"]
        langs = {r["lang"] for r in ho}
        check(langs == {"zh", "en"}, "abstain_heldout in both languages (%d: %s)" % (len(ho), sorted(langs)))
        check(all(r["completion"] == prepare.P.answer_completion(r["lang"], refuse=True) for r in ho),
              "abstain_heldout: the target is the refusal")
        own = [r["id"] for r in ho if set(r["meta"]["heldout"]) & set(r["meta"]["docs"]) or not r["meta"]["docs"]]
        check(ho and not own, "abstain_heldout: passages of other documents only, never the question's own (%s)" % own[:3])
        refs = [r["id"] for r in ho if any(a and a in r["prompt"] for a in by[r["source"]][r["meta"]["qid"]]["answers"])]
        check(not refs, "abstain_heldout: no shown passage holds the reference answer (%s)" % refs[:3])
        meta = json.load(open(os.path.join(out, "meta.json"), encoding="utf-8"))
        rounds = meta["sources"]["cmrc-dev"]["parts"].get("heldout_rounds") or []
        check(len(rounds) == 3 and all(x["examples"] > 0 for x in rounds), "meta.json: the rounds recorded (%s)" % rounds)
        for fn, want in (("cal_answer.jsonl", dev_split.question_is_calibration),
                         ("val_answer.jsonl", dev_split.question_is_validation)):
            rs = [json.loads(l) for l in open(os.path.join(out, fn), encoding="utf-8")]
            check(rs and all(want(r["source"], by[r["source"]][r["id"]]) for r in rs), "%s: its part only" % fn)


def test_bundle_files():
    """bundle.sh's box files hold every project module they import (aa70b99 made refusal_threshold.py import
    tools/dev_split.py; the bundle lacked it and train.py stopped at its first import on the box)."""
    import ast
    r = subprocess.run(["bash", os.path.join(ROOT, "tools", "decoder_train", "bundle.sh"), "--files"],
                       capture_output=True, text=True)
    files = r.stdout.split()
    check(r.returncode == 0 and "tools/decoder_train/train.py" in files, "bundle.sh --files lists the box's files")
    local = {}
    for d in ("tools", "tools/decoder_train"):
        for f in os.listdir(os.path.join(ROOT, d)):
            if f.endswith(".py"):
                local.setdefault(f[:-3], []).append(d + "/" + f)
    todo, missing = [f for f in files if f.endswith(".py")], []
    while todo:
        f = todo.pop()
        tree = ast.parse(open(os.path.join(ROOT, f), encoding="utf-8").read())
        names = [a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        for name in names:
            paths = local.get(name) or []
            if paths and not any(p in files for p in paths):
                missing.append("%s imports %s" % (f, name))
    check(not missing, "the box's files import nothing of the project they lack: %s" % missing)
    with tempfile.TemporaryDirectory() as t:
        for f in files:
            os.makedirs(os.path.dirname(os.path.join(t, f)), exist_ok=True)
            with open(os.path.join(ROOT, f), "rb") as a, open(os.path.join(t, f), "wb") as b:
                b.write(a.read())
        p = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import refusal_threshold, cqprompt", os.path.join(t, "tools", "decoder_train")],
                           capture_output=True, text=True, cwd=t)
        check(p.returncode == 0, "refusal_threshold.py imports in a bundle's tools/ alone: %s" % p.stderr[-300:])


def main():
    test_bundle_files()
    test_plan()
    test_guard()
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "clauseqa")
    test_end_to_end(binary)
    finish()


if __name__ == "__main__":
    main()
