"""`clauseqa backup` and `clauseqa restore` (app/backup.h): backups taken while a server ingests are whole and
consistent, restore into a new data directory gives the same KBs, documents, keys and answers, and restore refuses
what it should (a non-empty directory without --force, a database in use, a damaged backup).

usage: test_backup.py path/to/clauseqa"""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, SOURCE_DIR, Checks, Server  # noqa: E402

T = Checks('test_backup')
DEMO_LAW = os.path.join(SOURCE_DIR, 'data', 'demo', '劳动合同法(2012-12-28).md')
QUESTIONS = ['劳动合同法第十九条', '劳动法第四十四条规定了什么？', 'How many days of notice are needed to terminate?',
             '试用期最长多长时间？']


def run(binary, *args, check_rc=None):
    r = subprocess.run([binary] + list(args), capture_output=True, text=True, timeout=300)
    if check_rc is not None and r.returncode != check_rc:
        print(f'  {" ".join(args)} -> {r.returncode}: {r.stderr[-800:]}', flush=True)
    return r


def synthetic_law(i):
    """A law of 300 articles whose words are its own (every upload is new content; ingesting one takes a moment)."""
    arts = '\n'.join(f'第{n}条 第{i}号办法的第{n}项规定：编号{i * 1000 + n}的事项由主管部门负责办理。'
                     for n in range(1, 301))
    return f'# 第{i}号管理办法\n\n{arts}\n'.encode()


def answers(binary, data):
    out = []
    for q in QUESTIONS:
        r = run(binary, 'ask', '--data', data, '--kb', 'laws', '--answers', 'extractive', '--json', q, check_rc=0)
        a = json.loads(r.stdout)
        out.append((a['answer'], a['abstained'], [(c['doc'], c['clause'], c['quote']) for c in a['citations']]))
    return out


def documents(data):
    db = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    rows = db.execute('SELECT k.name, d.name, d.status, d.n_clauses, d.sha256, d.format FROM documents d '
                      'JOIN kbs k ON k.id = d.kb_id ORDER BY k.name, d.name').fetchall()
    db.close()
    return rows


def sha256_of(path):
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


