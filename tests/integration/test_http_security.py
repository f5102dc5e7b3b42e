#!/usr/bin/python3
"""What a hostile web page or client can do to the HTTP server (issue 16), each a regression test:

- CORS: same origin only by default (CivetWeb's own preflight answer granted every origin every method); requests
  that change something from another origin are refused; --cors-origin allows named origins;
- Host: only IP addresses, localhost and --allow-host names (DNS rebinding);
- input: every JSON body the server writes is valid UTF-8 JSON; encoded NUL bytes are refused, not cut at;
  trailing data after a JSON body is refused; questions are capped;
- CivetWeb's own errors are the documented JSON; a huge Content-Length is refused at once;
- ids are never used again after a deletion (an old clause id never opens another KB's clause);
- the database is created mode 0600; temp files a crashed write left are removed at start;
- (issue 29) request targets that are not paths ("*", absolute forms) get 400 instead of a silent close; two Origin
  headers are refused; a JSON name given twice in one object is refused; originals, page images and their folders
  are their owner's only, whatever the umask.

usage: test_http_security.py path/to/clauseqa"""
import fcntl
import os
import sqlite3
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks, Server, raw_request  # noqa: E402

T = Checks('test_http_security')
check = T.check


def valid_json(r):
    """The body is valid UTF-8 JSON (http_server.Response or RawResponse)."""
    try:
        import json
        json.loads(r.body.decode('utf-8'))
        return True
    except ValueError:
        return False


def cors_headers(r):
    return [k for k, _ in r.headers if k.lower().startswith('access-control-')]


def test_cors_default(s):
    own = f'http://127.0.0.1:{s.port}'
    evil = 'http://evil.example'
    s.post('/api/v1/kbs', {'name': 'cors'})
    r = s.request('OPTIONS', '/api/v1/kbs/cors', headers={'Origin': evil, 'Access-Control-Request-Method': 'DELETE'})
    check('foreign preflight refused', r.status == 403 and r.error_code() == 'forbidden_origin', r)
    check('foreign preflight grants nothing', cors_headers(r) == [], r.headers)
    r = s.request('OPTIONS', '/api/v1/kbs', headers={'Origin': evil, 'Access-Control-Request-Method': 'POST',
                                                     'Access-Control-Request-Headers': 'content-type'})
    check('foreign preflight (POST) grants nothing', r.status == 403 and cors_headers(r) == [], r.headers)
    r = s.request('OPTIONS', '/api/v1/kbs')
    check('plain OPTIONS: 204 with Allow, no CORS', r.status == 204 and r.header('Allow') and cors_headers(r) == [],
          r.headers)

    r = s.delete('/api/v1/kbs/cors', headers={'Origin': evil})
    check('cross-origin DELETE refused', r.status == 403 and r.error_code() == 'forbidden_origin', r)
    check('the KB is still there', s.get('/api/v1/kbs/cors').status == 200)
    r = s.post('/api/v1/kbs', '{"name": "planted"}', headers={'Origin': evil, 'Content-Type': 'text/plain'})
    check('cross-origin text/plain POST refused', r.status == 403, r)
    check('no KB planted', s.get('/api/v1/kbs/planted').status == 404)
    r = s.upload('cors', DEMO_MD, headers={'Origin': evil})
    check('cross-origin upload refused', r.status == 403, r)
    check('nothing uploaded', s.get('/api/v1/kbs/cors/documents').json()['documents'] == [])
    r = s.post('/api/v1/kbs/cors/ask', {'question': 'x'}, headers={'Origin': 'null'})
    check('Origin null refused', r.status == 403, r)
    r = s.request('PUT', '/api/v1/kbs/cors/documents?filename=a.md', b'# A\n', headers={'Origin': evil})
    check('cross-origin PUT refused', r.status == 403, r)
    # the routes of conversations and versions (PATCH, PUT, DELETE): refused before any handler runs
    for method, path, body in (('PATCH', '/api/v1/conversations/1', {'title': 'x'}),
                               ('DELETE', '/api/v1/conversations/1', None),
                               ('PUT', '/api/v1/documents/1/version', {'label': 'x'}),
                               ('DELETE', '/api/v1/documents/1/version', None)):
        r = s.request(method, path, body, headers={'Origin': evil})
        check(f'cross-origin {method} {path} refused', r.status == 403 and r.error_code() == 'forbidden_origin', r)

    r = s.get('/api/v1/kbs', headers={'Origin': evil})
    check('cross-origin GET answered without CORS headers (unreadable by the page)',
          r.status == 200 and cors_headers(r) == [], r.headers)
    r = s.post('/api/v1/kbs', {'name': 'own'}, headers={'Origin': own})
    check('same-origin POST allowed', r.status == 201 and cors_headers(r) == [], r)
    r = s.post('/api/v1/kbs', {'name': 'own2'}, headers={'Origin': f'https://127.0.0.1:{s.port}'})
    check('same host behind a TLS proxy allowed', r.status == 201, r)
    check('no Origin (a script, curl) allowed', s.post('/api/v1/kbs', {'name': 'cli'}).status == 201)


