"""PostgreSQL killed (SIGKILL) and restarted under load, two nodes on one store (issue 29 item 1).

    tests/pg/cluster.sh python3 tests/pg/outage_load.py path/to/clauseqa

Two `clauseqa serve` nodes share a database of the throwaway cluster (CLAUSEQA_PG, CLAUSEQA_PG_CTL: tests/pg/cluster.sh)
with API keys on. A clean ingest of the demo PDF gives the counts a run must leave; then one upload per node starts
(each page slowed by CLAUSEQA_FAULT_DELAY, leases of CLAUSEQA_JOB_LEASE_S = 3 s) and a few clients keep sending
health, a key-protected listing, retrieve and ask (extractive) to both nodes while the server is killed with SIGKILL
while the jobs run, stays away a moment, and is started again. Asserted: every answer is 200, or 503 with a
Retry-After (never 401, never 500, no connection dropped or left unanswered); each node saw the outage (503s) and
answers 200 again within a few seconds of the restart; both jobs end ready (finished, or started again through
the lease) and their KBs hold what the clean run's holds (documents, pages, clauses, postings, vectors); the clean
KB is as it was. Bounded: the load runs until both nodes are back plus a second, the whole test in well under a
minute on an idle machine. Exit 77 (skipped) without the cluster."""
import collections
import http.client
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
from http_server import DEMO_PDF, Checks, Server  # noqa: E402

checks = Checks('test_store_outage_load')
check = checks.check

LEASE_S = 3
PAGE_DELAY_MS = 120
OUTAGE_S = 1.5
RECOVER_S = 10
QUESTION = '劳动法第四十四条'


def kb_counts(sql, kb):
    """Documents (and how many are not ready), pages, clauses, keyword posting lists, clause vectors. (Not the
    postings' bytes: they encode clause ids by difference, which differ between two ingests of one file.)"""
    return sql(
        "SELECT (SELECT count(*) FROM documents d WHERE d.kb_id = k.id), "
        "(SELECT count(*) FROM documents d WHERE d.kb_id = k.id AND d.status <> 'ready'), "
        "(SELECT count(*) FROM pages p JOIN documents d ON d.id = p.doc_id WHERE d.kb_id = k.id), "
        "(SELECT count(*) FROM clauses c JOIN documents d ON d.id = c.doc_id WHERE d.kb_id = k.id), "
        "(SELECT count(*) FROM keyword_postings p WHERE p.kb_id = k.id), "
        "(SELECT count(*) FROM clause_vectors v WHERE v.kb_id = k.id) "
        f"FROM kbs k WHERE k.name = '{kb}'").split('|')


class Load:
    """Clients sending requests to the nodes in a loop until stopped; every answer (or failure) is recorded with
    its time, node and route."""

    ROUTES = (('GET', '/api/v1/health', None), ('GET', '/api/v1/kbs', None),
              ('POST', '/api/v1/kbs/laws/retrieve', {'question': QUESTION, 'k': 3}),
              ('POST', '/api/v1/kbs/laws/ask', {'question': QUESTION}))

    def __init__(self, nodes, clients_per_node=2):
        self.nodes, self.stop, self.lock, self.log = nodes, threading.Event(), threading.Lock(), []
        self.threads = [threading.Thread(target=self.client, args=(n, i), daemon=True)
                        for n in range(len(nodes)) for i in range(clients_per_node)]

    def client(self, n, i):
        node, k = self.nodes[n], i
        while not self.stop.is_set():
            method, path, body = self.ROUTES[k % len(self.ROUTES)]
            k += 1
            t = time.time()
            try:
                r = node.request(method, path, body, timeout_s=15)
                entry = (t, n, path, r.status, r.header('Retry-After'), r.body[:200])
            except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out, no answer
                entry = (t, n, path, 'dropped', None, repr(e).encode())
            with self.lock:
                self.log.append(entry)
            time.sleep(0.02)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(30)


