#!/usr/bin/python3
"""The three demo questions of issue 26 on the demo KB (tools/demo_kb.sh), CPU, default settings (the trained
adapter the tree holds): each is answered right or refused.

- "休息日安排劳动者工作又不能安排补休的，用人单位应当支付多少工资报酬？" must be answered from item (二) of 劳动法 第四十四条,
  with its 不 ("不低于工资的百分之二百", not "低于工资的…"), and the item as its context.
- "员工加班费怎么算？": 劳动法 第四十四条 holds no word of the question; since search/lexicon.c (加班 → 延长工作时间, …) BM25
  ranks it first, and the reader reads the question in its words: answered from it, with the rates, or refused.
- "什么情况下可以签无固定期限劳动合同？": not "…可以订立固定期限劳动合同" (第十三条, the question's 无 dropped).
- "劳动合同应当具备哪些条款？": the clause's whole list as the context, the answer printed once in the terminal.
- "公司的注册资本最低限额是多少？" (no company law in the KB): refused, or — the 270M reader's known limit, docs/EVAL.md —
  answered with a context that shows whose registered capital the clause is about (劳务派遣).
- A verdict (是/否) the reader gives with a confidence under its floor carries a notice that it is unsure.
- "用人单位可以扣押劳动者的身份证吗？": 否 from 劳动合同法 第九条 (不得扣押…), not the reader's 是 (docs/ANSWERS.md).
- English questions of the services agreement about what it does not say: the words no clause uses are named; those it
  answers carry no such notice; "When are invoices due?" is answered from the clause that says "invoice".

Skipped (77) when the model or the adapter is not installed.

usage: test_demo_questions.py path/to/clauseqa"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import SOURCE_DIR, Checks, require_models  # noqa: E402

MODELS = os.path.join(SOURCE_DIR, 'data', 'models')
T = Checks('test_demo_questions')
check = T.check


def ask(binary, data, question):
    r = subprocess.run([binary, 'ask', '--data', data, '--kb', 'demo', '--models', MODELS, '--json', question],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stderr)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def cited(a):
    c = (a.get('citations') or [{}])[0]
    return c.get('doc', ''), c.get('clause') or ''


def main():
    binary = os.path.abspath(sys.argv[1])
    require_models('gemma-3-270m-q4_k_m.gguf', os.path.join('answer', 'adapter.safetensors'))
    work = tempfile.mkdtemp(prefix='cq-demo-')
    try:
        data = os.path.join(work, 'data')
        subprocess.run(['bash', os.path.join(SOURCE_DIR, 'tools', 'demo_kb.sh'), binary, data], check=True,
                       capture_output=True, timeout=300)

        a = ask(binary, data, '休息日安排劳动者工作又不能安排补休的，用人单位应当支付多少工资报酬？')
        doc, clause = cited(a)
        check('rest day: answered', a and not a.get('abstained') and a.get('generated'), a)
        check('rest day: from 劳动法 第四十四条', doc.startswith('劳动法') and clause == '第四十四条', (doc, clause))
        check('rest day: item (二), 200 %, with its 不', '不低于工资的百分之二百' in a.get('answer', ''), a.get('answer'))
        check('rest day: the item as context', '（二）休息日' in (a.get('context') or '')
              and a.get('answer', '') in (a.get('context') or ''), a.get('context'))

        a = ask(binary, data, '员工加班费怎么算？')
        doc, clause = cited(a)
        print(f'overtime: {"refused" if a.get("abstained") else "answered"}: {a.get("answer")} [{doc} {clause}] '
              f'{a.get("notice") or ""}')
        # 第四十四条 holds no word of the question: BM25 ranks it first through the lexicon (加班 → 延长工作时间), and the
        # reader reads the question in its words (search/lexicon.h cq_lexicon_reword: "劳动者延长工作时间的工资报酬怎么算？")
        # — asked about 加班费 the 270M quoted the penalty of 第八十五条, which says 加班费. An answer from its lead-in
        # sentence ("…支付…的工资报酬：") is read with the items it announces, the rates.
        check('overtime: answered from 劳动法 第四十四条 with the rates, or refused', a.get('abstained')
              or (doc.startswith('劳动法') and clause == '第四十四条'
                  and '百分之一百五十' in a.get('answer', '') + (a.get('context') or '')), (a.get('answer'), doc, clause, a.get('context')))
        check('overtime: not the penalty clause', clause != '第八十五条', (doc, clause))

        # a question asking for several things (哪些): the lead-in and every item as the context; in the terminal the
        # streamed answer is not printed twice (the reader's "…负责人；" streamed, "…负责人" kept: marks at the end wait)
        a = ask(binary, data, '劳动合同应当具备哪些条款？')
        check('contract terms: the whole list as the context', '（一）' in (a.get('context') or '')
              and '（九）' in (a.get('context') or '') and a.get('answer', '') in (a.get('context') or ''), a)
        r = subprocess.run([binary, 'ask', '--data', data, '--kb', 'demo', '--models', MODELS, '劳动合同应当具备哪些条款？'],
                           capture_output=True, text=True, timeout=600)
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        check('contract terms: the answer printed once', r.returncode == 0 and len(lines) > 2 and lines[0] == a.get('answer')
              and lines[1].startswith('（原文：'), r.stdout)

        # the question's 无 kept: the reader took "…可以订立" + "固定期限劳动合同" from 第十三条 (copy-constrained decoding
        # slipped into the look-alike clause); 第十四条, shown too, says "…可以订立无固定期限劳动合同"
        a = ask(binary, data, '什么情况下可以签无固定期限劳动合同？')
        doc, clause = cited(a)
        check('open-ended contract: not the fixed-term clause', a.get('abstained') or ('无固定期限' in a.get('answer', '')
              or '连续工作满十年' in a.get('answer', '')) and clause != '第十三条', (a.get('answer'), doc, clause))

        a = ask(binary, data, '公司的注册资本最低限额是多少？')
        doc, clause = cited(a)
        print(f'company capital: {"refused" if a.get("abstained") else "answered"}: {a.get("answer")} [{doc} {clause}] '
              f'context: {a.get("context")}')
        check('company capital: refused, or the context says whose capital it is', a.get('abstained')
              or '劳务派遣' in (a.get('context') or ''), a)

        # a question asking leave for what a clause forbids: 否 from that clause, whatever the reader's verdict
        # (the 270M said 是 here, its quote saying 不得扣押…); an act only a neighbour of forbids (安排 vs 强迫 加班) is not
        a = ask(binary, data, '用人单位可以扣押劳动者的身份证吗？')
        doc, clause = cited(a)
        quote = ((a.get('citations') or [{}])[0].get('quote') or '')
        check('ID card: 否 from 劳动合同法 第九条', a.get('answer') == '否' and a.get('verdict') == 'no'
              and a.get('forbidden') is True and doc.startswith('劳动合同法') and clause == '第九条', a)
        check('ID card: the forbidding sentence as the quote', '不得扣押劳动者的居民身份证' in quote, quote)
        a = ask(binary, data, '用人单位可以安排劳动者加班吗？')
        check('overtime arranged: not answered as forbidden', not a.get('forbidden'), a)
        a = ask(binary, data, '用人单位可以随意延长劳动者的工作时间吗？')  # 不得违反本法规定延长…
        doc, clause = cited(a)
        check('hours extended at will: 否 from 劳动法 第四十三条', a.get('answer') == '否' and a.get('forbidden') is True
              and doc.startswith('劳动法') and clause == '第四十三条', a)

        # someone a clause's items protect: 否 from 劳动合同法 第四十二条 (辞退 read as 解除劳动合同), the reader having said 是
        a = ask(binary, data, '女职工怀孕期间可以被辞退吗？')
        doc, clause = cited(a)
        check('pregnant employee: 否 from 劳动合同法 第四十二条', a.get('answer') == '否' and a.get('forbidden') is True
              and doc.startswith('劳动合同法') and clause == '第四十二条', a)

        # a verdict the reader is unsure of (confidence under the adapter's floor, 0.5 in Chinese) says so; one a
        # clause's prohibition makes (否, forbidden) does not
        for q in ('试用期可以不交社保吗？', '用人单位能随意调岗吗？', '劳动合同必须是书面的吗？', '女职工怀孕期间可以被辞退吗？'):
            a = ask(binary, data, q)
            if a.get('verdict') and not a.get('forbidden'):
                unsure = (a.get('confidence') or 0) < 0.5
                check(f'{q}: a verdict under the floor says it is unsure, one over it does not',
                      unsure == ('把握不足' in (a.get('notice') or '')), a)

        # a span that only repeats the question's words (the 270M quoted "三个月以上") is no answer: the clause's
        # sentence is quoted instead, which holds the answer (一个月)
        a = ask(binary, data, '劳动合同期限三个月以上不满一年的，试用期不得超过多久？')
        check('trial period: not the question\'s own words', a.get('answer') != '三个月以上'
              and (a.get('abstained') or '一个月' in a.get('answer', '')), a)

        # English, of the services agreement: a question about what no clause says (assignment, consent) is answered
        # with a notice naming the words no clause uses; a fragment of the question's own words ("non" of
        # "non-compete") is no answer; a question the contract answers carries no such notice
        a = ask(binary, data, 'Can either party assign the agreement without consent?')
        check('assignment: the missing words named', 'uses the words "assign" or "consent"' in (a.get('notice') or '')
              or a.get('abstained'), a)
        a = ask(binary, data, 'Is there a non-compete clause?')
        check('non-compete: not "non", "compete" named', a.get('answer', '').strip().lower() != 'non'
              and '"compete"' in (a.get('notice') or ''), a)
        # in the terminal too, after an answer that streamed (it was printed only when the answer had not)
        r = subprocess.run([binary, 'ask', '--data', data, '--kb', 'demo', '--models', MODELS,
                            'Does the agreement allow subcontracting?'], capture_output=True, text=True, timeout=600)
        check('subcontracting: the notice printed in the terminal', 'uses the word "subcontracting"' in r.stdout, r.stdout)
        for q in ('What happens if the client pays late?', 'How long is the notice period for termination?'):
            a = ask(binary, data, q)
            check(f'{q}: no missing words', not a.get('abstained') and 'uses the word' not in (a.get('notice') or ''), a)
        # "invoices" finds the clause that says "invoice" (the keyword index does not stem; its other forms are searched)
        a = ask(binary, data, 'When are invoices due?')
        doc, clause = cited(a)
        check('invoices: answered from Section 3.1', not a.get('abstained') and clause == 'Section 3.1', a)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
