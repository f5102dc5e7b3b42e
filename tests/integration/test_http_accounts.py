#!/usr/bin/python3
"""Sign-in over HTTP (issue 30): POST /api/v1/login gives an HttpOnly, SameSite=Strict session cookie; GET
/api/v1/me says who is signed in; POST /api/v1/logout ends the session. A session authorises exactly as a key of
the same role and KBs (every role x the routes, compared with keys); a cookie cannot be used cross-site; a wrong
password and an unknown user get the same 401 and change nothing; failed sign-ins are held back (429 with
Retry-After, backing off) per user and per client address; a new password or the user's removal ends the sessions;
a user's conversations are the user's.

usage: test_http_accounts.py path/to/clauseqa"""
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks, Server, multipart  # noqa: E402

T = Checks('test_http_accounts')
check = T.check


class Browser:
    """A page of the server's own origin: sends the session cookie and the Origin a browser sends."""

    def __init__(self, s, cookie=None, origin='own'):
        self.s, self.cookie = s, cookie
        self.origin = f'http://127.0.0.1:{s.port}' if origin == 'own' else origin

    def headers(self, extra=None):
        h = {}
        if self.cookie:
            h['Cookie'] = 'cq_session=' + self.cookie
        if self.origin:
            h['Origin'] = self.origin
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, headers=None):
        return self.s.request(method, path, body, headers=self.headers(headers), key=None)

    def get(self, path, **kw):
        return self.request('GET', path, **kw)

    def post(self, path, body=None, **kw):
        return self.request('POST', path, body, **kw)

    def delete(self, path, **kw):
        return self.request('DELETE', path, **kw)

    def upload(self, kb, path):
        body, ctype = multipart({}, ('file', os.path.basename(path), open(path, 'rb').read()))
        return self.post(f'/api/v1/kbs/{kb}/documents', body, headers={'Content-Type': ctype})


class KeyClient:
    def __init__(self, s, key):
        self.s, self.key = s, key

    def request(self, method, path, body=None, headers=None):
        return self.s.request(method, path, body, headers=headers, key=self.key)

    def get(self, path, **kw):
        return self.request('GET', path, **kw)

    def post(self, path, body=None, **kw):
        return self.request('POST', path, body, **kw)

    def delete(self, path, **kw):
        return self.request('DELETE', path, **kw)

    def upload(self, kb, path):
        body, ctype = multipart({}, ('file', os.path.basename(path), open(path, 'rb').read()))
        return self.post(f'/api/v1/kbs/{kb}/documents', body, headers={'Content-Type': ctype})


def set_cookie(r):
    return r.header('Set-Cookie') or ''


def cookie_value(r):
    c = set_cookie(r)
    return c.split(';')[0].split('=', 1)[1] if c.startswith('cq_session=') else None


def login(s, user, password, headers=None):
    h = {'Origin': f'http://127.0.0.1:{s.port}'}
    h.update(headers or {})
    return s.post('/api/v1/login', {'user': user, 'password': password}, key=None, headers=h)


def add_user(s, name, password, *args):
    r = s.cli('user', 'add', name, *args, input_text=password + '\n')
    check(f'user add {name}', r.returncode == 0, r.stderr)


def create_key(s, *args):
    r = s.cli('keys', 'create', '--json', *args)
    check('keys create ' + ' '.join(args), r.returncode == 0, r.stderr)
    return json.loads(r.stdout)['key']


def db_value(s, sql):
    con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def outcome(r):
    return 'denied' if r.status in (401, 403) else 'allowed'


