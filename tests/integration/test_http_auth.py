#!/usr/bin/python3
"""API keys over HTTP: open mode until the first key, then 401 without a valid key and 403 outside a key's KB or
role (admin / editor / reader, one KB or every KB); revocation; `clauseqa keys` on the command line; authentication
stays on when the last key is revoked, until `clauseqa keys open-mode on`.

usage: test_http_auth.py path/to/clauseqa"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks, Server  # noqa: E402

T = Checks('test_http_auth')
check = T.check


def create_key(s, *args):
    r = s.cli('keys', 'create', '--json', *args)
    if not check('keys create ' + ' '.join(args), r.returncode == 0, r.stderr):
        return None
    return json.loads(r.stdout)['key']


def test_auth_stays_on(s, keys, admin):
    """Revoking the last key does not reopen the server; only `keys open-mode on` does, and it is logged."""
    for k in keys:
        if not k['revoked']:
            s.cli('keys', 'revoke', str(k['id']))
    check('every key revoked', all(k['revoked'] for k in json.loads(s.cli('keys', 'list', '--json').stdout)['keys']))
    time.sleep(1.2)
    r = s.get('/api/v1/health', key=None)
    check('no key left: health still says auth', r.json()['auth'] is True, r)
    check('no key left: 401 without a key', s.get('/api/v1/kbs', key=None).status == 401)
    check('no key left: a KB cannot be deleted without a key', s.delete('/api/v1/kbs/laws', key=None).status == 401)
    check('...and the revoked admin key is refused', s.get('/api/v1/kbs', key=admin).status == 401)
    check('metrics: open mode 0', 'clauseqa_auth_open_mode 0' in s.get('/metrics').body.decode())
    r = s.cli('keys', 'open-mode')
    check('keys open-mode says authentication is on', r.returncode == 0 and 'authentication on' in r.stdout, r)

    r = s.cli('keys', 'open-mode', 'on')
    check('keys open-mode on', r.returncode == 0 and 'open-mode on' in r.stderr, r)
    time.sleep(1.2)
    check('open mode after the admin turned it on', s.get('/api/v1/health', key=None).json()['auth'] is False)
    check('open mode: no key needed', s.get('/api/v1/kbs', key=None).status == 200)
    check('the server logs the change', 'open mode ON' in s.log_text(), s.log_text()[-500:])
    check('keys open-mode says open', 'open mode' in s.cli('keys', 'open-mode').stdout)

    r = s.cli('keys', 'open-mode', 'off')
    check('keys open-mode off', r.returncode == 0, r)
    time.sleep(1.2)
    check('keys required again, with no key', s.get('/api/v1/kbs', key=None).status == 401)
    check('the server logs it', 'authentication ON' in s.log_text(), s.log_text()[-500:])
    key = create_key(s, '--role', 'reader', '--kb', 'laws')
    r = s.cli('keys', 'open-mode', 'on')
    check('open-mode on refused while a key is active', r.returncode == 1 and 'revoke' in r.stderr, r)
    check('the new key works', s.get('/api/v1/kbs/laws', key=key).status == 200)
    check('usage error', s.cli('keys', 'open-mode', 'maybe').returncode == 2)


def main():
    binary = sys.argv[1]
    s = Server(binary)
    try:
        s.start()
        check('open mode: no key needed', s.post('/api/v1/kbs', {'name': 'laws'}, key=None).status == 201)
        s.post('/api/v1/kbs', {'name': 'other'}, key=None)
        job = s.upload('laws', DEMO_PDF, key=None).json()['job']
        doc_id = s.wait_job(job['id'], key=None)['document_id']

        # CLI usage errors
        check('admin keys take no KB', s.cli('keys', 'create', '--role', 'admin', '--kb', 'laws').returncode == 2)
        check('reader keys need a KB', s.cli('keys', 'create', '--role', 'reader').returncode == 2)
        check('unknown role', s.cli('keys', 'create', '--role', 'root').returncode == 2)
        check('unknown action', s.cli('keys', 'rotate').returncode == 2)

        admin = create_key(s, '--role', 'admin', '--name', 'ops')
        reader = create_key(s, '--role', 'reader', '--kb', 'laws', '--name', 'office')
        editor = create_key(s, '--role', 'editor', '--kb', 'laws')
        everything = create_key(s, '--role', 'reader', '--kb', '*')
        time.sleep(1.2)  # the server re-reads "are there keys?" at most once a second

        r = s.get('/api/v1/health', key=None)
        check('health is public and says auth is on', r.status == 200 and r.json()['auth'] is True, r)
        check('the page is public', s.get('/', key=None).status == 200)
        check('metrics are public', s.get('/metrics', key=None).status == 200)
        r = s.get('/api/v1/kbs', key=None)
        check('no key: 401', r.status == 401 and r.error_code() == 'unauthorized', r)
        check('401 names the scheme', (r.header('WWW-Authenticate') or '').startswith('Bearer'), r.headers)
        check('wrong scheme: 401', s.get('/api/v1/kbs', key=None, headers={'Authorization': 'Basic YTpi'}).status == 401)
        check('unknown key: 401', s.get('/api/v1/kbs', key='cq_' + '0' * 40).status == 401)
        check('garbage key: 401', s.get('/api/v1/kbs', key='x' * 300).status == 401)
        check('no key on ask: 401', s.post('/api/v1/kbs/laws/ask', {'question': 'x'}, key=None).status == 401)
        check('no key on chat: 401', s.post('/v1/chat/completions', {'model': 'laws', 'messages': []}, key=None).status
              == 401)

        # reader of laws
        r = s.get('/api/v1/kbs', key=reader)
        check('reader lists its KB only', r.status == 200 and [k['name'] for k in r.json()['kbs']] == ['laws'], r)
        r = s.post('/api/v1/kbs/laws/retrieve', {'question': '劳动法第四十四条'}, key=reader)
        check('reader retrieves', r.status == 200 and r.json()['results'][0]['clause'] == '第四十四条', r)
        r = s.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'}, key=reader)
        check('reader asks', r.status == 200, r)
        clause_id = r.json()['citations'][0]['clause_id']
        check('reader reads a document', s.get(f'/api/v1/documents/{doc_id}', key=reader).status == 200)
        check('reader reads a clause', s.get(f'/api/v1/clauses/{clause_id}', key=reader).status == 200)
        check('reader sees page images',
              s.get(f'/api/v1/documents/{doc_id}/pages/4.png?clause={clause_id}', key=reader).status == 200)
        check('reader downloads', s.get(f'/api/v1/documents/{doc_id}/original', key=reader).status == 200)
        r = s.post('/api/v1/kbs/other/retrieve', {'question': 'x'}, key=reader)
        check('reader outside its KB: 403', r.status == 403 and r.error_code() == 'forbidden', r)
        check('reader cannot upload', s.upload('laws', DEMO_MD, key=reader).status == 403)
        check('reader cannot delete', s.delete(f'/api/v1/documents/{doc_id}', key=reader).status == 403)
        check('reader cannot create KBs', s.post('/api/v1/kbs', {'name': 'x'}, key=reader).status == 403)
        check('reader cannot delete KBs', s.delete('/api/v1/kbs/laws', key=reader).status == 403)
        r = s.get('/v1/models', key=reader)
        check('reader models', r.status == 200 and [m['id'] for m in r.json()['data']] == ['laws'], r)
        r = s.post('/v1/chat/completions', {'model': 'other', 'messages': [{'role': 'user', 'content': 'x'}]},
                   key=reader)
        check('reader chat outside its KB: 403', r.status == 403, r)

        # editor of laws
        r = s.upload('laws', DEMO_MD, key=editor)
        check('editor uploads', r.status == 202, r)
        md_doc = s.wait_job(r.json()['job']['id'], key=editor)
        check('editor follows its job', md_doc.get('state') == 'ready', md_doc)
        check('reader follows the jobs of its KB', s.get(f"/api/v1/jobs/{md_doc['id']}", key=reader)
              .status == 200)
        check('editor deletes', s.delete(f"/api/v1/documents/{md_doc['document_id']}", key=editor).status == 200)
        check('editor outside its KB: 403', s.upload('other', DEMO_MD, key=editor).status == 403)
        check('editor cannot create KBs', s.post('/api/v1/kbs', {'name': 'x'}, key=editor).status == 403)

        # reader of every KB
        check('reader * reads other', s.post('/api/v1/kbs/other/retrieve', {'question': 'x'}, key=everything).status
              == 200)
        check('reader * lists both', len(s.get('/api/v1/kbs', key=everything).json()['kbs']) == 2)
        check('reader * cannot upload', s.upload('other', DEMO_MD, key=everything).status == 403)

        # a grant is bound to the KB's id, not its name (issue 29 item 10)
        r = s.cli('keys', 'create', '--role', 'reader', '--kb', 'does-not-exist')
        check('a key for a KB that does not exist is refused', r.returncode == 1 and
              "no knowledge base named 'does-not-exist'" in r.stderr, r)
        r = s.cli('keys', 'create', '--role', 'editor', '--kb', 'doomed')
        check('a KB to be made later is refused too', r.returncode == 1, r)
        check('admin creates doomed', s.post('/api/v1/kbs', {'name': 'doomed'}, key=admin).status == 201)
        doomed = create_key(s, '--role', 'editor', '--kb', 'doomed')
        check("doomed's key reads doomed", s.post('/api/v1/kbs/doomed/retrieve', {'question': 'x'}, key=doomed).status
              == 200)
        check('admin deletes doomed', s.delete('/api/v1/kbs/doomed', key=admin).status == 200)
        check('admin creates a new doomed', s.post('/api/v1/kbs', {'name': 'doomed'}, key=admin).status == 201)
        r = s.post('/api/v1/kbs/doomed/retrieve', {'question': 'x'}, key=doomed)
        check("the old key does not reach the new KB of the same name", r.status == 403, r)
        check('...nor upload to it', s.upload('doomed', DEMO_MD, key=doomed).status == 403)
        r = s.get('/api/v1/kbs', key=doomed)
        check('...and lists no KB', r.status == 200 and r.json()['kbs'] == [], r)
        listed = [k for k in json.loads(s.cli('keys', 'list', '--json').stdout)['keys'] if k['kb'] == 'doomed']
        check('keys list flags the key whose KB was deleted', [k['kb_deleted'] for k in listed] == [True], listed)
        check('admin deletes the new doomed', s.delete('/api/v1/kbs/doomed', key=admin).status == 200)

        # admin
        check('admin creates a KB', s.post('/api/v1/kbs', {'name': 'tmp'}, key=admin).status == 201)
        check('admin deletes a KB', s.delete('/api/v1/kbs/tmp', key=admin).status == 200)
        check('admin uploads anywhere', s.upload('other', DEMO_MD, key=admin).status == 202)

        # keys list and revoke (the four above and doomed's)
        r = s.cli('keys', 'list', '--json')
        keys = json.loads(r.stdout)['keys'] if r.returncode == 0 else []
        check('keys listed', len(keys) == 5 and keys[0]['role'] == 'admin' and keys[1]['kb'] == 'laws', keys)
        check('no secrets listed', all(k['prefix'] and 'key' not in k for k in keys), keys)
        check('used keys have a time', keys and keys[1]['last_used_at'] > 0, keys)
        office = [k for k in keys if k['name'] == 'office']
        r = s.cli('keys', 'revoke', str(office[0]['id'])) if office else None
        check('revoke', r is not None and r.returncode == 0, r)
        check('revoked key: 401', s.post('/api/v1/kbs/laws/retrieve', {'question': 'x'}, key=reader).status == 401)
        check('revoke again fails', s.cli('keys', 'revoke', str(office[0]['id'])).returncode == 1 if office else False)
        check('revoke nothing', s.cli('keys', 'revoke', '999').returncode == 1)
        r = s.cli('keys', 'list')
        check('text list', r.returncode == 0 and 'revoked' in r.stdout and 'office' in r.stdout, r.stdout)
        check('database keeps only hashes', reader and reader.encode() not in open(os.path.join(s.data, 'clauseqa.db'),
                                                                                   'rb').read())
        m = s.get('/metrics').body.decode()
        check('401 and 403 counted', 'status="401"' in m and 'status="403"' in m)
        test_auth_stays_on(s, keys, admin)
        check('server exits 0', s.stop() == 0, s.log_text())
    finally:
        s.close()

    # Open mode can be refused: no keys and --no-open-mode means every request needs one.
    s = Server(binary, args=['--no-open-mode'])
    try:
        s.start()
        check('--no-open-mode: 401 without keys', s.get('/api/v1/kbs', key=None).status == 401)
        check('--no-open-mode: health says auth', s.get('/api/v1/health', key=None).json()['auth'] is True)
    finally:
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
