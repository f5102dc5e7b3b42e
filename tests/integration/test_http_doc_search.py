#!/usr/bin/python3
"""Search inside a document (issue 30 item 4): GET /api/v1/documents/{id}/search?q= gives the clauses of that
document whose text holds q, in order, at most 50 ("more" when others), checked against the database and against
each clause's own text; every format (a Markdown file's hits have no page); ASCII letters in either case; q of 1 to
200 bytes (400 otherwise, with its catalog code), 404 for a missing document, 403 for a key without the KB; the
clause's "doc_pages" for the viewer's page list.

usage: test_http_doc_search.py path/to/clauseqa"""
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks, Server, quote  # noqa: E402

T = Checks('test_http_doc_search')
check = T.check


def db_hits(data, doc_id, q):
    """The oracle: the clause ids of the document whose text holds q (byte for byte), in the document's order."""
    con = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    try:
        return [r[0] for r in con.execute('SELECT id FROM clauses WHERE doc_id = ? AND instr(text, ?) > 0 ORDER BY ord',
                                          (doc_id, q))]
    finally:
        con.close()


def search(s, doc_id, q, **kw):
    return s.get(f'/api/v1/documents/{doc_id}/search?q=' + quote(q), **kw)


def test_hits(s, pdf_id, md_id):
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': '劳动法第四十四条'})
    top = r.json()['results'][0]
    clause = s.get(f"/api/v1/clauses/{top['clause_id']}").json()
    check('the clause gives the document\'s page count', clause.get('doc_pages') == 9, clause)

    q = '延长工作时间'
    r = search(s, pdf_id, q)
    j = r.json()
    want = db_hits(s.data, pdf_id, q)
    check('search: 200', r.status == 200, r)
    check('search: the clauses the database holds q in, in order', [c['clause_id'] for c in j['clauses']] == want
          and 0 < len(want) <= 50 and j['more'] is False, (j, want))
    check('search: the cited clause is among them', top['clause_id'] in want, (top, want))
    check('search: q and the document echoed', j['q'] == q and j['document_id'] == pdf_id, j)
    for c in j['clauses']:
        full = s.get(f"/api/v1/clauses/{c['clause_id']}").json()
        check(f"hit {c['clause_id']} holds q, with its label and page", q in full['text']
              and c['clause'] == full['clause'] and c['page'] == full['page'] and c['page_last'] == full['page_last']
              and c['path'] == full['path'] and full['document_id'] == pdf_id, (c, full))

    # more than 50: the first 50 in order, and "more"
    want = db_hits(s.data, pdf_id, '第')
    r = search(s, pdf_id, '第')
    j = r.json()
    check('a common word: 50 and more', len(want) > 50 and [c['clause_id'] for c in j['clauses']] == want[:50]
          and j['more'] is True, (len(want), j.get('more')))

    r = search(s, pdf_id, '这句话不在劳动法里')
    check('no hits: 200 with none', r.status == 200 and r.json()['clauses'] == [] and r.json()['more'] is False, r)

    # a document without pages; ASCII letters in either case
    want = db_hits(s.data, md_id, 'Confidential Information')
    r = search(s, md_id, 'confidential INFORMATION')
    j = r.json()
    check('markdown: hits in either case', r.status == 200 and len(want) >= 2
          and [c['clause_id'] for c in j['clauses']] == want, (j, want))
    check('markdown: hits have no page', all(c['page'] is None for c in j['clauses']), j)
    check('a search inside one document finds nothing of another', search(s, md_id, q).json()['clauses'] == [])


def test_bad_inputs(s, pdf_id):
    for what, path in (('no q', f'/api/v1/documents/{pdf_id}/search'),
                       ('empty q', f'/api/v1/documents/{pdf_id}/search?q='),
                       ('q of 201 bytes', f'/api/v1/documents/{pdf_id}/search?q=' + 'x' * 201),
                       ('q of 67 CJK characters (201 bytes)', f'/api/v1/documents/{pdf_id}/search?q=' + quote('劳' * 67)),
                       ('q of 5000 bytes', f'/api/v1/documents/{pdf_id}/search?q=' + 'x' * 5000)):
        r = s.get(path)
        e = (r.json() or {}).get('error', {})
        check(what + ': 400 with its code', r.status == 400 and e.get('code') == 'invalid'
              and e.get('message_code') == 'search_q_length' and e.get('message_args') == ['200'], r)
    r = search(s, pdf_id, '劳' * 66 + 'ab')
    check('q of 200 bytes: 200', r.status == 200 and r.json()['clauses'] == [], r)
    r = search(s, 99999, '劳动')
    check('missing document: 404', r.status == 404 and r.error_code() == 'not_found', r)
    r = s.get('/api/v1/documents/abc/search?q=x')
    check('not an id: 400 or 404', r.status in (400, 404), r)
    r = s.post(f'/api/v1/documents/{pdf_id}/search?q=x', {})
    check('POST: 405', r.status == 405, r)


def create_key(s, *args):
    r = s.cli('keys', 'create', '--json', *args)
    if not check('keys create ' + ' '.join(args), r.returncode == 0, r.stderr):
        return None
    return json.loads(r.stdout)['key']


def test_access(s, pdf_id):
    reader = create_key(s, '--role', 'reader', '--kb', 'laws')
    outsider = create_key(s, '--role', 'reader', '--kb', 'other')
    time.sleep(1.2)  # the server re-reads "are there keys?" at most once a second
    r = search(s, pdf_id, '劳动', key=reader)
    check('a reader of the KB searches', r.status == 200 and r.json()['clauses'], r)
    r = search(s, pdf_id, '劳动', key=outsider)
    check('a key without the KB: 403', r.status == 403 and r.error_code() == 'forbidden', r)
    r = search(s, pdf_id, '劳动', key=None)
    check('no key: 401', r.status == 401, r)
    r = search(s, 99999, '劳动', key=outsider)
    check('a missing document is 404 to anyone', r.status == 404, r)


def main():
    s = Server(sys.argv[1])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'})
        s.post('/api/v1/kbs', {'name': 'other'})
        pdf_id = s.wait_job(s.upload('laws', DEMO_PDF).json()['job']['id'])['document_id']
        md_id = s.wait_job(s.upload('laws', DEMO_MD).json()['job']['id'])['document_id']
        test_hits(s, pdf_id, md_id)
        test_bad_inputs(s, pdf_id)
        test_access(s, pdf_id)
        check('stops cleanly', s.stop() == 0, s.log_text())
    except Exception as e:
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        raise
    finally:
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
