#!/usr/bin/python3
"""The admin API over HTTP (issue 30): users (create with a password, list, change role and KBs, disable, delete,
reset the password), groups and their members, KB grants to users and groups, API keys (create: the secret once;
list; revoke). Every role x every route: admins (a user and a key) may, editors and readers get 403, no one 401.
Each change is in the audit trail; bad input gets 400/404/409 with the reason and changes nothing; a group's rights
reach its members' sessions at their next request; an admin cannot remove or disable themself; the sign-in limiter
(held in each node's memory) still holds back a user's failed sign-ins.

usage: test_http_admin.py path/to/clauseqa"""
import os
import sqlite3
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import Checks, Server  # noqa: E402

T = Checks('test_http_admin')
check = T.check


def q(name):
    return urllib.parse.quote(name)


class Session:
    def __init__(self, s, user, password):
        self.s = s
        r = s.post('/api/v1/login', {'user': user, 'password': password}, key=None,
                   headers={'Origin': f'http://127.0.0.1:{s.port}'})
        self.status = r.status
        c = r.header('Set-Cookie') or ''
        self.cookie = c.split(';')[0].split('=', 1)[1] if c.startswith('cq_session=') else ''

    def request(self, method, path, body=None):
        return self.s.request(method, path, body, key=None,
                              headers={'Cookie': 'cq_session=' + self.cookie, 'Origin': f'http://127.0.0.1:{self.s.port}'})


class Key:
    def __init__(self, s, key):
        self.s, self.key = s, key

    def request(self, method, path, body=None):
        return self.s.request(method, path, body, key=self.key)


def db(s, sql):
    con = sqlite3.connect(os.path.join(s.data, 'clauseqa.db'))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def state(s):
    """What a refused request must leave as it was."""
    return (db(s, 'SELECT name, role, coalesce(kb, ""), password_hash, coalesce(disabled_at, 0) FROM users ORDER BY id'),
            db(s, 'SELECT name, role, coalesce(kb, "") FROM groups ORDER BY id'),
            db(s, 'SELECT * FROM group_members ORDER BY group_id, user_id'),
            db(s, 'SELECT subject, subject_id, kb FROM kb_grants ORDER BY 1, 2, 3'),
            db(s, 'SELECT id, coalesce(revoked_at, 0) FROM api_keys ORDER BY id'))


def refused(s, who, method, path, body, status, message):
    before = state(s)
    r = who.request(method, path, body)
    msg = ((r.json() or {}).get('error') or {}).get('message', '')
    check(f'{method} {path} {body}: {status} "{message}"', r.status == status and message in msg, r)
    check(f'{method} {path}: nothing changed', state(s) == before)
    return r


def test_roles(s, admin, admin_key, editor, editor_key, reader, reader_key):
    """Every role x every admin route (the request as an admin would make it, on things that exist)."""
    routes = [('GET', '/api/v1/users', None), ('POST', '/api/v1/users', {'name': 'm1', 'password': 'x'}),
              ('GET', '/api/v1/users/ed', None), ('PATCH', '/api/v1/users/ed', {'role': 'reader'}),
              ('DELETE', '/api/v1/users/ed', None), ('PUT', '/api/v1/users/ed/password', {'password': 'p'}),
              ('GET', '/api/v1/groups', None), ('POST', '/api/v1/groups', {'name': 'g', 'kbs': ['laws']}),
              ('GET', '/api/v1/groups/staff', None), ('PATCH', '/api/v1/groups/staff', {'role': 'reader'}),
              ('DELETE', '/api/v1/groups/staff', None), ('PUT', '/api/v1/groups/staff/members/rd', None),
              ('DELETE', '/api/v1/groups/staff/members/rd', None), ('GET', '/api/v1/keys', None),
              ('POST', '/api/v1/keys', {'role': 'reader', 'kbs': ['laws']}), ('DELETE', '/api/v1/keys/1', None),
              ('GET', '/api/v1/kbs/laws/grants', None), ('PUT', '/api/v1/kbs/other/grants/user/rd', None),
              ('DELETE', '/api/v1/kbs/laws/grants/user/rd', None),
              ('PUT', '/api/v1/kbs/other/grants/group/staff', None)]
    for name, who in (('editor user', editor), ('editor key', editor_key), ('reader user', reader),
                      ('reader key', reader_key)):
        before = state(s)
        statuses = {f'{m} {p}': who.request(m, p, b).status for m, p, b in routes}
        check(f'{name}: 403 on every admin route', set(statuses.values()) == {403}, statuses)
        check(f'{name}: nothing changed', state(s) == before)
    before = state(s)
    statuses = {f'{m} {p}': s.request(m, p, b, key=None).status for m, p, b in routes}
    check('no one: 401 on every admin route', set(statuses.values()) == {401}, statuses)
    check('no one: nothing changed', state(s) == before)
    # admins (a user and a key): the reads answer 200; the changes are tried below, each with its outcome
    for name, who in (('admin user', admin), ('admin key', admin_key)):
        for m, p, b in routes:
            if m == 'GET':
                r = who.request(m, p, b)
                check(f'{name}: {m} {p} 200', r.status == 200, r)
    r = s.request('GET', '/api/v1/users', key=None, headers={'Cookie': 'cq_session=cqs_' + '0' * 64})
    check('a forged session: 401', r.status == 401, r)
    r = admin.request('POST', '/api/v1/users/ed', {})
    check('a method the route has not: 405', r.status == 405, r)