def check_restored(binary, backup, target, what):
    """Restores backup into target and checks it against the manifest; returns the manifest."""
    m = json.load(open(os.path.join(backup, 'manifest.json')))
    r = run(binary, 'restore', backup, '--data', target, '--json', check_rc=0)
    T.check(f'{what}: restore exits 0', r.returncode == 0, r.stderr)
    got = json.loads(r.stdout) if r.returncode == 0 else {}
    T.check(f'{what}: counts as the manifest says', all(got.get(k) == m['counts'][k]
                                                        for k in ('kbs', 'documents', 'clauses')), (got, m['counts']))
    db = sqlite3.connect(os.path.join(target, 'clauseqa.db'))
    T.check(f'{what}: integrity', db.execute('PRAGMA integrity_check').fetchone()[0] == 'ok')
    unfinished = db.execute("SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')").fetchone()[0]
    T.check(f'{what}: no job left waiting for an upload the backup lacks', unfinished == 0)
    db.close()
    docs = documents(target)
    T.check(f'{what}: every document ready', all(d[2] == 'ready' for d in docs), [d for d in docs if d[2] != 'ready'])
    originals_ok = all(os.path.exists(p) and sha256_of(p) == d[4]
                       for d in docs for p in [os.path.join(target, 'files', f'{d[4]}.{d[5]}')])
    T.check(f'{what}: every original there, with its hash', originals_ok)
    return m


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix='cq-backup-')
    source = os.path.join(work, 'source')
    servers = []  # closed however the test ends
    try:
        run(binary, 'ingest', '--data', source, '--kb', 'laws', DEMO_PDF, DEMO_LAW, DEMO_MD, check_rc=0)
        key = run(binary, 'keys', 'create', '--data', source, '--role', 'reader', '--kb', 'laws', '--name', 'portal',
                  check_rc=0).stdout.strip()
        with open(os.path.join(source, 'clauseqa.conf'), 'w') as f:
            f.write('log-level = info\n')
        before = answers(binary, source)

        # Backups while a server ingests 24 uploads into another KB.
        admin = run(binary, 'keys', 'create', '--data', source, '--role', 'admin', '--name', 'ops',
                    check_rc=0).stdout.strip()
        s = Server(binary, data_dir=source)
        servers.append(s)
        s.start()
        s.key = admin
        backups = []

        def upload_all():
            for i in range(24):
                s.upload('busy', None, filename=f'办法{i:02d}.md', content=synthetic_law(i))

        s.post('/api/v1/kbs', {'name': 'busy'})
        uploader = threading.Thread(target=upload_all)
        uploader.start()
        for n in range(4):
            time.sleep(0.3)
            out = os.path.join(work, f'during{n}')
            r = run(binary, 'backup', out, '--data', source, '--json', check_rc=0)
            T.check(f'backup {n} while ingesting: exit 0', r.returncode == 0, r.stderr)
            T.check(f'backup {n}: no partial folder left', not [p for p in os.listdir(work) if '.partial-' in p])
            backups.append(out)
        uploader.join()
        deadline = time.time() + 300
        while time.time() < deadline:
            jobs = s.get('/api/v1/kbs/busy/jobs').json()['jobs']
            if len(jobs) == 24 and all(j['state'] not in ('queued', 'running') for j in jobs):
                break
            time.sleep(0.2)
        T.check('all 24 uploads ingested', all(j['state'] == 'ready' for j in jobs), [j['state'] for j in jobs])
        final = os.path.join(work, 'final')
        r = run(binary, 'backup', final, '--data', source, check_rc=0)  # the server still runs
        T.check('final backup (server running)', r.returncode == 0, r.stderr)
        s.stop()
        s.close()

        sizes = []
        for n, b in enumerate(backups):
            target = os.path.join(work, f'restored{n}')
            m = check_restored(binary, b, target, f'during {n}')
            sizes.append(m['counts']['documents'])
            T.check(f'during {n}: the laws KB whole', [k for k in m['kbs'] if k['name'] == 'laws'][0]['documents'] == 3)
            T.check(f'during {n}: same answers', answers(binary, target) == before)
        print(f'  documents in the backups taken while ingesting: {sizes}', flush=True)
        T.check('the backups saw the ingestion progress', sizes == sorted(sizes) and sizes[-1] <= 27, sizes)

        target = os.path.join(work, 'restored-final')
        m = check_restored(binary, final, target, 'final')
        T.check('final: same documents', documents(target) == documents(source))
        T.check('final: 27 documents', m['counts']['documents'] == 27, m['counts'])
        T.check('final: same answers', answers(binary, target) == before)
        keys = json.loads(run(binary, 'keys', 'list', '--json', '--data', target).stdout)['keys']
        T.check('final: the API keys came along', [k['name'] for k in keys] == ['portal', 'ops'], keys)
        T.check('final: clauseqa.conf came along', open(os.path.join(target, 'clauseqa.conf')).read() == 'log-level = info\n')

        # The restored directory serves: the key works, a question is answered.
        s = Server(binary, data_dir=target, args=['--no-open-mode'])
        servers.append(s)
        s.start()
        s.key = key
        r = s.post('/api/v1/kbs/laws/ask', {'question': '劳动合同法第十九条'})
        T.check('restored: the server answers with the old key', r.status == 200 and r.json()['citations'], r)
        # Restore refuses a database in use, even with --force.
        r = run(binary, 'restore', final, '--data', target, '--force')
        T.check('restore into a served directory: refused', r.returncode != 0 and 'in use' in r.stderr, r.stderr)
        s.stop()
        s.close()

        # Restore refuses a directory with data, unless --force; --force replaces it.
        r = run(binary, 'restore', final, '--data', target)
        T.check('restore into a non-empty directory: exit 2', r.returncode == 2, r.stderr)
        T.check('restore into a non-empty directory: says --force', '--force' in r.stderr, r.stderr)
        r = run(binary, 'restore', backups[0], '--data', target, '--force', check_rc=0)
        T.check('restore --force', r.returncode == 0, r.stderr)
        T.check('restore --force: the older state', len(documents(target)) == sizes[0])
        leftover = [f for f in os.listdir(os.path.join(target, 'files'))
                    if f.split('.')[0] not in {d[4] for d in documents(target)}]
        T.check('restore --force: no originals of the replaced database left', not leftover, leftover)

        # A damaged backup is refused before anything is written.
        damaged = os.path.join(work, 'damaged')
        shutil.copytree(final, damaged)
        victim = os.path.join(damaged, 'files', sorted(os.listdir(os.path.join(damaged, 'files')))[0])
        with open(victim, 'r+b') as f:
            f.write(b'X')
        fresh = os.path.join(work, 'fresh')
        r = run(binary, 'restore', damaged, '--data', fresh)
        T.check('damaged backup: refused', r.returncode == 1 and 'damaged' in r.stderr, r.stderr)
        T.check('damaged backup: nothing restored', not os.path.exists(os.path.join(fresh, 'clauseqa.db')))
        r = run(binary, 'restore', os.path.join(work, 'source'), '--data', fresh)
        T.check('not a backup: refused', r.returncode == 1 and 'manifest' in r.stderr, r.stderr)

        # backup refuses a folder that holds something, and a data directory without a database.
        r = run(binary, 'backup', final, '--data', source)
        T.check('backup into a non-empty folder: refused', r.returncode == 1 and 'not empty' in r.stderr, r.stderr)
        r = run(binary, 'backup', os.path.join(work, 'x'), '--data', os.path.join(work, 'nothing'))
        T.check('backup of nothing: refused', r.returncode == 1 and 'no database' in r.stderr, r.stderr)
        mode = os.stat(os.path.join(final, 'clauseqa.db')).st_mode & 0o777
        T.check('the backup is its owner\'s only', mode == 0o600 and os.stat(final).st_mode & 0o077 == 0, oct(mode))
    finally:
        for s in servers:
            s.close()
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
