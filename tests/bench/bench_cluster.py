#!/usr/bin/python3
"""Load through HAProxy on PostgreSQL (issue 20, docs/PERF.md "Several nodes behind HAProxy"): a KB of a suite's
documents ingested once into a database of the throwaway cluster (CLAUSEQA_PG: run through tests/pg/cluster.sh),
then for each node count N: N `clauseqa serve --store` nodes (a data folder each) behind HAProxy with
deploy/cluster/haproxy.cfg (this run's ports, the servers past N dropped), and tests/bench/bench_load.py's
closed-loop clients asking through HAProxy at each concurrency level. Prints the ingest time and one table row a
(nodes, clients) pair. Everything — PostgreSQL, HAProxy, the nodes and the clients — runs on this machine: the
nodes share its cores, so N nodes measure the cluster's overhead and scheduling, not N machines.

    tests/pg/cluster.sh python3 tests/bench/bench_cluster.py [--binary build/clauseqa] [--nodes 1,3]
        [--levels 1,4,16] [--seconds 10] --docs-dir ../shared/eval/policy-zh-dev/docs
        [--questions ../shared/eval/policy-zh-dev/questions.jsonl] [--mode router,bm25] [--answers extractive]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_load  # noqa: E402

SOURCE = bench_load.SOURCE


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def haproxy_config(front_port, node_ports):
    """The shipped configuration: this run's ports, as many servers as nodes, no daemon, user switch or syslog."""
    text = open(os.path.join(SOURCE, 'deploy', 'cluster', 'haproxy.cfg'), encoding='utf-8').read()
    text = re.sub(r'^\s*(daemon|user haproxy|group haproxy|log /dev/log.*)\s*$\n', '', text, flags=re.M)
    text = text.replace('bind 127.0.0.1:8080', f'bind 127.0.0.1:{front_port}')
    for i in range(3):
        if i < len(node_ports):
            text = text.replace(f'127.0.0.1:{8081 + i} check', f'127.0.0.1:{node_ports[i]} check')
        else:
            text = re.sub(rf'^\s*server node{i + 1} .*\n', '', text, flags=re.M)
    if text.count(' check\n') != len(node_ports):
        sys.exit('bench_cluster: deploy/cluster/haproxy.cfg does not have the three server lines expected')
    return text


def wait_health(port, timeout_s=60):
    import http.client
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=5)
            c.request('GET', '/api/v1/health')
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def start_node(binary, work, name, store, threads, connections, answers):
    data = os.path.join(work, name)
    port_file = data + '.port'
    log = open(data + '.log', 'wb')
    proc = subprocess.Popen([binary, 'serve', '--data', data, '--port', '0', '--port-file', port_file,
                             '--store', store, '--threads', threads, '--connections', connections,
                             '--max-client-connections', '0', '--answers', answers],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return proc, int(open(port_file).read())
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit('bench_cluster: a node did not start:\n' + open(log.name, errors='replace').read()[-2000:])


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--binary', default=os.path.join(SOURCE, 'build', 'clauseqa'))
    ap.add_argument('--nodes', default='1,3')
    ap.add_argument('--levels', default='1,4,16')
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--answers', default='extractive')
    ap.add_argument('--docs-dir', required=True)
    ap.add_argument('--questions')
    ap.add_argument('--mode', default='router,bm25')
    a = ap.parse_args()
    conninfo = os.environ.get('CLAUSEQA_PG')
    if not conninfo:
        sys.exit('bench_cluster: CLAUSEQA_PG is not set (run through tests/pg/cluster.sh)')
    haproxy = shutil.which('haproxy') or '/usr/sbin/haproxy'
    if not os.access(haproxy, os.X_OK):
        sys.exit('bench_cluster: haproxy is not installed (Debian haproxy)')
    bench_load.MODE = a.mode or None
    bench_load.KB = 'bench'
    if a.questions:
        bench_load.QUESTIONS[:] = [__import__('json').loads(ln)['question']
                                   for ln in open(a.questions, encoding='utf-8') if ln.strip()]
    node_counts = [int(x) for x in a.nodes.split(',')]
    levels = [int(x) for x in a.levels.split(',')]
    bindir = sorted(os.path.join('/usr/lib/postgresql', v, 'bin') for v in os.listdir('/usr/lib/postgresql'))[-1]
    subprocess.run([os.path.join(bindir, 'psql'), conninfo, '-qc', 'CREATE DATABASE bench'], check=True)
    store = conninfo + ' dbname=bench'
    work = tempfile.mkdtemp(prefix='cq-bench-cluster-')
    procs, proxy = [], None
    try:
        docs = sorted(os.path.join(a.docs_dir, f) for f in os.listdir(a.docs_dir))
        t0 = time.time()
        r = subprocess.run([a.binary, 'ingest', '--data', os.path.join(work, 'ingest'), '--store', store, '--kb',
                            'bench', '--ocr', 'off'] + docs, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit('bench_cluster: ingest failed:\n' + r.stderr[-2000:])
        print(f'# bench_cluster: {a.binary}; KB bench: {len(docs)} documents of {a.docs_dir} ingested into '
              f'PostgreSQL in {time.time() - t0:.1f} s; answers {a.answers}; mode {a.mode}; '
              f'{len(bench_load.QUESTIONS)} questions; {os.cpu_count()} CPUs here (PostgreSQL, HAProxy, nodes and '
              f'clients together); {a.seconds:g} s a level')
        print()
        print('| nodes | clients | asks | asks/s | P50 ms | P95 ms | P99 ms | 503 busy | errors |')
        print('|---|---|---|---|---|---|---|---|---|')
        threads = str(min(256, max(levels) + 8))
        connections = str(max(levels) * 2 + 16)
        for n in node_counts:
            ports = []
            for i in range(n):
                p, port = start_node(a.binary, work, f'{n}-nodes-{i}', store, threads, connections, a.answers)
                procs.append(p)
                ports.append(port)
            front = free_port()
            cfg = os.path.join(work, f'haproxy-{n}.cfg')
            with open(cfg, 'w', encoding='utf-8') as f:
                f.write(haproxy_config(front, ports))
            proxy = subprocess.Popen([haproxy, '-db', '-f', cfg], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            if not all(wait_health(p) for p in ports) or not wait_health(front):
                sys.exit('bench_cluster: the nodes or HAProxy did not answer /api/v1/health')
            time.sleep(4.5)  # HAProxy counts a server in after 2 health checks 2 s apart (rise 2, inter 2s)
            for q in bench_load.QUESTIONS[:8]:  # warm-up: every node's page cache and connections
                bench_load.ask_streamed(front, q, 60)
            for clients in levels:
                r = bench_load.run_level(front, clients, a.seconds)
                print(f'| {n} | {clients} | {r["asks"]} | {r["asks_s"]:.1f} | {r["p50"] * 1e3:.0f} | '
                      f'{r["p95"] * 1e3:.0f} | {r["p99"] * 1e3:.0f} | {r["busy"]} | {r["errors"]} |', flush=True)
            stop(proxy)
            proxy = None
            for p in procs:
                stop(p)
            procs = []
    finally:
        stop(proxy)
        for p in procs:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