def test_cors_allowed(binary):
    portal = 'https://portal.example.com'
    s = Server(binary, args=['--cors-origin', portal + '/', '--cors-origin', 'http://10.0.0.7:3000'])
    try:
        s.start()
        r = s.request('OPTIONS', '/api/v1/kbs', headers={'Origin': portal, 'Access-Control-Request-Method': 'POST',
                                                         'Access-Control-Request-Headers': 'authorization'})
        check('allowed preflight', r.status == 204 and r.header('Access-Control-Allow-Origin') == portal
              and 'POST' in (r.header('Access-Control-Allow-Methods') or '')
              and 'PATCH' in (r.header('Access-Control-Allow-Methods') or '')
              and 'Authorization' in (r.header('Access-Control-Allow-Headers') or ''), r.headers)
        r = s.post('/api/v1/kbs', {'name': 'p'}, headers={'Origin': portal})
        check('allowed origin POST', r.status == 201 and r.header('Access-Control-Allow-Origin') == portal
              and r.header('Vary') == 'Origin', r.headers)
        r = s.get('/api/v1/kbs', headers={'Origin': 'http://10.0.0.7:3000'})
        check('second allowed origin', r.header('Access-Control-Allow-Origin') == 'http://10.0.0.7:3000', r.headers)
        r = s.post('/api/v1/kbs', {'name': 'q'}, headers={'Origin': 'https://portal.example.com.evil.example'})
        check('look-alike origin refused', r.status == 403 and cors_headers(r) == [], r)
        r = s.get('/api/v1/kbs', headers={'Origin': 'https://other.example'})
        check('other origin gets no CORS headers', cors_headers(r) == [], r.headers)
    finally:
        s.close()
    for bad in ('*', 'portal.example.com', 'https://portal.example.com/app'):
        s = Server(binary, args=['--cors-origin', bad])
        try:
            s.start(timeout_s=5)
            check(f'--cors-origin {bad} refused', False)
        except RuntimeError as e:
            check(f'--cors-origin {bad} refused', 'invalid CORS origin' in str(e), str(e)[-300:])
        finally:
            s.close()


def test_host(s, binary):
    def get(host):
        return s.get('/api/v1/health', headers={'Host': host})

    for host in (f'127.0.0.1:{s.port}', 'localhost', f'LocalHost:{s.port}', f'[::1]:{s.port}', '10.1.2.3:8080',
                 'localhost.'):
        check(f'Host {host} accepted', get(host).status == 200)
    for host in ('evil.example', f'evil.example:{s.port}', 'localhost.evil.example', '127.0.0.1.nip.io'):
        r = get(host)
        check(f'Host {host} refused', r.status == 403 and r.error_code() == 'forbidden_host', r)
    r = s.get('/api/v1/kbs', headers={'Host': 'rebind.example'})
    check('rebinding page cannot read the API', r.status == 403, r)
    r = raw_request(s.port, f'GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n'.encode())
    check('two Host headers refused', r and r.status == 400 and r.strict_json(), r)
    r = raw_request(s.port, b'GET /api/v1/health HTTP/1.0\r\n\r\n')
    check('HTTP/1.0 without Host answered', r and r.status == 200, r)

    s2 = Server(binary, args=['--allow-host', 'qa.example.com', '--allow-host', 'Docs.Example.com:8443',
                              '--allow-host', 'a.example, b.example'])
    try:
        s2.start()
        for host, want in (('qa.example.com', 200), ('qa.example.com:8080', 200), ('docs.example.com', 200),
                           ('a.example', 200), ('b.example', 200), ('evil.example', 403)):
            r = s2.get('/api/v1/health', headers={'Host': host})
            check(f'--allow-host: {host} -> {want}', r.status == want, r)
    finally:
        s2.close()
    s3 = Server(binary, args=['--allow-host', '*'])
    try:
        s3.start()
        check("--allow-host '*' accepts any name", s3.get('/api/v1/health', headers={'Host': 'x.example'}).status
              == 200)
    finally:
        s3.close()


