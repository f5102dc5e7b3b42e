#!/usr/bin/python3
"""HTTP API against a real server on a loopback port: KBs, uploads (multipart and raw) as background jobs, duplicates,
retrieve, ask (JSON and SSE), follow-up questions, page images, clauses, downloads, deletion that leaves nothing,
bad inputs that leave the server healthy, jobs resumed after a restart, graceful stop, metrics; real PDFs from
../shared/eval when present.

usage: test_http_api.py path/to/clauseqa"""
import glob
import os
import shutil
import signal
import socket
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, SHARED_DIR, SOURCE_DIR, Checks, Server, multipart, png_size, quote  # noqa: E402

T = Checks('test_http_api')
check = T.check


def db_count(data, sql, *args):
    con = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    try:
        return con.execute(sql, args).fetchone()[0]
    finally:
        con.close()


def test_kbs(s):
    r = s.get('/api/v1/health')
    h = r.json()
    check('health', r.status == 200 and h['status'] == 'ok', r)
    check('open mode without keys', h['auth'] is False, r)
    formats = {f['name']: f for f in h.get('formats', [])}
    check('health lists the formats', set(formats) == {'pdf', 'docx', 'html', 'md', 'txt'} and formats['pdf']['pages'] is True
          and formats['md']['extensions'] == ['md', 'markdown'] and formats['txt']['pages'] is False, h)
    r = s.post('/api/v1/kbs', {'name': 'laws'})
    check('create kb', r.status == 201 and r.json()['name'] == 'laws', r)
    check('create kb again', s.post('/api/v1/kbs', {'name': 'laws'}).status == 409)
    r = s.post('/api/v1/kbs', {'name': '../etc'})
    check('invalid kb name', r.status == 400 and r.error_code() == 'invalid', r)
    check('kb name required', s.post('/api/v1/kbs', {'nom': 'x'}).status == 400)
    check('create 合同库', s.post('/api/v1/kbs', {'name': '合同库'}).status == 201)
    r = s.get('/api/v1/kbs')
    names = [k['name'] for k in r.json()['kbs']]
    check('list kbs', r.status == 200 and 'laws' in names and '合同库' in names, r)
    r = s.get('/api/v1/kbs/' + quote('合同库'))
    check('get kb by CJK name', r.status == 200 and r.json()['documents'] == 0, r)
    check('unknown kb', s.get('/api/v1/kbs/nope').status == 404)
    check('delete kb', s.delete('/api/v1/kbs/' + quote('合同库')).status == 200)
    check('deleted kb is gone', s.get('/api/v1/kbs/' + quote('合同库')).status == 404)


