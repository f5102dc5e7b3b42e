#!/usr/bin/python3
"""Every server message reaches the page in the page's language (issue 30 item 5): each error message format the
server writes (web/*.c, app/service_*.c) is in the catalog of web/messages.c, each catalog code has its Chinese in
web/static/messages.js with the same placeholders, and the server's errors carry "message_code" and
"message_args"; a failed document's reason is the plain one (the reader's MuPDF text only in the log).

usage: test_messages.py path/to/clauseqa"""
import glob
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_PDF, SOURCE_DIR, Checks, Server  # noqa: E402

T = Checks('test_messages')
check = T.check

# Messages only an operator sees (starting the server, its threads, its settings), never a client over HTTP.
OPERATOR_ONLY = ('web/listen.c', 'web/access_log.c', 'web/watchdog.c')
OPERATOR_MESSAGES = {'cannot start worker thread %d', 'cannot start the ingestion worker',
                     'cannot start the job lease renewer', '%s', 'cannot listen on %s:%d: %s',
                     "CLAUSEQA_JOB_LEASE_S='%.40s': the job lease is whole seconds from %d to %d (default %d)"}
CONVERSION = re.compile(r'%[-+ #0]*\d*(?:\.\d+)?[hlLzjt]*[diouxXeEfgGcsp]')


def c_literals(text):
    """The concatenated string literal at the start of text (C escapes kept as written)."""
    return ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', re.match(r'((?:\s*"(?:[^"\\]|\\.)*")+)', text).group(1)))


def source_formats():
    call = re.compile(r'(?:cq_web_send_error\s*\(\s*r\s*,\s*[^,]+,\s*"[^"]*"\s*,|cq_err_set\s*\(\s*[\w>&-]+\s*,'
                      r'\s*CQ_ERR_\w+\s*,)(?=\s*")', re.S)
    found = {}
    for path in sorted(glob.glob(os.path.join(SOURCE_DIR, 'web', '*.c')) +
                       glob.glob(os.path.join(SOURCE_DIR, 'app', 'service*.c'))):
        rel = os.path.relpath(path, SOURCE_DIR)
        if rel in OPERATOR_ONLY:
            continue
        text = open(path, encoding='utf-8').read()
        for m in call.finditer(text):
            fmt = c_literals(text[m.end():])
            if fmt not in OPERATOR_MESSAGES:
                found.setdefault(fmt, rel)
    return found


def catalog():
    text = open(os.path.join(SOURCE_DIR, 'web', 'messages.c'), encoding='utf-8').read()
    body = text[text.index('cq_web_messages[] = {'):text.index('};')]
    out = {}
    for m in re.finditer(r'\{"(\w+)",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}', body):
        out[m.group(1)] = c_literals(m.group(2))
    return out


def page_table():
    text = open(os.path.join(SOURCE_DIR, 'web', 'static', 'messages.js'), encoding='utf-8').read()
    body = text[text.index('SERVER_MESSAGES_ZH = {'):text.index('};')]
    return dict(re.findall(r"^\s+(\w+): '((?:[^'\\]|\\.)*)',$", body, re.M))


def sources_and_tables():
    cat = catalog()
    check('the catalog is read', len(cat) > 80, len(cat))
    formats = set(cat.values())
    for fmt, where in source_formats().items():
        check(f'{where}: "{fmt}" is in web/messages.c', fmt in formats)
    zh = page_table()
    for code, fmt in cat.items():
        if not check(f'{code}: Chinese in messages.js', code in zh):
            continue
        n = len(CONVERSION.findall(fmt.replace('%%', '')))
        used = {int(i) for i in re.findall(r'\{(\d+)\}', zh[code])}
        check(f'{code}: the Chinese uses only the {n} values', used <= set(range(n)), (fmt, zh[code]))
        check(f'{code}: the Chinese is Chinese', re.search(r'[\u4e00-\u9fff]', zh[code]), zh[code])
    check('messages.js has no code the server lacks', set(zh) <= set(cat), set(zh) - set(cat))


def damaged_pdf():
    data = open(DEMO_PDF, 'rb').read()
    return data[:3000]  # cut short: MuPDF rebuilds it and finds no page


def over_http(s):
    s.post('/api/v1/kbs', {'name': 'laws'})
    r = s.get('/api/v1/clauses/419')
    e = (r.json() or {}).get('error', {})
    check('no clause 419: 404 with its code and value', r.status == 404 and e.get('code') == 'not_found'
          and e.get('message') == 'no clause with id 419' and e.get('message_code') == 'no_clause_with_id'
          and e.get('message_args') == ['419'], r)
    r = s.post('/api/v1/kbs/laws/ask', {'question': ''})
    e = (r.json() or {}).get('error', {})
    check('an empty question: its code', r.status == 400 and e.get('message_code') == 'question_required'
          and e.get('message_args') == [], r)
    r = s.get('/api/v1/kbs/laws/nothing-here')
    e = (r.json() or {}).get('error', {})
    check('no such resource: code and the path as its value', e.get('message_code') == 'no_such_resource'
          and e.get('message_args') == ['/api/v1/kbs/laws/nothing-here'], r)

    # a damaged PDF: the plain reason stored and shown, MuPDF's words in the log
    r = s.upload('laws', None, filename='cut.pdf', content=damaged_pdf())
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else (r.json() or {})
    check('a damaged PDF fails with the plain reason', job.get('state') == 'failed'
          and job.get('error') == 'the PDF is damaged and cannot be read'
          and job.get('error_message_code') == 'pdf_damaged' and job.get('error_code') == 'bad_format', job)
    docs = (s.get('/api/v1/kbs/laws/documents').json() or {}).get('documents', [])
    failed = [d for d in docs if d.get('status') == 'failed']
    check('… the document too', failed and failed[0].get('error') == 'the PDF is damaged and cannot be read'
          and failed[0].get('error_message_code') == 'pdf_damaged' and 'MuPDF' not in json.dumps(docs), docs)
    time.sleep(0.2)
    check('… MuPDF\'s own words are in the log', '[MuPDF:' in s.log_text() and 'failed: ' in s.log_text(),
          s.log_text())

    # an admin's route with a reader's key
    r = s.cli('keys', 'create', '--json', '--role', 'reader', '--kb', 'laws')
    key = json.loads(r.stdout)['key'] if r.returncode == 0 else None
    time.sleep(1.2)  # the server re-reads "are there keys?" at most once a second
    r = s.get('/api/v1/conversations?all=true', key=key)
    e = (r.json() or {}).get('error', {})
    check('this needs an admin key: its code', r.status == 403 and e.get('message_code') == 'admin_key_required', r)


def main():
    sources_and_tables()
    s = Server(sys.argv[1])
    try:
        s.start()
        over_http(s)
    except Exception as e:
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        raise
    finally:
        check('server exits 0', s.stop() == 0, s.log_text())
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
