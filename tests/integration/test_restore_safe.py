"""`clauseqa restore --force` never destroys the target on a backup that fails a check (issue 29, item 7): a backup
whose hashes all pass but whose database is damaged, whose schema version is 99, whose schema version or counts
disagree with its manifest, or whose manifest lists a file that is not an original is refused, and the target's every file (database, originals, page images, vector
indexes) is as it was, byte for byte and mode for mode. A good backup then replaces the target; what restore writes
is its owner's only (files 0600, folders 0700) whatever the umask (item 8).

Before the fix (e6353a8) restore checked the database only after it had replaced the target's database and
originals: each refused backup left the target destroyed, and a damaged one was accepted (its quick_check rows
were not read).

usage: test_restore_safe.py path/to/clauseqa"""
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, SOURCE_DIR, Checks  # noqa: E402

T = Checks('test_restore_safe')
check = T.check
DEMO_LAW = os.path.join(SOURCE_DIR, 'data', 'demo', '劳动合同法(2012-12-28).md')


def run(binary, *args, umask=None):
    pre = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run([binary] + list(args), capture_output=True, text=True, timeout=300, preexec_fn=pre)


def snapshot(folder):
    """Every entry under folder: (kind, mode, sha256 of a file's bytes)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            digest = hashlib.sha256(open(p, 'rb').read()).hexdigest() if stat.S_ISREG(st.st_mode) else None
            out[os.path.relpath(p, folder)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), digest)
    return out


def sha256_of(path):
    return hashlib.sha256(open(path, 'rb').read()).hexdigest()


def reseal(backup):
    """Makes the manifest's database entry match the (edited) database again: every hash passes."""
    path = os.path.join(backup, 'manifest.json')
    m = json.load(open(path))
    db = os.path.join(backup, 'clauseqa.db')
    m['database']['sha256'] = sha256_of(db)
    m['database']['bytes'] = os.path.getsize(db)
    json.dump(m, open(path, 'w'), indent=2)


def edit_manifest(backup, fn):
    path = os.path.join(backup, 'manifest.json')
    m = json.load(open(path))
    fn(m)
    json.dump(m, open(path, 'w'), indent=2)


def empty_an_index(backup):
    """Turns the root page of an index of a table with rows into an empty leaf: the pages are well formed (SQLite
    opens and reads the database, quick_check passes), but the index no longer lists its table's rows, which only
    PRAGMA integrity_check reports, as rows of its result."""
    db_path = os.path.join(backup, 'clauseqa.db')
    db = sqlite3.connect(db_path)
    page_size = db.execute('PRAGMA page_size').fetchone()[0]
    rootpage = None
    for name, table, root in db.execute("SELECT name, tbl_name, rootpage FROM sqlite_master WHERE type = 'index' "
                                        "AND rootpage > 1 ORDER BY name"):
        if db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] > 0:
            rootpage = root
            break
    db.close()
    assert rootpage, 'no index of a table with rows'
    with open(db_path, 'r+b') as f:
        f.seek((rootpage - 1) * page_size)
        f.write(bytes([0x0A, 0, 0, 0, 0]) + (page_size % 65536).to_bytes(2, 'big') + b'\0')
    reseal(backup)


def set_user_version(backup, v):
    db = sqlite3.connect(os.path.join(backup, 'clauseqa.db'))
    db.execute(f'PRAGMA user_version = {v}')
    db.commit()
    db.close()
    reseal(backup)