def test_upload_and_ask(s):
    r = s.upload('laws', DEMO_PDF)
    j = r.json()
    check('upload: 202 with a job', r.status == 202 and j['job']['state'] in ('queued', 'running', 'ready'), r)
    job = s.wait_job(j['job']['id'])
    check('job ready', job['state'] == 'ready', job)
    check('job progress', job['done'] == job['total'] == 9 and job['progress'] == 1, job)
    check('job document', job['document']['pages'] == 9 and job['document']['clauses'] > 100, job)
    check('job page warnings', job['document']['warnings'] == [], job)
    doc_id = job['document_id']

    r = s.upload('laws', DEMO_PDF)
    check('duplicate reported', r.status == 200 and r.json()['duplicate'] is True
          and r.json()['document']['id'] == doc_id, r)
    check('no second document', db_count(s.data, 'SELECT count(*) FROM documents') == 1)

    # raw body with the name in the query
    md = open(DEMO_MD, 'rb').read()
    r = s.post('/api/v1/kbs/laws/documents?filename=' + quote('sample-services-agreement.md'), md,
               headers={'Content-Type': 'text/markdown'})
    check('raw upload', r.status == 202, r)
    md_job = s.wait_job(r.json()['job']['id'])
    check('raw upload ready', md_job['state'] == 'ready' and md_job['document']['format'] == 'md', md_job)
    r = s.post('/api/v1/kbs/laws/documents', b'no name', headers={'Content-Type': 'application/octet-stream'})
    check('raw upload needs a name', r.status == 400, r)

    r = s.get('/api/v1/kbs/laws/documents')
    docs = r.json()['documents']
    check('documents listed', r.status == 200 and len(docs) == 2, r)
    r = s.get(f'/api/v1/documents/{doc_id}')
    d = r.json()
    check('document status', r.status == 200 and d['status'] == 'ready' and d['kb'] == 'laws', r)
    check('per-page quality', len(d['page_quality']) == 9 and all(p['quality'] > 0.8 for p in d['page_quality']), d)
    r = s.get('/api/v1/kbs/laws/jobs')
    check('jobs listed', r.status == 200 and len(r.json()['jobs']) >= 2, r)

    # retrieve
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': '劳动法第四十四条规定了什么？', 'k': 3})
    res = r.json()
    check('retrieve', r.status == 200 and res['results'][0]['clause'] == '第四十四条', r)
    check('retrieve has ids and pages', res['results'][0]['document_id'] == doc_id and res['results'][0]['page'] == 4, res)
    check('retrieve k', len(res['results']) <= 3, res)
    check('retrieve timing', res['timings']['retrieve_ms'] >= 0, res)
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': 'How many days of notice are needed to terminate?',
                                             'mode': 'bm25'})
    check('retrieve English bm25', r.status == 200 and 'sixty (60) days' in r.json()['results'][0]['text'], r)
    check('bad mode', s.post('/api/v1/kbs/laws/retrieve', {'question': 'x', 'mode': 'psychic'}).status == 400)
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': 'x', 'mode': 'dense'})
    check('dense: 200 with an encoder, 400 without', r.status == 200 or (r.status == 400 and 'dense' in
                                                                         r.json()['error']['message']), r)

    # ask, JSON
    r = s.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'})
    a = r.json()
    check('ask', r.status == 200 and not a['abstained'], r)
    cite = a['citations'][0] if a.get('citations') else {}
    check('ask cites the clause', cite.get('clause') == '第四十四条' and cite.get('document_id') == doc_id, a)
    check('quote is in the answer', cite.get('quote', '#') in a['answer'], a)
    check('ask timings', all(k in a['timings'] for k in ('retrieve_ms', 'generate_ms', 'total_ms')), a)
    r = s.post('/api/v1/kbs/laws/ask', {'question': '火星上的量子引力如何影响足球比赛的转播权？'})
    check('ask abstains', r.status == 200 and r.json()['abstained'] is True, r)

    # ask, SSE: the conversation, the stages, tokens, then citations, then done
    r, ev = s.events('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'})
    names = [e[0] for e in ev]
    check('sse content type', (r.header('Content-Type') or '').startswith('text/event-stream'), r)
    check('sse order', names[:3] == ['conversation', 'stage', 'stage'] and names[-2:] == ['citations', 'done']
          and set(names[3:-2]) == {'token'} and len(names) > 6, names)
    tokens = ''.join(e[1]['text'] for e in ev if e[0] == 'token')
    done = ev[-1][1] if ev else {}
    check('sse tokens make the answer', tokens == done.get('answer'), (tokens[:80], done))
    check('sse citations', ev and ev[-2][1]['citations'][0]['clause'] == '第四十四条', ev[-2:] if ev else ev)
    # stream: true in the body does the same without the Accept header
    r = s.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条', 'stream': True})
    check('stream flag', r.status == 200 and b'event: done' in r.body, r)

    # follow-up: "那第二款呢？" after a question about 第四十四条 (history without citations, as a plain client sends)
    hist = [{'role': 'user', 'content': '劳动法第四十四条规定了什么？'}, {'role': 'assistant', 'content': a['answer']}]
    r = s.post('/api/v1/kbs/laws/ask', {'question': '那第二款呢？', 'history': hist})
    f = r.json()
    check('follow-up resolved', r.status == 200 and '第四十四条第二款' in f.get('resolved_question', ''), r)
    check('follow-up cites 第四十四条', f['citations'] and f['citations'][0]['clause'] == '第四十四条', f)
    # with the citations the assistant turn carried
    hist = [{'role': 'user', 'content': '加班工资标准'}, {'role': 'assistant', 'content': '...', 'citations': a['citations']}]
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': '第三款呢', 'history': hist})
    check('follow-up from citations', r.status == 200 and '第四十四条第三款' in r.json().get('resolved_question', ''), r)
    r = s.post('/api/v1/kbs/laws/ask', {'question': '那第五十条呢？', 'history': hist})
    check('follow-up article', r.status == 200 and r.json()['citations'][0]['clause'] == '第五十条', r)
    check('history must be a list', s.post('/api/v1/kbs/laws/ask', {'question': 'x', 'history': 'no'}).status == 400)
    return doc_id, cite['clause_id'], md_job['document_id']