def test_roles_as_keys(s, doc_id):
    """Every role x the routes: a session and a key of the same role and KBs get the same answers."""
    pairs = [('root', 'admin', []), ('ed', 'editor', ['laws']), ('rd', 'reader', ['laws']),
             ('both', 'reader', ['laws', 'other'])]
    for name, role, kbs in pairs:
        args = ['--role', role] + sum((['--kb', k] for k in kbs), [])
        add_user(s, name, 'password of ' + name, *args)
    keys = {name: create_key(s, '--role', role, *sum((['--kb', k] for k in kbs), [])) for name, role, kbs in pairs}
    time.sleep(1.2)
    for name, role, kbs in pairs:
        r = login(s, name, 'password of ' + name)
        if not check(f'{name} signs in', r.status == 200, r):
            continue
        b, k = Browser(s, cookie_value(r)), KeyClient(s, keys[name])
        me = b.get('/api/v1/me').json()
        check(f'{name}: /me', me and me['name'] == name and me['role'] == role and me['via'] == 'session' and
              me['kbs'] == ('*' if role == 'admin' else kbs), me)
        same = [('GET', '/api/v1/kbs', None), ('GET', '/api/v1/kbs/laws', None), ('GET', '/api/v1/kbs/other', None),
                ('GET', '/api/v1/kbs/laws/documents', None), ('GET', '/api/v1/kbs/other/documents', None),
                ('GET', '/api/v1/kbs/laws/jobs', None), ('GET', f'/api/v1/documents/{doc_id}', None),
                ('GET', f'/api/v1/documents/{doc_id}/search?q=%E5%8A%B3', None),
                ('POST', '/api/v1/kbs/laws/retrieve', {'question': '第四十四条'}),
                ('POST', '/api/v1/kbs/other/retrieve', {'question': '第四十四条'}),
                ('POST', '/api/v1/kbs/laws/ask', {'question': '第四十四条', 'store': False}),
                ('POST', '/api/v1/kbs/other/ask', {'question': 'x', 'store': False}),
                ('GET', '/api/v1/conversations?all=1', None), ('GET', '/v1/models', None),
                ('GET', '/api/v1/audit?limit=1', None), ('GET', '/api/v1/audit?before=x', None),
                ('DELETE', '/api/v1/kbs/no-such-kb', None), ('POST', '/api/v1/kbs', {'name': ''}),
                ('DELETE', '/api/v1/documents/999999', None),
                # the admin API (test_http_admin.py has every route): admins 200 or 400, the others 403
                ('GET', '/api/v1/users', None), ('GET', '/api/v1/groups', None), ('GET', '/api/v1/keys', None),
                ('GET', '/api/v1/kbs/laws/grants', None), ('POST', '/api/v1/groups', {'name': ''}),
                ('PATCH', '/api/v1/users/nobody', {'role': 'reader'}), ('DELETE', '/api/v1/keys/999999', None)]
        for method, path, body in same:
            rb, rk = b.request(method, path, body), k.request(method, path, body)
            check(f'{name}: {method} {path}: as a key ({rk.status})', rb.status == rk.status, (rb, rk))
        kb_names = sorted(x['name'] for x in (b.get('/api/v1/kbs').json() or {}).get('kbs', []))
        check(f'{name}: lists its KBs', kb_names == (['laws', 'other'] if role == 'admin' else sorted(kbs)), kb_names)
        # what changes something: allowed or refused alike (each on its own copy)
        for client in (b, k):
            r = client.upload('laws', DEMO_MD)
            want = role in ('admin', 'editor')
            check(f'{name} ({type(client).__name__}): upload to laws {"allowed" if want else "refused"}',
                  outcome(r) == ('allowed' if want else 'denied'), r)
            if r.status == 202:
                job = s.wait_job(r.json()['job']['id'], key=keys['root'])
                r = client.delete(f"/api/v1/documents/{job['document_id']}")
                check(f'{name}: deletes what it uploaded', r.status == 200, r)
            r = client.upload('other', DEMO_MD)
            check(f'{name}: upload to other', outcome(r) == ('allowed' if role == 'admin' else 'denied'), r)
            if r.status == 202:
                job = s.wait_job(r.json()['job']['id'], key=keys['root'])
                client.delete(f"/api/v1/documents/{job['document_id']}")
            if role == 'reader':
                r = client.delete(f'/api/v1/documents/{doc_id}')
                check(f'{name}: a reader cannot delete', r.status == 403, r)
        r = b.post('/api/v1/logout')
        check(f'{name}: signs out', r.status == 200 and r.json()['signed_out'] is True, r)
        check(f'{name}: the cookie is cleared', 'Max-Age=0' in set_cookie(r), set_cookie(r))
        check(f'{name}: the old cookie is refused', b.get('/api/v1/me').status == 401)
    return keys