def test_users(s, admin, admin_key):
    r = admin.request('POST', '/api/v1/users', {'name': '王芳', 'password': 'eight chars', 'role': 'editor',
                                                'kbs': ['laws']})
    u = r.json() or {}
    check('create a user: 201', r.status == 201 and u.get('name') == '王芳' and u.get('role') == 'editor' and
          u.get('kbs') == ['laws'] and u.get('source') == 'local' and u.get('disabled') is False, r)
    check('only an argon2id hash is kept',
          db(s, "SELECT password_hash LIKE '$argon2id$%' AND password_hash NOT LIKE '%eight%' FROM users "
                "WHERE name = '王芳'") == [(1,)])
    wang = Session(s, '王芳', 'eight chars')
    check('the new user signs in', wang.status == 200)
    refused(s, admin, 'POST', '/api/v1/users', {'name': '王芳', 'password': 'eight chars', 'kbs': ['laws']}, 409,
            "a user named '王芳' exists already")
    refused(s, admin, 'POST', '/api/v1/users', {'name': 'x', 'password': 'short', 'kbs': ['laws']}, 400,
            'the password is too short')
    refused(s, admin, 'POST', '/api/v1/users', {'name': 'x', 'password': 'long enough', 'kbs': ['missing']}, 404,
            "no knowledge base named 'missing'")
    refused(s, admin, 'POST', '/api/v1/users', {'name': 'x', 'password': 'long enough', 'role': 'boss',
                                                'kbs': ['laws']}, 400, '"role" must be admin, editor or reader')
    refused(s, admin, 'POST', '/api/v1/users', {'name': 'x', 'password': 'long enough', 'kbs': 'laws'}, 400,
            '"kbs" must be "*" or a list of KB names')
    refused(s, admin, 'POST', '/api/v1/users', {'name': 'x'}, 400, 'give the user a "name" and a "password"')
    refused(s, admin, 'POST', '/api/v1/users', {'name': 7, 'password': 'long enough'}, 400,
            '"name" must be a string')
    refused(s, admin, 'POST', '/api/v1/users', {'name': 'a b', 'password': 'long enough', 'kbs': ['laws']}, 400,
            'invalid user name')
    refused(s, admin, 'POST', '/api/v1/users', '[1]', 400, 'the body must be a JSON object')

    users = admin.request('GET', '/api/v1/users').json()['users']
    check('list users: no hash, with source and groups',
          [x['name'] for x in users][:2] == ['root', 'ed'] and all('password_hash' not in x for x in users) and
          all('groups' in x for x in users), users)
    check('one user', admin.request('GET', f'/api/v1/users/{q("王芳")}').json()['role'] == 'editor')
    refused(s, admin, 'GET', '/api/v1/users/nobody', None, 404, "no user named 'nobody'")

    r = admin.request('PATCH', f'/api/v1/users/{q("王芳")}', {'role': 'reader'})
    check('change the role (the KBs stay)', r.status == 200 and r.json()['role'] == 'reader' and
          r.json()['kbs'] == ['laws'], r)
    check('her session follows at once', wang.request('GET', '/api/v1/me').json()['role'] == 'reader')
    r = admin.request('PATCH', f'/api/v1/users/{q("王芳")}', {'kbs': ['laws', 'other']})
    check('change the KBs', r.status == 200 and r.json()['kbs'] == ['laws', 'other'], r)
    refused(s, admin, 'PATCH', f'/api/v1/users/{q("王芳")}', {'kbs': ['missing']}, 404,
            "no knowledge base named 'missing'")
    refused(s, admin, 'PATCH', f'/api/v1/users/{q("王芳")}', {}, 400, 'give what to change')
    refused(s, admin, 'PATCH', f'/api/v1/users/{q("王芳")}', {'disabled': 'yes'}, 400,
            '"disabled" must be true or false')
    refused(s, admin, 'PATCH', '/api/v1/users/root', {'disabled': True}, 400,
            'you cannot disable your own account')
    refused(s, admin, 'PATCH', '/api/v1/users/root', {'role': 'reader', 'kbs': ['laws']}, 400,
            'take away your own admin role')
    refused(s, admin, 'DELETE', '/api/v1/users/root', None, 400, 'you cannot remove your own account')

    r = admin.request('PATCH', f'/api/v1/users/{q("王芳")}', {'disabled': True})
    check('disable', r.status == 200 and r.json()['disabled'] is True, r)
    check('...her session ends', wang.request('GET', '/api/v1/me').status == 401)
    again = Session(s, '王芳', 'eight chars')
    check('...and she cannot sign in', again.status == 401)
    r = admin.request('PATCH', f'/api/v1/users/{q("王芳")}', {'disabled': False})
    check('enable', r.status == 200 and r.json()['disabled'] is False, r)
    check('...she signs in again', Session(s, '王芳', 'eight chars').status == 200)

    refused(s, admin, 'PUT', f'/api/v1/users/{q("王芳")}/password', {'password': 'short'}, 400, 'too short')
    refused(s, admin, 'PUT', f'/api/v1/users/{q("王芳")}/password', {}, 400, 'give the new "password"')
    wang = Session(s, '王芳', 'eight chars')
    r = admin_key.request('PUT', f'/api/v1/users/{q("王芳")}/password', {'password': 'a new password'})
    check('reset the password', r.status == 200 and r.json()['password_changed'] is True, r)
    check('...her sessions end', wang.request('GET', '/api/v1/me').status == 401)
    check('...the old password fails', Session(s, '王芳', 'eight chars').status == 401)
    check('...the new one signs in', Session(s, '王芳', 'a new password').status == 200)

    r = admin.request('DELETE', f'/api/v1/users/{q("王芳")}')
    check('delete', r.status == 200 and r.json()['deleted'] is True, r)
    check('...gone', admin.request('GET', f'/api/v1/users/{q("王芳")}').status == 404)
    refused(s, admin, 'DELETE', f'/api/v1/users/{q("王芳")}', None, 404, "no user named '王芳'")