def test_pages_and_files(s, doc_id, clause_id, md_id):
    r = s.get(f'/api/v1/clauses/{clause_id}')
    c = r.json()
    check('clause', r.status == 200 and c['clause'] == '第四十四条' and '第四章' in c['path'], r)
    check('clause boxes', c['boxes'] and all(b['page'] == 4 for b in c['boxes']), c)
    check('clause page image url', c['page_image_url'].startswith(f'/api/v1/documents/{doc_id}/pages/4.png'), c)
    check('clause page size', c['page_sizes'][0]['width'] > 500, c)

    t0 = time.time()
    r = s.get(f'/api/v1/documents/{doc_id}/pages/4.png?clause={clause_id}&width=800')
    first = time.time() - t0
    check('page image', r.status == 200 and r.header('Content-Type') == 'image/png', r)
    check('page image width', png_size(r.body) and png_size(r.body)[0] == 800, png_size(r.body))
    plain = s.get(f'/api/v1/documents/{doc_id}/pages/4.png?width=800')
    check('highlight changes the image', plain.status == 200 and plain.body != r.body)
    t0 = time.time()
    again = s.get(f'/api/v1/documents/{doc_id}/pages/4.png?clause={clause_id}&width=800')
    check('page image cached', again.body == r.body and len(glob.glob(os.path.join(s.data, 'cache/pages/*.png'))) == 2,
          (first, time.time() - t0))
    check('default width', png_size(s.get(f'/api/v1/documents/{doc_id}/pages/1.png').body)[0] == 1000)
    check('no page 99', s.get(f'/api/v1/documents/{doc_id}/pages/99.png').status == 404)
    check('page 0', s.get(f'/api/v1/documents/{doc_id}/pages/0.png').status == 404)
    check('width too large', s.get(f'/api/v1/documents/{doc_id}/pages/1.png?width=99999').status == 400)
    check('clause of another document', s.get(f'/api/v1/documents/{md_id}/pages/1.png?clause={clause_id}').status
          in (400, 404))
    r = s.get(f'/api/v1/documents/{md_id}/pages/1.png')
    check('markdown has no page images', r.status == 404, r)

    r = s.get(f'/api/v1/documents/{doc_id}/original')
    check('download original', r.status == 200 and r.body == open(DEMO_PDF, 'rb').read(), r.status)
    check('download name', "filename*=UTF-8''%E5%8A%B3" in (r.header('Content-Disposition') or ''), r.headers)
    check('no document 999', s.get('/api/v1/documents/999/original').status == 404)
    check('bad id', s.get('/api/v1/documents/abc').status == 404)