def test_cookie_and_cross_site(s):
    add_user(s, 'carol', 'carol password', '--role', 'editor', '--kb', 'laws')
    r = login(s, 'carol', 'carol password')
    check('sign-in: 200', r.status == 200, r)
    c = set_cookie(r)
    attrs = [a.strip() for a in c.split(';')]
    check('cookie: HttpOnly, SameSite=Strict, Path=/', {'HttpOnly', 'SameSite=Strict', 'Path=/'} <= set(attrs), c)
    check('cookie: not Secure over plain HTTP', 'Secure' not in attrs, c)
    token = cookie_value(r)
    check('cookie: a 256-bit token', token and token.startswith('cqs_') and len(token) == 68, token)
    check('the token is not in the body', token and token.encode() not in r.body, r)
    check('only its hash is stored', token and token.encode() not in open(os.path.join(s.data, 'clauseqa.db'),
                                                                          'rb').read())
    body = r.json()
    check('sign-in answers who', body['name'] == 'carol' and body['role'] == 'editor' and body['kbs'] == ['laws'], body)
    r = login(s, 'carol', 'carol password', headers={'X-Forwarded-Proto': 'https'})
    check('cookie: Secure behind a TLS proxy', 'Secure' in [a.strip() for a in set_cookie(r).split(';')], r)

    b = Browser(s, token)
    check('cookie: GET /me', b.get('/api/v1/me').json()['via'] == 'session')
    # cross-site: the cookie alone must not change anything from another page
    foreign = Browser(s, token, origin='http://evil.example')
    r = foreign.post('/api/v1/kbs', {'name': 'x'})
    check('cross-site POST (Origin): 403', r.status == 403, r)
    r = foreign.upload('laws', DEMO_MD)
    check('cross-site upload (Origin): 403', r.status == 403, r)
    nameless = Browser(s, token, origin=None)
    r = nameless.post('/api/v1/kbs/laws/ask', {'question': 'x'}, headers={'Sec-Fetch-Site': 'cross-site'})
    check('cross-site POST (Sec-Fetch-Site): 403 cross_site', r.status == 403 and r.error_code() == 'cross_site', r)
    r = nameless.delete('/api/v1/documents/1', headers={'Sec-Fetch-Site': 'same-site'})
    check('a sibling subdomain (same-site) is not the page: 403', r.status == 403 and r.error_code() == 'cross_site',
          r)
    r = nameless.post('/api/v1/kbs/laws/ask', {'question': 'x'})
    check('a cookie POST without Origin or Sec-Fetch-Site: 403', r.status == 403 and r.error_code() == 'cross_site',
          r)
    r = nameless.post('/api/v1/kbs/laws/retrieve', {'question': '第四十四条'},
                      headers={'Sec-Fetch-Site': 'same-origin'})
    check('the page itself (Sec-Fetch-Site: same-origin): allowed', r.status == 200, r)
    check('a cross-site GET reads nothing it may not (reads are not changes)',
          foreign.get('/api/v1/me').status == 200)
    r = s.post('/api/v1/login', {'user': 'carol', 'password': 'carol password'}, key=None,
               headers={'Sec-Fetch-Site': 'cross-site'})
    check('sign-in from another site: 403', r.status == 403 and not set_cookie(r), r)
    r = s.post('/api/v1/login', {'user': 'carol', 'password': 'carol password'}, key=None,
               headers={'Origin': 'http://evil.example'})
    check('sign-in from another origin: 403', r.status == 403, r)
    # a key is not held to the page's origin
    return b


