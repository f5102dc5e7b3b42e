#!/usr/bin/python3
"""Issue 30 items 5 and 6 over HTTP: thumbs up/down with a comment on an answer (replaced when rated again; an
unknown turn, a rating that is not up/down, a comment over 2,000 characters get a 4xx and change nothing; another
key's conversation is 404), the rating shown with the conversation; a conversation exported as Markdown and PDF
with its citations (document, clause, page, quoted text; the PDF's Chinese text extracted again by MuPDF); search
over titles, questions and answers; the quality log per KB and day for admins (/api/v1/quality and /metrics:
answers, abstentions, low-confidence answers, thumbs down, answers whose cited document was deleted since); the
rated answers exported as the eval suite's JSONL over HTTP and by `clauseqa feedback export`, checked against
../shared/eval/FORMAT.md's schema.

usage: test_http_feedback.py path/to/clauseqa"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_PDF, Checks, Server  # noqa: E402

T = Checks('test_http_feedback')
check = T.check
ASK = '/api/v1/kbs/laws/ask'
EVAL_TYPES = {'clause_lookup', 'semantic', 'span_qa', 'yes_no', 'multiple_choice', 'clause_extraction', 'page_qa'}


def eval_line_errors(o):
    """What keeps o from being a question of ../shared/eval/FORMAT.md (empty: none)."""
    errors = []
    for field, kind in (('id', str), ('question', str), ('type', str), ('answerable', bool), ('gold', list),
                        ('answers', list)):
        if not isinstance(o.get(field), kind):
            errors.append(f'{field} is not a {kind.__name__}')
    if o.get('type') not in EVAL_TYPES:
        errors.append('type')
    if not re.fullmatch(r'.+-[1-9][0-9]*', str(o.get('id', ''))):
        errors.append('id is not <suite>-<n>')
    for g in o.get('gold') or []:
        if not isinstance(g.get('doc'), str) or not g['doc']:
            errors.append('gold doc')
        for f in ('clause', 'text'):
            if g.get(f) is not None and not isinstance(g[f], str):
                errors.append('gold ' + f)
        if g.get('page') is not None and not isinstance(g['page'], int):
            errors.append('gold page')
        if set(g) - {'doc', 'clause', 'page', 'text'}:
            errors.append('gold has other keys')
    if not all(isinstance(a, str) for a in o.get('answers') or []):
        errors.append('answers')
    if o.get('verdict') not in ('up', 'down'):
        errors.append('verdict')
    return errors


def feedback(s, cid):
    path = f'/api/v1/conversations/{cid}/turns/%d/feedback'
    r = s.post(path % 1, {'rating': 'down', 'comment': '引用的条款不对'})
    check('rate turn 1 down', r.status == 200 and (r.json() or {}).get('rating') == 'down'
          and r.json().get('comment') == '引用的条款不对', r)
    r = s.post(path % 1, {'rating': 'up'})
    check('rating again replaces it', r.status == 200 and r.json().get('rating') == 'up' and r.json().get('comment')
          == '', r)
    r = s.request('PUT', path % 2, {'rating': 'down', 'comment': 'wrong clause'})
    check('PUT rates too', r.status == 200 and r.json().get('rating') == 'down', r)

    def unchanged(what):
        turns = (s.get(f'/api/v1/conversations/{cid}').json() or {}).get('turns') or []
        got = [(t.get('feedback') or {}).get('rating') for t in turns]
        check(what + ': nothing changed', got[:2] == ['up', 'down'], got)

    r = s.post(path % 9, {'rating': 'down'})
    check('unknown turn: 404 that says so', r.status == 404 and 'no turn 9' in r.json()['error']['message'], r)
    r = s.post(path % 1, {'rating': 'meh'})
    check('rating not up/down: 400', r.status == 400 and r.error_code() == 'invalid', r)
    r = s.post(path % 1, {'comment': 'no rating'})
    check('no rating: 400', r.status == 400, r)
    r = s.post(path % 1, {'rating': 'down', 'comment': '长' * 2001})
    check('comment over 2,000 characters: 400 naming the limit', r.status == 400 and '2000' in
          r.json()['error']['message'], r)
    r = s.post(path % 1, {'rating': 'down', 'comment': 5})
    check('comment not a string: 400', r.status == 400, r)
    r = s.post('/api/v1/conversations/999999/turns/1/feedback', {'rating': 'down'})
    check('unknown conversation: 404', r.status == 404, r)
    r = s.post(path % (2 ** 32 + 1), {'rating': 'down'})
    check('a turn past 2^32: 404, not turn 1', r.status == 404, r)
    r = s.post(path.replace('%d', 'x'), {'rating': 'down'})
    check('turn not a number: 404', r.status == 404, r)
    r = s.get(path % 1)
    check('GET: 405', r.status == 405, r)
    unchanged('bad input')
    r = s.post(path % 1, {'rating': 'down', 'comment': '长' * 2000})
    check('a 2,000-character comment is fine', r.status == 200, r)
    r = s.post(path % 1, {'rating': 'up'})
    r = s.delete(path % 1)
    check('DELETE takes the rating back', r.status == 200 and r.json().get('rating') is None, r)
    r = s.delete(path % 1)
    check('… once: then 404', r.status == 404, r)
    s.post(path % 1, {'rating': 'up', 'comment': 'right clause'})
    unchanged('after taking back and rating again')


def export(s, cid):
    r = s.get(f'/api/v1/conversations/{cid}/export?format=md')
    md = r.body.decode('utf-8', 'replace')
    check('md: 200, text/markdown, an attachment', r.status == 200 and r.header('Content-Type').startswith(
        'text/markdown') and 'attachment' in (r.header('Content-Disposition') or ''), r)
    check('md: the questions and answers', '## 1. 劳动法第四十四条规定了什么？' in md and '百分之一百五十' in md, md[:800])
    check('md: each citation with document, clause, page and quote', re.search(
        r'1\. \*\*[^*]+\*\* — 第四十四条.*page \d+', md) and '\n   > ' in md, md[:1500])
    check('md: the rating', 'thumbs up' in md and 'thumbs down' in md, md[-600:])
    r = s.get(f'/api/v1/conversations/{cid}/export')
    check('md is the default', r.status == 200 and r.body.decode() .startswith('# '), r)
    r = s.get(f'/api/v1/conversations/{cid}/export?format=pdf')
    check('pdf: 200, application/pdf', r.status == 200 and r.header('Content-Type') == 'application/pdf'
          and r.body.startswith(b'%PDF-'), r)
    tmp = tempfile.mkdtemp()
    try:
        pdf = os.path.join(tmp, 'c.pdf')
        open(pdf, 'wb').write(r.body)
        if shutil.which('mutool'):
            p = subprocess.run(['mutool', 'draw', '-F', 'txt', '-o', '-', pdf], capture_output=True, timeout=60)
            text = re.sub(r'\s+', '', p.stdout.decode('utf-8', 'replace'))
            check('pdf: MuPDF reads it, Chinese text included', p.returncode == 0 and '劳动法第四十四条规定了什么' in text
                  and '第四十四条' in text and '百分之一百五十' in text, (p.returncode, text[:600], p.stderr[-300:]))
            check('pdf: the citations', 'Citations' in text and '[1]' in text, text[:1000])
        else:
            check('mutool is installed (tools/setup.sh)', False)
    finally:
        shutil.rmtree(tmp)
    r = s.get(f'/api/v1/conversations/{cid}/export?format=docx')
    check('unknown format: 400', r.status == 400 and r.error_code() == 'invalid', r)
    check('unknown conversation: 404', s.get('/api/v1/conversations/999999/export').status == 404)


def search(s, cid, other):
    def ids(q):
        r = s.get('/api/v1/conversations?q=' + q)
        return r.status, [c['id'] for c in (r.json() or {}).get('conversations', [])]

    import urllib.parse
    q = urllib.parse.quote
    check('search a question', ids(q('第五十条'))[1] == [cid], ids(q('第五十条')))
    check('search an answer', cid in ids(q('百分之一百五十'))[1], ids(q('百分之一百五十')))
    check('search the title, any case', ids(q('OVERTIME'))[1] == [other], ids(q('OVERTIME')))
    check('nothing found: an empty list', ids('zzzzqqq') == (200, []), ids('zzzzqqq'))
    r = s.get('/api/v1/conversations?q=' + 'x' * 600)
    check('a search text over 511 bytes: 400, not the whole list', r.status == 400 and r.error_code() == 'invalid', r)
    check('search within a KB', s.get('/api/v1/conversations?kb=laws&q=' + q('第五十条')).status == 200)


def quality_and_exports(s, cid):
    days = s.get('/api/v1/quality?days=7').json() or {}
    rows = [r for r in days.get('rows', []) if r['kb'] == 'laws']
    check('quality: one row for laws today', len(rows) == 1 and rows[0]['answers'] >= 4, days)
    row = rows[0] if rows else {}
    check('quality: abstentions counted', row.get('abstentions', 0) >= 1, row)
    check('quality: thumbs down counted', row.get('thumbs_down') == 1 and row.get('thumbs_up') == 1, row)
    check('quality: the threshold is said', days.get('low_confidence_below') == 0.5, days)
    check('quality: days out of range: 400', s.get('/api/v1/quality?days=0').status == 400)
    check('quality: an unknown KB: 404', s.get('/api/v1/quality?kb=nope').status == 404)
    m = s.get('/metrics').body.decode()
    check('metrics: the quality families with kb and day', re.search(
        r'^clauseqa_quality_answers\{kb="laws",day="\d{4}-\d\d-\d\d"\} [1-9]', m, re.M) and re.search(
        r'^clauseqa_quality_thumbs_down\{kb="laws",day="[0-9-]+"\} 1$', m, re.M) and
        '# TYPE clauseqa_quality_cited_deleted gauge' in m, m[-1500:])

    r = s.get('/api/v1/feedback/export?kb=laws')
    lines = [json.loads(x) for x in r.body.decode().splitlines() if x.strip()]
    check('feedback export: JSONL of the two rated answers', r.status == 200 and len(lines) == 2, r)
    errors = [e for o in lines for e in eval_line_errors(o)]
    check('feedback export: every line is an eval question (shared/eval/FORMAT.md)', not errors, (errors, lines[:1]))
    up = [o for o in lines if o['verdict'] == 'up']
    down = [o for o in lines if o['verdict'] == 'down']
    check('thumbs up: its citations are the gold, its answer the reference', up and up[0]['gold'] and
          up[0]['gold'][0]['clause'] == '第四十四条' and up[0]['answers'] == [up[0]['answer']] and
          up[0]['comment'] == 'right clause', up)
    check('thumbs down: no gold, no reference answer, the cited clause kept', down and down[0]['gold'] == [] and
          down[0]['answers'] == [] and down[0]['cited'] and down[0]['comment'] == 'wrong clause', down)
    cli = s.cli('feedback', 'export', '--kb', 'laws')
    cli_lines = [json.loads(x) for x in cli.stdout.splitlines() if x.strip()]
    check('clauseqa feedback export: the same lines', cli.returncode == 0 and cli_lines == lines, cli.stderr)
    bad = s.cli('feedback', 'export', '--kb', 'nope')
    check('clauseqa feedback export --kb nope: an error', bad.returncode != 0 and 'nope' in bad.stderr, bad.stderr)

    # the cited document deleted: its answers counted
    docs = (s.get('/api/v1/kbs/laws/documents').json() or {}).get('documents') or []
    for d in docs:
        s.delete(f"/api/v1/documents/{d['id']}")
    row = [r for r in (s.get('/api/v1/quality?kb=laws').json() or {}).get('rows', [])][0]
    check('quality: answers whose cited document was deleted since', row['cited_deleted'] >= 3, row)


def with_keys(s, cid):
    admin = s.cli('keys', 'create', '--json', '--role', 'admin')
    s.key = json.loads(admin.stdout)['key']
    reader = json.loads(s.cli('keys', 'create', '--json', '--role', 'reader', '--kb', 'laws').stdout)['key']
    time.sleep(1.2)  # the server re-reads "are there keys?" at most once a second
    check('quality needs an admin: 403', s.get('/api/v1/quality', key=reader).status == 403)
    check('feedback export needs an admin: 403', s.get('/api/v1/feedback/export', key=reader).status == 403)
    r = s.post(f'/api/v1/conversations/{cid}/turns/1/feedback', {'rating': 'down'}, key=reader)
    check("another key's conversation: 404", r.status == 404, r)
    check("… its export too", s.get(f'/api/v1/conversations/{cid}/export', key=reader).status == 404)
    r = s.post(ASK, {'question': '劳动法第四十四条规定了什么？'}, key=reader)
    mine = (r.json() or {}).get('conversation_id')
    r = s.post(f'/api/v1/conversations/{mine}/turns/1/feedback', {'rating': 'up'}, key=reader)
    check('a reader rates its own answer', r.status == 200, r)
    check("a reader's search finds only its own", [c['id'] for c in (s.get(
        '/api/v1/conversations?q=%E5%8A%B3%E5%8A%A8%E6%B3%95', key=reader).json() or {}).get('conversations', [])]
        == [mine])
    check('no key: 401', s.get('/api/v1/quality', key=None).status == 401)


def main():
    s = Server(sys.argv[1])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'})
        job = s.wait_job(s.upload('laws', DEMO_PDF).json()['job']['id'])
        check('upload ready', job.get('state') == 'ready', job)
        cid = s.post(ASK, {'question': '劳动法第四十四条规定了什么？'}).json()['conversation_id']
        s.post(ASK, {'question': '第五十条呢？', 'conversation_id': cid})
        s.post(ASK, {'question': '火星上的量子引力怎么计算？', 'conversation_id': cid})  # abstains
        other = s.post(ASK, {'question': '第四十四条'}).json()['conversation_id']
        s.request('PATCH', f'/api/v1/conversations/{other}', {'title': 'Overtime pay'})
        feedback(s, cid)
        export(s, cid)
        search(s, cid, other)
        quality_and_exports(s, cid)
        with_keys(s, cid)
    except Exception as e:
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        raise
    finally:
        check('server exits 0', s.stop() == 0, s.log_text())
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