def main():
    binary = sys.argv[1]
    conninfo, ctl = os.environ.get('CLAUSEQA_PG'), os.environ.get('CLAUSEQA_PG_CTL')
    if not conninfo or not ctl:
        print('SKIP: CLAUSEQA_PG / CLAUSEQA_PG_CTL not set (run through tests/pg/cluster.sh)', file=sys.stderr)
        sys.exit(77)
    began = time.time()
    bindir = sorted(os.path.join('/usr/lib/postgresql', v, 'bin') for v in os.listdir('/usr/lib/postgresql'))[-1]
    psql = os.path.join(bindir, 'psql')
    # cluster.sh runs the server with synchronous_commit off, which may lose the last commits to a crash
    env = dict(os.environ, PGOPTIONS='-c synchronous_commit=on', CLAUSEQA_CONFIG='/dev/null')
    subprocess.run([psql, conninfo, '-qc', 'CREATE DATABASE outage_load'], check=True, env=env)
    store_info = conninfo + ' dbname=outage_load'

    def sql(statement):
        return subprocess.run([psql, store_info, '-tAc', statement], capture_output=True, text=True, check=True,
                              env=env).stdout.strip()

    nodes = [Server(binary, args=['--store', store_info]) for _ in range(2)]
    for n in nodes:
        n.env = {'PGOPTIONS': env['PGOPTIONS'], 'CLAUSEQA_CONFIG': '/dev/null', 'CLAUSEQA_LOG': 'info',
                 'CLAUSEQA_JOB_LEASE_S': str(LEASE_S), 'CLAUSEQA_FAULT_DELAY': f'job-page:{PAGE_DELAY_MS}'}
    try:
        a = nodes[0]
        for kb in ('laws', 'flight0', 'flight1'):
            r = a.cli('--store', store_info, 'kb', 'create', kb)
            check(f'KB {kb} created', r.returncode == 0, r.stderr)
        r = a.cli('--store', store_info, 'keys', 'create', '--role', 'admin', '--name', 'load')
        check('admin key created', r.returncode == 0, r.stderr)
        for n in nodes:
            n.key = r.stdout.strip()
            n.start()
        check('keys are on: no key, 401', a.get('/api/v1/kbs', key=None).status == 401)

        # the clean run: what an ingest of the demo PDF leaves
        r = a.upload('laws', DEMO_PDF)
        check('clean upload', r.status == 202, r)
        job = a.wait_job(r.json()['job']['id'], timeout_s=60)
        check('clean run ready', job.get('state') == 'ready', job)
        clean = kb_counts(sql, 'laws')
        check('the clean run has clauses', clean[:2] == ['1', '0'] and int(clean[3]) > 100, clean)

        # one upload through each node; each node's worker claims one (or one runs the other after it)
        job_ids = []
        for i, n in enumerate(nodes):
            r = n.upload(f'flight{i}', DEMO_PDF)
            check(f'upload through node {i}', r.status == 202, r)
            job_ids.append(r.json()['job']['id'])

        with Load(nodes) as load:
            deadline = time.time() + 20
            while time.time() < deadline:  # a job in the middle of its pages
                running = sql(f"SELECT count(*) FROM jobs WHERE id IN ({job_ids[0]}, {job_ids[1]}) "
                              "AND state = 'running' AND done >= 2 AND done < total")
                if int(running) >= 1:
                    break
                time.sleep(0.05)
            in_flight = sql(f"SELECT string_agg(id || ':' || state || ':' || done || '/' || total, ' ') FROM jobs "
                            f"WHERE id IN ({job_ids[0]}, {job_ids[1]})")
            check('a job is reading pages when the server is killed', int(running) >= 1, in_flight)
            time.sleep(0.3)
            killed_at = time.time()
            subprocess.run([ctl, 'kill9'], check=True)
            time.sleep(OUTAGE_S)
            subprocess.run([ctl, 'start'], check=True)
            started_at = time.time()
            back = [None, None]
            while None in back and time.time() < started_at + RECOVER_S:
                for i, n in enumerate(nodes):
                    if back[i] is None:
                        try:
                            if n.get('/api/v1/health').status == 200 and n.get('/api/v1/kbs').status == 200:
                                back[i] = time.time() - started_at
                        except OSError:
                            pass
                time.sleep(0.05)
            time.sleep(1.0)  # load on the recovered nodes
        log = load.log

        check(f'both nodes answer 200 again within {RECOVER_S} s of the restart', None not in back, back)
        counts = collections.Counter((n, s) for _, n, _, s, _, _ in log)
        bad = [e for e in log if e[3] not in (200, 503)]
        check('every answer is 200 or 503 (never 401, never 500, none dropped)', not bad, bad[:5])
        no_retry = [e for e in log if e[3] == 503 and not (e[4] or '').isdigit()]
        check('every 503 has a Retry-After', not no_retry, no_retry[:5])
        last_503 = [None, None]
        for i in range(2):
            check(f'node {i} saw the outage (503s)', counts[(i, 503)] > 0, dict(counts))
            # once a node answers again it is wholly back: its other pooled connections do not wait out their
            # backoff (db/db_pg.c); 0.5 s for the requests already under way
            late = [e for e in log if e[1] == i and e[0] > started_at + (back[i] or RECOVER_S) + 0.5]
            check(f'node {i}: only 200s from 0.5 s after its recovery', late and all(e[3] == 200 for e in late),
                  [e for e in late if e[3] != 200][:5])
            last_503[i] = max((e[0] for e in log if e[1] == i and e[3] == 503), default=started_at) - started_at
        unreachable = [e for e in log if e[3] == 503 and e[2] == '/api/v1/health' and b'store unreachable' not in e[5]]
        check('health says "store unreachable" while it is', not unreachable, unreachable[:3])

        # nothing lost: both jobs end ready with a clean run's counts, the clean KB as it was
        for i, job_id in enumerate(job_ids):
            j = nodes[i].wait_job(job_id, timeout_s=60)
            check(f'job {job_id} ended ready', isinstance(j, dict) and j.get('state') == 'ready', j)
            got = kb_counts(sql, f'flight{i}')
            check(f'flight{i}: the counts of a clean run', got == clean, (got, clean))
            attempts = j.get('attempts') if isinstance(j, dict) else None
            print(f'job {job_id} (flight{i}): ready after {attempts} start(s)')
        check('the clean KB is intact', kb_counts(sql, 'laws') == clean, kb_counts(sql, 'laws'))
        # a job cut off by the outage is no failure: its node records nothing and leaves it to the lease
        for i, n in enumerate(nodes):
            m = n.get('/metrics').body.decode()
            failed = [line for line in m.splitlines() if line.startswith('clauseqa_ingest_jobs_total{state="failed"}')]
            check(f'node {i} counted no job failed', failed == ['clauseqa_ingest_jobs_total{state="failed"} 0'], failed)

        def ranked(kb):  # the clauses a retrieve ranks, by what they are (not by their ids)
            r = nodes[0].post(f'/api/v1/kbs/{kb}/retrieve', {'question': QUESTION, 'k': 10})
            return [(h['clause'], h['path'], h['page'], h['text'], h['score']) for h in (r.json() or {})['results']]
        want = ranked('laws')
        check('the clean KB answers', len(want) > 0, want)
        for i in range(2):
            check(f'flight{i} ranks the same clauses as the clean KB', ranked(f'flight{i}') == want)
        r = nodes[1].post('/api/v1/kbs/flight0/ask', {'question': QUESTION})
        check('a recovered job\'s document answers', r.status == 200 and (r.json() or {}).get('citations'), r)

        per_node = {i: {s: c for (n, s), c in sorted(counts.items(), key=str) if n == i} for i in range(2)}
        print(f'in flight at the kill: {in_flight}; outage {OUTAGE_S} s; {len(log)} requests under load: '
              f'node 0 {per_node[0]}, node 1 {per_node[1]}; back {back[0]:.2f} s / {back[1]:.2f} s after the '
              f'restart ({started_at - killed_at:.1f} s after the kill), the last 503 {last_503[0]:.2f} s / '
              f'{last_503[1]:.2f} s after it; whole test {time.time() - began:.1f} s'
              if None not in back else f'not back: {back}')
    finally:
        for n in nodes:
            if checks.failed:
                print(n.log_text()[-3000:], file=sys.stderr)
            n.close()
    checks.finish()


if __name__ == '__main__':
    main()
