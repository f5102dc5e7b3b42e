#!/usr/bin/env python3
"""Prompt format cq-prompt-v1 (docs/ANSWERS.md): the training tools' formatter (tools/decoder_train/cqprompt.py) and
the C runtime (`clauseqa prompt --jsonl`) must give byte-identical prompts for the same question and passages.

  python3 tests/integration/test_decoder_prompt_parity.py build/clauseqa
Skips (exit 77) when the binary has no `prompt` command yet.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools", "decoder_train"))
import cqprompt as P  # noqa: E402

LONG_ZH = "第十二条 " + "用人单位应当按照劳动合同约定和国家规定，向劳动者及时足额支付劳动报酬。" * 30   # > 800 chars
LONG_EN = "7.2 Payment. " + "The Customer shall pay each invoice within thirty (30) days of its date. " * 20
MID_ZH = "劳动者在试用期的工资不得低于本单位相同岗位最低档工资的百分之八十。\r\n试用期包含在劳动合同期限内。" * 4

CASES = [
    # (task, question, passages)
    ("answer", "试用期最长多长时间？", [
        {"title": "中华人民共和国劳动合同法", "label": "第十九条",
         "text": "第十九条 劳动合同期限三个月以上不满一年的，试用期不得超过一个月；\n劳动合同期限一年以上不满三年的，试用期不得超过二个月。"},
        {"title": "中华人民共和国劳动合同法", "label": "第二十条", "text": "劳动者在试用期的工资不得低于本单位相同岗位最低档工资。"},
    ]),
    ("answer", "  What does the agreement say about termination?\n", [
        {"title": "Distribution Agreement", "label": "Section 12.1",
         "text": "12.1 Either party may terminate this Agreement upon ninety (90) days' written notice."},
        {"title": "Distribution Agreement", "label": "12.2", "text": "Upon termination, all licenses granted end.\r\nSurvival."},
        {"title": "Distribution Agreement", "label": None, "text": "Notices shall be in writing."},
    ]),
    ("answer", "工资怎么算？", [{"title": "长条例", "label": "第十二条", "text": LONG_ZH},
                              {"title": "短", "label": None, "text": "不会显示。"}]),
    ("answer", "How long to pay?", [{"title": "Long Services Agreement", "label": "7.2", "text": LONG_EN}]),
    ("answer", "试用期工资？", [{"title": "甲", "label": "第一条", "text": MID_ZH},
                           {"title": "乙", "label": "第二条", "text": MID_ZH},
                           {"title": "丙", "label": "第三条", "text": "短条文。"},
                           {"title": "丁", "label": "第四条", "text": "再一条。"}]),
    ("answer", "六个条文？", [{"title": "t%d" % i, "label": "第%d条" % i, "text": "条文%d。" % i} for i in range(6)]),
    ("answer", "Case with 〇 only〇?", [{"title": "No label doc", "label": "", "text": "Plain text."}]),
    ("answer", "what about 〸?", [{"title": "X", "label": "1.", "text": "1. Starts with its label."}]),
    ("relevance", "试用期最长多长时间？", [{"title": "中华人民共和国劳动合同法", "label": "第十九条", "text": LONG_ZH}]),
    ("relevance", "Which law governs?", [{"title": "MSA", "label": "Section 14", "text": LONG_EN}]),
    ("relevance", "Which law governs?", [{"title": "MSA", "label": None, "text": "Governing law:\nNew York."}]),
]


def random_cases(n=200, seed=13):
    """Seeded random cases around the edges: lengths near the 800 / 400 budgets, 4-byte characters (U+20000…) at the
    cut, \r and \n, labels that open the text or not, empty or missing labels, white space of every kind around
    the question, questions whose only CJK is U+3007 or that have none."""
    import random
    rng = random.Random(seed)
    alphabet = ["字", "𠀀", "𪚥", "a", "B", " ", "\n", "\r", "，", "。", "é", "〇", "ｘ", "1"]
    spaces = [" ", "\t", "\u3000", "\u00a0", "\u2003", "\u200b", "\ufeff", "\r\n", ""]
    out = []
    for i in range(n):
        zh = rng.random() < 0.6
        q = rng.choice(spaces) + (rng.choice(["试用期多长？", "甲〇乙", "第〇条?"]) if zh else
                                  rng.choice(["How long?", "What is 〸?", "Net\n30?"])) + rng.choice(spaces)
        ps = []
        for _ in range(rng.randint(1, 7)):
            L = rng.choice([0, 1, 5, 50, 199, 200, 201, 399, 400, 401, 600, 799, 800, 801, 1200])
            text = "".join(rng.choice(alphabet) for _ in range(L))
            label = rng.choice([None, "", "第十二条", "7.2", "Section 3"])
            if label and rng.random() < 0.5:
                text = label + text
            ps.append({"title": rng.choice(["劳动法", "MSA", "t" * 30, "《嵌套》"]), "label": label, "text": text})
        out.append((rng.choice(["answer", "answer", "relevance"]), q, ps))
    return out


def python_prompt(task, question, passages):
    if task == "answer":
        return P.answer_prompt(question, passages)[0]
    return P.relevance_prompt(question, passages[0])


def main():
    cq = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "clauseqa")
    if not os.path.exists(cq):
        print("SKIP: no clauseqa binary at %s" % cq)
        return 77
    probe = subprocess.run([cq, "prompt", "--help"], capture_output=True, text=True)
    if probe.returncode != 0 or "jsonl" not in (probe.stdout + probe.stderr):
        print("SKIP: %s has no `prompt --jsonl` command yet" % cq)
        return 77
    cases = CASES + random_cases()
    lines = []
    for i, (task, q, ps) in enumerate(cases):
        lines.append(json.dumps({"id": "c%d" % i, "task": task, "question": q, "passages": ps}, ensure_ascii=False))
    r = subprocess.run([cq, "prompt", "--jsonl"], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: clauseqa prompt --jsonl exited %d: %s" % (r.returncode, r.stderr[-2000:]))
        return 1
    got = {}
    for line in r.stdout.splitlines():
        if line.strip():
            o = json.loads(line)
            got[o["id"]] = o["prompt"]
    bad = 0
    for i, (task, q, ps) in enumerate(cases):
        want = python_prompt(task, q, ps)
        c = got.get("c%d" % i)
        if c != want:
            bad += 1
            print("MISMATCH case %d (%s, %r):" % (i, task, q[:30]))
            if c is None:
                print("  C printed nothing for it")
                continue
            k = next((j for j in range(min(len(c), len(want))) if c[j] != want[j]), min(len(c), len(want)))
            print("  first difference at character %d" % k)
            print("  python: %r" % want[max(0, k - 40):k + 60])
            print("  C:      %r" % c[max(0, k - 40):k + 60])
    if bad:
        print("FAIL: %d of %d prompts differ" % (bad, len(cases)))
        return 1
    print("ok: %d prompts byte-identical (python cqprompt.py vs clauseqa prompt --jsonl)" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
