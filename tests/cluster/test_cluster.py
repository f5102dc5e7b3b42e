"""Three clauseqa nodes behind HAProxy on loopback (issue 20, docs/SCALE.md), with deploy/cluster/haproxy.cfg as
shipped (ports and process settings changed for a test): an upload through one node is asked through another and
through HAProxy, its original and page images are served by a third, a stopped node is routed around, a delete
through one node is gone on the others. In pg mode, last: the node running an ingest job is killed (-9) mid-job and
another node finishes it, with a clean run's counts (kill_during_ingest).

    python3 tests/cluster/test_cluster.py path/to/clauseqa sqlite
    tests/pg/cluster.sh python3 tests/cluster/test_cluster.py path/to/clauseqa pg

sqlite: the nodes share one data folder (SQLite in WAL mode serves several processes of one machine). pg: each node
has a data folder of its own and the store is a database of the throwaway cluster (CLAUSEQA_PG); the originals then
reach a node through the store; the nodes run with a 4 s job lease (CLAUSEQA_JOB_LEASE_S) and each page of an
ingest job slowed down (CLAUSEQA_FAULT_DELAY=job-page:MS, core/fault.h) so that a job runs long enough to be cut
off. Exit 77 (skipped) without haproxy, or without the PostgreSQL cluster in pg mode."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
from http_server import DEMO_PDF, SOURCE_DIR, Checks, Server  # noqa: E402

checks = Checks('test_cluster')
check = checks.check


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def haproxy_config(front_port, node_ports):
    """The shipped configuration with this test's ports; no daemon, no user switch, no syslog."""
    text = open(os.path.join(SOURCE_DIR, 'deploy', 'cluster', 'haproxy.cfg'), encoding='utf-8').read()
    text = re.sub(r'^\s*(daemon|user haproxy|group haproxy|log /dev/log.*)\s*$\n', '', text, flags=re.M)
    text = text.replace('bind 127.0.0.1:8080', f'bind 127.0.0.1:{front_port}')
    for i, port in enumerate(node_ports):
        text = text.replace(f'127.0.0.1:{8081 + i} check', f'127.0.0.1:{port} check')
    assert text.count(' check\n') == len(node_ports), text
    return text


LEASE_S = 4
PAGE_DELAY_MS = 150


def kb_counts(sql, kb):
    """What one KB holds, as a clean run must leave it: documents (all ready), pages, clauses, keyword postings (rows
    and bytes) and clause vectors."""
    return sql(
        "SELECT (SELECT count(*) FROM documents d WHERE d.kb_id = k.id), "
        "(SELECT count(*) FROM documents d WHERE d.kb_id = k.id AND d.status <> 'ready'), "
        "(SELECT count(*) FROM pages p JOIN documents d ON d.id = p.doc_id WHERE d.kb_id = k.id), "
        "(SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE d.kb_id = k.id), "
        "(SELECT count(*) || '/' || coalesce(sum(length(p.postings)), 0) FROM keyword_postings p "
        "WHERE p.kb_id = k.id), "
        "(SELECT count(*) FROM clause_vectors v WHERE v.kb_id = k.id) "
        f"FROM kbs k WHERE k.name = '{kb}'").split('|')


def kill_during_ingest(front, nodes, sql):
    """An upload through HAProxy; the node whose worker claimed it (the job's lease_owner, host/pid/time) is killed
    with SIGKILL while it reads pages; another node takes the job over once the lease runs out and ends it ready at
    the second start; the KB then holds what a clean run of the same file leaves."""
    alive = [n for n in nodes if n.proc]
    check('two nodes up for the kill', len(alive) >= 2, len(alive))
    r = front.upload('laws', DEMO_PDF)
    check('upload through haproxy', r.status == 202, r)
    job_id = r.json()['job']['id']
    owner, done, total = '', 0, 0
    deadline = time.time() + 30
    while time.time() < deadline:
        state, done, total, owner = sql(f"SELECT state, done, total, coalesce(lease_owner, '') FROM jobs "
                                        f"WHERE id = {job_id}").split('|')
        done, total = int(done), int(total)
        if state == 'running' and owner and 2 <= done:
            break
        time.sleep(0.05)
    check('a node is running the job', owner and 2 <= done < total, (owner, done, total))
    pid = int(owner.split('/')[1]) if owner.count('/') == 2 else -1
    victim = next((n for n in alive if n.proc.pid == pid), None)
    check('the job\'s lease names a node of this cluster', victim is not None, owner)
    if victim is None:
        return
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    victim.proc = None
    victim.log.close()
    killed_at = time.time()
    survivor = next(n for n in alive if n is not victim)
    j = survivor.wait_job(job_id, timeout_s=45)
    took = time.time() - killed_at
    check('another node finished it', j.get('state') == 'ready' and j.get('attempts') == 2, j)
    check('within the lease and a run', took < LEASE_S + 30, took)
    new_owner = sql(f"SELECT coalesce(lease_owner, '') || '|' || attempt FROM jobs WHERE id = {job_id}")
    check('held by another node at attempt 2', new_owner.split('|')[1] == '2' and new_owner.split('|')[0] != owner,
          (owner, new_owner))
    check('through HAProxy too', front.get(f'/api/v1/jobs/{job_id}').json().get('state') == 'ready')
    r = survivor.post('/api/v1/kbs', {'name': 'clean'})
    rc = survivor.upload('clean', DEMO_PDF)
    jc = survivor.wait_job(rc.json()['job']['id'])
    check('a clean run', jc.get('state') == 'ready' and jc.get('attempts') == 1, jc)
    after_kill, clean = kb_counts(sql, 'laws'), kb_counts(sql, 'clean')
    check('one document, nothing left processing', after_kill[:2] == ['1', '0'], after_kill)
    check('pages, clauses, postings, vectors as a clean run\'s', after_kill == clean and int(clean[3]) > 100,
          (after_kill, clean))
    r = front.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'})
    cite = (r.json() or {}).get('citations') or [{}]
    check('the taken-over document answers', r.status == 200 and cite[0].get('document_id') == j['document_id'], r)
    print(f'kill -9 during ingest: {done} of {total} pages read when killed; ready on another node '
          f'{took:.1f} s later (lease {LEASE_S} s)')


