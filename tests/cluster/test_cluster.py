"""Three clauseqa nodes behind HAProxy on loopback (issue 20, docs/SCALE.md), with deploy/cluster/haproxy.cfg as
shipped (ports and process settings changed for a test): an upload through one node is asked through another and
through HAProxy, its original and page images are served by a third, a stopped node is routed around, a delete
through one node is gone on the others.

    python3 tests/cluster/test_cluster.py path/to/clauseqa sqlite
    tests/pg/cluster.sh python3 tests/cluster/test_cluster.py path/to/clauseqa pg

sqlite: the nodes share one data folder (SQLite in WAL mode serves several processes of one machine). pg: each node
has a data folder of its own and the store is a database of the throwaway cluster (CLAUSEQA_PG); the originals then
reach a node through the store. Exit 77 (skipped) without haproxy, or without the PostgreSQL cluster in pg mode."""
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
    shared = os.path.join(tmp, 'data')
    nodes = [Server(binary, data_dir=shared if mode == 'sqlite' else os.path.join(tmp, f'data{i}'), args=store)
             for i in range(3)]
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