def test_input(s):
    s.post('/api/v1/kbs', {'name': 'laws'})
    # Encoded NUL bytes: refused, never cut at.
    r = s.get('/api/v1/kbs/laws%00x')
    check('laws%00x does not serve laws', r.status == 400 and r.error_code() == 'bad_request', r)
    r = s.get('/api/v1/kbs/laws%00x/documents')
    check('laws%00x/documents refused', r.status == 400, r)
    r = s.post('/api/v1/kbs/laws/documents?filename=a.md%00.pdf', b'# A\n\nText.\n')
    check('NUL in a query string refused', r.status == 400, r)
    r = s.post('/api/v1/kbs/laws/documents', b'# A\n\nText.\n', headers={'X-Filename': 'a.md%00.pdf'})
    check('NUL in X-Filename refused', r.status == 400, r)
    r = s.post('/api/v1/kbs', '{"name": "laws\\u0000x"}')
    check('\\u0000 in a JSON name refused', r.status == 400 and r.error_code() == 'invalid_json', r)
    check('no KB made by a cut name', s.get('/api/v1/kbs/laws').json()['documents'] == 0)

    # Invalid UTF-8 is never echoed into JSON.
    for path in ('/api/v1/kbs/%FF%FE', '/api/v1/kbs/%C0%AF/documents', '/api/v1/%ED%A0%80', '/nope/%E6%B3'):
        r = s.get(path)
        check(f'404 for {path} is valid JSON', r.status == 404 and valid_json(r), r.body)
    r = s.post('/api/v1/kbs', b'{"name": "\xff\xfe"}')
    check('invalid UTF-8 in a JSON body refused', r.status == 400 and valid_json(r), r.body)
    r = s.post('/api/v1/kbs/laws/retrieve', b'{"question": "\xe5\x8a"}')
    check('truncated UTF-8 in a question refused', r.status == 400 and valid_json(r), r.body)
    r = s.post('/api/v1/kbs/laws/documents', b'# Title\n\nArticle 1 caf\xe9 \xff\xfe text.\n',
               headers={'X-Filename': 'bad%FFname.md'})
    job = s.wait_job(r.json()['job']['id']) if r.status == 202 else {}
    check('a file with invalid UTF-8 in name and text is ingested', job.get('state') in ('ready', 'failed'), r)
    for path in ('/api/v1/kbs/laws/documents', '/api/v1/kbs/laws/jobs', f"/api/v1/jobs/{job.get('id')}"):
        r = s.get(path)
        check(f'{path} is valid JSON', r.status == 200 and valid_json(r), r.body[:300])
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': 'Article 1 text'})
    check('retrieve over it is valid JSON', r.status == 200 and valid_json(r), r.body[:300])

    # Strict JSON bodies.
    r = s.post('/api/v1/kbs', '{"name": "x1"}garbage')
    check('trailing junk refused', r.status == 400 and r.error_code() == 'invalid_json', r)
    check('...and nothing made', s.get('/api/v1/kbs/x1').status == 404)
    r = s.post('/api/v1/kbs', '{"name": "x2"} {"name": "x3"}')
    check('two JSON values refused', r.status == 400, r)
    check('trailing white space accepted', s.post('/api/v1/kbs', '{"name": "x4"}\r\n  ').status == 201)

    # Questions are capped.
    r = s.post('/api/v1/kbs/laws/retrieve', {'question': '问' * 4001})
    check('4001-character question refused', r.status == 413 and r.error_code() == 'question_too_long'
          and '4000' in r.json()['error']['message'], r)
    r = s.post('/api/v1/kbs/laws/ask', {'question': 'x' * 900_000})
    check('900 KB question refused', r.status == 413, r)
    check('4000 characters answered', s.post('/api/v1/kbs/laws/retrieve', {'question': '问' * 4000}).status == 200)
    r = s.post('/v1/chat/completions', {'model': 'laws', 'messages': [{'role': 'user', 'content': 'x' * 5000}]})
    check('chat: long question refused', r.status == 413 and r.error_code() == 'question_too_long', r)