def test_bad_inputs(s):
    r = s.post('/api/v1/kbs/laws/ask', '{"question": "x"', headers={'Content-Type': 'application/json'})
    check('malformed JSON', r.status == 400 and r.error_code() == 'invalid_json', r)
    check('JSON not an object', s.post('/api/v1/kbs/laws/ask', '[1, 2]').status == 400)
    check('empty body', s.post('/api/v1/kbs/laws/retrieve', b'').status == 400)
    check('question missing', s.post('/api/v1/kbs/laws/ask', {'q': 'x'}).status == 400)
    check('question empty', s.post('/api/v1/kbs/laws/ask', {'question': ''}).status == 400)
    check('k out of range', s.post('/api/v1/kbs/laws/retrieve', {'question': 'x', 'k': 5000}).status == 400)
    big = '{"question": "' + 'x' * (1100 * 1024) + '"}'
    r = s.post('/api/v1/kbs/laws/ask', big)
    check('oversized body', r.status == 413 and r.error_code() == 'payload_too_large', r)
    r = s.post('/api/v1/kbs/nope/ask', {'question': '劳动法第四十四条'})
    check('unknown kb ask', r.status == 404 and r.error_code() == 'not_found', r)
    check('unknown kb retrieve', s.post('/api/v1/kbs/nope/retrieve', {'question': 'x'}).status == 404)
    check('unknown kb upload', s.upload('nope', DEMO_PDF).status == 404)
    check('kb name with a slash', s.get('/api/v1/kbs/a%2Fb/documents').status == 404)

    r = s.upload('laws', None, filename='fake.pdf', content=b'this is plain text, not a PDF\n')
    check('non-PDF bytes named .pdf', r.status == 415 and r.error_code() == 'bad_format', r)
    r = s.upload('laws', None, filename='image.png', content=b'\x89PNG\r\n\x1a\nxxxx')
    check('unsupported type', r.status == 415 and r.error_code() == 'unsupported', r)
    r = s.upload('laws', None, filename='empty.pdf', content=b'')
    check('empty file', r.status == 422, r)
    check('422 reads "Unprocessable Content" (not CivetWeb\'s "Unproccessable entity")',
          r.reason == 'Unprocessable Content', r.reason)
    check('422 keeps its headers and JSON body', r.header('X-Content-Type-Options') == 'nosniff'
          and (r.header('Content-Type') or '').startswith('application/json') and r.error_code() == 'empty'
          and r.header('Content-Length') == str(len(r.body)) and r.header('Date'), r.headers)
    truncated = open(DEMO_PDF, 'rb').read()[:20000]
    r = s.upload('laws', None, filename='truncated.pdf', content=truncated)
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
    check('truncated PDF fails with a reason', job.get('state') == 'failed' and job.get('error'), job)

    for name, reason in (('encrypted.pdf', 'password'), ('scanned.pdf', 'no text layer')):
        r = s.upload('laws', os.path.join(SOURCE_DIR, 'tests', 'data', 'pdf', name))
        job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
        check(name + ' fails with its reason', job.get('state') == 'failed' and reason in (job.get('error') or ''), job)
        doc = s.get(f"/api/v1/documents/{job.get('document_id')}").json() if job.get('document_id') else {}
        check(name + ' listed as failed', doc.get('status') == 'failed' and reason in (doc.get('error') or ''), doc)

    # Names with path tricks: kept as a plain name, never a path.
    pdf = open(DEMO_PDF, 'rb').read()
    r = s.upload('laws', None, filename='../../etc/passwd.pdf', content=pdf.replace(b'%%EOF', b'%%EOF\n%x', 1))
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
    check('path trick uploaded as a name', job.get('state') == 'ready' and job['document']['name'] == 'passwd'
          and job['filename'] == 'passwd.pdf', job)
    r = s.post('/api/v1/kbs/laws/documents?filename=' + quote('..\\..\\evil\x01.md'), b'# Evil\n\nNothing here.\n')
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
    check('backslashes and control characters', job.get('filename') == 'evil_.md', job)
    # a name that a format string or a file-name parser would trip on: the upload's record keeps it as it is
    r = s.post('/api/v1/kbs/laws/documents?ocr=off&filename=' + quote('50% off %s %n.md'),
               '# 通知\n\n第一条 百分之五十。\n'.encode())
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
    check("'%' in a name", job.get('state') == 'ready' and job.get('filename') == '50% off %s %n.md'
          and (job.get('document') or {}).get('name') == '50% off %s %n', job)
    r = s.post('/api/v1/kbs/laws/documents?filename=..', b'text')
    check('dot-dot name', r.status in (202, 415) and '..' not in str(r.json()), r)
    outside = [p for p in glob.glob(os.path.join(s.tmp, '**', '*passwd*'), recursive=True)]
    check('nothing written under a tricked name', outside == [], outside)
    for f in os.listdir(os.path.join(s.data, 'files')):
        check('stored originals are named by hash', len(f.split('.')[0]) == 64, f)

    check('unknown route', s.get('/api/v1/nothing').status == 404)
    check('unknown top-level path', s.get('/etc/passwd').status == 404)
    check('dot-dot path', s.get('/api/v1/../../etc/passwd').status == 404)
    r = s.request('PUT', '/api/v1/health')
    check('wrong method', r.status == 405 and r.error_code() == 'method_not_allowed', r)
    check('405 says what is allowed', r.header('Allow') == 'GET', r.headers)
    r = s.delete('/api/v1/kbs/laws/retrieve')
    check('delete on retrieve', r.status == 405 and r.header('Allow') == 'POST', r)
    r = s.request('PATCH', '/api/v1/kbs/laws/documents')
    check('Allow lists every method of the path', r.status == 405 and r.header('Allow') == 'GET, POST, PUT', r)
    r = s.request('POST', '/api/v1/documents/1/original', key=None)
    check('the method is checked before the key', r.status == 405 and r.header('Allow') == 'GET, HEAD', r)
    check('a wrong method of an unknown path is 404', s.request('PATCH', '/api/v1/kbs/laws/nothing').status == 404)
    r = s.get('/api/v1/health')
    check('healthy after bad inputs', r.status == 200 and r.json()['status'] == 'ok', r)