def test_groups(s, admin, reader):
    """rd reads laws alone; the group 'staff' (editor of other) is made in main."""
    me = reader.request('GET', '/api/v1/me').json()
    check('rd alone: reader of laws', me['role'] == 'reader' and me['kbs'] == ['laws'], me)
    r = admin.request('PUT', '/api/v1/groups/staff/members/rd')
    check('add a member', r.status == 200 and r.json()['members'] == 1, r)
    me = reader.request('GET', '/api/v1/me').json()
    check("rd's session: own ∪ the group's, the highest role", me['role'] == 'editor' and
          sorted(me['kbs']) == ['laws', 'other'], me)
    check('rd may now read other', reader.request('GET', '/api/v1/kbs/other').status == 200)
    refused(s, admin, 'PUT', '/api/v1/groups/staff/members/rd', None, 409, "rd is in group 'staff' already")
    refused(s, admin, 'PUT', '/api/v1/groups/nogroup/members/rd', None, 404, "no group named 'nogroup'")
    refused(s, admin, 'PUT', '/api/v1/groups/staff/members/nobody', None, 404, "no user named 'nobody'")
    g = admin.request('GET', '/api/v1/groups/staff').json()
    check('a group with its members', g['member_list'] == [{'user': 'rd', 'source': 'local'}], g)
    check("the user's groups listed", admin.request('GET', '/api/v1/users/rd').json()['groups'] == ['staff'])
    refused(s, admin, 'POST', '/api/v1/groups', {'name': 'staff', 'kbs': ['laws']}, 409,
            "a group named 'staff' exists already")
    refused(s, admin, 'POST', '/api/v1/groups', {'name': 'g2', 'kbs': ['missing']}, 404,
            "no knowledge base named 'missing'")
    refused(s, admin, 'POST', '/api/v1/groups', {'kbs': ['laws']}, 400, 'give the group a "name"')
    refused(s, admin, 'POST', '/api/v1/groups', {'name': 'g2', 'role': 'admin', 'kbs': ['laws']}, 400,
            'give no KB')
    refused(s, admin, 'PATCH', '/api/v1/groups/staff', {}, 400, 'give what to change')
    r = admin.request('PATCH', '/api/v1/groups/staff', {'role': 'admin'})
    check('a group made admin', r.status == 200 and r.json()['role'] == 'admin' and r.json()['kbs'] == '*', r)
    check('...its member is an admin', reader.request('GET', '/api/v1/users').status == 200)
    r = admin.request('PATCH', '/api/v1/groups/staff', {'role': 'editor', 'kbs': ['other']})
    check('...and back', r.status == 200 and r.json()['kbs'] == ['other'], r)
    check('...its member is not', reader.request('GET', '/api/v1/users').status == 403)
    r = admin.request('DELETE', '/api/v1/groups/staff/members/rd')
    check('remove the member', r.status == 200 and r.json()['members'] == 0, r)
    me = reader.request('GET', '/api/v1/me').json()
    check("rd's rights are her own again", me['role'] == 'reader' and me['kbs'] == ['laws'], me)
    refused(s, admin, 'DELETE', '/api/v1/groups/staff/members/rd', None, 404, "rd is not in group 'staff'")
    r = admin.request('POST', '/api/v1/groups', {'name': '临时', 'role': 'reader', 'kbs': '*'})
    check('create a group', r.status == 201 and r.json()['kbs'] == '*', r)
    r = admin.request('DELETE', f'/api/v1/groups/{q("临时")}')
    check('delete a group', r.status == 200, r)
    refused(s, admin, 'DELETE', f'/api/v1/groups/{q("临时")}', None, 404, "no group named '临时'")
    names = [g['name'] for g in admin.request('GET', '/api/v1/groups').json()['groups']]
    check('list groups', names == ['staff'], names)