def test_request_forms(s):
    """Targets that are not paths, repeated headers and repeated JSON names: a clear 400, never a silent close nor a
    second reading of the request (issue 29)."""
    port = s.port
    for target in (b'*', b'http://127.0.0.1/api/v1/health', b'http://127.0.0.1:%d/api/v1/health' % port,
                   b'http://evil.example/api/v1/kbs', b'https://127.0.0.1:%d/api/v1/kbs' % port):
        for method in (b'GET', b'POST'):
            r = raw_request(port, method + b' ' + target + b' HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n')
            check(f'{method.decode()} {target.decode()}: 400 JSON', r is not None and r.status == 400
                  and (r.strict_json() or {}).get('error', {}).get('code') == 'bad_request', r)
    r = raw_request(port, b'OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
    check('OPTIONS *: answered', r is not None and r.status in (200, 204, 400), r)
    r = raw_request(port, b'GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')
    check('a path is served as before', r is not None and r.status == 200, r)

    own = f'http://127.0.0.1:{port}'
    for method, body in ((b'GET', b''), (b'POST', b'{"name": "twice"}')):
        for first, second in ((own, 'http://evil.example'), ('http://evil.example', own)):
            r = raw_request(port, method + b' /api/v1/kbs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: %s\r\n'
                            b'Origin: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n'
                            b'Connection: close\r\n\r\n%s' % (port, first.encode(), second.encode(), len(body), body))
            check(f'{method.decode()} with two Origin headers ({first} first): 400', r is not None and r.status == 400
                  and 'Origin' in (r.strict_json() or {}).get('error', {}).get('message', ''), r)
    check('...and no KB made', s.get('/api/v1/kbs/twice').status == 404)

    for path, body in (('/api/v1/kbs', '{"name": "dup1", "name": "dup2"}'),
                       ('/api/v1/kbs', '{"name": "dup3", "n\\u0061me": "dup4"}'),
                       ('/api/v1/kbs/laws/retrieve', '{"question": "Article 1", "k": 1, "k": 50}'),
                       ('/api/v1/kbs/laws/ask', '{"question": "a", "options": {"x": 1, "x": 2}}')):
        r = s.post(path, body)
        check(f'a name twice in {body}: 400 invalid_json', r.status == 400 and r.error_code() == 'invalid_json'
              and 'twice' in r.json()['error']['message'], r)
    check('...and no KB made', all(s.get(f'/api/v1/kbs/dup{i}').status == 404 for i in range(1, 5)))
    check('healthy after them', s.get('/api/v1/health').status == 200)


def test_civetweb_errors(s):
    cases = [
        (b'GARBAGE\r\n\r\n', 400),
        (b'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ' + b'a' * 70000 + b'\r\n\r\n', 400),  # over 64 KiB
        (b'POST /api/v1/kbs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n', 411),
        (b'POST /api/v1/kbs HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n', 400),
        (b'GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n', 505),
        (b'GET nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 400),
    ]
    for data, status in cases:
        r = raw_request(s.port, data)
        ok = r is not None and r.status == status and r.headers.get('content-type', '').startswith('application/json')
        j = r.strict_json() if r else None
        check(f'CivetWeb error {status} is JSON ({data[:30]!r})',
              ok and isinstance(j, dict) and isinstance(j.get('error'), dict) and j['error'].get('code')
              and j['error'].get('message'), r)

    # A huge Content-Length: 413 at once, before a byte of the body.
    for path in ('/api/v1/kbs', '/api/v1/kbs/laws/documents?filename=a.pdf', '/api/v1/kbs/laws/ask'):
        t0 = time.time()
        r = raw_request(s.port, f'POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000000\r\n'
                                f'Content-Type: application/json\r\n\r\n'.encode(), timeout_s=10)
        dt = time.time() - t0
        check(f'huge Content-Length on {path}: 413 at once', r is not None and r.status == 413 and dt < 1.0
              and r.strict_json(), (r, dt))
    check('healthy after the errors', s.get('/api/v1/health').status == 200)


def test_ids(s):
    s.post('/api/v1/kbs', {'name': 'first'})
    s.post('/api/v1/kbs', {'name': 'second'})
    r = s.upload('first', DEMO_MD)
    job1 = s.wait_job(r.json()['job']['id'])
    doc1 = job1['document_id']
    cites = s.post('/api/v1/kbs/first/retrieve', {'question': 'termination', 'k': 50}).json()['results']
    old_clauses = sorted(c['clause_id'] for c in cites)
    check('clauses of the first document', old_clauses, cites)
    check('delete the document', s.delete(f'/api/v1/documents/{doc1}').status == 200)
    r = s.upload('second', DEMO_PDF)
    job2 = s.wait_job(r.json()['job']['id'])
    check('new job id', job2['id'] > job1['id'], (job1['id'], job2['id']))
    check('new document id', job2['document_id'] > doc1, job2)
    for cid in old_clauses:
        r = s.get(f'/api/v1/clauses/{cid}')
        check(f'old clause {cid} is 404, not another KB\'s clause', r.status == 404, r)
    check('the old document is 404', s.get(f'/api/v1/documents/{doc1}').status == 404)
    check('the old job is 404', s.get(f"/api/v1/jobs/{job1['id']}").status == 404
          or s.get(f"/api/v1/jobs/{job1['id']}").json().get('document_id') in (None, doc1))
    con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
    try:
        seq = dict(con.execute('SELECT name, seq FROM sqlite_sequence').fetchall())
    finally:
        con.close()
    check('sequences kept for every table', {'kbs', 'documents', 'clauses', 'jobs'} <= set(seq), seq)


def test_files(s):
    for suffix in ('', '-wal', '-shm'):
        p = os.path.join(s.data, 'clauseqa.db' + suffix)
        mode = stat.S_IMODE(os.stat(p).st_mode) if os.path.exists(p) else None
        check(f'clauseqa.db{suffix} is 0600', mode == 0o600, oct(mode) if mode is not None else 'missing')
    # The server runs under umask 0 (main): originals, page images and every folder are still private.
    docs = s.get('/api/v1/kbs/second/documents').json()['documents']
    r = s.get(f"/api/v1/documents/{docs[0]['id']}/pages/1.png?width=600")
    check('a page image rendered', r.status == 200, r)
    modes = {}
    for root, dirs, files in os.walk(s.data):
        for name in dirs + files:
            p = os.path.join(root, name)
            modes[os.path.relpath(p, s.data)] = (stat.S_IMODE(os.lstat(p).st_mode), name in dirs)
    modes['.'] = (stat.S_IMODE(os.stat(s.data).st_mode), True)
    check('originals and page images were written', any(k.startswith('files/') for k in modes)
          and any(k.startswith('cache/pages/') and k.endswith('.png') for k in modes), sorted(modes))
    loose = {k: oct(m) for k, (m, is_dir) in modes.items() if m != (0o700 if is_dir else 0o600)}
    check('under umask 0: every file 0600, every folder 0700', not loose, loose)


def test_temp_cleanup(binary):
    s = Server(binary)
    try:
        s.start()
        s.stop()
        files = os.path.join(s.data, 'files')
        stale = os.path.join(files, 'ab' * 32 + '.pdf.tmp.Zx81Qa')
        busy = os.path.join(files, 'cd' * 32 + '.pdf.tmp.Yq02Pb')
        page = os.path.join(s.data, 'cache', 'pages', '1-2-0-1000.png.tmp.Wq1234')
        for p in (stale, busy, page):
            open(p, 'wb').write(b'%PDF-1.4 partial')
            os.utime(p, (time.time() - 120, time.time() - 120))
        held = open(busy, 'rb')
        fcntl.flock(held, fcntl.LOCK_EX)  # a writer still at it (another process on the same data)
        s.start()
        check('leftover files/*.tmp.* removed at start', not os.path.exists(stale), os.listdir(files))
        check('leftover cache temp files removed', not os.path.exists(page))
        check('a temp file being written is kept', os.path.exists(busy))
        held.close()
    finally:
        s.close()


def main():
    binary = sys.argv[1]
    s = Server(binary)
    try:
        old_umask = os.umask(0)  # the server's files must not depend on it (test_files)
        try:
            s.start()
        finally:
            os.umask(old_umask)
        test_cors_default(s)
        test_host(s, binary)
        test_input(s)
        test_civetweb_errors(s)
        test_request_forms(s)
        test_ids(s)
        test_files(s)
        r = s.get('/metrics')
        check('refusals counted', 'status="403"' in r.body.decode() and 'status="413"' in r.body.decode())
        check('server exits 0', s.stop() == 0, s.log_text())
    finally:
        s.close()
    test_cors_allowed(binary)
    test_temp_cleanup(binary)
    T.finish()


if __name__ == '__main__':
    main()