def documents(data):
    db = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    rows = db.execute('SELECT k.name, d.name, d.status, d.n_clauses, d.sha256 FROM documents d '
                      'JOIN kbs k ON k.id = d.kb_id ORDER BY k.name, d.name').fetchall()
    db.close()
    return rows


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix='cq-restore-')
    try:
        source, target = os.path.join(work, 'source'), os.path.join(work, 'target')
        r = run(binary, 'ingest', '--data', source, '--kb', 'laws', DEMO_MD)
        check('source ingested', r.returncode == 0, r.stderr)
        good = os.path.join(work, 'good')
        r = run(binary, 'backup', good, '--data', source)
        check('backup taken', r.returncode == 0, r.stderr)
        r = run(binary, 'ingest', '--data', target, '--kb', 'mine', DEMO_LAW)
        check('target ingested', r.returncode == 0, r.stderr)
        # derived files of the target, which a refused restore leaves alone too
        for rel, data in (('vectors/kb1.faiss', b'faiss index'), ('cache/pages/x-p1-w600-plain.png', b'png')):
            os.makedirs(os.path.dirname(os.path.join(target, rel)), exist_ok=True)
            open(os.path.join(target, rel), 'wb').write(data)
        before = snapshot(target)
        target_docs = documents(target)

        def variant(name, damage):
            path = os.path.join(work, name)
            shutil.copytree(good, path)
            damage(path)
            return path

        bad = [
            ('a damaged database (hashes pass)', variant('damaged', empty_an_index), 'integrity check'),
            ('schema version 99', variant('v99', lambda b: set_user_version(b, 99)), 'schema version 99'),
            ('schema version other than the manifest\'s', variant('v-other', lambda b: edit_manifest(
                b, lambda m: m.__setitem__('schema_version', m['schema_version'] - 1))), 'manifest says'),
            ('counts other than the manifest\'s', variant('counts', lambda b: edit_manifest(
                b, lambda m: m['counts'].__setitem__('documents', m['counts']['documents'] + 1))), 'manifest says'),
            ('a KB\'s counts other than the manifest\'s', variant('kb-counts', lambda b: edit_manifest(
                b, lambda m: m['kbs'][0].__setitem__('clauses', m['kbs'][0]['clauses'] + 1))), 'as its manifest says'),
            ('a file entry that is not an original', variant('not-original', lambda b: edit_manifest(
                b, lambda m: m['files'].append(dict(m['database'])))), 'not an original'),
        ]
        for what, backup, says in bad:
            r = run(binary, 'restore', backup, '--data', target, '--force')
            check(f'{what}: refused', r.returncode != 0 and says in r.stderr, (r.returncode, r.stderr))
            after = snapshot(target)
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            check(f'{what}: the target untouched (every file, byte and mode)', not changed, changed)
            check(f'{what}: the target still serves its documents', documents(target) == target_docs)

        # A good backup replaces the target, under umask 0 as well.
        r = run(binary, 'restore', good, '--data', target, '--force', umask=0)
        check('good backup: restored', r.returncode == 0, r.stderr)
        check('good backup: the source\'s documents', documents(target) == documents(source))
        names = os.listdir(target)
        check('good backup: no staging folder left', not [n for n in names if n.startswith('.restore')], names)
        originals = sorted(os.listdir(os.path.join(target, 'files')))
        check('good backup: only the restored originals',
              originals == sorted(f'{d[4]}.md' for d in documents(source)), originals)
        check('good backup: page images and vector indexes of the old database gone',
              not os.listdir(os.path.join(target, 'cache', 'pages'))
              and not os.path.exists(os.path.join(target, 'vectors', 'kb1.faiss')))
        loose = {k: oct(m) for k, (kind, m, _) in snapshot(target).items()
                 if (k == 'clauseqa.db' or k.startswith('files')) and m != (0o700 if kind == stat.S_IFDIR else 0o600)}
        check('good backup under umask 0: database and originals 0600, files/ 0700', not loose, loose)

        fresh = os.path.join(work, 'fresh')
        r = run(binary, 'restore', good, '--data', fresh, umask=0)
        check('restore into a new folder', r.returncode == 0, r.stderr)
        modes = snapshot(fresh)
        modes['.'] = (stat.S_IFDIR, stat.S_IMODE(os.stat(fresh).st_mode), None)
        loose = {k: oct(m) for k, (kind, m, _) in modes.items() if m != (0o700 if kind == stat.S_IFDIR else 0o600)}
        check('new folder under umask 0: every file 0600, every folder 0700', not loose, loose)
        r = run(binary, 'doc', 'list', '--data', fresh, '--kb', 'laws', '--json')
        check('the restored folder reads', r.returncode == 0 and json.loads(r.stdout), r.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