def test_grants(s, admin, reader):
    r = admin.request('GET', '/api/v1/kbs/laws/grants')
    g = r.json() or {}
    check('who reaches laws', r.status == 200 and {'root', 'ed', 'rd'} <= {u['name'] for u in g['users']} and
          [x['name'] for x in g['groups']] == [], g)
    r = admin.request('PUT', '/api/v1/kbs/other/grants/user/rd')
    check('grant other to rd', r.status == 200 and r.json()['kbs'] == ['laws', 'other'], r)
    me = reader.request('GET', '/api/v1/me').json()
    check('...her session reaches it, her role unchanged', me['role'] == 'reader' and sorted(me['kbs']) ==
          ['laws', 'other'], me)
    refused(s, admin, 'PUT', '/api/v1/kbs/other/grants/user/rd', None, 409, "user rd has knowledge base 'other' already")
    refused(s, admin, 'PUT', '/api/v1/kbs/missing/grants/user/rd', None, 404, "no knowledge base named 'missing'")
    refused(s, admin, 'PUT', '/api/v1/kbs/other/grants/user/nobody', None, 404, "no user named 'nobody'")
    refused(s, admin, 'PUT', '/api/v1/kbs/other/grants/user/root', None, 400, 'user root is an admin')
    r = admin.request('DELETE', '/api/v1/kbs/other/grants/user/rd')
    check('take other back', r.status == 200 and r.json()['kbs'] == ['laws'], r)
    check('...her session lost it', reader.request('GET', '/api/v1/me').json()['kbs'] == ['laws'])
    refused(s, admin, 'DELETE', '/api/v1/kbs/other/grants/user/rd', None, 404,
            "user rd has no grant of knowledge base 'other'")
    refused(s, admin, 'DELETE', '/api/v1/kbs/laws/grants/user/rd', None, 400, "'laws' is the last KB of user rd")
    r = admin.request('PUT', '/api/v1/kbs/laws/grants/group/staff')
    check('grant laws to a group', r.status == 200 and sorted(r.json()['kbs']) == ['laws', 'other'], r)
    g = admin.request('GET', '/api/v1/kbs/laws/grants').json()
    check('...listed', [x['name'] for x in g['groups']] == ['staff'], g)
    r = admin.request('DELETE', '/api/v1/kbs/laws/grants/group/staff')
    check('...and taken back', r.status == 200 and r.json()['kbs'] == ['other'], r)
    refused(s, admin, 'PUT', '/api/v1/kbs/laws/grants/group/nogroup', None, 404, "no group named 'nogroup'")