class Front(Server):
    """Requests to HAProxy's port (the Server class's request helpers; no process of its own)."""

    def __init__(self, port):
        self.port, self.key = port, None


def main():
    binary, mode = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else 'sqlite'
    haproxy = shutil.which('haproxy') or ('/usr/sbin/haproxy' if os.access('/usr/sbin/haproxy', os.X_OK) else None)
    if not haproxy:
        print('SKIP: haproxy is not installed (Debian haproxy; tools/setup.sh installs it)')
        sys.exit(77)
    store = []
    tmp = tempfile.mkdtemp(prefix='cq-cluster-')
    if mode == 'pg':
        conninfo = os.environ.get('CLAUSEQA_PG')
        if not conninfo:
            print('SKIP: CLAUSEQA_PG is not set (run through tests/pg/cluster.sh)')
            sys.exit(77)
        psql = sorted(p for p in (os.path.join(d, 'bin', 'psql') for d in
                                  [os.path.join('/usr/lib/postgresql', v) for v in os.listdir('/usr/lib/postgresql')])
                      if os.access(p, os.X_OK))[-1]
        subprocess.run([psql, conninfo, '-qc', 'CREATE DATABASE clustertest'], check=True)
        store = ['--store', conninfo + ' dbname=clustertest']

        def sql(statement):
            return subprocess.run([psql, conninfo + ' dbname=clustertest', '-tAc', statement], capture_output=True,
                                  text=True, check=True).stdout.strip()
    shared = os.path.join(tmp, 'data')
    nodes = [Server(binary, data_dir=shared if mode == 'sqlite' else os.path.join(tmp, f'data{i}'), args=store)
             for i in range(3)]
    if mode == 'pg':
        for n in nodes:
            n.env = {'CLAUSEQA_JOB_LEASE_S': str(LEASE_S), 'CLAUSEQA_FAULT_DELAY': f'job-page:{PAGE_DELAY_MS}'}
    proxy = None
    try:
        for n in nodes:
            n.start()
        front_port = free_port()
        cfg = os.path.join(tmp, 'haproxy.cfg')
        with open(cfg, 'w', encoding='utf-8') as f:
            f.write(haproxy_config(front_port, [n.port for n in nodes]))
        check('haproxy accepts the shipped configuration',
              subprocess.run([haproxy, '-c', '-f', cfg], capture_output=True).returncode == 0)
        proxy = subprocess.Popen([haproxy, '-db', '-f', cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        front = Front(front_port)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if front.get('/api/v1/health').status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        check('health through haproxy', front.get('/api/v1/health').status == 200)

        a, b, c = nodes
        check('KB made through haproxy', front.post('/api/v1/kbs', {'name': 'laws'}).status == 201)
        r = a.upload('laws', DEMO_PDF)
        check('upload through node 1', r.status == 202, r)
        job = a.wait_job(r.json()['job']['id'])
        check('ingested', job['state'] == 'ready' and job['document']['clauses'] > 100, job)
        doc_id = job['document_id']

        r = b.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'})
        cite = (r.json() or {}).get('citations') or [{}]
        check('asked through node 2', r.status == 200 and cite[0].get('clause') == '第四十四条'
              and cite[0].get('document_id') == doc_id, r)
        clause_id = cite[0].get('clause_id')
        for i in range(6):
            r = front.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'})
            cite = (r.json() or {}).get('citations') or [{}]
            check(f'asked through haproxy ({i})', r.status == 200 and cite[0].get('document_id') == doc_id, r)

        r = c.get(f'/api/v1/documents/{doc_id}/original')
        check('original from node 3', r.status == 200 and r.body == open(DEMO_PDF, 'rb').read(), r)
        r = c.get(f'/api/v1/documents/{doc_id}/pages/4.png?clause={clause_id}&width=600')
        check('page image from node 3', r.status == 200 and r.body[:8] == b'\x89PNG\r\n\x1a\n', r)

        # A node stops: HAProxy routes around it (a refused connection is retried on another node).
        check('node 1 stops', a.stop() == 0)
        ok = sum(front.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'}).status == 200 for _ in range(6))
        check('asks go on with a node down', ok == 6, ok)

        r = c.delete(f'/api/v1/documents/{doc_id}')
        check('deleted through node 3', r.status == 200, r)
        check('gone on node 2', b.get(f'/api/v1/documents/{doc_id}').status == 404)
        r = b.post('/api/v1/kbs/laws/ask', {'question': '劳动法第四十四条'})
        cites = (r.json() or {}).get('citations') or []
        check('not cited any more', r.status == 200 and not any(x.get('document_id') == doc_id for x in cites), r)
        check('its original gone', front.get(f'/api/v1/documents/{doc_id}/original').status == 404)
        if mode == 'pg':
            kill_during_ingest(front, nodes, sql)
    finally:
        if proxy:
            proxy.send_signal(signal.SIGTERM)
            try:
                proxy.wait(10)
            except subprocess.TimeoutExpired:
                proxy.kill()
        for n in nodes:
            if n.proc and not check(f'node on port {n.port} stops cleanly', n.stop() == 0):
                print(n.log_text())
            n.close()
        shutil.rmtree(tmp, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
