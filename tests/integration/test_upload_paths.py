"""Waiting uploads survive a data directory named differently (issue 29, item 6): a server started with
`--data rel11` (relative) queues three uploads and stops; started again through another name of the same folder (an
absolute path through a symlink), every job runs to `ready` and no upload is deleted. Upload paths are stored
relative to the data directory; rows written by earlier versions (an absolute path, or the relative path as given)
keep working, since only the file name is read.

Before the fix (e6353a8) the start-up sweep compared the stored path string with the path under the new name
(`!strcmp(j.upload_path, path)`), deleted every waiting upload, and the jobs failed.

usage: test_upload_paths.py path/to/clauseqa"""
import os
import shutil
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_server import DEMO_MD, DEMO_PDF, SOURCE_DIR, Checks, Server  # noqa: E402

T = Checks('test_upload_paths')
check = T.check
DEMO_LAW = os.path.join(SOURCE_DIR, 'data', 'demo', '劳动合同法(2012-12-28).md')


def rows(data):
    db = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
    out = db.execute('SELECT id, state, upload_path FROM jobs ORDER BY id').fetchall()
    db.close()
    return out


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix='cq-uploads-')
    cwd = os.getcwd()
    s = None
    try:
        os.chdir(work)
        s = Server(binary, data_dir='rel11')
        s.env = {'CLAUSEQA_FAULT_DELAY': 'job-page:1500'}  # a page every 1.5 s: the uploads wait
        s.start()
        s.post('/api/v1/kbs', {'name': 'laws'})
        jobs = [s.upload('laws', p).json()['job']['id'] for p in (DEMO_PDF, DEMO_MD, DEMO_LAW)]
        deadline = time.time() + 30
        while time.time() < deadline and s.get(f'/api/v1/jobs/{jobs[0]}').json()['state'] != 'running':
            time.sleep(0.1)
        check('the first job runs', s.get(f'/api/v1/jobs/{jobs[0]}').json()['state'] == 'running')
        check('server stops', s.stop() == 0, s.log_text())
        data = os.path.join(work, 'rel11')
        stored = rows(data)
        check('three jobs wait', [r[1] for r in stored] == ['queued'] * 3, stored)
        check('upload paths stored relative to the data directory',
              all(r[2] == f'uploads/{os.path.basename(r[2])}' for r in stored), stored)
        uploads = sorted(os.listdir(os.path.join(data, 'uploads')))
        check('three uploads kept', len([u for u in uploads if u.startswith('job-')]) == 3, uploads)
        db = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
        ocr = [r[0] for r in db.execute('SELECT ocr FROM jobs ORDER BY id')]
        db.close()
        check('each job keeps its OCR mode in its row, not in its upload\'s name (issue 28)',
              ocr == ['auto'] * 3 and not any('.ocr-' in u for u in uploads), (ocr, uploads))

        # Rows as earlier versions wrote them: the path as it was given (absolute, or relative with its folder).
        db = sqlite3.connect(os.path.join(data, 'clauseqa.db'))
        leaf = {r[0]: os.path.basename(r[2]) for r in stored}
        db.execute('UPDATE jobs SET upload_path = ? WHERE id = ?',
                   (os.path.join(os.path.realpath(data), 'uploads', leaf[jobs[1]]), jobs[1]))
        db.execute('UPDATE jobs SET upload_path = ? WHERE id = ?', (f'rel11/uploads/{leaf[jobs[2]]}', jobs[2]))
        db.commit()
        db.close()

        # The same folder by another name: an absolute path through a symlink, from another working directory.
        os.symlink(data, os.path.join(work, 'link'))
        os.chdir(cwd)
        s.data = os.path.join(work, 'link')
        s.env = None
        s.start()
        ended = [s.wait_job(j) for j in jobs]
        check('every waiting job ran to ready', [j['state'] for j in ended] == ['ready'] * 3,
              [(j['state'], j.get('error')) for j in ended])
        docs = s.get('/api/v1/kbs/laws/documents').json()['documents']
        check('three documents', len(docs) == 3, docs)
        left = [u for u in os.listdir(os.path.join(data, 'uploads')) if u.startswith('job-')]
        check('the uploads were used and then removed', not left, left)
        check('server stops', s.stop() == 0, s.log_text())

        # And the sweep still removes an upload that no job owns.
        stray = os.path.join(data, 'uploads', 'job-999.ocr-auto.md')
        open(stray, 'wb').write(b'# stray\n')
        s.start()
        check('an upload no job owns is removed at the start', not os.path.exists(stray))
    finally:
        os.chdir(cwd)
        if s:
            s.close()
        shutil.rmtree(work, ignore_errors=True)
    T.finish()


if __name__ == '__main__':
    main()