def test_wrong_and_unknown(s):
    before = db_value(s, "SELECT coalesce(last_login_at, 0) || '/' || password_hash FROM users WHERE name = 'carol'")
    sessions = db_value(s, 'SELECT count(*) FROM sessions')
    a = login(s, 'carol', 'not her password')
    b = login(s, 'nobody-here', 'carol password')
    check('wrong password: 401', a.status == 401 and a.error_code() == 'unauthorized', a)
    check('unknown user: the same 401', b.status == 401 and a.json() == b.json(), (a, b))
    check('no cookie for a failure', not set_cookie(a) and not set_cookie(b))
    check('a failure changes nothing', db_value(s, "SELECT coalesce(last_login_at, 0) || '/' || password_hash FROM "
                                                   "users WHERE name = 'carol'") == before and
          db_value(s, 'SELECT count(*) FROM sessions') == sessions)
    for body in ({'user': 'carol'}, {'password': 'x'}, {'user': 5, 'password': 'x'}, {'user': '', 'password': 'x'}):
        r = s.post('/api/v1/login', body, key=None)
        check(f'malformed sign-in {body}: 400', r.status == 400, r)
    check('GET /api/v1/login: 405', s.get('/api/v1/login', key=None).status == 405)
    check('no session: /me 401', s.get('/api/v1/me', key=None).status == 401)
    r = s.get('/api/v1/me', key=None, headers={'Cookie': 'cq_session=cqs_' + '0' * 64})
    check('a forged cookie: 401, and the browser is told to drop it', r.status == 401 and 'Max-Age=0' in set_cookie(r),
          r)


def test_rate_limit(s):
    add_user(s, 'dave', 'dave password', '--role', 'reader', '--kb', 'laws')
    addr = {'X-Forwarded-For': '203.0.113.5'}
    statuses = [login(s, 'dave', 'wrong password', headers=addr).status for _ in range(5)]
    check('5 failures: 401 each', statuses == [401] * 5, statuses)
    r = login(s, 'dave', 'wrong password', headers=addr)
    check('the 6th: 429 too_many_sign_ins', r.status == 429 and r.error_code() == 'too_many_sign_ins', r)
    first = int(r.header('Retry-After') or 0)
    check('with Retry-After', 1 <= first <= 2, r.headers)
    r = login(s, 'dave', 'dave password', headers={'X-Forwarded-For': '203.0.113.99'})
    check('held back by name, from any address, the right password too', r.status == 429, r)
    time.sleep(first + 0.2)
    r = login(s, 'dave', 'wrong password', headers=addr)
    check('after the wait: tried again (401)', r.status == 401, r)
    r = login(s, 'dave', 'dave password', headers=addr)
    second = int(r.header('Retry-After') or 0)
    check('another failure: the wait doubles', r.status == 429 and second >= 2 * first - 1 and second > first, r)
    time.sleep(second + 0.2)
    r = login(s, 'dave', 'dave password', headers=addr)
    check('after the wait, the right password signs in', r.status == 200, r)
    check('the failed sign-ins are logged', 'failed sign-in of dave from 203.0.113.5' in s.log_text())
    # unknown names count the same (no enumeration)
    statuses = [login(s, 'ghost', 'x' * 10).status for _ in range(6)]
    check('an unknown name is held back the same way', statuses == [401] * 5 + [429], statuses)
    # per address: 20 failures of different names from one address hold that address back
    spray = {'X-Forwarded-For': '198.51.100.7'}
    statuses = [login(s, f'spray{i}', 'wrong password', headers=spray).status for i in range(20)]
    check('20 names from one address: 401 each', statuses == [401] * 20, statuses)
    r = login(s, 'carol', 'carol password', headers=spray)
    check('then that address is held back', r.status == 429 and int(r.header('Retry-After') or 0) >= 1, r)
    r = login(s, 'carol', 'carol password', headers={'X-Forwarded-For': '198.51.100.8'})
    check('...not another address', r.status == 200, r)
    m = s.get('/metrics').body.decode()
    check('429 counted on the sign-in route', 'route="/api/v1/login",status="429"' in m)