def test_delete(s, doc_id):
    d = s.get(f'/api/v1/documents/{doc_id}').json()
    sha = d['sha256']
    r = s.delete(f'/api/v1/documents/{doc_id}')
    check('delete document', r.status == 200, r)
    check('deleted: 404', s.get(f'/api/v1/documents/{doc_id}').status == 404)
    check('delete twice', s.delete(f'/api/v1/documents/{doc_id}').status == 404)
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': '劳动法第四十四条'})
    check('deleted: not retrieved', r.status == 200 and all(x['document_id'] != doc_id for x in r.json()['results']), r)
    check('no clauses left', db_count(s.data, 'SELECT count(*) FROM clauses WHERE doc_id = ?', doc_id) == 0)
    check('no pages left', db_count(s.data, 'SELECT count(*) FROM pages WHERE doc_id = ?', doc_id) == 0)
    check('no jobs left', db_count(s.data, 'SELECT count(*) FROM jobs WHERE doc_id = ?', doc_id) == 0)
    kb = db_count(s.data, "SELECT id FROM kbs WHERE name = 'laws'")
    # (the FTS table itself needs the cjk tokenizer; its docsize shadow table is plain SQL)
    check('fts rows = clauses', db_count(s.data, f'SELECT count(*) FROM fts_kb{kb}_docsize') ==
          db_count(s.data, 'SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE d.kb_id = ?', kb))
    check('fts has no rows of it', db_count(s.data, f'SELECT count(*) FROM fts_kb{kb}_docsize WHERE id NOT IN '
                                                    '(SELECT id FROM clauses)') == 0)
    check('original removed', not os.path.exists(os.path.join(s.data, 'files', sha + '.pdf')))
    check('page cache removed', not glob.glob(os.path.join(s.data, 'cache/pages', sha + '*')))
    check('vectors gone', db_count(s.data, 'SELECT count(*) FROM clause_vectors c LEFT JOIN clauses x ON x.id = '
                                           'c.clause_id WHERE x.id IS NULL') == 0)