def test_keys(s, admin):
    r = admin.request('POST', '/api/v1/keys', {'name': 'scanner', 'role': 'editor', 'kbs': ['laws', 'other']})
    k = r.json() or {}
    check('create a key: the secret once', r.status == 201 and k.get('key', '').startswith('cq_') and
          k['kbs'] == ['laws', 'other'] and k['role'] == 'editor', r)
    secret = k.get('key', '')
    check('...it works', s.get('/api/v1/kbs/other', key=secret).status == 200)
    keys = admin.request('GET', '/api/v1/keys').json()['keys']
    mine = [x for x in keys if x['id'] == k.get('id')]
    check('listed without the secret', mine and 'key' not in mine[0] and secret[:10] == mine[0]['prefix'] and
          all(secret not in str(x) for x in keys), keys)
    refused(s, admin, 'POST', '/api/v1/keys', {'role': 'reader', 'kbs': ['missing']}, 404,
            "no knowledge base named 'missing'")
    refused(s, admin, 'POST', '/api/v1/keys', {'role': 'reader'}, 400, 'needs a KB')
    r = admin.request('DELETE', f"/api/v1/keys/{k.get('id')}")
    check('revoke', r.status == 200 and r.json()['revoked'] is True, r)
    check('...it no longer works', s.get('/api/v1/kbs/other', key=secret).status == 401)
    refused(s, admin, 'DELETE', f"/api/v1/keys/{k.get('id')}", None, 400, 'is revoked already')
    refused(s, admin, 'DELETE', '/api/v1/keys/999999', None, 404, 'no key with id 999999')
    refused(s, admin, 'DELETE', '/api/v1/keys/abc', None, 404, 'no key with id abc')


def test_audit(s):
    rows = db(s, "SELECT action, actor_kind, actor_name, kb, target FROM audit WHERE actor_kind IN ('user', 'key') "
                 "AND action NOT LIKE 'sign_in%' ORDER BY id")
    actions = [r[0] for r in rows]
    want = ['user_add', 'user_set', 'user_set', 'user_disable', 'user_enable', 'user_passwd', 'user_remove',
            'group_member_add', 'group_set', 'group_set', 'group_member_remove', 'group_add', 'group_remove',
            'grant_add', 'grant_remove', 'grant_add', 'grant_remove', 'key_create', 'key_revoke']
    check('every change in the audit trail, in order, nothing for the refusals', actions == want, actions)
    check('by whom', rows and rows[0][1] == 'user' and rows[0][2] == 'root' and
          ('key', 'admin') in [(r[1], r[2]) for r in rows], rows)
    check('what', ('grant_add', 'other', 'user rd') in [(r[0], r[3], r[4]) for r in rows] and
          ('group_member_add', '', 'group staff: user rd') in [(r[0], r[3], r[4]) for r in rows], rows)
    text = str(db(s, 'SELECT * FROM audit'))
    check('never a password or a key in it', 'a new password' not in text and 'cq_' not in text)


def test_limiter(s):
    statuses = [Session(s, 'ed', 'wrong password').status for _ in range(6)]
    check('failed sign-ins held back (per node, in memory)', statuses == [401] * 5 + [429], statuses)


def main():
    s = Server(sys.argv[1])
    try:
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'}, key=None)
        s.post('/api/v1/kbs', {'name': 'other'}, key=None)
        for name, args in (('root', ['--role', 'admin']), ('ed', ['--role', 'editor', '--kb', 'laws']),
                           ('rd', ['--role', 'reader', '--kb', 'laws'])):
            r = s.cli('user', 'add', name, *args, input_text=f'password of {name}\n')
            check(f'user add {name}', r.returncode == 0, r.stderr)
        r = s.cli('group', 'add', 'staff', '--role', 'editor', '--kb', 'other')
        check('group add staff', r.returncode == 0, r.stderr)
        keys = {}
        for role, args in (('admin', []), ('editor', ['--kb', 'laws']), ('reader', ['--kb', 'laws'])):
            r = s.cli('keys', 'create', '--role', role, '--name', role, *args)
            keys[role] = r.stdout.strip()
        import time
        time.sleep(1.2)  # the server notices that authentication is on
        admin, editor, reader = Session(s, 'root', 'password of root'), Session(s, 'ed', 'password of ed'), \
            Session(s, 'rd', 'password of rd')
        check('the three sign in', (admin.status, editor.status, reader.status) == (200, 200, 200))
        admin_key = Key(s, keys['admin'])
        test_roles(s, admin, admin_key, editor, Key(s, keys['editor']), reader, Key(s, keys['reader']))
        test_users(s, admin, admin_key)
        test_groups(s, admin, reader)
        test_grants(s, admin, reader)
        test_keys(s, admin)
        test_audit(s)
        test_limiter(s)
        check('server exits 0', s.stop() == 0, s.log_text())
    finally:
        s.close()
    T.finish()


if __name__ == '__main__':
    main()