def test_sessions_end(s, carol):
    sid = Browser(s, cookie_value(login(s, 'carol', 'carol password')))
    check('a second session', sid.get('/api/v1/me').status == 200)
    r = s.cli('user', 'passwd', 'carol', input_text='carol new password\n')
    check('passwd', r.returncode == 0, r.stderr)
    check('a new password ends the sessions', carol.get('/api/v1/me').status == 401 and
          sid.get('/api/v1/me').status == 401)
    check('the old password no longer signs in', login(s, 'carol', 'carol password').status == 401)
    r = login(s, 'carol', 'carol new password')
    check('the new one does', r.status == 200, r)
    b = Browser(s, cookie_value(r))
    r = s.cli('user', 'set', 'carol', '--role', 'reader', '--kb', 'other')
    check('user set', r.returncode == 0, r.stderr)
    me = b.get('/api/v1/me').json()
    check('the session follows the new grant', me['role'] == 'reader' and me['kbs'] == ['other'], me)
    check('...at once', b.upload('laws', DEMO_MD).status == 403)
    r = s.cli('user', 'remove', 'carol')
    check('user remove', r.returncode == 0, r.stderr)
    check('removal ends the session', b.get('/api/v1/me').status == 401)


def test_conversations(s, keys, open_conv):
    add_user(s, 'erin', 'erin password', '--role', 'reader', '--kb', 'laws')
    add_user(s, 'frank', 'frank password', '--role', 'reader', '--kb', 'laws')
    erin = Browser(s, cookie_value(login(s, 'erin', 'erin password')))
    frank = Browser(s, cookie_value(login(s, 'frank', 'frank password')))
    r = erin.post('/api/v1/kbs/laws/ask', {'question': '第四十四条'})
    conv = (r.json() or {}).get('conversation_id')
    check("erin's question is kept", r.status == 200 and conv, r)
    mine = erin.get('/api/v1/conversations').json()['conversations']
    check('erin lists it', [c['id'] for c in mine] == [conv], mine)
    check('it is hers', mine and mine[0].get('owner_user_id') == db_value(s, "SELECT id FROM users WHERE name = "
                                                                             "'erin'"), mine)
    check('frank does not see it', frank.get('/api/v1/conversations').json()['conversations'] == [])
    check('frank cannot open it', frank.get(f'/api/v1/conversations/{conv}').status == 404)
    check('frank cannot continue it', frank.post('/api/v1/kbs/laws/ask', {'question': 'x', 'conversation_id': conv})
          .status == 404)
    check('frank cannot delete it', frank.delete(f'/api/v1/conversations/{conv}').status == 404)
    key_reader = KeyClient(s, create_key(s, '--role', 'reader', '--kb', 'laws'))
    time.sleep(1.2)
    check('nor a key', conv not in [c['id'] for c in key_reader.get('/api/v1/conversations').json()['conversations']])
    admin = KeyClient(s, keys['root'])
    every = admin.get('/api/v1/conversations?all=1').json()['conversations']
    check('an admin sees it with all=1', conv in [c['id'] for c in every], every)
    check('erin deletes it', erin.delete(f'/api/v1/conversations/{conv}').status == 200)
    # those made before sign-in was turned on stay on the admins' own lists (they vanished from every page)
    check('a reader does not see the open-mode conversation',
          open_conv not in [c['id'] for c in erin.get('/api/v1/conversations').json()['conversations']])
    root = Browser(s, cookie_value(login(s, 'root', 'password of root')))
    listed = {c['id']: c for c in root.get('/api/v1/conversations').json()['conversations']}
    check("an admin's own list keeps it, marked", open_conv in listed and listed[open_conv]['before_sign_in'] is True,
          listed)
    check('...and the admin opens it', root.get(f'/api/v1/conversations/{open_conv}').status == 200)
    listed = {c['id']: c for c in admin.get('/api/v1/conversations').json()['conversations']}
    check('an admin key too', open_conv in listed, listed)


