#!/usr/bin/python3
"""LDAP sign-in against a real directory (issue 30): a throwaway slapd (Debian's OpenLDAP server) in a temp dir on
free ports, with a few users and groups, and the server configured by clauseqa.conf's [ldap] section and
$CLAUSEQA_LDAP_*. Checks: a directory user signs in and gets the role and KBs of the groups their directory groups
map to (by cn and by DN); a wrong password, an unknown user and an empty password (which LDAP would take as an
anonymous bind) get the one 401; a user whose groups map to nothing is refused with the reason; a change in the
directory reaches the user's rights at the next sign-in; local accounts still work beside LDAP (a local name is
never taken over by the directory); StartTLS and ldaps:// with the directory's CA (and without it: refused);
a directory that is down, and one that accepts but never answers, give a clear 503 within the timeout, no hang.
Skips (77) when slapd is not installed (tools/setup.sh installs it).

usage: test_ldap.py path/to/clauseqa"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import Checks, Server  # noqa: E402

SLAPD = shutil.which('slapd') or '/usr/sbin/slapd'
SLAPADD = shutil.which('slapadd') or '/usr/sbin/slapadd'
LDAPMODIFY = shutil.which('ldapmodify')
if not (os.access(SLAPD, os.X_OK) and os.access(SLAPADD, os.X_OK) and LDAPMODIFY and shutil.which('openssl')):
    print('skip: slapd, slapadd, ldapmodify or openssl is not installed (tools/setup.sh installs slapd and ldap-utils)')
    sys.exit(77)

T = Checks('test_ldap')
check = T.check
SUFFIX = 'dc=example,dc=com'

DATA = f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups
""" + ''.join(f"""
dn: uid={u},ou=people,{SUFFIX}
objectClass: inetOrgPerson
uid: {u}
cn: {u}
sn: {u}
userPassword: {u} password
""" for u in ('alice', 'boss', 'carol', 'dave', '王芳')) + f"""
dn: cn=lawyers,ou=groups,{SUFFIX}
objectClass: groupOfNames
cn: lawyers
member: uid=alice,ou=people,{SUFFIX}
member: uid=王芳,ou=people,{SUFFIX}

dn: cn=clauseqa-admins,ou=groups,{SUFFIX}
objectClass: groupOfNames
cn: clauseqa-admins
member: uid=boss,ou=people,{SUFFIX}

dn: cn=readers,ou=groups,{SUFFIX}
objectClass: groupOfNames
cn: readers
member: uid=boss,ou=people,{SUFFIX}

dn: cn=canteen,ou=groups,{SUFFIX}
objectClass: groupOfNames
cn: canteen
member: uid=carol,ou=people,{SUFFIX}
"""


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Slapd:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='cq-slapd-')
        self.port, self.tls_port = free_port(), free_port()
        d = self.dir
        os.makedirs(os.path.join(d, 'db'))
        subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj',
                        '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-addext',
                        'basicConstraints=critical,CA:TRUE', '-keyout', f'{d}/key.pem', '-out', f'{d}/cert.pem'],
                       check=True, capture_output=True)
        schema = '/etc/ldap/schema'
        with open(f'{d}/slapd.conf', 'w') as f:
            f.write(f"""include {schema}/core.schema
include {schema}/cosine.schema
include {schema}/inetorgperson.schema
include {schema}/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {d}/slapd.pid
TLSCertificateFile {d}/cert.pem
TLSCertificateKeyFile {d}/key.pem
database mdb
maxsize 10485760
suffix "{SUFFIX}"
rootdn "cn=admin,{SUFFIX}"
rootpw admin-secret
directory {d}/db
""")
        with open(f'{d}/data.ldif', 'w') as f:
            f.write(DATA)
        subprocess.run([SLAPADD, '-f', f'{d}/slapd.conf', '-l', f'{d}/data.ldif'], check=True, capture_output=True)
        self.log = open(f'{d}/slapd.log', 'wb')
        self.proc = subprocess.Popen([SLAPD, '-d', '0', '-f', f'{d}/slapd.conf', '-h',
                                      f'ldap://127.0.0.1:{self.port}/ ldaps://127.0.0.1:{self.tls_port}/'],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(('127.0.0.1', self.port), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError('slapd did not start: ' + open(f'{d}/slapd.log').read())

    def modify(self, ldif):
        r = subprocess.run([LDAPMODIFY, '-x', '-H', f'ldap://127.0.0.1:{self.port}', '-D', f'cn=admin,{SUFFIX}',
                            '-w', 'admin-secret'], input=ldif, capture_output=True, text=True)
        check('ldapmodify', r.returncode == 0, r.stderr)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def login(s, user, password):
    return s.post('/api/v1/login', {'user': user, 'password': password}, key=None,
                  headers={'Origin': f'http://127.0.0.1:{s.port}', 'X-Forwarded-For': f'198.51.100.{len(user)}'})


def me(s, r):
    c = r.header('Set-Cookie') or ''
    cookie = c.split(';')[0]
    return s.get('/api/v1/me', key=None, headers={'Cookie': cookie}).json()


def error_message(r):
    return ((r.json() or {}).get('error') or {}).get('message', '')


def start(s, env):
    s.stop()
    s.env = env
    s.start()


def main():
    directory = Slapd()
    s = Server(sys.argv[1])
    conf = os.path.join(s.tmp, 'clauseqa.conf')
    with open(conf, 'w') as f:
        f.write(f"""[ldap]
url = ldap://127.0.0.1:{directory.port}
user-dn = uid=%u,ou=people,{SUFFIX}
base = ou=groups,{SUFFIX}
group-map = lawyers => editors | cn=clauseqa-admins,ou=groups,{SUFFIX} => admins | readers => readers
timeout-s = 2
""")
    env = {'CLAUSEQA_CONFIG': conf}
    try:
        s.env = env
        s.start()
        for kb in ('laws', 'other'):
            s.post('/api/v1/kbs', {'name': kb}, key=None)
        for g, args in (('editors', ['--role', 'editor', '--kb', 'laws']), ('admins', ['--role', 'admin']),
                        ('readers', ['--role', 'reader', '--kb', 'other'])):
            r = s.cli('group', 'add', g, *args)
            check(f'group add {g}', r.returncode == 0, r.stderr)
        r = s.cli('user', 'add', 'root', '--role', 'admin', input_text='local root password\n')
        check('a local admin', r.returncode == 0, r.stderr)
        r = s.cli('user', 'add', 'dave', '--role', 'reader', '--kb', 'laws', input_text='local dave password\n')
        check('a local dave (the directory has a dave too)', r.returncode == 0, r.stderr)
        time.sleep(1.2)
        check('the server says LDAP is on', 'sign-in: LDAP at ldap://127.0.0.1' in s.log_text())

        t0 = time.time()
        r = login(s, 'alice', 'alice password')
        check('a directory user signs in', r.status == 200, r)
        m = me(s, r)
        check('...an editor of laws, from the directory group lawyers (by cn)', m.get('role') == 'editor' and
              m.get('kbs') == ['laws'] and m.get('via') == 'session', m)
        check('...in a second or so', time.time() - t0 < 2, time.time() - t0)
        users = {u['name']: u for u in s.get('/api/v1/users', key=None, headers={'Cookie': (login(
            s, 'root', 'local root password').header('Set-Cookie') or '').split(';')[0]}).json()['users']}
        check('kept as a directory user with no password here', users['alice']['source'] == 'ldap' and
              users['alice']['groups'] == ['editors'], users.get('alice'))
        r = login(s, '王芳', '王芳 password')
        check('a Chinese name', r.status == 200 and me(s, r).get('role') == 'editor', r)

        m = me(s, login(s, 'boss', 'boss password'))
        check('admins by DN, the highest role of two groups', m.get('role') == 'admin' and m.get('kbs') == '*', m)

        for user, password, what in (('alice', 'wrong password', 'a wrong password'),
                                     ('nobody', 'any password', 'an unknown user'),
                                     ('alice', '', 'an empty password (no anonymous bind)')):
            r = login(s, user, password)
            check(f'{what}: 401, the one message', r.status == 401 and
                  error_message(r) == 'wrong user name or password', r)
        r = login(s, 'carol', 'carol password')
        check('groups that map to nothing: refused with the reason', r.status == 401 and
              "carol's directory groups give no access here" in error_message(r), r)

        # local accounts beside the directory; a local name is not the directory's
        check('a local admin signs in', login(s, 'root', 'local root password').status == 200)
        check('local dave: his local password', login(s, 'dave', 'local dave password').status == 200)
        check("...not the directory's dave's", login(s, 'dave', 'dave password').status == 401)

        # the directory changes: alice leaves lawyers for readers; the next sign-in follows
        old = login(s, 'alice', 'alice password')
        directory.modify(f"""dn: cn=lawyers,ou=groups,{SUFFIX}
changetype: modify
delete: member
member: uid=alice,ou=people,{SUFFIX}

dn: cn=readers,ou=groups,{SUFFIX}
changetype: modify
add: member
member: uid=alice,ou=people,{SUFFIX}
""")
        r = login(s, 'alice', 'alice password')
        m = me(s, r)
        check("the next sign-in follows the directory: reader of other", m.get('role') == 'reader' and
              m.get('kbs') == ['other'], m)
        m = me(s, old)
        check('...and so does her older session (the same memberships)', m.get('role') == 'reader', m)
        r = s.cli('group', 'show', 'editors')
        check("the group's members show where they come from", '王芳 (directory)' in r.stdout and
              'alice' not in r.stdout, r.stdout)
        r = s.cli('user', 'passwd', 'alice', input_text='a new password\n')
        check("a directory user's password is the directory's", r.returncode != 0 and
              'signs in against the directory' in r.stderr, r.stderr)

        # TLS: StartTLS and ldaps:// with the directory's CA; without it, refused (503, the reason)
        ca = os.path.join(directory.dir, 'cert.pem')
        for name, extra in (('StartTLS', {'CLAUSEQA_LDAP_STARTTLS': 'true', 'CLAUSEQA_LDAP_CA_FILE': ca}),
                            ('ldaps://', {'CLAUSEQA_LDAP_URL': f'ldaps://127.0.0.1:{directory.tls_port}',
                                          'CLAUSEQA_LDAP_CA_FILE': ca})):
            start(s, dict(env, **extra))
            r = login(s, 'boss', 'boss password')
            check(f'{name} with the CA: signs in', r.status == 200, (r, s.log_text()[-2000:]))
        start(s, dict(env, CLAUSEQA_LDAP_STARTTLS='true', CLAUSEQA_LDAP_CA_FILE='/nonexistent/ca.pem'))
        r = login(s, 'boss', 'boss password')
        check('StartTLS without the CA: refused, not signed in', r.status in (500, 503) and
              'the directory' in error_message(r), r)

        # the directory down: a clear 503 at once; one that never answers: 503 within the timeout
        start(s, dict(env, CLAUSEQA_LDAP_URL=f'ldap://127.0.0.1:{free_port()}'))
        t0 = time.time()
        r = login(s, 'alice', 'alice password')
        check('directory down: 503 with the reason', r.status == 503 and 'cannot be reached' in error_message(r) and
              r.header('Retry-After'), r)
        check('...at once', time.time() - t0 < 2, time.time() - t0)
        check('...and a local account still signs in', login(s, 'root', 'local root password').status == 200)
        silent = socket.socket()
        silent.bind(('127.0.0.1', 0))
        silent.listen(8)
        held = []
        threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(4)], daemon=True).start()
        start(s, dict(env, CLAUSEQA_LDAP_URL=f'ldap://127.0.0.1:{silent.getsockname()[1]}'))
        t0 = time.time()
        r = login(s, 'alice', 'alice password')
        took = time.time() - t0
        check('a directory that never answers: 503', r.status == 503 and 'cannot be reached' in error_message(r), r)
        check('...within the timeout (2 s), no hang', took < 6, took)
        silent.close()

        # bad configuration: serve refuses to start, saying which key
        with open(conf + '.bad', 'w') as f:
            f.write('[ldap]\nurl = http://x\n')
        r = subprocess.run([s.binary, 'serve', '--data', s.data, '--port', '0'], capture_output=True, text=True,
                           env=dict(os.environ, CLAUSEQA_CONFIG=conf + '.bad'), timeout=60)
        check('a bad url: serve refuses, naming it', r.returncode == 2 and '[ldap] url must start with ldap://' in
              r.stderr, r.stderr)
        audit = s.cli('user', 'list', '--json')
        check('the CLI lists directory users', '"source":"ldap"' in audit.stdout.replace(' ', ''), audit.stdout)
        check('server exits 0', s.stop() == 0, s.log_text())
    finally:
        s.close()
        directory.close()
    T.finish()


if __name__ == '__main__':
    main()