def test_resume(binary):
    """A job the server left queued (stopped) or running (crashed) runs at the next start."""
    s = Server(binary)
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'r'})
        s.stop()
        os.makedirs(os.path.join(s.data, 'uploads'), exist_ok=True)
        con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
        kb = con.execute("SELECT id FROM kbs WHERE name = 'r'").fetchone()[0]
        for i, (state, src) in enumerate((('queued', DEMO_PDF), ('running', DEMO_MD), ('queued', None))):
            path = os.path.join(s.data, 'uploads', f'job-{i + 1}.' + ('pdf' if i == 0 else 'md'))
            if src:
                shutil.copy(src, path)
            con.execute('INSERT INTO jobs(id, kb_id, state, created_at, updated_at, filename, upload_path) '
                        'VALUES(?, ?, ?, 0, 0, ?, ?)', (i + 1, kb, state, os.path.basename(src or 'lost.md'), path))
        con.commit()
        con.close()
        open(os.path.join(s.data, 'uploads', 'spool', 'upload-stale'), 'w').write('x')
        s.start()
        j1, j2, j3 = s.wait_job(1), s.wait_job(2), s.wait_job(3)
        check('queued job resumed', j1['state'] == 'ready' and j1['document']['pages'] == 9, j1)
        check('running job resumed', j2['state'] == 'ready', j2)
        check('lost upload reported', j3['state'] == 'failed' and 'lost' in (j3['error'] or ''), j3)
        check('uploads cleaned', os.listdir(os.path.join(s.data, 'uploads')) == ['spool']
              and os.listdir(os.path.join(s.data, 'uploads', 'spool')) == [],
              os.listdir(os.path.join(s.data, 'uploads')))

        # Graceful stop: a request in flight (half its body sent when SIGTERM comes) finishes; new ones get 503;
        # the process exits 0; the job it queued runs at the next start.
        body, ctype = multipart({}, ('file', 'again.pdf', open(DEMO_PDF, 'rb').read() + b'\n%pad'))
        c = socket.create_connection(('127.0.0.1', s.port), timeout=30)
        c.sendall(f'POST /api/v1/kbs/r/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n'
                  f'Content-Length: {len(body)}\r\n\r\n'.encode() + body[:len(body) // 2])
        time.sleep(0.3)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        late = s.get('/api/v1/health')
        check('new requests during the stop get 503', late.status == 503 and late.error_code() == 'shutting_down', late)
        c.sendall(body[len(body) // 2:])
        answer = b''
        while b'\r\n\r\n' not in answer:
            chunk = c.recv(65536)
            if not chunk:
                break
            answer += chunk
        c.close()
        check('request in flight answered', answer.startswith(b'HTTP/1.1 202'), answer[:200])
        rc = s.stop(signal.SIGTERM)
        check('SIGTERM exits 0', rc == 0, s.log_text())
        check('log says stopped', 'stopped' in s.log_text())
        s.start()
        jobs = s.get('/api/v1/kbs/r/jobs').json()['jobs']
        again = [j for j in jobs if j['filename'] == 'again.pdf']
        j = s.wait_job(again[0]['id']) if again else {}
        check('job of the stopped server ends', j.get('state') == 'ready', jobs)
        s.stop()
    finally:
        s.close()


def test_shared_pdfs(s):
    docs = os.path.join(SHARED_DIR, 'eval', 'laws-zh-pdf', 'docs')
    cuad = sorted(glob.glob(os.path.join(SHARED_DIR, 'eval', 'cuad-dev', 'docs', '*.pdf')))
    if not os.path.isdir(docs):
        print('skip: ../shared/eval is not here')
        return
    s.post('/api/v1/kbs', {'name': 'shared'})
    files = [os.path.join(docs, '农民专业合作社法(2017-12-27).pdf'), os.path.join(docs, '刑法.pdf')] + cuad[:1]
    jobs = []
    for f in files:
        if os.path.exists(f):
            r = s.upload('shared', f)
            check('shared upload ' + os.path.basename(f), r.status == 202, r)
            jobs.append((f, r.json()['job']['id']))
    for f, jid in jobs:
        j = s.wait_job(jid, timeout_s=240)
        check('shared ready ' + os.path.basename(f), j['state'] == 'ready' and j['document']['clauses'] > 0, j)
    r = s.post('/api/v1/kbs/shared/retrieve', {'question': '《农民专业合作社法》第三十三条'})
    check('shared retrieve', r.status == 200 and r.json()['results'][0]['clause'] == '第三十三条', r)
    r = s.post('/api/v1/kbs/shared/ask', {'question': '刑法第二十条'})
    a = r.json()
    check('shared ask', r.status == 200 and a['citations'] and a['citations'][0]['clause'] == '第二十条', r)
    if a.get('citations'):
        c = a['citations'][0]
        r = s.get(f"/api/v1/documents/{c['document_id']}/pages/{c['page']}.png?clause={c['clause_id']}")
        check('shared page image', r.status == 200 and png_size(r.body) is not None, r)
    for f, jid in jobs:
        doc_id = s.get(f'/api/v1/jobs/{jid}').json()['document_id']
        check('shared delete', s.delete(f'/api/v1/documents/{doc_id}').status == 200)
    check('shared: nothing left', db_count(s.data, "SELECT count(*) FROM documents d JOIN kbs k ON k.id = d.kb_id "
                                                    "WHERE k.name = 'shared'") == 0)


def test_metrics(s):
    r = s.get('/metrics')
    text = r.body.decode()
    check('metrics', r.status == 200 and (r.header('Content-Type') or '').startswith('text/plain'), r)
    for needle in ('clauseqa_http_requests_total{route="/api/v1/kbs/{kb}/ask",status="200"}',
                   'clauseqa_http_requests_total{route="/api/v1/kbs/{kb}/ask",status="404"}',
                   'clauseqa_http_request_duration_seconds_bucket{route="/api/v1/kbs/{kb}/retrieve",le="+Inf"}',
                   'clauseqa_ingest_queue_depth', 'clauseqa_ingest_pages_total', 'clauseqa_ingest_pages_per_second',
                   'clauseqa_generated_tokens_total', 'clauseqa_model_loaded{model="decoder"}'):
        check('metrics has ' + needle, needle in text)
    pages = [l for l in text.splitlines() if l.startswith('clauseqa_ingest_pages_total ')]
    check('pages counted', pages and float(pages[0].split()[1]) >= 9, pages)


def main():
    binary = sys.argv[1]
    s = Server(binary)
    try:
        s.start()
        test_kbs(s)
        doc_id, clause_id, md_id = test_upload_and_ask(s)
        test_pages_and_files(s, doc_id, clause_id, md_id)
        test_bad_inputs(s)
        test_delete(s, doc_id)
        test_shared_pdfs(s)
        test_metrics(s)
        check('stops cleanly', s.stop() == 0, s.log_text())
    except Exception as e:  # a crash of the test itself is a failure with the server's log
        check('no exception', False, f'{e!r}\n{s.log_text()}')
        raise
    finally:
        s.close()
    # small server for the upload limit
    s = Server(binary, args=['--max-upload-mb', '1'])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'small'})
        r = s.upload('small', None, filename='big.txt', content=b'x' * (2 << 20))
        check('upload over the limit', r.status == 413, r)
        r = s.post('/api/v1/kbs/small/documents?filename=big.txt', b'y' * (3 << 20))
        check('raw upload over the limit', r.status == 413, r)
        check('healthy after 413', s.get('/api/v1/health').status == 200)
        check('spool empty after 413', os.listdir(os.path.join(s.data, 'uploads', 'spool')) == [])
    finally:
        s.close()
    test_resume(binary)
    T.finish()


if __name__ == '__main__':
    main()