def test_audit(s, keys):
    """Who signed in (or failed), uploaded, deleted, changed a user or a key: GET /api/v1/audit, admins only."""
    admin = KeyClient(s, keys['root'])
    root = Browser(s, cookie_value(login(s, 'root', 'password of root', headers={'X-Forwarded-For': '192.0.2.44'})))
    check('an admin user makes a KB', root.post('/api/v1/kbs', {'name': 'audited'}).status == 201)
    check('...and deletes it', root.delete('/api/v1/kbs/audited').status == 200)
    r = admin.get('/api/v1/audit?limit=1000')
    entries = (r.json() or {}).get('entries', [])
    check('GET /api/v1/audit', r.status == 200 and entries, r)
    actions = {e['action'] for e in entries}
    want = {'sign_in', 'sign_in_failed', 'upload', 'document_delete', 'kb_create', 'kb_delete', 'user_add',
            'user_passwd', 'user_set', 'user_remove', 'key_create'}
    check('every kind of change is there', want <= actions, sorted(actions))
    check('newest first', [e['id'] for e in entries] == sorted((e['id'] for e in entries), reverse=True))
    made = [e for e in entries if e['action'] == 'kb_create']
    check('who, what, where, from where', made and made[0]['actor'] == {'kind': 'user', 'id': made[0]['actor']['id'],
                                                                         'name': 'root'} and
          made[0]['kb'] == 'audited' and made[0]['client'] == '127.0.0.1' and made[0]['at'] > 0, made)
    signed = [e for e in entries if e['action'] == 'sign_in' and e['client'] == '192.0.2.44']
    check('a sign-in, with the client behind the proxy', signed and signed[0]['actor']['name'] == 'root', signed)
    failed = [e for e in entries if e['action'] == 'sign_in_failed' and e['actor']['name'] == 'nobody-here']
    check('a failed sign-in names the name tried', failed and failed[0]['actor']['kind'] == 'anonymous', failed)
    uploads = [e for e in entries if e['action'] == 'upload' and e['actor']['name'] == 'ed']
    check("the editor's upload (session) names the file and job", uploads and uploads[0]['kb'] == 'laws' and
          uploads[0]['target'].startswith('sample-services-agreement.md (job '), uploads)
    cli = [e for e in entries if e['action'] == 'user_add']
    check('the command line is an actor too', cli and cli[0]['actor']['kind'] == 'cli' and cli[0]['client'] is None and
          cli[0]['target'].startswith('user '), cli)
    check('no password or token in the trail', all('password' not in json.dumps(e) and 'cqs_' not in json.dumps(e)
                                                    for e in entries))
    # pages and one action
    r = admin.get('/api/v1/audit?limit=2')
    page = r.json()
    check('a page of 2 with the next one', len(page['entries']) == 2 and page['next_before'] == page['entries'][1]['id'],
          page)
    r = admin.get(f"/api/v1/audit?limit=2&before={page['next_before']}")
    check('the next page: older entries', r.status == 200 and all(e['id'] < page['next_before'] for e in
                                                                   r.json()['entries']), r)
    r = admin.get('/api/v1/audit?action=kb_delete')
    check('one action', r.status == 200 and {e['action'] for e in r.json()['entries']} == {'kb_delete'}, r)
    check('limit out of range: 400', admin.get('/api/v1/audit?limit=0').status == 400)
    check('readers may not read it', KeyClient(s, keys['rd']).get('/api/v1/audit').status == 403)
    check('nor editors', KeyClient(s, keys['ed']).get('/api/v1/audit').status == 403)
    check('nor anyone unknown', s.get('/api/v1/audit', key=None).status == 401)


def main():
    s = Server(sys.argv[1])
    try:
        s.start()
        check('open mode: /me is the open admin', s.get('/api/v1/me', key=None).json()['via'] == 'open')
        s.post('/api/v1/kbs', {'name': 'laws'}, key=None)
        s.post('/api/v1/kbs', {'name': 'other'}, key=None)
        doc_id = s.wait_job(s.upload('laws', DEMO_PDF, key=None).json()['job']['id'], key=None)['document_id']
        r = login(s, 'nobody', 'any password')
        check('open mode, no users: sign-in fails plainly', r.status == 401, r)
        r = s.post('/api/v1/kbs/laws/ask', {'question': '第四十四条'}, key=None)
        open_conv = (r.json() or {}).get('conversation_id')
        check('a conversation made before sign-in is turned on', r.status == 200 and open_conv, r)
        keys = test_roles_as_keys(s, doc_id)
        check('health says auth is on', s.get('/api/v1/health', key=None).json()['auth'] is True)
        carol = test_cookie_and_cross_site(s)
        test_wrong_and_unknown(s)
        test_conversations(s, keys, open_conv)
        test_rate_limit(s)
        test_sessions_end(s, carol)
        test_audit(s, keys)
        check('server exits 0', s.stop() == 0, s.log_text())
    finally:
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
