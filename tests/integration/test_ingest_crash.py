#!/usr/bin/python3
"""kill -9 during `clauseqa ingest` (issue 16): the command is killed at several moments while it ingests the demo
PDF and the demo contract, and made to exit right after a document's commit and in the middle of writing an original
(core/fault.h); running the same command again then leaves the store exactly as a run without a kill (documents,
clauses, FTS rows), every document ready, no temp file, and no original that no document uses. With the encoder on
(random weights), what the first commit saved has every clause's vector and the document's state.
(Served uploads: test_http_crash.py.)

usage: test_ingest_crash.py path/to/clauseqa"""
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, Checks  # noqa: E402
from test_http_dense import write_random_model  # noqa: E402

T = Checks('test_ingest_crash')
check = T.check
KILL_AFTER_S = (0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.8)


def ingest(binary, data, env=None):
    return subprocess.Popen([binary, '--data', data, 'ingest', '--kb', 'laws', DEMO_PDF, DEMO_MD],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, 'CLAUSEQA_LOG': 'warn', **(env or {})})


def store(data):
    """(documents as sorted (name, status, n_pages, n_clauses), clause rows, FTS rows, the originals' hashes)."""
    con = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    try:
        docs = sorted(con.execute('SELECT name, status, n_pages, n_clauses FROM documents').fetchall())
        clauses = con.execute('SELECT count(*) FROM clauses').fetchone()[0]
        fts = sum(con.execute(f'SELECT count(*) FROM {t}').fetchone()[0] for (t,) in con.execute(
            "SELECT name FROM sqlite_schema WHERE name LIKE 'fts_kb%_content'").fetchall())
        hashes = sorted(h for (h,) in con.execute('SELECT sha256 FROM documents'))
    finally:
        con.close()
    return docs, clauses, fts, hashes


def files(data):
    """(temp files, originals' hashes) under DATA/files."""
    names = os.listdir(os.path.join(data, 'files'))
    return [n for n in names if '.tmp.' in n], sorted(n.split('.')[0] for n in names if '.tmp.' not in n)


def encoded(data):
    """(ready documents, their clauses, document vectors, clause vectors)."""
    con = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    try:
        return con.execute("SELECT (SELECT count(*) FROM documents WHERE status = 'ready'), (SELECT count(*) FROM "
                           "clauses), (SELECT count(*) FROM doc_vectors), (SELECT count(*) FROM clause_vectors)").fetchone()
    finally:
        con.close()


def run_again(binary, data, what, env=None):
    """The same command once more, to its end: the store must be the reference's, nothing left over."""
    p = ingest(binary, data, env)
    _, err = p.communicate(timeout=300)
    check(f'{what}: the command run again succeeds', p.returncode == 0, err.decode(errors='replace')[-500:])
    got = store(data)
    temps, originals = files(data)
    check(f'{what}: the store matches the run without a kill', got[:3] == reference[:3], (got, reference))
    check(f'{what}: no temp file left', temps == [], temps)
    check(f'{what}: every original is a document\'s', originals == got[3], (originals, got[3]))
    return got


def main():
    global reference
    binary = sys.argv[1]
    work = tempfile.mkdtemp(prefix='cq_ingest_crash_')
    try:
        data = os.path.join(work, 'reference')
        p = ingest(binary, data)
        _, err = p.communicate(timeout=300)
        check('reference run', p.returncode == 0, err)
        reference = store(data)
        check('reference: two ready documents with clauses', [d[1] for d in reference[0]] == ['ready', 'ready']
              and reference[1] > 0 and reference[1] == reference[2], reference)

        for delay in KILL_AFTER_S:
            data = os.path.join(work, f'kill-{delay}')
            p = ingest(binary, data)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
            try:  # killed before its first migration committed, the database has no tables yet
                before = store(data) if os.path.exists(os.path.join(data, 'clauseqa.db')) else None
            except sqlite3.OperationalError:
                before = None
            got = run_again(binary, data, f'kill at {delay} s')
            print(f'kill -9 {delay:.2f} s after the start: {len(before[0]) if before else 0} document(s) saved '
                  f'before the kill, {got[1]} clauses after the second run', flush=True)
            check(f'kill at {delay} s: what was saved was whole', before is None or
                  all(d[1] == 'ready' for d in before[0]), before)

        # The process exits right after the first commit (of a document, or of a group of them: a batch ingest
        # commits several files at once), then in the middle of writing an original (its temp file written, not yet
        # renamed; files are read by several threads, so one or more): a temp file is a crashed writer's and goes
        # at the next run.
        for point in ('after-document-commit', 'in-temp-write'):
            data = os.path.join(work, point)
            p = ingest(binary, data, {'CLAUSEQA_FAULT': point})
            p.communicate(timeout=300)
            check(f'{point}: the command exited at the fault', p.returncode == 86, p.returncode)
            temps = files(data)[0]
            if point == 'in-temp-write':
                check(f'{point}: a temp file was left', len(temps) >= 1, temps)
            else:
                saved = store(data)[0]
                check(f'{point}: the first commit saved, whole', saved and all(d[1] == 'ready' for d in saved), saved)
            run_again(binary, data, point)

        # The encoder on (with a document head): a group's vectors and document vectors are written in its transaction,
        # after its documents.
        data = os.path.join(work, 'dense')
        write_random_model(os.path.join(data, 'models', 'ssm'))
        dense = {'CLAUSEQA_DENSE': 'on'}
        p = ingest(binary, data, {**dense, 'CLAUSEQA_FAULT': 'after-document-commit'})
        _, err = p.communicate(timeout=300)
        check('encoder on: the command exited at the fault', p.returncode == 86, (p.returncode, err[-500:]))
        docs, clauses, dvecs, vectors = encoded(data)
        check('encoder on: what the first commit saved has its vectors and document vectors',
              docs >= 1 and dvecs == docs and vectors == clauses > 0, (docs, clauses, dvecs, vectors))
        run_again(binary, data, 'encoder on', dense)
        docs, clauses, dvecs, vectors = encoded(data)
        check('encoder on, run again: every document has its vectors and document vector',
              docs == 2 and dvecs == docs and vectors == clauses > 0, (docs, clauses, dvecs, vectors))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


reference = None
if __name__ == '__main__':
    main()
